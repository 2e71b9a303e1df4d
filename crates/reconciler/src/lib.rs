//! The provisioning workers. Each server process runs a few tasks that claim operations from
//! the durable queue (one per cluster), call [`domain::reconcile::reconcile_step`] until the
//! cluster is idle or the lease runs short, and record the outcome: done, retried with
//! exponential backoff after a transient failure, or parked with its error after a permanent
//! one. Several processes on one database share the work; the queue hands each operation to
//! one worker at a time, and every step being idempotent, a crash only repeats a step.

mod worker;

#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use domain::ports::storage::OperationQueue;
use domain::service::Ports;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// The shutdown signal [`Reconciler::start`] takes, re-exported so the server needs no
/// dependency of its own for it.
pub use tokio_util::sync::CancellationToken;

/// How the workers run.
#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// Worker tasks in this process (`RECONCILER_WORKERS`); 0 switches provisioning off.
    pub workers: usize,
    /// How long a claimed operation stays this worker's.
    pub lease: Duration,
    /// How long an idle worker waits before looking at the queue again (unless woken).
    pub poll_interval: Duration,
    /// The first retry delay after a transient failure; doubled on every further attempt.
    pub base_backoff: Duration,
    /// The longest retry delay after a transient failure.
    pub max_backoff: Duration,
    /// The retry delay after a permanent failure: the operation stays visible with its error
    /// and is tried again this late, or at once when the user asks for more work.
    pub permanent_retry_delay: Duration,
    /// A step is only started while the lease has at least this much time left, so a step
    /// never outlives its lease (each simulated step takes `PROVISIONER_STEP_MS`).
    pub step_budget: Duration,
    /// On shutdown, how long a step under way may still take before it is abandoned.
    pub shutdown_grace: Duration,
    /// Worker names are `<name>-<n>`; they show who holds a lease.
    pub name: String,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        ReconcilerConfig {
            workers: 2,
            lease: Duration::from_secs(30),
            poll_interval: Duration::from_millis(200),
            base_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            permanent_retry_delay: Duration::from_secs(600),
            step_budget: Duration::from_secs(10),
            shutdown_grace: Duration::from_secs(5),
            name: format!("reconciler-{}", std::process::id()),
        }
    }
}

/// The delay before retry number `attempts` (counted from 1): `base · 2^(attempts-1)`, at
/// most `max`.
pub fn backoff(attempts: i32, base: Duration, max: Duration) -> Duration {
    let exponent = u32::try_from(attempts.saturating_sub(1))
        .unwrap_or(0)
        .min(31);
    base.saturating_mul(1u32 << exponent).min(max)
}

/// Counters for `/metrics`, shared by the workers.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub claimed: AtomicU64,
    pub steps: AtomicU64,
    pub finished: AtomicU64,
    pub retried: AtomicU64,
    pub failed: AtomicU64,
    pub requeued: AtomicU64,
    pub busy: AtomicU64,
}

/// A snapshot of the workers' activity since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReconcilerMetrics {
    /// Worker tasks started.
    pub workers: u64,
    /// Workers holding a lease right now.
    pub busy_workers: u64,
    /// Operations not yet done, across every process; `None` when the queue could not say.
    pub queue_depth: Option<u64>,
    /// Leases taken.
    pub operations_claimed: u64,
    /// Operations finished with their cluster idle.
    pub operations_finished: u64,
    /// Operations given back for a retry after a transient failure.
    pub operations_retried: u64,
    /// Operations parked after a permanent failure.
    pub operations_failed: u64,
    /// Leases given back with work remaining (the lease ran short, or shutdown).
    pub operations_requeued: u64,
    /// Reconcile steps that did a piece of work.
    pub steps: u64,
}

/// Pokes idle workers so they look at the queue at once (after a commit that scheduled work)
/// instead of at their next poll.
#[derive(Debug, Clone, Default)]
pub struct Waker(Arc<Notify>);

impl Waker {
    pub fn wake(&self) {
        // A stored permit: a worker busy now sees it when it next goes idle.
        self.0.notify_one();
    }
}

/// What every worker shares.
pub(crate) struct Shared {
    pub ports: Ports,
    pub queue: Arc<dyn OperationQueue>,
    pub config: ReconcilerConfig,
    pub shutdown: CancellationToken,
    pub waker: Waker,
    pub counters: Counters,
}

/// The reconciler's workers.
pub struct Reconciler;

impl Reconciler {
    /// Starts `config.workers` worker tasks on the current tokio runtime. They stop when
    /// `shutdown` is cancelled: no new claim, the step under way finishes (within
    /// `shutdown_grace`), its lease is given back; [`ReconcilerHandle::join`] waits for that.
    pub fn start(
        ports: Ports,
        queue: Arc<dyn OperationQueue>,
        config: ReconcilerConfig,
        shutdown: CancellationToken,
    ) -> ReconcilerHandle {
        let workers = config.workers;
        let shared = Arc::new(Shared {
            ports,
            queue,
            config,
            shutdown,
            waker: Waker::default(),
            counters: Counters::default(),
        });
        if workers == 0 {
            tracing::warn!(
                "reconciler switched off (RECONCILER_WORKERS=0): nothing will be provisioned"
            );
        } else {
            tracing::info!(workers, "reconciler started");
        }
        let tasks = (0..workers)
            .map(|n| {
                let name = format!("{}-{n}", shared.config.name);
                tokio::spawn(worker::run(shared.clone(), name))
            })
            .collect();
        ReconcilerHandle {
            shared,
            tasks,
            workers: workers as u64,
        }
    }
}

/// Reads the workers' counters and the queue depth.
#[derive(Clone)]
pub struct MetricsReader {
    shared: Arc<Shared>,
    workers: u64,
}

impl MetricsReader {
    /// The counters, and the queue depth as the queue reports it.
    pub async fn read(&self) -> ReconcilerMetrics {
        let queue_depth = self.shared.queue.depth().await.ok();
        let c = &self.shared.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        ReconcilerMetrics {
            workers: self.workers,
            busy_workers: get(&c.busy),
            queue_depth,
            operations_claimed: get(&c.claimed),
            operations_finished: get(&c.finished),
            operations_retried: get(&c.retried),
            operations_failed: get(&c.failed),
            operations_requeued: get(&c.requeued),
            steps: get(&c.steps),
        }
    }
}

/// The running workers.
pub struct ReconcilerHandle {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    workers: u64,
}

impl ReconcilerHandle {
    /// A handle to wake idle workers, for the code that commits new work.
    pub fn waker(&self) -> Waker {
        self.shared.waker.clone()
    }

    /// A cloneable reader of the counters, for a metrics endpoint.
    pub fn metrics_reader(&self) -> MetricsReader {
        MetricsReader {
            shared: self.shared.clone(),
            workers: self.workers,
        }
    }

    /// The counters, and the queue depth as the queue reports it.
    pub async fn metrics(&self) -> ReconcilerMetrics {
        self.metrics_reader().read().await
    }

    /// Cancels the shutdown token and waits for every worker to stop.
    pub async fn shutdown(self) {
        self.shared.shutdown.cancel();
        self.join().await;
    }

    /// Waits for every worker to stop (they stop once the shutdown token is cancelled).
    pub async fn join(self) {
        for task in self.tasks {
            if let Err(e) = task.await {
                tracing::error!(error = %e, "a reconciler worker ended abnormally");
            }
        }
    }
}
