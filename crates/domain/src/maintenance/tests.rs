#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use futures::executor::block_on;
use mockall::predicate::eq;
use uuid::Uuid;

use super::*;
use crate::model::audit::AuditResource;
use crate::model::cluster::ClusterPhase;
use crate::model::kubeconfig::{ClusterCredentials, SealedCredentials};
use crate::model::operation::{OperationKind, OperationStatus, Settled};
use crate::model::secret::{SealedSecret, Secret};
use crate::ports::maintenance::{
    ClusterWithoutCredentials, MockMaintenanceStore, OrphanedElasticIp, ZoneUsageDrift,
};
use crate::ports::provisioning::{Endpoint, MockCloudProvider, Step, StepOutcome};
use crate::ports::secrets::MockSecretVault;
use crate::ports::storage::{Change, ClusterWrite, MockClusterRepository, MockOperationLog};
use crate::testing::{CLUSTER_1, FixedClock, ORG_A, at, cluster, running_operation};

/// Every port of the operator's use cases as a mock.
#[derive(Default)]
struct Mocks {
    store: MockMaintenanceStore,
    clusters: MockClusterRepository,
    operations: MockOperationLog,
    cloud: MockCloudProvider,
    vault: MockSecretVault,
}

impl Mocks {
    fn maintenance(self) -> Maintenance {
        Maintenance::new(MaintenancePorts {
            store: Arc::new(self.store),
            clusters: Arc::new(self.clusters),
            operations: Arc::new(self.operations),
            cloud: Arc::new(self.cloud),
            vault: Arc::new(self.vault),
            clock: Arc::new(FixedClock::default()),
        })
    }

    /// `operation()` answers `op` (and, after a settle, `op` as settled).
    fn with_operation(mut self, op: ClusterOperation) -> Self {
        self.store
            .expect_operation()
            .returning(move |_| Ok(Some(op.clone())));
        self
    }

    /// Records every write committed.
    fn recording_commits(mut self) -> (Self, Arc<Mutex<Vec<ClusterWrite>>>) {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let seen = writes.clone();
        self.clusters.expect_commit().returning(move |w| {
            seen.lock().unwrap().push(w);
            Ok(8)
        });
        (self, writes)
    }
}

fn pool_change() -> ClusterOperation {
    running_operation(
        OperationKind::NodePoolChange,
        AuditResource::NodePool,
        "workers".into(),
    )
}

fn settled(status: OperationStatus) -> ClusterOperation {
    ClusterOperation {
        status,
        finished_at: Some(at(5)),
        ..pool_change()
    }
}

// ---- Operations --------------------------------------------------------------------------

#[test]
fn only_a_running_operation_can_be_retried_or_cancelled() {
    for status in [
        OperationStatus::Succeeded,
        OperationStatus::Failed,
        OperationStatus::Cancelled,
    ] {
        let m = Mocks::default()
            .with_operation(settled(status))
            .maintenance();
        let op = pool_change().id;
        let err = block_on(m.retry_operation(op)).unwrap_err();
        assert_eq!(
            err,
            MaintenanceError::NotRunning {
                id: op,
                status: status.as_str(),
                verb: "retried"
            }
        );
        let err = block_on(m.cancel_operation(op, "stuck")).unwrap_err();
        assert!(matches!(
            err,
            MaintenanceError::NotRunning {
                verb: "cancelled",
                ..
            }
        ));
    }
}

#[test]
fn an_unknown_operation_is_named() {
    let mut mocks = Mocks::default();
    mocks.store.expect_operation().returning(|_| Ok(None));
    let m = mocks.maintenance();
    let id = Uuid::from_u128(77);
    assert_eq!(
        block_on(m.retry_operation(id)).unwrap_err(),
        MaintenanceError::OperationNotFound(id)
    );
}

#[test]
fn a_retry_schedules_provisioning_now_on_the_clusters_revision_and_changes_nothing() {
    let (mut mocks, writes) = Mocks::default()
        .with_operation(pool_change())
        .recording_commits();
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.revision = 7;
    mocks
        .clusters
        .expect_cluster()
        .returning(move |_, _| Ok(Some(c.clone())));
    mocks.store.expect_queue_entry().returning(|_| Ok(None));
    block_on(mocks.maintenance().retry_operation(pool_change().id)).unwrap();

    let writes = writes.lock().unwrap();
    assert_eq!(writes.len(), 1);
    let w = &writes[0];
    assert_eq!(w.cluster_id, CLUSTER_1);
    assert_eq!(w.expected_revision, Some(7));
    assert!(w.reconcile && w.changes.is_empty());
    assert!(w.audit.is_none() && w.operation.is_none() && w.idempotency.is_none());
}

