//! The timer behind the HTTP/1.1 request-head timeout (slow-header attacks), one per worker.
//!
//! hyper arms its head timeout each time it starts reading a request head, every request of a
//! keep-alive connection included. Through Tokio's timer that takes the timer wheel's lock to
//! move the entry, and when the wheel was empty as the worker went to sleep (every connection
//! busy upstream), it wakes the worker's own event loop with a write to its eventfd: a system
//! call per request or so, for a timeout that almost never fires. Here a deadline is a number
//! the request stores, and one task per worker looks at every connection's deadline each
//! [`TICK`], waking those past theirs: a head not complete by its deadline is cut off at most a
//! tick late, and arming it costs no lock and no system call.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::task::AtomicWaker;
use hyper::rt::{Sleep, Timer};

/// How often a worker looks at its connections' deadlines: how late a timeout may fire.
pub const TICK: Duration = Duration::from_millis(250);

/// A worker's head deadlines: the timer hyper is given, and the task that fires them
/// ([`HeadTimer::fire`], run on the same worker).
#[derive(Clone)]
pub struct HeadTimer {
    shared: Arc<Shared>,
}

struct Shared {
    /// Deadlines are kept as milliseconds since this instant.
    epoch: Instant,
    /// One entry per connection (hyper keeps its sleep for the connection's life and moves
    /// its deadline); an entry whose connection is gone is dropped at the next tick.
    armed: Mutex<Vec<Weak<Deadline>>>,
}

struct Deadline {
    at_ms: AtomicU64,
    waker: AtomicWaker,
}

/// A sleep until a deadline, as hyper holds it.
struct HeadSleep {
    deadline: Arc<Deadline>,
    shared: Arc<Shared>,
}

impl HeadTimer {
    pub fn new() -> HeadTimer {
        HeadTimer {
            shared: Arc::new(Shared {
                epoch: clock(),
                armed: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Wakes, every [`TICK`], each connection whose deadline has passed, and forgets the
    /// connections that closed. Runs until the worker's runtime ends.
    pub async fn fire(self) {
        let mut ticks = tokio::time::interval(TICK);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let now = self.shared.millis(clock());
            let mut armed = self
                .shared
                .armed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            armed.retain(|entry| {
                let Some(deadline) = entry.upgrade() else {
                    return false;
                };
                if deadline.at_ms.load(Ordering::Acquire) <= now {
                    deadline.waker.wake();
                }
                true
            });
        }
    }

    /// How many connections' deadlines the worker looks at.
    #[cfg(test)]
    fn armed(&self) -> usize {
        self.shared.armed.lock().map_or(0, |a| a.len())
    }
}

impl Shared {
    fn millis(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_millis()).unwrap_or(u64::MAX)
    }
}

/// The worker's clock: Tokio's, so that a test with paused time moves it.
fn clock() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        self.sleep_until(clock() + duration)
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        let entry = Arc::new(Deadline {
            at_ms: AtomicU64::new(self.shared.millis(deadline)),
            waker: AtomicWaker::new(),
        });
        self.shared
            .armed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Arc::downgrade(&entry));
        Box::pin(HeadSleep {
            deadline: entry,
            shared: self.shared.clone(),
        })
    }

    fn now(&self) -> Instant {
        clock()
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn Sleep>>, new_deadline: Instant) {
        match sleep.as_mut().downcast_mut_pin::<HeadSleep>() {
            Some(own) => own
                .deadline
                .at_ms
                .store(self.shared.millis(new_deadline), Ordering::Release),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}

impl Future for HeadSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.deadline.at_ms.load(Ordering::Acquire) <= self.shared.millis(clock()) {
            return Poll::Ready(());
        }
        // Woken by the next tick past the deadline (the deadline is read again then).
        self.deadline.waker.register(cx.waker());
        Poll::Pending
    }
}

impl Sleep for HeadSleep {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `sleep` completes within `within` (of the paused clock).
    async fn done_within(sleep: &mut Pin<Box<dyn Sleep>>, within: Duration) -> bool {
        tokio::time::timeout(within, sleep).await.is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_fires_once_past_and_moves_when_reset() {
        let timer = HeadTimer::new();
        tokio::spawn(timer.clone().fire());
        let mut sleep = timer.sleep(Duration::from_secs(10));
        assert!(!done_within(&mut sleep, Duration::from_secs(9)).await);
        assert!(done_within(&mut sleep, Duration::from_secs(1) + TICK).await);
        // Moved on (the next request's head): pending again until the new deadline.
        timer.reset(&mut sleep, timer.now() + Duration::from_secs(10));
        assert!(!done_within(&mut sleep, Duration::from_secs(9)).await);
        timer.reset(&mut sleep, timer.now() + Duration::from_secs(10));
        assert!(!done_within(&mut sleep, Duration::from_secs(9)).await);
        assert!(done_within(&mut sleep, Duration::from_secs(1) + TICK).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_connections_deadline_is_forgotten() {
        let timer = HeadTimer::new();
        tokio::spawn(timer.clone().fire());
        let kept = timer.sleep(Duration::from_secs(10));
        let dropped = timer.sleep(Duration::from_secs(10));
        assert_eq!(timer.armed(), 2);
        drop(dropped);
        tokio::time::sleep(TICK * 2).await;
        assert_eq!(timer.armed(), 1);
        drop(kept);
    }
}
