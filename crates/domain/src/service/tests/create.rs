//! Creating clusters: body rules, organization, catalog, credit and capacity.

use super::*;

#[test]
fn create_takes_the_organization_from_the_body_and_starts_pending() {
    let mut m = create_ready();
    m.clusters.checkpoint();
    m.clusters
        .expect_commit()
        .withf(|w: &ClusterWrite| {
            w.expected_revision.is_none() && w.reconcile && matches!(&w.changes[..], [Change::InsertCluster(c)] if c.phase == ClusterPhase::Pending && c.organization_id == ORG_A)
        })
        .times(1)
        .returning(|_| Ok(1));
    let s = m.services();
    let c = block_on(s.create_cluster(Command::new(&super_admin_a()), cluster_body()))
        .unwrap()
        .fresh()
        .unwrap();
    assert_eq!(c.organization_slug, "acme");
    assert_eq!(
        c.version, "v1.32.4",
        "the recommended version is the default"
    );
    assert_eq!(c.zone, "zone-1", "the default zone");
    assert_eq!(
        c.exposure,
        Exposure::Public,
        "the catalog's default exposure"
    );
    assert_eq!(c.network_mode, NetworkMode::Intranet);
    assert_eq!(
        c.control_plane_option_id, "cp-standard",
        "the zone's active option is applied"
    );
    assert_eq!(
        c.node_pools[0].root_volume_size_gib, 50,
        "root volume = the tier's disk"
    );
    assert_eq!(c.node_pools[0].status, PoolStatus::Provisioning);
}

#[test]
fn create_without_organization_is_422_even_with_a_preferred_organization() {
    let mut who = super_admin_a();
    who.preferred_organization = Some(ORG_A);
    let body = CreateClusterRequest {
        organization: None,
        ..cluster_body()
    };
    let r = block_on(
        create_ready()
            .services()
            .create_cluster(Command::new(&who), body),
    );
    assert_eq!(code(r), "validation_failed");
}

#[test]
fn create_unknown_zone_version_or_tier_is_400() {
    let s = create_ready().services();
    let who = super_admin_a();
    assert_eq!(
        code(block_on(s.create_cluster(
            Command::new(&who),
            CreateClusterRequest {
                zone: Some("zone-9".into()),
                ..cluster_body()
            }
        ))),
        "unknown_zone"
    );
    assert_eq!(
        code(block_on(s.create_cluster(
            Command::new(&who),
            CreateClusterRequest {
                version: Some("v1.0.0".into()),
                ..cluster_body()
            }
        ))),
        "unknown_version"
    );
    let tier = CreateClusterRequest {
        node_pools: Some(vec![pool_body(None, "kube.x9.huge", 1)]),
        ..cluster_body()
    };
    let e = block_on(s.create_cluster(Command::new(&who), tier)).unwrap_err();
    assert_eq!(e.code(), "unknown_machine_tier");
    assert!(e.to_string().contains("node_pools[0].size"));
}

#[test]
fn create_count_zero_without_auto_scale_is_422() {
    let body = CreateClusterRequest {
        node_pools: Some(vec![pool_body(None, "kube.c5.large", 0)]),
        ..cluster_body()
    };
    assert_eq!(
        code(block_on(
            create_ready()
                .services()
                .create_cluster(Command::new(&super_admin_a()), body)
        )),
        "validation_failed"
    );
}

#[test]
fn create_into_an_organization_where_not_super_admin_is_403() {
    let member = caller(&[(ORG_A, Role::Member)]);
    assert_eq!(
        code(block_on(
            create_ready()
                .services()
                .create_cluster(Command::new(&member), cluster_body())
        )),
        "forbidden"
    );
    let other = caller(&[(ORG_B, Role::SuperAdmin)]);
    assert_eq!(
        code(block_on(
            create_ready()
                .services()
                .create_cluster(Command::new(&other), cluster_body())
        )),
        "forbidden"
    );
}

#[test]
fn create_into_an_unknown_slug_is_404() {
    let r = block_on(
        create_ready()
            .services()
            .create_cluster(Command::new(&super_admin_a()), cluster_in("nosuch")),
    );
    assert_eq!(code(r), "not_found");
}

#[test]
fn create_prepaid_without_credit_is_402() {
    let who = caller(&[(ORG_B, Role::SuperAdmin)]);
    let r = block_on(
        create_ready()
            .services()
            .create_cluster(Command::new(&who), cluster_in("globex")),
    );
    assert_eq!(code(r), "insufficient_credit");
}

#[test]
fn create_is_written_only_within_the_zone_capacity() {
    // The body asks for 3 nodes; the store checks the limit with the write.
    let mut m = Mocks::new().with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    m.clusters
        .expect_commit()
        .withf(|w: &ClusterWrite| {
            w.zone_capacity
                == Some(ZoneCapacity {
                    zone: "zone-1".into(),
                    adds: 3,
                    capacity: 10_000,
                })
        })
        .times(1)
        .returning(|_| Ok(1));
    assert_eq!(
        code(block_on(m.services().create_cluster(
            Command::new(&super_admin_a()),
            cluster_body()
        ))),
        "ok"
    );
}

#[test]
fn create_past_zone_capacity_is_503() {
    let mut m = Mocks::new().with_organizations(vec![organization(ORG_A, Plan::Postpaid, 0)]);
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    m.clusters
        .expect_commit()
        .returning(|_| Err(StoreError::CapacityExhausted));
    let r = block_on(
        m.services()
            .create_cluster(Command::new(&super_admin_a()), cluster_body()),
    );
    assert_eq!(code(r), "capacity_exhausted");
}

#[test]
fn the_zone_capacity_admits_up_to_its_limit_exactly() {
    let limit = ZoneCapacity {
        zone: "zone-1".into(),
        adds: 3,
        capacity: 10_000,
    };
    assert!(limit.admits(9_997));
    assert!(!limit.admits(9_998));
    assert!(!limit.admits(u64::MAX), "no overflow");
}

#[test]
fn create_duplicate_name_is_409_name_conflict() {
    let mut m = create_ready();
    m.clusters.checkpoint();
    m.clusters.expect_commit().returning(|_| {
        Err(StoreError::Duplicate(
            crate::ports::storage::UniqueRule::ClusterName,
        ))
    });
    let e = block_on(
        m.services()
            .create_cluster(Command::new(&super_admin_a()), cluster_body()),
    )
    .unwrap_err();
    assert_eq!(e.code(), "name_conflict");
    assert!(e.to_string().contains("prod-1"));
}

#[test]
fn database_unavailable_is_503_service_unavailable() {
    let mut m = create_ready();
    m.clusters.checkpoint();
    m.clusters
        .expect_commit()
        .returning(|_| Err(StoreError::Unavailable("pool timeout".into())));
    let r = block_on(
        m.services()
            .create_cluster(Command::new(&super_admin_a()), cluster_body()),
    );
    assert_eq!(code(r), "service_unavailable");
}
