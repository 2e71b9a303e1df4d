//! Authentication through the identity port.

use super::*;

#[test]
fn token_rejected_by_the_platform_is_401_invalid_bearer_token() {
    let mut m = Mocks::new();
    m.identity
        .expect_caller()
        .returning(|_| Err(IdentityError::InvalidToken));
    let e = block_on(m.services().authenticate(&Secret::new("expired"))).unwrap_err();
    assert_eq!(
        (e.code(), e.to_string()),
        ("unauthorized", "invalid bearer token".to_owned())
    );
}

#[test]
fn platform_unreachable_is_502() {
    let mut m = Mocks::new();
    m.identity
        .expect_caller()
        .returning(|_| Err(IdentityError::Unavailable("connection refused".into())));
    let e = block_on(m.services().authenticate(&Secret::new("t"))).unwrap_err();
    assert_eq!(e.code(), "auth_backend_unavailable");
}

#[test]
fn node_delete_marks_it_deleting_and_unknown_names_are_404() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters.expect_nodes().returning(|_, _| {
        Ok(vec![crate::model::node::Node {
            name: crate::names::NodeName::parse("prod-1-default-abcde").unwrap(),
            pool: crate::names::DnsLabel::from_trusted("default".into()),
            status: crate::model::node::NodeStatus::Ready,
            version: "v1.32.4".into(),
            created_at: at(0),
            labels: Default::default(),
            taints: Vec::new(),
        }])
    });
    m.clusters
        .expect_commit()
        .withf(|w| w.reconcile)
        .returning(|_| Ok(6));
    let s = m.services();
    let n = block_on(s.delete_node(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        "prod-1-default-abcde",
    ))
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(n.status, crate::model::node::NodeStatus::Deleting);
    assert_eq!(
        code(block_on(s.delete_node(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            "prod-1-default-zzzzz"
        ))),
        "not_found"
    );
    assert_eq!(
        code(block_on(s.delete_node(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            "../x"
        ))),
        "not_found"
    );
}

#[test]
fn conflict_variants_render_distinct_codes() {
    assert_eq!(
        DomainError::Conflict(Conflict::LastPool).code(),
        "last_pool"
    );
}