#[test]
fn a_retry_of_an_operation_of_a_deleted_cluster_is_refused() {
    let mut mocks = Mocks::default().with_operation(pool_change());
    let mut c = cluster(ORG_A, ClusterPhase::Deleting);
    c.deleted_at = Some(at(3));
    mocks
        .clusters
        .expect_cluster()
        .returning(move |_, _| Ok(Some(c.clone())));
    mocks.clusters.expect_commit().never();
    let err = block_on(mocks.maintenance().retry_operation(pool_change().id)).unwrap_err();
    assert_eq!(err, MaintenanceError::ClusterDeleted(CLUSTER_1));
}

#[test]
fn a_cancel_ends_the_operation_with_the_operators_reason_for_its_owners() {
    let mut mocks = Mocks::default().with_operation(pool_change());
    let op = pool_change();
    mocks
        .operations
        .expect_settle_operations()
        .with(
            eq(CLUSTER_1),
            eq(vec![Settled {
                id: op.id,
                status: OperationStatus::Cancelled,
                reason: Some(
                    "Cancelled by the service's operators: the zone is being drained".into(),
                ),
            }]),
            eq(at(0)),
        )
        .times(1)
        .returning(|_, _, _| Ok(()));
    block_on(
        mocks
            .maintenance()
            .cancel_operation(op.id, "  the zone is being drained "),
    )
    .unwrap();
}

#[test]
fn a_cancel_needs_a_reason() {
    let mut mocks = Mocks::default().with_operation(pool_change());
    mocks.operations.expect_settle_operations().never();
    let err = block_on(
        mocks
            .maintenance()
            .cancel_operation(pool_change().id, " \n"),
    )
    .unwrap_err();
    assert_eq!(err, MaintenanceError::NoReason);
}

#[test]
fn stuck_operations_are_those_running_since_before_the_threshold() {
    let mut mocks = Mocks::default();
    mocks
        .store
        .expect_running_operations()
        // The fixed clock says at(0); ten minutes before.
        .with(eq(at(-600)), eq(50))
        .returning(|_, _| Ok(vec![pool_change()]));
    mocks.store.expect_queue_entry().returning(|_| Ok(None));
    let stuck = block_on(
        mocks
            .maintenance()
            .stuck_operations(chrono::Duration::minutes(10), 50),
    )
    .unwrap();
    assert_eq!(stuck.len(), 1);
    assert_eq!(stuck[0].operation, pool_change());
}

// ---- Invariants --------------------------------------------------------------------------

fn orphan() -> OrphanedElasticIp {
    OrphanedElasticIp {
        id: Uuid::from_u128(0xe1),
        cluster_id: CLUSTER_1,
        address: "203.0.113.9".parse().unwrap(),
    }
}

#[test]
fn a_check_reports_every_broken_invariant_in_words() {
    let mut mocks = Mocks::default();
    mocks.store.expect_zone_usage_drift().returning(|| {
        Ok(vec![ZoneUsageDrift {
            zone: "eu-west-1a".into(),
            recorded: 9,
            actual: 6,
        }])
    });
    mocks
        .store
        .expect_clusters_without_credentials()
        .returning(|| {
            Ok(vec![ClusterWithoutCredentials {
                cluster_id: CLUSTER_1,
                phase: ClusterPhase::Provisioned,
            }])
        });
    mocks
        .store
        .expect_orphaned_elastic_ips()
        .returning(|| Ok(vec![orphan()]));
    let findings = block_on(mocks.maintenance().check()).unwrap();
    let said: Vec<String> = findings
        .iter()
        .map(|f| format!("{}: {f}", f.invariant()))
        .collect();
    assert_eq!(
        said,
        [
            "zone_usage: zone eu-west-1a records 9 nodes in use but its pools ask for 6".to_owned(),
            format!(
                "cluster_credentials: cluster {CLUSTER_1} is Provisioned but has no credentials"
            ),
            format!(
                "orphaned_elastic_ip: Elastic IP {} (203.0.113.9) still belongs to deleted cluster {CLUSTER_1}",
                orphan().id
            ),
        ]
    );
}

