//! The operator's use cases, for the operator's tool (`kubesvc-admin`): look at a cluster with
//! everything its state machines and provisioning hold, follow stuck operations and retry or
//! cancel one, and check the invariants the service keeps, repairing what breaks them. They
//! run on the same model, rules and ports as the API's use cases, with the operator (not a
//! customer) as the one asking: no organization or role applies.

mod checks;
mod operations;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use uuid::Uuid;

use crate::model::cluster::Cluster;
use crate::model::elastic_ip::ElasticIp;
use crate::model::firewall::FirewallRule;
use crate::model::node::Node;
use crate::model::operation::ClusterOperation;
use crate::ports::clock::Clock;
use crate::ports::maintenance::{MaintenanceStore, QueueEntry};
use crate::ports::provisioning::CloudProvider;
use crate::ports::secrets::SecretVault;
use crate::ports::storage::{ClusterRepository, Freshness, OperationLog, PageRequest, StoreError};

pub use checks::{Finding, Repair};
pub use operations::StuckOperation;

/// What the operator's use cases need.
#[derive(Clone)]
pub struct MaintenancePorts {
    pub store: Arc<dyn MaintenanceStore>,
    pub clusters: Arc<dyn ClusterRepository>,
    pub operations: Arc<dyn OperationLog>,
    pub cloud: Arc<dyn CloudProvider>,
    pub vault: Arc<dyn SecretVault>,
    pub clock: Arc<dyn Clock>,
}

/// The operator's use cases.
#[derive(Clone)]
pub struct Maintenance {
    ports: MaintenancePorts,
}

/// Why an operator's request was refused or failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaintenanceError {
    #[error("no cluster {0}")]
    ClusterNotFound(Uuid),
    #[error("cluster {0} is deleted: its operations can only be cancelled")]
    ClusterDeleted(Uuid),
    #[error("no operation {0}")]
    OperationNotFound(Uuid),
    /// Only a running operation can be retried or cancelled.
    #[error("operation {id} is {status}, not running: only a running operation can be {verb}")]
    NotRunning {
        id: Uuid,
        status: &'static str,
        verb: &'static str,
    },
    #[error("a cancellation needs a reason: the cluster's owners read it")]
    NoReason,
    #[error("the cluster changed while it was being repaired; check again")]
    Changed,
    #[error("the cloud provider refused: {0}")]
    Provider(String),
    #[error("storage: {0}")]
    Store(StoreError),
}

impl From<StoreError> for MaintenanceError {
    fn from(e: StoreError) -> MaintenanceError {
        match e {
            StoreError::RevisionMismatch => MaintenanceError::Changed,
            other => MaintenanceError::Store(other),
        }
    }
}

/// A cluster as an operator looks at it: the resource, everything under it, and where its
/// provisioning stands.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterReport {
    /// Deleted clusters (tombstones) included.
    pub cluster: Cluster,
    pub nodes: Vec<Node>,
    pub elastic_ips: Vec<ElasticIp>,
    pub firewall_rules: Vec<FirewallRule>,
    pub has_credentials: bool,
    pub queue: Option<QueueEntry>,
    /// The newest operations first (at most [`REPORT_OPERATIONS`]).
    pub operations: Vec<ClusterOperation>,
    pub operations_total: u64,
}

/// How many of a cluster's operations a report shows.
pub const REPORT_OPERATIONS: u32 = 20;

impl Maintenance {
    pub fn new(ports: MaintenancePorts) -> Maintenance {
        Maintenance { ports }
    }

    /// A cluster with everything under it, its provisioning queue entry and its latest
    /// operations; deleted clusters too.
    pub async fn cluster_report(&self, id: Uuid) -> Result<ClusterReport, MaintenanceError> {
        let p = &self.ports;
        let cluster = p
            .clusters
            .cluster(id, Freshness::Latest)
            .await?
            .ok_or(MaintenanceError::ClusterNotFound(id))?;
        let page = p
            .operations
            .cluster_operations(
                id,
                None,
                PageRequest {
                    page: 1,
                    size: REPORT_OPERATIONS,
                },
            )
            .await?;
        Ok(ClusterReport {
            nodes: p.clusters.nodes(id, None).await?,
            elastic_ips: p.clusters.elastic_ips(id).await?,
            firewall_rules: p.clusters.firewall_rules(id).await?,
            has_credentials: p.clusters.credentials(id).await?.is_some(),
            queue: p.store.queue_entry(id).await?,
            operations: page.items,
            operations_total: page.total,
            cluster,
        })
    }
}
