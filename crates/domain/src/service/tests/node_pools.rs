//! Node pools: adding, resizing, deleting, nodes, and credit.

use super::*;

#[test]
fn last_pool_cannot_be_deleted() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    let r =
        block_on(s.delete_node_pool(Command::new(&super_admin_a()), CLUSTER_1, "default", None));
    assert_eq!(code(r), "last_pool");
}

#[test]
fn a_deleting_pool_does_not_count_toward_the_last_pool() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    let mut old = pool("old", 2);
    old.status = PoolStatus::Deleting;
    c.node_pools.push(old);
    let s = Mocks::new().with_cluster(c).services();
    assert_eq!(
        code(block_on(s.delete_node_pool(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            "default",
            None
        ))),
        "last_pool"
    );
}

#[test]
fn pool_delete_answers_the_pool_deleting() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.node_pools.push(pool("second", 2));
    let mut m = Mocks::new().with_cluster(c);
    m.clusters.expect_commit().returning(|_| Ok(6));
    let p = block_on(m.services().delete_node_pool(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        "second",
        None,
    ))
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(p.status, PoolStatus::Deleting);
}

#[test]
fn pool_name_unique_on_the_cluster_is_409() {
    let mut m = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    m.clusters.expect_commit().never();
    let add: NodePoolRequest = pool_body(None, "kube.c5.large", 1);
    assert_eq!(
        code(block_on(m.services().create_node_pool(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            add
        ))),
        "name_conflict"
    );
}

fn pool_ready(org_plan: Plan, credit: i64) -> Mocks {
    let mut m = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .with_organizations(vec![organization(ORG_A, org_plan, credit)]);
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    m.clusters.expect_commit().returning(|_| Ok(6));
    m
}

#[test]
fn pool_add_needs_credit_when_prepaid() {
    let add = || pool_body(Some("b"), "kube.c5.large", 1);
    let r = block_on(pool_ready(Plan::Prepaid, 0).services().create_node_pool(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        add(),
    ));
    assert_eq!(code(r), "insufficient_credit");
    let p = block_on(pool_ready(Plan::Prepaid, 100).services().create_node_pool(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        add(),
    ));
    assert_eq!(
        p.unwrap().fresh().map(|p| p.status),
        Some(PoolStatus::Provisioning)
    );
}

#[test]
fn pool_add_with_unknown_tier_is_400() {
    let add: NodePoolRequest = pool_body(Some("b"), "kube.z1.tiny", 1);
    assert_eq!(
        code(block_on(
            pool_ready(Plan::Postpaid, 0).services().create_node_pool(
                Command::new(&super_admin_a()),
                CLUSTER_1,
                add
            )
        )),
        "unknown_machine_tier"
    );
}

#[test]
fn pool_add_beyond_twenty_pools_is_422() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    for i in 1..20 {
        c.node_pools.push(pool(&format!("p{i}"), 1));
    }
    let s = Mocks::new().with_cluster(c).services();
    let add: NodePoolRequest = pool_body(Some("b"), "kube.c5.large", 1);
    assert_eq!(
        code(block_on(s.create_node_pool(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            add
        ))),
        "validation_failed"
    );
}

#[test]
fn scale_up_needs_credit_scale_down_never_does() {
    let patch = |count: i64| NodePoolPatch {
        count: Some(Some(count)),
        ..Default::default()
    };
    let up = block_on(pool_ready(Plan::Prepaid, 0).services().patch_node_pool(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        "default",
        patch(5),
        None,
    ));
    assert_eq!(code(up), "insufficient_credit");
    let down = block_on(pool_ready(Plan::Prepaid, 0).services().patch_node_pool(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        "default",
        patch(1),
        None,
    ));
    let p = down.unwrap().fresh().unwrap();
    assert_eq!((p.count, p.status), (1, PoolStatus::Scaling));
}

#[test]
fn scale_past_zone_capacity_is_503() {
    let mut m = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    // The pool grows from 3 to 5: the write carries the 2 nodes it adds.
    m.clusters
        .expect_commit()
        .withf(|w: &ClusterWrite| w.zone_capacity.as_ref().is_some_and(|z| z.adds == 2))
        .returning(|_| Err(StoreError::CapacityExhausted));
    let patch = NodePoolPatch {
        count: Some(Some(5)),
        ..Default::default()
    };
    assert_eq!(
        code(block_on(m.services().patch_node_pool(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            "default",
            patch,
            None
        ))),
        "capacity_exhausted"
    );
}

#[test]
fn pool_patch_while_scaling_replaces_the_target() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.node_pools[0].status = PoolStatus::Scaling;
    let mut m = Mocks::new()
        .with_cluster(c)
        .with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    m.clusters.expect_commit().returning(|_| Ok(6));
    let patch = NodePoolPatch {
        count: Some(Some(7)),
        ..Default::default()
    };
    let p = block_on(m.services().patch_node_pool(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        "default",
        patch,
        None,
    ))
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!((p.count, p.status), (7, PoolStatus::Scaling));
}

#[test]
fn pool_patch_turning_auto_scale_off_needs_count_at_least_one() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.node_pools[0].auto_scale = true;
    c.node_pools[0].count = 0;
    c.node_pools[0].min_nodes = 0;
    c.node_pools[0].max_nodes = Some(5);
    let s = Mocks::new().with_cluster(c).services();
    let patch = NodePoolPatch {
        auto_scale: Some(Some(false)),
        ..Default::default()
    };
    assert_eq!(
        code(block_on(s.patch_node_pool(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            "default",
            patch,
            None
        ))),
        "validation_failed"
    );
}

#[test]
fn pool_patch_unknown_pool_is_404_and_deleting_pool_409() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    let mut d = pool("going", 1);
    d.status = PoolStatus::Deleting;
    c.node_pools.push(d);
    let s = Mocks::new().with_cluster(c).services();
    let patch = || NodePoolPatch {
        labels: Some(Some([("a".to_owned(), "b".to_owned())].into())),
        ..Default::default()
    };
    assert_eq!(
        code(block_on(s.patch_node_pool(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            "nosuch",
            patch(),
            None
        ))),
        "not_found"
    );
    assert_eq!(
        code(block_on(s.patch_node_pool(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            "going",
            patch(),
            None
        ))),
        "invalid_state"
    );
}

#[test]
fn an_upgrading_pool_is_not_resized_but_its_labels_still_change() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.node_pools[0].status = PoolStatus::Upgrading;
    let mut m = Mocks::new().with_cluster(c);
    m.clusters.expect_commit().returning(|_| Ok(6));
    let s = m.services();
    let resize = NodePoolPatch {
        count: Some(Some(2)),
        ..Default::default()
    };
    assert_eq!(
        code(block_on(s.patch_node_pool(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            "default",
            resize,
            None
        ))),
        "invalid_state"
    );
    let relabel = NodePoolPatch {
        labels: Some(Some([("tier".to_owned(), "web".to_owned())].into())),
        max_surge: Some(Some(3)),
        ..Default::default()
    };
    let changed = block_on(s.patch_node_pool(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        "default",
        relabel,
        None,
    ));
    let pool = fresh(changed).unwrap();
    assert_eq!(pool.status, PoolStatus::Upgrading);
    assert_eq!(pool.surge.max_surge, 3);
}
