//! The audit trail: every change carries its event into the commit, and the trail reads back
//! one organization at a time.

use super::*;
use crate::input::audit::ListAuditEvents;
use crate::model::audit::{
    Actor, AuditCursor, AuditEvent, AuditFilter, AuditQuery, AuditResource, Channel, Outcome,
    PAGE_MAX, Parent,
};

fn only_event(writes: &std::sync::Mutex<Vec<ClusterWrite>>) -> AuditEvent {
    let writes = writes.lock().unwrap();
    assert_eq!(writes.len(), 1, "one write expected");
    writes[0].audit.clone().unwrap()
}

#[test]
fn a_change_commits_its_event_saying_who_what_how_and_for_which_request() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    let writes = recording(&mut m);
    let s = m.services().for_request("req-42");
    block_on(s.patch_cluster(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        description_patch("new"),
        None,
    ))
    .unwrap();
    let e = only_event(&writes);
    assert_eq!(
        (
            e.organization_id,
            e.resource,
            e.resource_id.as_str(),
            e.action.as_str()
        ),
        (
            ORG_A,
            AuditResource::Cluster,
            CLUSTER_1.to_string().as_str(),
            "updated"
        )
    );
    assert_eq!(
        e.actor,
        Actor {
            user_id: "user-1".into(),
            email: Some("user@example.com".into()),
            client: ClientKind::Api,
        }
    );
    assert_eq!(e.via, Channel::Api);
    assert_eq!(e.request_id.as_deref(), Some("req-42"));
    assert_eq!(e.parent, Some(Parent::Cluster(CLUSTER_1)));
    assert_eq!(e.outcome, Outcome::Applied);
    assert_eq!(e.changes, json!({"description": "new"}));
}

#[test]
fn a_change_handed_to_provisioning_is_accepted_not_applied() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    let writes = recording(&mut m);
    block_on(
        m.services()
            .delete_cluster(Command::new(&super_admin_a()), CLUSTER_1, None),
    )
    .unwrap();
    let e = only_event(&writes);
    assert_eq!(
        (e.action.as_str(), e.outcome),
        ("deletion_started", Outcome::Accepted)
    );
}

#[test]
fn a_create_names_what_was_asked_and_is_accepted() {
    let mut m = create_ready();
    m.clusters = Default::default();
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    let writes = recording(&mut m);
    let c = block_on(
        m.services()
            .create_cluster(Command::new(&super_admin_a()), cluster_body()),
    )
    .unwrap()
    .fresh()
    .unwrap();
    let e = only_event(&writes);
    assert_eq!(
        (e.resource, e.action.as_str()),
        (AuditResource::Cluster, "created")
    );
    assert_eq!(e.parent, Some(Parent::Cluster(c.id)));
    assert_eq!(e.outcome, Outcome::Accepted);
    assert_eq!(e.changes["name"], "prod-1");
    assert_eq!(e.changes["node_pools"][0]["count"], 3);
}

#[test]
fn the_console_face_is_recorded_as_such() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    let writes = recording(&mut m);
    let s = m.services().via(Channel::Console);
    block_on(s.patch_cluster(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        description_patch("x"),
        None,
    ))
    .unwrap();
    assert_eq!(only_event(&writes).via, Channel::Console);
}

#[test]
fn a_change_that_changes_nothing_records_nothing() {
    // Already private and nothing in flight: no write, so no event either.
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.exposure = Exposure::Private;
    let mut m = Mocks::new().with_cluster(c);
    m.clusters.expect_commit().never();
    let r = fresh(block_on(m.services().change_exposure(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        ExposurePatch {
            exposure: Exposure::Private,
        },
        None,
    )));
    assert!(!r.unwrap().started);
}

fn event(at_secs: i64, n: u128) -> AuditEvent {
    AuditEvent {
        id: uuid::Uuid::from_u128(n),
        organization_id: ORG_A,
        at: at(at_secs),
        actor: Actor::of(&super_admin_a()),
        via: Channel::Api,
        resource: AuditResource::Cluster,
        resource_id: CLUSTER_1.to_string(),
        parent: Some(Parent::Cluster(CLUSTER_1)),
        action: "updated".into(),
        changes: json!({}),
        request_id: None,
        outcome: Outcome::Applied,
        approval: None,
    }
}

fn list(limit: u32) -> ListAuditEvents {
    ListAuditEvents {
        org: sel(Some("acme"), None),
        filter: AuditFilter {
            resource: Some(AuditResource::Cluster),
            cluster_id: Some(CLUSTER_1),
            actor: Some("user-1".into()),
            ..AuditFilter::default()
        },
        after: None,
        limit,
    }
}

#[test]
fn a_member_reads_a_page_and_learns_where_the_next_one_starts() {
    let mut m = Mocks::new();
    m.audit
        .expect_audit_events()
        .withf(|q: &AuditQuery| {
            q.organization_id == ORG_A
                && q.limit == 3
                && q.filter.resource == Some(AuditResource::Cluster)
                && q.filter.cluster_id == Some(CLUSTER_1)
                && q.filter.actor.as_deref() == Some("user-1")
        })
        .returning(|_| Ok(vec![event(30, 3), event(20, 2), event(10, 1)]));
    let member = caller(&[(ORG_A, Role::Member)]);
    let page = block_on(m.services().audit_events(&member, list(2))).unwrap();
    assert_eq!(page.items.len(), 2);
    assert_eq!(
        page.next,
        Some(AuditCursor {
            at: at(20),
            id: uuid::Uuid::from_u128(2)
        })
    );
}

#[test]
fn the_last_page_has_no_next_and_a_limit_is_cut_to_the_maximum() {
    let mut m = Mocks::new();
    m.audit
        .expect_audit_events()
        .withf(|q: &AuditQuery| q.limit == PAGE_MAX + 1)
        .returning(|_| Ok(vec![event(10, 1)]));
    let page = block_on(m.services().audit_events(&super_admin_a(), list(10_000))).unwrap();
    assert_eq!((page.items.len(), page.next), (1, None));
}

#[test]
fn another_organizations_trail_is_refused_before_it_is_read() {
    let mut m = Mocks::new().with_organizations(vec![organization(ORG_B, Plan::Postpaid, 0)]);
    m.audit.expect_audit_events().never();
    let r = block_on(m.services().audit_events(
        &super_admin_a(),
        ListAuditEvents {
            org: sel(Some(slug_of(ORG_B)), None),
            ..list(10)
        },
    ));
    assert_eq!(code(r), "forbidden");
}