#[test]
fn missing_credentials_are_issued_again_by_the_provider_and_stored_sealed() {
    let (mut mocks, writes) = Mocks::default().recording_commits();
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.revision = 4;
    mocks
        .clusters
        .expect_cluster()
        .returning(move |_, _| Ok(Some(c.clone())));
    mocks.clusters.expect_credentials().returning(|_| Ok(None));
    mocks
        .cloud
        .expect_execute()
        .withf(|s| matches!(s, Step::CreateControlPlane { cluster_id, .. } if *cluster_id == CLUSTER_1))
        .times(1)
        .returning(|_| {
            Ok(StepOutcome::ControlPlane {
                endpoint: Endpoint {
                    host: "10.0.0.1".into(),
                    public_hostname: None,
                },
                credentials: ClusterCredentials {
                    ca_certificate_pem: "CA".into(),
                    token: Secret::new("fresh-token"),
                },
            })
        });
    mocks
        .vault
        .expect_seal()
        .withf(|s| s.expose() == "fresh-token")
        .returning(|_| Ok(SealedSecret("v2:sealed".into())));
    let finding = Finding::MissingCredentials {
        cluster_id: CLUSTER_1,
        phase: ClusterPhase::Provisioned,
    };
    assert_eq!(
        block_on(mocks.maintenance().repair(&finding)).unwrap(),
        Repair::Repaired
    );
    let writes = writes.lock().unwrap();
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0].expected_revision, Some(4));
    assert!(!writes[0].reconcile);
    assert_eq!(
        writes[0].changes,
        vec![Change::SetCredentials(SealedCredentials {
            ca_certificate_pem: "CA".into(),
            token: SealedSecret("v2:sealed".into()),
        })]
    );
}

#[test]
fn a_finding_that_resolved_itself_is_left_alone() {
    // Credentials stored meanwhile: no provider call, no write.
    let mut mocks = Mocks::default();
    mocks
        .clusters
        .expect_cluster()
        .returning(|_, _| Ok(Some(cluster(ORG_A, ClusterPhase::Provisioned))));
    mocks.clusters.expect_credentials().returning(|_| {
        Ok(Some(SealedCredentials {
            ca_certificate_pem: "CA".into(),
            token: SealedSecret("v2:x".into()),
        }))
    });
    mocks.cloud.expect_execute().never();
    mocks.clusters.expect_commit().never();
    mocks
        .store
        .expect_remove_orphaned_elastic_ip()
        .returning(|_| Ok(false));
    let m = mocks.maintenance();
    let missing = Finding::MissingCredentials {
        cluster_id: CLUSTER_1,
        phase: ClusterPhase::Provisioned,
    };
    assert_eq!(
        block_on(m.repair(&missing)).unwrap(),
        Repair::AlreadyResolved
    );
    let orphaned = Finding::OrphanedElasticIp {
        id: orphan().id,
        cluster_id: CLUSTER_1,
        address: orphan().address,
    };
    assert_eq!(
        block_on(m.repair(&orphaned)).unwrap(),
        Repair::AlreadyResolved
    );
}

#[test]
fn a_repair_that_races_a_change_says_to_check_again() {
    let mut mocks = Mocks::default();
    mocks
        .clusters
        .expect_cluster()
        .returning(|_, _| Ok(Some(cluster(ORG_A, ClusterPhase::Provisioned))));
    mocks.clusters.expect_credentials().returning(|_| Ok(None));
    mocks.cloud.expect_execute().returning(|_| {
        Ok(StepOutcome::ControlPlane {
            endpoint: Endpoint {
                host: "h".into(),
                public_hostname: None,
            },
            credentials: ClusterCredentials {
                ca_certificate_pem: "CA".into(),
                token: Secret::new("t"),
            },
        })
    });
    mocks
        .vault
        .expect_seal()
        .returning(|_| Ok(SealedSecret("v2:s".into())));
    mocks
        .clusters
        .expect_commit()
        .returning(|_| Err(crate::ports::storage::StoreError::RevisionMismatch));
    let finding = Finding::MissingCredentials {
        cluster_id: CLUSTER_1,
        phase: ClusterPhase::Provisioned,
    };
    assert_eq!(
        block_on(mocks.maintenance().repair(&finding)).unwrap_err(),
        MaintenanceError::Changed
    );
}
