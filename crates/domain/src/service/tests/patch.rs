//! PATCH of a cluster: description and tags only.

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
