//! One worker: claim an operation, reconcile its cluster step by step while the lease lasts,
//! record how it ended, and look for the next.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use chrono::{DateTime, Utc};
use domain::ports::storage::OperationLease;
use domain::reconcile::{
    Outcome, Progress, ReconcileError, StepReport, reconcile_step_report, settle_operations,
};
use tracing::Instrument;

use crate::{Shared, backoff};

/// How a lease ended.
enum End {
    /// The cluster is idle: the operation is done (unless more was asked meanwhile).
    Finished,
    /// Work remains but this worker stops: the operation is due again at once.
    Requeue(&'static str),
    /// A step failed: the operation is due again at `retry_at`.
    Failed {
        error: ReconcileError,
        retry_at: DateTime<Utc>,
    },
}

/// The worker loop; returns once shutdown is asked.
pub(crate) async fn run(shared: Arc<Shared>, name: String) {
    tracing::debug!(worker = %name, "reconciler worker started");
    while !shared.shutdown.is_cancelled() {
        // A claim is never interrupted: one dropped half-way could hold an operation until
        // its lease ran out.
        match shared.queue.claim(name.clone(), shared.config.lease).await {
            Ok(Some(lease)) => {
                shared.counters.claimed.fetch_add(1, Ordering::Relaxed);
                shared.counters.busy.fetch_add(1, Ordering::Relaxed);
                // Every line of this work carries the cluster and the request that asked for
                // it, so `LOG_FORMAT=json` lines join the request's own.
                // The trace of the request that scheduled it, so a tracing back end shows the
                // provisioning inside the request's story.
                let (request_id, trace) = lease.operation.cause();
                let parent = trace.and_then(telemetry::TraceContext::parse);
                let span = tracing::info_span!(
                    "operation",
                    cluster_id = %lease.operation.cluster_id,
                    request_id = request_id.unwrap_or(""),
                    trace_id = tracing::field::Empty,
                );
                // Work no traced request asked for (a retry, a repair) keeps an empty trace id.
                if parent.is_some() {
                    let own = telemetry::export::join(&span, parent.as_ref());
                    span.record("trace_id", tracing::field::display(own.trace_id()));
                }
                work_on(&shared, &name, lease).instrument(span).await;
                shared.counters.busy.fetch_sub(1, Ordering::Relaxed);
            }
            Ok(None) => idle(&shared).await,
            Err(e) => {
                tracing::warn!(worker = %name, error = %e, "claiming an operation failed");
                idle(&shared).await;
            }
        }
    }
    tracing::debug!(worker = %name, "reconciler worker stopped");
}

/// Waits for the poll interval, a wake-up or shutdown, whichever comes first.
async fn idle(shared: &Shared) {
    tokio::select! {
        () = tokio::time::sleep(shared.config.poll_interval) => {}
        () = shared.waker.0.notified() => {}
        () = shared.shutdown.cancelled() => {}
    }
}

async fn work_on(shared: &Shared, worker: &str, lease: OperationLease) {
    let cluster_id = lease.operation.cluster_id;
    let end = reconcile_while_leased(shared, worker, &lease).await;
    let queue = &shared.queue;
    let counters = &shared.counters;
    let generation = lease.operation.generation;
    let recorded = match end {
        End::Finished => {
            counters.finished.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(worker, %cluster_id, "operation finished");
            // The changes this work carried out end now; if settling fails, the next reconcile
            // of the cluster settles them (they stay running meanwhile).
            if let Err(e) = settle_operations(&shared.ports, cluster_id, generation).await {
                tracing::warn!(worker, %cluster_id, error = %e, "settling the cluster's operations failed");
            }
            queue.finish(lease).await
        }
        End::Requeue(why) => {
            counters.requeued.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(worker, %cluster_id, why, "operation given back with work remaining");
            queue.requeue(lease).await
        }
        End::Failed { error, retry_at } => {
            let attempts = lease.operation.attempts;
            let shown = shared
                .ports
                .operations
                // The claim counted this attempt already.
                .record_attempt(
                    cluster_id,
                    attempts,
                    error.customer_message(),
                    shared.ports.clock.now(),
                )
                .await;
            if let Err(e) = shown {
                tracing::warn!(worker, %cluster_id, error = %e, "recording the failed attempt on the cluster's operations failed");
            }
            if error.is_transient() {
                counters.retried.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(worker, %cluster_id, attempts, %retry_at, error = %error, "reconcile step failed; will retry");
            } else {
                counters.failed.fetch_add(1, Ordering::Relaxed);
                tracing::error!(worker, %cluster_id, attempts, %retry_at, error = %error, "reconcile step failed permanently");
            }
            queue.retry(lease, error.to_string(), retry_at).await
        }
    };
    if let Err(e) = recorded {
        // The lease runs out by itself and the operation is claimed again: nothing is lost.
        tracing::warn!(worker, %cluster_id, error = %e, "recording the operation's outcome failed");
    }
}

async fn reconcile_while_leased(shared: &Shared, worker: &str, lease: &OperationLease) -> End {
    let cluster_id = lease.operation.cluster_id;
    let config = &shared.config;
    loop {
        if shared.shutdown.is_cancelled() {
            return End::Requeue("the worker shut down with work remaining");
        }
        let left = (lease.expires_at - shared.ports.clock.now())
            .to_std()
            .unwrap_or_default();
        if left < config.step_budget {
            return End::Requeue("the lease ran short with work remaining");
        }
        let Some(result) = step_unless_shut_down(shared, lease).await else {
            return End::Requeue("the worker shut down during a step");
        };
        match result {
            Ok(StepReport { work: None, .. }) => return End::Finished,
            Ok(StepReport {
                work: Some(work),
                outcome,
                progress,
            }) => {
                shared.counters.steps.fetch_add(1, Ordering::Relaxed);
                match &outcome {
                    Outcome::Failed { reason } => {
                        tracing::warn!(worker, %cluster_id, work, outcome = "failed", reason = %reason, "reconcile step: the provider gave up")
                    }
                    Outcome::Raced => {
                        tracing::debug!(worker, %cluster_id, work, outcome = "raced", "reconcile step: the cluster changed meanwhile")
                    }
                    Outcome::Done | Outcome::Idle => {
                        tracing::info!(worker, %cluster_id, work, outcome = "done", "reconcile step")
                    }
                }
                if progress == Progress::Idle {
                    return End::Finished;
                }
            }
            Err(error) => {
                let delay = if error.is_transient() {
                    backoff(
                        lease.operation.attempts,
                        config.base_backoff,
                        config.max_backoff,
                    )
                } else {
                    config.permanent_retry_delay
                };
                let delay = chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
                let retry_at = shared
                    .ports
                    .clock
                    .now()
                    .checked_add_signed(delay)
                    .unwrap_or(DateTime::<Utc>::MAX_UTC);
                return End::Failed { error, retry_at };
            }
        }
    }
}

/// Runs one step; on shutdown the step gets `shutdown_grace` to finish, then is dropped
/// (`None`), which is safe: the state it leaves is what a crash would leave.
async fn step_unless_shut_down(
    shared: &Shared,
    lease: &OperationLease,
) -> Option<Result<StepReport, ReconcileError>> {
    let step = reconcile_step_report(&shared.ports, lease.operation.cluster_id)
        .instrument(tracing::info_span!("reconcile_step"));
    tokio::pin!(step);
    tokio::select! {
        result = &mut step => Some(result),
        () = shared.shutdown.cancelled() => tokio::time::timeout(shared.config.shutdown_grace, step).await.ok(),
    }
}
