//! PATCH of a cluster: description, tags and the control-plane firewall.

use super::*;

#[test]
fn patch_empty_body_is_422() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    let r = block_on(s.patch_cluster(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        ClusterPatch::default(),
        None,
    ));
    assert_eq!(code(r), "validation_failed");
}

#[test]
fn patch_replaces_tags_and_description() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters
        .expect_commit()
        .withf(|w| w.expected_revision == Some(5) && !w.reconcile)
        .returning(|_| Ok(6));
    let patch = ClusterPatch {
        description: Some(Some("new".into())),
        tags: Some(Some(vec!["team-a".into()])),
        control_plane_firewall: None,
        ..ClusterPatch::default()
    };
    let c = fresh(block_on(m.services().patch_cluster(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        patch,
        None,
    )))
    .unwrap();
    assert_eq!(c.description.as_deref(), Some("new"));
    assert_eq!(
        c.tags.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
        ["team-a"]
    );
}

#[test]
fn concurrent_change_is_decided_again_on_a_fresh_read() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    let mut calls = 0;
    m.clusters.expect_commit().times(2).returning(move |_| {
        calls += 1;
        if calls == 1 {
            Err(StoreError::RevisionMismatch)
        } else {
            Ok(7)
        }
    });
    let patch = description_patch("x");
    assert_eq!(
        code(block_on(m.services().patch_cluster(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            patch,
            None
        ))),
        "ok"
    );
}

#[test]
fn change_to_a_deleting_cluster_is_409_cluster_deleting() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Deleting))
        .services();
    let patch = description_patch("x");
    assert_eq!(
        code(block_on(s.patch_cluster(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            patch,
            None
        ))),
        "cluster_deleting"
    );
    let add = pool_body(Some("b"), "kube.c5.large", 1);
    assert_eq!(
        code(block_on(s.create_node_pool(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            add
        ))),
        "cluster_deleting"
    );
}

#[test]
fn failed_cluster_can_only_be_read_and_deleted() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Failed));
    m.clusters.expect_commit().times(1).returning(|_| Ok(6));
    let s = m.services();
    let id = CLUSTER_1;
    let patch = description_patch("x");
    assert_eq!(
        code(block_on(s.patch_cluster(
            Command::new(&super_admin_a()),
            id,
            patch,
            None
        ))),
        "cluster_failed"
    );
    assert_eq!(
        code(block_on(s.kubeconfig(
            &super_admin_a(),
            id,
            Default::default()
        ))),
        "cluster_failed"
    );
    assert_eq!(
        code(block_on(s.get_cluster(
            &super_admin_a(),
            id,
            Freshness::Latest
        ))),
        "ok"
    );
    let d = block_on(s.delete_cluster(Command::new(&super_admin_a()), id, None))
        .unwrap()
        .fresh()
        .unwrap();
    assert_eq!(d.phase, ClusterPhase::Deleting);
}

#[test]
fn delete_answers_deleting_and_a_second_delete_answers_as_it_is() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters
        .expect_commit()
        .withf(|w| w.reconcile)
        .times(1)
        .returning(|_| Ok(6));
    let d = block_on(
        m.services()
            .delete_cluster(Command::new(&super_admin_a()), CLUSTER_1, None),
    )
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(d.phase, ClusterPhase::Deleting);
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Deleting));
    m.clusters.expect_commit().never();
    let d = block_on(
        m.services()
            .delete_cluster(Command::new(&super_admin_a()), CLUSTER_1, None),
    )
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(d.phase, ClusterPhase::Deleting);
}

fn firewall_patch(enabled: Option<bool>, allowed: Option<&[&str]>) -> ClusterPatch {
    ClusterPatch {
        control_plane_firewall: Some(Some(crate::input::cluster::ControlPlaneFirewallRequest {
            enabled,
            allowed_addresses: allowed.map(|a| a.iter().map(|c| (*c).to_owned()).collect()),
        })),
        ..ClusterPatch::default()
    }
}

/// A new control-plane firewall is handed to provisioning: the change is recorded as in
/// flight (the current one still enforced), scheduled, and audited from and to.
#[test]
fn patch_control_plane_firewall_schedules_the_change_and_audits_from_and_to() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters
        .expect_commit()
        .withf(|w| {
            let audit = w.audit.as_ref().unwrap();
            w.reconcile
                && w.operation.is_some()
                && audit.action == "control_plane_firewall_change_started"
                && audit.changes["control_plane_firewall"]
                    == serde_json::json!({
                        "from": {"enabled": false, "allowed_addresses": []},
                        "to": {"enabled": true, "allowed_addresses": ["203.0.113.0/24", "2001:db8::/32"]},
                    })
        })
        .returning(|_| Ok(6));
    let a = block_on(m.services().patch_cluster(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        firewall_patch(Some(true), Some(&["203.0.113.0/24", "2001:DB8::/32"])),
        None,
    ));
    let Ok(crate::service::idempotency::Answer::Fresh(s)) = a else {
        panic!("{a:?}")
    };
    assert!(s.operation.is_some());
    assert!(
        !s.value.control_plane_firewall.enabled,
        "enforced once applied"
    );
    assert_eq!(
        s.value
            .control_plane_firewall_change
            .as_ref()
            .map(|f| f.allowed_addresses.len()),
        Some(2)
    );
}

/// Each refusal of a firewall change, and the no-op: (phase, change in flight, patch, code).
#[test]
fn patch_control_plane_firewall_refusals_and_no_change() {
    use crate::model::cluster::ControlPlaneFirewall;
    let in_flight = ControlPlaneFirewall {
        enabled: true,
        allowed_addresses: vec![crate::model::firewall::IpCidr::parse("10.0.0.0/8").unwrap()],
    };
    let cases = [
        (
            ClusterPhase::Provisioning,
            None,
            firewall_patch(Some(false), Some(&["10.0.0.0/8"])),
            "phase_not_provisioned",
        ),
        (
            ClusterPhase::Failed,
            None,
            firewall_patch(Some(false), None),
            "cluster_failed",
        ),
        (
            ClusterPhase::Provisioned,
            Some(in_flight.clone()),
            firewall_patch(Some(false), None),
            "change_in_flight",
        ),
        (
            ClusterPhase::Provisioned,
            None,
            firewall_patch(Some(true), None),
            "validation_failed",
        ),
        (
            ClusterPhase::Provisioned,
            None,
            firewall_patch(Some(true), Some(&[])),
            "validation_failed",
        ),
        (
            ClusterPhase::Provisioned,
            None,
            firewall_patch(None, Some(&["10.0.0.1/8"])),
            "validation_failed",
        ),
        // Already so: nothing committed, answered as it is.
        (
            ClusterPhase::Provisioned,
            None,
            firewall_patch(Some(false), Some(&[])),
            "ok",
        ),
    ];
    for (phase, change, patch, want) in cases {
        let mut c = cluster(ORG_A, phase);
        c.control_plane_firewall_change = change;
        let mut m = Mocks::new().with_cluster(c);
        m.clusters.expect_commit().never();
        let got = code(block_on(m.services().patch_cluster(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            patch.clone(),
            None,
        )));
        assert_eq!(got, want, "{phase:?} {patch:?}");
    }
}
