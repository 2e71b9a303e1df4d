//! A process-wide bound on Argon2id runs. Each run takes 19 MiB and a core for tens of
//! milliseconds; left unbounded, a burst of password checks (or of credentials to hash) takes
//! every blocking thread and gigabytes of memory. The gate lets as many run at once as there are
//! cores, and lets callers that must not queue long refuse instead of waiting.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Semaphore;

/// The gate was full and its waiting line too: the caller should answer "busy, retry".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many password checks are waiting")]
pub struct Busy;

/// Runs Argon2id work on the blocking pool, at most `slots` at a time.
#[derive(Debug)]
pub struct Argon2Gate {
    slots: Semaphore,
    waiting: AtomicUsize,
}

/// How long a line the caller accepts before [`Busy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    /// Wait however long it takes (hashing credentials an administrator is storing).
    Wait,
    /// Refuse when this many are already waiting (checks on behalf of anonymous clients).
    AtMost(usize),
}

impl Argon2Gate {
    pub fn new(slots: usize) -> Argon2Gate {
        Argon2Gate {
            slots: Semaphore::new(slots.max(1)),
            waiting: AtomicUsize::new(0),
        }
    }

    /// The one gate of this process: as many slots as cores.
    pub fn global() -> &'static Argon2Gate {
        static GATE: OnceLock<Argon2Gate> = OnceLock::new();
        GATE.get_or_init(|| {
            Argon2Gate::new(std::thread::available_parallelism().map_or(2, |n| n.get()))
        })
    }

    /// Runs `work` on the blocking pool once a slot is free. `None` inside `Ok` when the task
    /// panicked or was cancelled.
    pub async fn run<T: Send + 'static>(
        &self,
        queue: Queue,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Option<T>, Busy> {
        let permit = match self.slots.try_acquire() {
            Ok(p) => p,
            Err(_) => {
                let before = self.waiting.fetch_add(1, Ordering::AcqRel);
                let _line = Leave(&self.waiting);
                if let Queue::AtMost(limit) = queue
                    && before >= limit
                {
                    return Err(Busy);
                }
                match self.slots.acquire().await {
                    Ok(p) => p,
                    // The semaphore is never closed.
                    Err(_) => return Ok(None),
                }
            }
        };
        let result = tokio::task::spawn_blocking(work).await.ok();
        drop(permit);
        Ok(result)
    }

    /// Runs waiting in line now (for tests and metrics).
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

/// Takes one off the waiting count when the caller leaves the line (served, refused or
/// cancelled).
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn never_more_than_its_slots_run_at_once_and_a_full_line_is_refused() {
        let gate = Arc::new(Argon2Gate::new(2));
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = Arc::new(std::sync::Mutex::new(release_rx));
        let mut tasks = Vec::new();
        for _ in 0..6 {
            let (gate, running, most, rx) = (
                gate.clone(),
                running.clone(),
                most.clone(),
                release_rx.clone(),
            );
            tasks.push(tokio::spawn(async move {
                gate.run(Queue::Wait, move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    let _ = rx.lock().unwrap().recv();
                    running.fetch_sub(1, Ordering::SeqCst);
                })
                .await
            }));
        }
        // Two run (both inside their closures, blocked until released), four wait: a caller
        // that accepts at most four waiting is refused.
        while gate.waiting() < 4 || running.load(Ordering::SeqCst) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(gate.run(Queue::AtMost(4), || ()).await, Err(Busy));
        for _ in 0..6 {
            release_tx.send(()).unwrap();
        }
        for t in tasks {
            assert_eq!(t.await.unwrap(), Ok(Some(())));
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(gate.waiting(), 0);
    }
}
