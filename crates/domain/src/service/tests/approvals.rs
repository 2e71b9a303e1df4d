//! Approvals: what the assistant asks is checked and recorded; it runs once, as the person,
//! when that person approves it; declined, expired or somebody else's, it never runs.

use super::*;
use crate::model::approval::{Approval, ApprovalOutcome, ApprovalStatus, ApprovedAction};
use crate::model::audit::Channel;
use crate::service::Asked;
use std::sync::{Arc, Mutex};

fn assistant_of(c: crate::model::identity::Caller) -> crate::model::identity::Caller {
    crate::model::identity::Caller {
        client: ClientKind::Assistant,
        ..c
    }
}

fn create() -> ApprovedAction {
    ApprovedAction::CreateCluster {
        body: cluster_body(),
    }
}

/// A store of approvals in memory, as the port promises it: compare-and-set decisions.
fn approvals_in_memory(m: &mut Mocks) -> Arc<Mutex<Vec<Approval>>> {
    let kept: Arc<Mutex<Vec<Approval>>> = Arc::default();
    let k = kept.clone();
    m.approvals.expect_insert_approval().returning(move |a, _| {
        k.lock().unwrap().push(a);
        Ok(())
    });
    let k = kept.clone();
    m.approvals
        .expect_approval()
        .returning(move |id| Ok(k.lock().unwrap().iter().find(|a| a.id == id).cloned()));
    let k = kept.clone();
    m.approvals
        .expect_decide_approval()
        .returning(move |id, from, to, at, _| {
            let mut all = k.lock().unwrap();
            let Some(a) = all.iter_mut().find(|a| a.id == id && a.status == from) else {
                return Ok(false);
            };
            a.status = to;
            a.decided_at = Some(at);
            Ok(true)
        });
    let k = kept.clone();
    m.approvals.expect_approvals_of().returning(move |user, _| {
        let mut mine: Vec<Approval> = k
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a.requested_by.user_id == user)
            .cloned()
            .collect();
        mine.reverse();
        Ok(mine)
    });
    let k = kept.clone();
    m.approvals.expect_record_outcome().returning(move |id, o| {
        if let Some(a) = k.lock().unwrap().iter_mut().find(|a| a.id == id) {
            a.outcome.get_or_insert(o);
        }
        Ok(())
    });
    kept
}

#[test]
fn a_request_is_checked_then_recorded_pending_for_ten_minutes() {
    let mut m = create_ready();
    let kept = approvals_in_memory(&mut m);
    let s = m.services();
    let a = block_on(s.request_approval(&assistant_of(super_admin_a()), create())).unwrap();
    assert_eq!(a.status, ApprovalStatus::Pending);
    assert_eq!(a.organization_id, ORG_A);
    assert_eq!(a.expires_at - a.created_at, chrono::Duration::minutes(10));
    assert!(
        a.summary.contains("prod-1") && a.summary.contains("3 nodes"),
        "{}",
        a.summary
    );
    assert_eq!(kept.lock().unwrap().len(), 1);
}

#[test]
fn a_bad_input_or_a_missing_role_records_nothing() {
    let mut m = create_ready();
    m.approvals.expect_insert_approval().never();
    let s = m.services();
    let bad = ApprovedAction::CreateCluster {
        body: CreateClusterRequest {
            name: Some("Not A Label".into()),
            ..cluster_body()
        },
    };
    assert_eq!(
        code(block_on(
            s.request_approval(&assistant_of(super_admin_a()), bad)
        )),
        "validation_failed"
    );
    let member = assistant_of(caller(&[(ORG_A, Role::Member)]));
    assert_eq!(
        code(block_on(s.request_approval(&member, create()))),
        "forbidden"
    );
}

#[test]
fn approving_runs_the_action_once_as_the_person_through_the_assistant() {
    let mut m = create_ready();
    let kept = approvals_in_memory(&mut m);
    m.idempotency
        .expect_claim()
        .withf(|r| r.scope.key.as_str().starts_with("approval-"))
        .times(1)
        .returning(|_| Ok(ClaimOutcome::Claimed));
    m.clusters.checkpoint();
    let writes = recording(&mut m);
    let s = m.services();
    let person = super_admin_a();
    let a = block_on(s.request_approval(&assistant_of(person.clone()), create())).unwrap();
    let approved = block_on(s.approve(&person, a.id)).unwrap();
    assert_eq!(approved.status, ApprovalStatus::Approved);
    let Some(ApprovalOutcome::Done { resource, .. }) = &approved.outcome else {
        panic!("{approved:?}");
    };
    assert_eq!(resource, "cluster");
    // The action's own audit event says the assistant asked and the person approved.
    let w = writes.lock().unwrap();
    let event = w[0].audit.as_ref().unwrap();
    assert_eq!(
        (event.via, event.approval),
        (Channel::Assistant, Some(a.id))
    );
    assert_eq!(event.actor.user_id, person.user.id);
    drop(w);
    // A second approval answers the same and runs nothing again (the claim is once).
    let again = block_on(s.approve(&person, a.id)).unwrap();
    assert_eq!(again.outcome, approved.outcome);
    assert_eq!(kept.lock().unwrap()[0].status, ApprovalStatus::Approved);
}

