//! The timer behind the HTTP/1.1 request-head timeout (slow-header attacks), one per worker.
//!
//! hyper arms its head timeout each time it starts reading a request head, every request of a
//! keep-alive connection included. Through Tokio's timer that takes the timer wheel's lock to
//! move the entry, and when the wheel was empty as the worker went to sleep (every connection
//! busy upstream), it wakes the worker's own event loop with a write to its eventfd: a system
//! call per request or so, for a timeout that almost never fires. Here a deadline is a number
//! in a slot the request takes (and gives back once its head is read), and one task per worker
//! looks at every slot each [`TICK`], waking the holders past their deadline: a head not
//! complete by its deadline is cut off at most a tick late, and arming it costs no system call.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
    slots: Mutex<Slots>,
}

/// hyper makes a sleep for each head it reads and drops it once the head is in: a slot is
/// taken for each and given back, so there are never more than the heads read at one time.
#[derive(Default)]
struct Slots {
    all: Vec<Arc<Deadline>>,
    free: Vec<Arc<Deadline>>,
}

/// The deadline of a slot no sleep holds: never reached.
const UNUSED: u64 = u64::MAX;

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
                slots: Mutex::new(Slots::default()),
            }),
        }
    }

    /// Wakes, every [`TICK`], each head whose deadline has passed. Runs until the worker's
    /// runtime ends.
    pub async fn fire(self) {
        let mut ticks = tokio::time::interval(TICK);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let now = self.shared.millis(clock());
            for deadline in &self.shared.slots().all {
                if deadline.at_ms.load(Ordering::Acquire) <= now {
                    deadline.waker.wake();
                }
            }
        }
    }

    /// How many slots the worker has made.
    #[cfg(test)]
    fn slots(&self) -> usize {
        self.shared.slots().all.len()
    }
}

impl Shared {
    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        // Nothing panics while holding it; a poisoned lock's slots are whole all the same.
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

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
        let slot = {
            let mut slots = self.shared.slots();
            match slots.free.pop() {
                Some(slot) => slot,
                None => {
                    let slot = Arc::new(Deadline {
                        at_ms: AtomicU64::new(UNUSED),
                        waker: AtomicWaker::new(),
                    });
                    slots.all.push(slot.clone());
                    slot
                }
            }
        };
        slot.at_ms
            .store(self.shared.millis(deadline), Ordering::Release);
        Box::pin(HeadSleep {
            deadline: slot,
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

impl Drop for HeadSleep {
    fn drop(&mut self) {
        self.deadline.at_ms.store(UNUSED, Ordering::Release);
        drop(self.deadline.waker.take());
        self.shared.slots().free.push(self.deadline.clone());
    }
}

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
    async fn a_slot_given_back_is_taken_again_and_never_fires_for_its_old_deadline() {
        let timer = HeadTimer::new();
        tokio::spawn(timer.clone().fire());
        let kept = timer.sleep(Duration::from_secs(10));
        let done = timer.sleep(Duration::from_secs(1));
        assert_eq!(timer.slots(), 2);
        drop(done);
        // Its slot, taken again with a later deadline: the old one no longer counts.
        let mut next = timer.sleep(Duration::from_secs(10));
        assert_eq!(timer.slots(), 2);
        assert!(!done_within(&mut next, Duration::from_secs(9)).await);
        assert!(done_within(&mut next, Duration::from_secs(1) + TICK).await);
        drop(kept);
    }
}
