//! The invariants the service keeps, checked, and the repair of each finding:
//!
//! - a zone's recorded node count (what capacity checks read) is the sum of its live pools:
//!   recounted from the pools;
//! - a cluster whose control plane was created has its credentials: the provider issues them
//!   again (the control plane step is idempotent per cluster) and they are stored sealed;
//! - a deleted cluster holds no Elastic IP: the row goes, and its address returns to the pool.
//!
//! A repair is decided again on what the store holds when it runs, so a finding that resolved
//! itself meanwhile is left alone.

use std::fmt;
use std::net::Ipv4Addr;

use uuid::Uuid;

use super::{Maintenance, MaintenanceError};
use crate::model::cluster::ClusterPhase;
use crate::model::kubeconfig::SealedCredentials;
use crate::ports::provisioning::{Step, StepOutcome};
use crate::ports::storage::{Change, ClusterWrite, Freshness};

/// Where a repair started, kept on the write it makes.
const REPAIR_CAUSE: &str = "kubesvc-admin check --fix";

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    ZoneUsageDrift {
        zone: String,
        recorded: i64,
        actual: i64,
    },
    MissingCredentials {
        cluster_id: Uuid,
        phase: ClusterPhase,
    },
    OrphanedElasticIp {
        id: Uuid,
        cluster_id: Uuid,
        address: Ipv4Addr,
    },
}

impl Finding {
    /// A short name of the invariant, for reports and metrics.
    pub fn invariant(&self) -> &'static str {
        match self {
            Finding::ZoneUsageDrift { .. } => "zone_usage",
            Finding::MissingCredentials { .. } => "cluster_credentials",
            Finding::OrphanedElasticIp { .. } => "orphaned_elastic_ip",
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::ZoneUsageDrift {
                zone,
                recorded,
                actual,
            } => write!(
                f,
                "zone {zone} records {recorded} nodes in use but its pools ask for {actual}"
            ),
            Finding::MissingCredentials { cluster_id, phase } => write!(
                f,
                "cluster {cluster_id} is {} but has no credentials",
                phase.as_str()
            ),
            Finding::OrphanedElasticIp {
                id,
                cluster_id,
                address,
            } => write!(
                f,
                "Elastic IP {id} ({address}) still belongs to deleted cluster {cluster_id}"
            ),
        }
    }
}

/// What a repair did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repair {
    Repaired,
    /// The store no longer shows the finding.
    AlreadyResolved,
}

impl Maintenance {
    /// Every broken invariant, in the order of the module's list.
    pub async fn check(&self) -> Result<Vec<Finding>, MaintenanceError> {
        let store = &self.ports.store;
        let mut findings: Vec<Finding> = store
            .zone_usage_drift()
            .await?
            .into_iter()
            .map(|d| Finding::ZoneUsageDrift {
                zone: d.zone,
                recorded: d.recorded,
                actual: d.actual,
            })
            .collect();
        findings.extend(
            store
                .clusters_without_credentials()
                .await?
                .into_iter()
                .map(|c| Finding::MissingCredentials {
                    cluster_id: c.cluster_id,
                    phase: c.phase,
                }),
        );
        findings.extend(store.orphaned_elastic_ips().await?.into_iter().map(|e| {
            Finding::OrphanedElasticIp {
                id: e.id,
                cluster_id: e.cluster_id,
                address: e.address,
            }
        }));
        Ok(findings)
    }

    /// Repairs one finding of [`Maintenance::check`].
    pub async fn repair(&self, finding: &Finding) -> Result<Repair, MaintenanceError> {
        match finding {
            Finding::ZoneUsageDrift { zone, .. } => {
                self.ports.store.recount_zone_usage(zone.clone()).await?;
                Ok(Repair::Repaired)
            }
            Finding::MissingCredentials { cluster_id, .. } => {
                self.restore_credentials(*cluster_id).await
            }
            Finding::OrphanedElasticIp { id, .. } => {
                Ok(if self.ports.store.remove_orphaned_elastic_ip(*id).await? {
                    Repair::Repaired
                } else {
                    Repair::AlreadyResolved
                })
            }
        }
    }

    async fn restore_credentials(&self, cluster_id: Uuid) -> Result<Repair, MaintenanceError> {
        let p = &self.ports;
        let cluster = p
            .clusters
            .cluster(cluster_id, Freshness::Latest)
            .await?
            .ok_or(MaintenanceError::ClusterNotFound(cluster_id))?;
        let past_control_plane = matches!(
            cluster.phase,
            ClusterPhase::ControlPlaneReady | ClusterPhase::Provisioned
        );
        if cluster.is_gone()
            || !past_control_plane
            || p.clusters.credentials(cluster_id).await?.is_some()
        {
            return Ok(Repair::AlreadyResolved);
        }
        let step = Step::CreateControlPlane {
            cluster_id,
            cluster_name: cluster.name.as_str().to_owned(),
            zone: cluster.zone.clone(),
            version: cluster.version.clone(),
            exposure: cluster.exposure,
            control_plane_firewall: cluster.control_plane_firewall.clone(),
        };
        let credentials = match p.cloud.execute(step).await {
            Ok(StepOutcome::ControlPlane { credentials, .. }) => credentials,
            Ok(_) => {
                return Err(MaintenanceError::Provider(
                    "the control plane step answered something else".into(),
                ));
            }
            Err(e) => return Err(MaintenanceError::Provider(e.to_string())),
        };
        let token = p
            .vault
            .seal(&credentials.token)
            .map_err(|e| MaintenanceError::Provider(format!("sealing the token: {e}")))?;
        p.clusters
            .commit(ClusterWrite {
                cause: Some(REPAIR_CAUSE.to_owned()),
                ..ClusterWrite::plain(
                    cluster_id,
                    Some(cluster.revision),
                    vec![Change::SetCredentials(SealedCredentials {
                        ca_certificate_pem: credentials.ca_certificate_pem,
                        token,
                    })],
                    p.clock.now(),
                )
            })
            .await?;
        Ok(Repair::Repaired)
    }
}
