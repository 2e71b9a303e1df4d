//! The operator's reads and repairs: what only the operator's tool asks of storage (across
//! organizations, below the API's resources). The rules deciding what to repair and how are in
//! `crate::maintenance`; this port only finds and writes.

use std::net::Ipv4Addr;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::cluster::ClusterPhase;
use crate::model::operation::ClusterOperation;
use crate::ports::storage::StoreError;

/// The state of a cluster's provisioning work in the durable queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueState {
    /// Waiting until `run_after` (at once, or after a failed attempt's backoff).
    Pending,
    /// Held by a worker until its lease expires.
    Running,
    Done,
}

/// A cluster's entry in the provisioning queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    pub cluster_id: Uuid,
    pub state: QueueState,
    pub generation: i64,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub run_after: DateTime<Utc>,
    /// The worker holding it and until when, while `Running`.
    pub leased_by: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
}

/// A zone whose recorded node count (what capacity checks read) is not the sum of its pools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneUsageDrift {
    pub zone: String,
    pub recorded: i64,
    pub actual: i64,
}

/// An Elastic IP row still holding its address after its cluster was deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanedElasticIp {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub address: Ipv4Addr,
}

/// A cluster past its control plane's creation with no stored credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterWithoutCredentials {
    pub cluster_id: Uuid,
    pub phase: ClusterPhase,
}

#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait MaintenanceStore: Send + Sync {
    /// One operation, by its id alone.
    async fn operation(&self, id: Uuid) -> Result<Option<ClusterOperation>, StoreError>;
    /// Running operations created before `before`, oldest first, at most `limit`.
    async fn running_operations(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<ClusterOperation>, StoreError>;
    async fn queue_entry(&self, cluster_id: Uuid) -> Result<Option<QueueEntry>, StoreError>;
    async fn zone_usage_drift(&self) -> Result<Vec<ZoneUsageDrift>, StoreError>;
    /// Recounts one zone's usage from its pools, with writes to it held off meanwhile.
    async fn recount_zone_usage(&self, zone: String) -> Result<(), StoreError>;
    async fn clusters_without_credentials(
        &self,
    ) -> Result<Vec<ClusterWithoutCredentials>, StoreError>;
    async fn orphaned_elastic_ips(&self) -> Result<Vec<OrphanedElasticIp>, StoreError>;
    /// Deletes the Elastic IP row if its cluster is still deleted; whether it did.
    async fn remove_orphaned_elastic_ip(&self, id: Uuid) -> Result<bool, StoreError>;
}
