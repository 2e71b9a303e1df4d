//! Routes under an object: the object decides the organization; nothing is revealed.

use super::*;

#[test]
fn get_by_id_takes_the_clusters_organization_no_header_needed() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    assert_eq!(
        code(block_on(s.get_cluster(
            &caller(&[(ORG_A, Role::Member)]),
            CLUSTER_1,
            Freshness::Latest
        ))),
        "ok"
    );
    assert_eq!(
        code(block_on(s.get_cluster(
            &caller(&[(ORG_A, Role::ProjectAdmin)]),
            CLUSTER_1,
            Freshness::Latest
        ))),
        "ok"
    );
}

#[test]
fn get_cluster_of_another_organization_is_403() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_B, ClusterPhase::Provisioned))
        .services();
    assert_eq!(
        code(block_on(s.get_cluster(
            &super_admin_a(),
            CLUSTER_1,
            Freshness::Latest
        ))),
        "forbidden"
    );
}

#[test]
fn get_unknown_cluster_id_is_404() {
    let mut m = Mocks::new();
    m.clusters.expect_cluster().returning(|_, _| Ok(None));
    let s = m.services();
    assert_eq!(
        code(block_on(s.get_cluster(
            &super_admin_a(),
            uuid::Uuid::from_u128(77),
            Freshness::Latest
        ))),
        "not_found"
    );
}

#[test]
fn get_deleted_cluster_is_404() {
    let mut c = cluster(ORG_A, ClusterPhase::Deleting);
    c.deleted_at = Some(at(10));
    let s = Mocks::new().with_cluster(c).services();
    assert_eq!(
        code(block_on(s.get_cluster(
            &super_admin_a(),
            CLUSTER_1,
            Freshness::Latest
        ))),
        "not_found"
    );
}

#[test]
fn write_by_id_by_super_admin_nowhere_is_403_before_the_cluster_is_loaded() {
    let mut m = Mocks::new();
    m.clusters.expect_cluster().never();
    let s = m.services();
    let member = caller(&[(ORG_A, Role::Member), (ORG_B, Role::ProjectAdmin)]);
    let id = CLUSTER_1;
    let patch = description_patch("x");
    assert_eq!(
        code(block_on(s.patch_cluster(
            Command::new(&member),
            id,
            patch,
            None
        ))),
        "forbidden"
    );
    assert_eq!(
        code(block_on(s.delete_cluster(Command::new(&member), id, None))),
        "forbidden"
    );
    assert_eq!(
        code(block_on(s.delete_node_pool(
            Command::new(&member),
            id,
            "default",
            None
        ))),
        "forbidden"
    );
    assert_eq!(
        code(block_on(s.delete_cluster(
            Command::new(&member),
            uuid::Uuid::from_u128(5),
            None
        ))),
        "forbidden",
        "unknown ids too: existence is not revealed"
    );
}

#[test]
fn write_by_member_of_the_organization_is_403() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    // super_admin elsewhere, member here
    let who = caller(&[(ORG_A, Role::Member), (ORG_B, Role::SuperAdmin)]);
    let patch = ClusterPatch {
        description: None,
        tags: Some(Some(vec!["a".into()])),
        control_plane_firewall: None,
        ..ClusterPatch::default()
    };
    assert_eq!(
        code(block_on(s.patch_cluster(
            Command::new(&who),
            CLUSTER_1,
            patch,
            None
        ))),
        "forbidden"
    );
}

#[test]
fn write_to_another_organizations_cluster_is_403_and_to_an_unknown_one_404() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_B, ClusterPhase::Provisioned))
        .services();
    assert_eq!(
        code(block_on(s.delete_cluster(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            None
        ))),
        "forbidden"
    );
    let mut m = Mocks::new();
    m.clusters.expect_cluster().returning(|_, _| Ok(None));
    assert_eq!(
        code(block_on(m.services().delete_cluster(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            None
        ))),
        "not_found"
    );
}

#[test]
fn get_by_id_reads_as_current_as_the_caller_asked() {
    for freshness in [Freshness::Latest, Freshness::Recent] {
        let mut m = Mocks::new();
        m.clusters
            .expect_cluster()
            .with(eq(CLUSTER_1), eq(freshness))
            .times(1)
            .returning(|_, _| Ok(Some(cluster(ORG_A, ClusterPhase::Provisioned))));
        let s = m.services();
        assert_eq!(
            code(block_on(s.get_cluster(
                &super_admin_a(),
                CLUSTER_1,
                freshness
            ))),
            "ok"
        );
    }
}