#[test]
fn nobody_else_and_no_assistant_decides() {
    let mut m = create_ready();
    approvals_in_memory(&mut m);
    m.idempotency.expect_claim().never();
    let s = m.services();
    let person = super_admin_a();
    let a = block_on(s.request_approval(&assistant_of(person.clone()), create())).unwrap();
    let mut other = super_admin_a();
    other.user.id = "user-2".into();
    assert_eq!(code(block_on(s.approve(&other, a.id))), "not_found");
    assert_eq!(code(block_on(s.decline(&other, a.id))), "not_found");
    assert_eq!(
        code(block_on(s.approve(&assistant_of(person.clone()), a.id))),
        "assistant_not_allowed"
    );
}

#[test]
fn a_declined_or_expired_approval_never_runs() {
    let mut m = create_ready();
    approvals_in_memory(&mut m);
    m.idempotency.expect_claim().never();
    let s = m.services();
    let person = super_admin_a();
    let a = block_on(s.request_approval(&assistant_of(person.clone()), create())).unwrap();
    assert_eq!(
        block_on(s.decline(&person, a.id)).unwrap().status,
        ApprovalStatus::Declined
    );
    assert_eq!(code(block_on(s.approve(&person, a.id))), "invalid_state");
    // Ten minutes later a new request has expired without anybody deciding.
    let b = block_on(s.request_approval(&assistant_of(person.clone()), create())).unwrap();
    let later = Approval {
        expires_at: b.created_at,
        ..b.clone()
    };
    assert_eq!(later.status_at(b.created_at), ApprovalStatus::Expired);
}

#[test]
fn asking_again_answers_from_the_same_approval_and_runs_once() {
    let mut m = create_ready();
    let kept = approvals_in_memory(&mut m);
    m.idempotency
        .expect_claim()
        .times(1)
        .returning(|_| Ok(ClaimOutcome::Claimed));
    m.clusters.checkpoint();
    let _writes = recording(&mut m);
    let s = m.services();
    let person = super_admin_a();
    let assistant = assistant_of(person.clone());
    let Asked::Requested(a) = block_on(s.ask_approval(&assistant, create())).unwrap() else {
        panic!("the first ask records an approval");
    };
    // Asked again before the person decided: the same approval, nothing more recorded.
    let again = block_on(s.ask_approval(&assistant, create())).unwrap();
    assert_eq!(again, Asked::Waiting(a.clone()));
    assert_eq!(kept.lock().unwrap().len(), 1);
    block_on(s.approve(&person, a.id)).unwrap();
    // Asked again once approved: what became of it, run once (the claim above is once).
    for _ in 0..2 {
        let Asked::Approved(done) = block_on(s.ask_approval(&assistant, create())).unwrap() else {
            panic!("an approved ask answers its outcome");
        };
        assert_eq!(done.id, a.id);
        assert!(matches!(done.outcome, Some(ApprovalOutcome::Done { .. })));
    }
    assert_eq!(kept.lock().unwrap().len(), 1);
    // Another action is another approval.
    let other = ApprovedAction::CreateCluster {
        body: CreateClusterRequest {
            name: Some("prod-2".into()),
            ..cluster_body()
        },
    };
    assert!(matches!(
        block_on(s.ask_approval(&assistant, other)).unwrap(),
        Asked::Requested(_)
    ));
}

#[test]
fn asking_again_after_a_decline_is_told_so_and_nothing_runs() {
    let mut m = create_ready();
    let kept = approvals_in_memory(&mut m);
    m.idempotency.expect_claim().never();
    let s = m.services();
    let person = super_admin_a();
    let assistant = assistant_of(person.clone());
    let Asked::Requested(a) = block_on(s.ask_approval(&assistant, create())).unwrap() else {
        panic!("the first ask records an approval");
    };
    block_on(s.decline(&person, a.id)).unwrap();
    let Asked::Declined(d) = block_on(s.ask_approval(&assistant, create())).unwrap() else {
        panic!("a declined ask is told so");
    };
    assert_eq!(d.id, a.id);
    assert_eq!(kept.lock().unwrap().len(), 1);
}

/// What the person approves says every change asked, so a change of taints or labels alone
/// never reads as a resize to the same size.
#[test]
fn a_pool_change_is_summed_up_with_each_thing_it_changes() {
    use crate::input::node_pool::{NodePoolPatch, TaintRequest};
    let mut m = create_ready().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    approvals_in_memory(&mut m);
    let s = m.services();
    let gpu = || {
        Some(Some(vec![TaintRequest {
            key: Some("nvidia.com/gpu".into()),
            value: None,
            effect: Some("NoSchedule".into()),
        }]))
    };
    let cases = [
        (
            NodePoolPatch {
                taints: gpu(),
                ..Default::default()
            },
            "Change the node pool default of the cluster prod-1: its taints to nvidia.com/gpu:NoSchedule.",
        ),
        (
            NodePoolPatch {
                count: Some(Some(5)),
                labels: Some(Some([("role".to_owned(), "gpu".to_owned())].into())),
                ..Default::default()
            },
            "Change the node pool default of the cluster prod-1: from 3 nodes to 5 nodes; its labels to role=gpu.",
        ),
        (
            NodePoolPatch {
                count: Some(Some(3)),
                ..Default::default()
            },
            "Change the node pool default of the cluster prod-1: from 3 nodes to 3 nodes.",
        ),
    ];
    for (patch, said) in cases {
        let asked = ApprovedAction::ScaleNodePool {
            cluster: CLUSTER_1,
            pool: "default".into(),
            patch,
        };
        let a = block_on(s.request_approval(&assistant_of(super_admin_a()), asked)).unwrap();
        assert_eq!(a.summary, said);
    }
}
