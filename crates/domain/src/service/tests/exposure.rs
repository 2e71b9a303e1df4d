//! Exposure changes: only when Provisioned, one at a time.

use super::*;

fn exposure(exposure: Exposure) -> ExposurePatch {
    ExposurePatch { exposure }
}

#[test]
fn exposure_before_provisioned_is_400() {
    for phase in [
        ClusterPhase::Pending,
        ClusterPhase::Provisioning,
        ClusterPhase::ControlPlaneReady,
    ] {
        let s = Mocks::new().with_cluster(cluster(ORG_A, phase)).services();
        let r = block_on(s.change_exposure(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            exposure(Exposure::Public),
            None,
        ));
        assert_eq!(code(r), "phase_not_provisioned", "{phase:?}");
    }
}

#[test]
fn exposure_change_starts_and_shows_the_target() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters
        .expect_commit()
        .withf(|w| w.reconcile)
        .returning(|_| Ok(6));
    let o = fresh(block_on(m.services().change_exposure(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        exposure(Exposure::Public),
        None,
    )))
    .unwrap();
    assert!(o.started);
    assert_eq!(
        o.cluster.exposure,
        Exposure::Private,
        "exposure shows the current value"
    );
    assert_eq!(
        o.cluster.exposure_change.map(|c| c.to),
        Some(Exposure::Public)
    );
}

#[test]
fn exposure_to_the_current_value_is_200_nothing_started() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters.expect_commit().never();
    let o = fresh(block_on(m.services().change_exposure(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        exposure(Exposure::Private),
        None,
    )))
    .unwrap();
    assert!(!o.started);
}

#[test]
fn exposure_while_another_change_is_in_flight_is_409() {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.exposure_change = Some(ExposureChange {
        to: Exposure::Public,
        status: ExposureChangeStatus::InProgress,
    });
    let s = Mocks::new().with_cluster(c).services();
    for to in [Exposure::Public, Exposure::Private] {
        assert_eq!(
            code(block_on(s.change_exposure(
                Command::new(&super_admin_a()),
                CLUSTER_1,
                exposure(to),
                None
            ))),
            "change_in_flight"
        );
    }
}

#[test]
fn exposure_public_needs_a_zone_with_public_exposure() {
    let text = crate::model::catalog::BUILTIN_CATALOG_JSON.replace(
        "\"public_exposure_enabled\": true",
        "\"public_exposure_enabled\": false",
    );
    let catalog = crate::model::catalog::Catalog::from_json(&text).unwrap();
    let m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    let base = m.services();
    let s = crate::service::Services::new(base.ports().clone(), catalog, Default::default());
    let r = block_on(s.change_exposure(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        exposure(Exposure::Public),
        None,
    ));
    assert_eq!(code(r), "public_exposure_unavailable");
}
