//! Failed-attempt limit: per client address and route, fixed one-minute windows (CONTRACT §9).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// Failures allowed in a window; the next attempts are refused until it ends.
pub const MAX_FAILURES: u32 = 10;
const WINDOW_S: u64 = 60;

#[derive(Debug, Default)]
pub struct FailureLimiter {
    /// (client, route) → (window index, failures in it).
    counts: Mutex<HashMap<(IpAddr, usize), (u64, u32)>>,
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl FailureLimiter {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(IpAddr, usize), (u64, u32)>> {
        self.counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Some(seconds to the window's end)` when the client is blocked on the route.
    pub fn blocked(&self, client: IpAddr, route: usize) -> Option<u64> {
        let now = now_s();
        let window = now / WINDOW_S;
        match self.lock().get(&(client, route)) {
            Some(&(w, n)) if w == window && n >= MAX_FAILURES => {
                Some((WINDOW_S - now % WINDOW_S).max(1))
            }
            _ => None,
        }
    }

    pub fn record_failure(&self, client: IpAddr, route: usize) {
        let window = now_s() / WINDOW_S;
        let mut counts = self.lock();
        // Old windows are dropped now and then, so the map holds only recent clients.
        if counts.len() > 10_000 {
            counts.retain(|_, (w, _)| *w == window);
        }
        let entry = counts.entry((client, route)).or_insert((window, 0));
        if entry.0 != window {
            *entry = (window, 0);
        }
        entry.1 = entry.1.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eleventh_attempt_is_blocked_per_route_and_client() {
        let l = FailureLimiter::default();
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        for _ in 0..MAX_FAILURES {
            assert!(l.blocked(a, 0).is_none());
            l.record_failure(a, 0);
        }
        let retry = l.blocked(a, 0);
        assert!(
            matches!(retry, Some(s) if (1..=60).contains(&s)),
            "{retry:?}"
        );
        assert!(l.blocked(a, 1).is_none());
        assert!(l.blocked(b, 0).is_none());
    }
}
