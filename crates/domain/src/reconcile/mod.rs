//! Level-triggered reconciliation of one cluster: load what is stored, decide the next piece
//! of work with a pure rule ([`next_work`]), carry it out with at most one provider step, and
//! commit the outcome through the cluster's state machines. The worker loop around it (leases,
//! retries, shutdown) lives in the `reconciler` crate; this module needs only the ports.

#[cfg(any(test, feature = "mocks"))]
pub mod memory;
mod plan;
mod settle;
mod step;

#[cfg(test)]
mod tests;

pub use self::plan::{ClusterState, Work, next_work, node_name};
pub use self::settle::{settle, settle_operations};
pub use self::step::{load_state, reconcile_step, reconcile_step_report, upgrade_progress};

use crate::ports::storage::StoreError;

/// Whether a cluster needs more work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Work was done (or a concurrent change won the race): call again on fresh state.
    More,
    /// The cluster matches what was asked (or is gone): nothing to do.
    Idle,
}

/// What one call did, for the worker's logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to do.
    Idle,
    /// The work was done and committed.
    Done,
    /// The cluster changed meanwhile; nothing of this call's last commit was written.
    Raced,
    /// The provider gave up and the object it was working on (the cluster, an Elastic IP, a
    /// firewall rule) went to `Failed` with this reason.
    Failed { reason: String },
}

/// One call of [`reconcile_step_report`]: which work it took on and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepReport {
    /// [`Work::name`] of the work taken on; `None` when there was none.
    pub work: Option<&'static str>,
    pub outcome: Outcome,
    pub progress: Progress,
}

/// Why a reconcile step could not finish. No variant ever carries a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconcileError {
    /// The provider failed in a way worth retrying with backoff.
    #[error("{step}: transient provider failure: {message}")]
    Transient { step: &'static str, message: String },
    /// The provider gave up on work whose object has no `Failed` status to go to (work on a
    /// `Provisioned` cluster, deletions): recorded on the operation, retried only much later.
    #[error("{step}: provider failure: {message}")]
    Permanent { step: &'static str, message: String },
    /// Storage failed; retry with backoff.
    #[error("storage: {0}")]
    Store(#[from] StoreError),
    /// A broken invariant (a state machine refused the planned change, the provider answered
    /// with the wrong outcome, sealing failed): a bug, recorded like a permanent failure.
    #[error("internal: {0}")]
    Internal(String),
}

impl ReconcileError {
    /// What a customer following an operation is told: what was being done, that it is
    /// retried by itself, and what they can do about it. Never a secret, never a stack of
    /// internal names.
    pub fn customer_message(&self) -> String {
        match self {
            // What the provider said of a passing failure helps no one act: left out.
            ReconcileError::Transient { step, .. } => format!(
                "The cloud provider failed while {}; it is retried automatically, nothing to do.",
                doing(step)
            ),
            ReconcileError::Permanent { step, message } => format!(
                "The cloud provider refused {} ({message}); it is retried every few minutes. If it keeps failing, contact support with the operation's id.",
                doing(step)
            ),
            ReconcileError::Store(_) => "The service could not reach its database; the work is retried automatically, nothing to do.".into(),
            ReconcileError::Internal(_) => "An internal error stopped the work; it is retried every few minutes and the operators are alerted. Contact support with the operation's id if it persists.".into(),
        }
    }

    /// Whether retrying soon may help (else the worker waits its longest backoff).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ReconcileError::Transient { .. } | ReconcileError::Store(_)
        )
    }
}

/// A provider step as a customer would say it.
fn doing(step: &str) -> &'static str {
    match step {
        "create_control_plane" => "creating the control plane",
        "register_hub" => "registering the cluster with the service hub",
        "install_default_environment" => "installing the default environment",
        "set_exposure" => "changing where the API endpoint is reachable from",
        "set_control_plane_firewall" => "changing which addresses may reach the API server",
        "apply_firewall_rule" => "applying a firewall rule",
        "remove_firewall_rule" => "removing a firewall rule",
        "attach_address" => "attaching an Elastic IP",
        "detach_address" => "detaching an Elastic IP",
        "create_node" => "creating a node",
        "configure_node" => "setting a node pool's labels and taints on a node",
        "delete_node" => "deleting a node",
        "destroy_cluster" => "deleting the cluster",
        "upgrade_control_plane" => "upgrading the control plane",
        _ => "working on the cluster",
    }
}
