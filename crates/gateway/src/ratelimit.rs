//! The failed-attempt limit: per client and route, in fixed one-minute windows, at most
//! [`MAX_FAILURES`] wrong credentials; after that every request of that client on that route
//! gets 429 until the window ends.
//!
//! An attempt is counted when it starts, not when its verdict is known: [`Limiter::begin`]
//! reserves a place in the window and the [`Attempt`] gives it back only if the credentials were
//! right. So however many wrong passwords arrive at once, no more than [`MAX_FAILURES`] are ever
//! checked in a window (counting after a slow Argon2id check let 300 concurrent guesses through).
//! A client also has at most [`MAX_IN_FLIGHT`] such checks running at a time. That is for the
//! checks that cost (Basic's Argon2id, an OIDC code exchange). A static token or a bearer JWT
//! costs microseconds: it is not reserved, only counted when it fails ([`Limiter::fail`]), so a
//! client's concurrent requests are never refused for being many at once; the price is that
//! wrong tokens arriving together may all be checked before the block starts.
//!
//! Clients are keyed by address, IPv6 by its /64 (one subscriber's allocation, which a client
//! can rotate through freely). The table holds at most [`MAX_CLIENTS`] entries; past that, new
//! clients share one overflow entry per route, so a flood of addresses costs bounded memory
//! and is limited as one client.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// Wrong credentials allowed in a window; the next attempts are refused until it ends.
pub const MAX_FAILURES: u32 = 10;
/// Credential checks one client may have running at once.
pub const MAX_IN_FLIGHT: u32 = 2;
/// Clients tracked at once before new ones share the overflow entry.
pub const MAX_CLIENTS: usize = 100_000;
const WINDOW_S: u64 = 60;

/// Which limit a request belongs to: a route, or the sign-in callbacks (which belong to none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Route(u64),
    Callback,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ClientKey {
    Addr(IpAddr),
    Overflow,
}

