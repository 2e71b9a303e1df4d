//! Stuck operations: found, retried (provisioning scheduled again at once, its backoff cut
//! short) or cancelled (ended as `cancelled` with the operator's reason, which the cluster's
//! owners read). Only a running operation can be either.

use chrono::Duration;
use uuid::Uuid;

use super::{Maintenance, MaintenanceError};
use crate::model::operation::{ClusterOperation, OperationStatus, Settled};
use crate::ports::maintenance::QueueEntry;
use crate::ports::storage::{ClusterWrite, Freshness};

/// Where the request that started a retry came from, kept on the work it schedules.
const RETRY_CAUSE: &str = "kubesvc-admin operations retry";

/// A running operation and where its cluster's provisioning stands.
#[derive(Debug, Clone, PartialEq)]
pub struct StuckOperation {
    pub operation: ClusterOperation,
    pub queue: Option<QueueEntry>,
}

impl Maintenance {
    /// Operations still running `older_than` after they started, oldest first (at most
    /// `limit`), each with its cluster's queue entry.
    pub async fn stuck_operations(
        &self,
        older_than: Duration,
        limit: i64,
    ) -> Result<Vec<StuckOperation>, MaintenanceError> {
        let before = self.ports.clock.now() - older_than;
        let mut out = Vec::new();
        for operation in self.ports.store.running_operations(before, limit).await? {
            let queue = self.ports.store.queue_entry(operation.cluster_id).await?;
            out.push(StuckOperation { operation, queue });
        }
        Ok(out)
    }

    /// Schedules the operation's cluster for provisioning now, as a change would: the queue
    /// entry is due at once (a backoff cut short), and the operation is settled by the next
    /// reconcile that finishes. The attempts so far are kept.
    pub async fn retry_operation(&self, id: Uuid) -> Result<StuckOperation, MaintenanceError> {
        let operation = self.running(id, "retried").await?;
        let cluster = self
            .ports
            .clusters
            .cluster(operation.cluster_id, Freshness::Latest)
            .await?
            .ok_or(MaintenanceError::ClusterNotFound(operation.cluster_id))?;
        if cluster.is_gone() {
            // The cluster's deletion finished: nothing will settle the operation but a cancel.
            return Err(MaintenanceError::ClusterDeleted(cluster.id));
        }
        self.ports
            .clusters
            .commit(ClusterWrite {
                reconcile: true,
                cause: Some(RETRY_CAUSE.to_owned()),
                ..ClusterWrite::plain(
                    cluster.id,
                    Some(cluster.revision),
                    Vec::new(),
                    self.ports.clock.now(),
                )
            })
            .await?;
        let queue = self.ports.store.queue_entry(cluster.id).await?;
        Ok(StuckOperation { operation, queue })
    }

    /// Ends a running operation as `cancelled`, with `reason` for the cluster's owners. The
    /// cluster keeps what was asked of it: provisioning goes on toward it, and an owner changes
    /// or deletes the resource to ask for something else.
    pub async fn cancel_operation(
        &self,
        id: Uuid,
        reason: &str,
    ) -> Result<ClusterOperation, MaintenanceError> {
        let reason = reason.trim();
        if reason.is_empty() {
            return Err(MaintenanceError::NoReason);
        }
        let operation = self.running(id, "cancelled").await?;
        let settled = Settled::of(
            &operation,
            OperationStatus::Cancelled,
            Some(format!("Cancelled by the service's operators: {reason}")),
        );
        self.ports
            .operations
            .settle_operations(operation.cluster_id, vec![settled], self.ports.clock.now())
            .await?;
        self.ports
            .store
            .operation(id)
            .await?
            .ok_or(MaintenanceError::OperationNotFound(id))
    }

    async fn running(
        &self,
        id: Uuid,
        verb: &'static str,
    ) -> Result<ClusterOperation, MaintenanceError> {
        let operation = self
            .ports
            .store
            .operation(id)
            .await?
            .ok_or(MaintenanceError::OperationNotFound(id))?;
        if operation.status != OperationStatus::Running {
            return Err(MaintenanceError::NotRunning {
                id,
                status: operation.status.as_str(),
                verb,
            });
        }
        Ok(operation)
    }
}