fn client_key(ip: IpAddr) -> ClientKey {
    match crate::forwarding::canonical_ip(ip) {
        IpAddr::V6(v6) => {
            let mut s = v6.segments();
            s[4..].fill(0);
            ClientKey::Addr(IpAddr::from(s))
        }
        v4 => ClientKey::Addr(v4),
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Window {
    index: u64,
    failures: u32,
    in_flight: u32,
}

type Key = (ClientKey, Scope);

/// Why an attempt may not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The window's failures are used up: retry after this many seconds.
    Blocked { retry_after: u64 },
    /// The client already has [`MAX_IN_FLIGHT`] checks running.
    Busy,
}

#[derive(Debug, Default)]
struct Table {
    windows: HashMap<Key, Window>,
}

/// The limiter; cheap to clone (shared).
#[derive(Debug, Clone, Default)]
pub struct Limiter {
    table: Arc<Mutex<Table>>,
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn retry_after(now: u64) -> u64 {
    (WINDOW_S - now % WINDOW_S).max(1)
}

impl Table {
    /// The key `key` is counted under: its own, or the overflow entry of its scope when the
    /// table is full and `key` is not in it.
    fn place(&mut self, key: Key, now: u64) -> Key {
        if self.windows.contains_key(&key) || self.windows.len() < MAX_CLIENTS {
            return key;
        }
        // Forget finished windows with nothing in flight, then look again.
        let index = now / WINDOW_S;
        self.windows
            .retain(|_, w| w.index == index || w.in_flight > 0);
        if self.windows.len() < MAX_CLIENTS {
            key
        } else {
            (ClientKey::Overflow, key.1)
        }
    }

    /// The entry for `key` in the current window, made if it is missing.
    fn window(&mut self, key: Key, now: u64) -> &mut Window {
        let index = now / WINDOW_S;
        let w = self.windows.entry(key).or_default();
        if w.index != index {
            *w = Window {
                index,
                failures: 0,
                in_flight: w.in_flight,
            };
        }
        w
    }

    /// Failures of `key` in the current window, without making an entry.
    fn failures(&self, key: Key, now: u64) -> u32 {
        let key = if self.windows.contains_key(&key) || self.windows.len() < MAX_CLIENTS {
            key
        } else {
            (ClientKey::Overflow, key.1)
        };
        self.windows
            .get(&key)
            .filter(|w| w.index == now / WINDOW_S)
            .map_or(0, |w| w.failures)
    }
}

impl Limiter {
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Some(seconds)` when `client` has used up its failures on `scope` in this window.
    pub fn blocked(&self, client: IpAddr, scope: Scope) -> Option<u64> {
        let now = now_s();
        let table = self.lock();
        (table.failures((client_key(client), scope), now) >= MAX_FAILURES).then(|| retry_after(now))
    }

    /// Starts a credential check: counted at once as if it will fail.
    pub fn begin(&self, client: IpAddr, scope: Scope) -> Result<Attempt, Refusal> {
        let now = now_s();
        let mut table = self.lock();
        let key = table.place((client_key(client), scope), now);
        let w = table.window(key, now);
        if w.failures + w.in_flight >= MAX_FAILURES {
            return Err(Refusal::Blocked {
                retry_after: retry_after(now),
            });
        }
        if w.in_flight >= MAX_IN_FLIGHT {
            return Err(Refusal::Busy);
        }
        w.in_flight += 1;
        Ok(Attempt {
            limiter: self.clone(),
            key,
            settled: false,
        })
    }

    /// Counts a failure of a check that was not reserved (a cheap one, or malformed
    /// credentials).
    pub fn fail(&self, client: IpAddr, scope: Scope) {
        let now = now_s();
        let mut table = self.lock();
        let key = table.place((client_key(client), scope), now);
        let w = table.window(key, now);
        w.failures = w.failures.saturating_add(1);
    }

    fn settle(&self, key: Key, failed: bool) {
        let now = now_s();
        let mut table = self.lock();
        let w = table.window(key, now);
        w.in_flight = w.in_flight.saturating_sub(1);
        if failed {
            w.failures = w.failures.saturating_add(1);
        }
        // A client that only ever sent right credentials leaves nothing behind.
        if w.failures == 0 && w.in_flight == 0 {
            table.windows.remove(&key);
        }
    }
}

/// A credential check in progress. Dropped without a verdict (the client went away mid-check)
/// it counts as a failure: an attacker gains nothing by hanging up early.
#[derive(Debug)]
#[must_use = "an attempt counts as failed unless it is settled"]
pub struct Attempt {
    limiter: Limiter,
    key: Key,
    settled: bool,
}

impl Attempt {
    /// The credentials were right: the attempt is not counted.
    pub fn succeeded(mut self) {
        self.settled = true;
        self.limiter.settle(self.key, false);
    }

    /// The credentials were wrong.
    pub fn failed(mut self) {
        self.settled = true;
        self.limiter.settle(self.key, true);
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.settled {
            self.limiter.settle(self.key, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Scope = Scope::Route(0);

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))
    }

    #[test]
    fn the_eleventh_failure_is_blocked_per_route_and_client() {
        let l = Limiter::default();
        let a = ip("127.0.0.1");
        for _ in 0..MAX_FAILURES {
            assert!(l.blocked(a, A).is_none());
            l.begin(a, A).map(Attempt::failed).ok();
        }
        let retry = l.blocked(a, A);
        assert!(
            matches!(retry, Some(s) if (1..=60).contains(&s)),
            "{retry:?}"
        );
        assert!(matches!(l.begin(a, A), Err(Refusal::Blocked { .. })));
        assert!(l.blocked(a, Scope::Route(1)).is_none());
        assert!(l.blocked(a, Scope::Callback).is_none());
        assert!(l.blocked(ip("127.0.0.2"), A).is_none());
    }

    #[test]
    fn attempts_count_while_they_run_so_concurrency_cannot_exceed_the_limit() {
        let l = Limiter::default();
        // Many clients behind one address, each holding a check open: never more than the
        // in-flight cap run, and never more than the limit are ever admitted in a window.
        let a = ip("198.51.100.1");
        let mut admitted = 0;
        let mut open = Vec::new();
        for _ in 0..300 {
            match l.begin(a, A) {
                Ok(attempt) => {
                    admitted += 1;
                    open.push(attempt);
                }
                Err(Refusal::Busy) => {
                    // The ones running fail; their places are used.
                    open.drain(..).for_each(Attempt::failed);
                }
                Err(Refusal::Blocked { .. }) => {}
            }
        }
        drop(open);
        assert_eq!(admitted, MAX_FAILURES);
        assert!(l.blocked(a, A).is_some());
    }

    #[test]
    fn a_right_credential_gives_its_place_back_and_a_dropped_attempt_fails() {
        let l = Limiter::default();
        let a = ip("192.0.2.1");
        for _ in 0..100 {
            l.begin(a, A).map(Attempt::succeeded).ok();
        }
        assert!(l.blocked(a, A).is_none());
        assert!(
            l.lock().windows.is_empty(),
            "right credentials leave no entry"
        );
        for _ in 0..MAX_FAILURES {
            drop(l.begin(a, A));
        }
        assert!(l.blocked(a, A).is_some());
    }

    #[test]
    fn ipv6_clients_are_limited_by_their_64() {
        let l = Limiter::default();
        for i in 0..MAX_FAILURES {
            l.begin(ip(&format!("2001:db8:1:2::{i:x}")), A)
                .map(Attempt::failed)
                .ok();
        }
        assert!(l.blocked(ip("2001:db8:1:2:ffff::1"), A).is_some());
        assert!(l.blocked(ip("2001:db8:1:3::1"), A).is_none());
    }

    #[test]
    fn past_the_client_cap_new_addresses_share_one_overflow_entry() {
        let l = Limiter::default();
        for i in 0..MAX_CLIENTS as u32 {
            l.begin(IpAddr::from(i.to_be_bytes()), A)
                .map(Attempt::failed)
                .ok();
        }
        assert_eq!(l.lock().windows.len(), MAX_CLIENTS);
        // Two addresses never seen before: limited together.
        for _ in 0..MAX_FAILURES / 2 {
            l.begin(ip("203.0.113.1"), A).map(Attempt::failed).ok();
            l.begin(ip("203.0.113.2"), A).map(Attempt::failed).ok();
        }
        assert!(l.blocked(ip("203.0.113.3"), A).is_some());
        assert!(l.lock().windows.len() <= MAX_CLIENTS + 1);
    }
}
