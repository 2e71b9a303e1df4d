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
//! can rotate through freely). The table is bounded, and what an attacker holding many addresses
//! can do with that bound is bounded too:
//! - It holds at most [`MAX_CLIENTS`] clients, each with its own counts for at most
//!   [`MAX_SCOPES_PER_CLIENT`] routes; a client's failures on further routes in the same window
//!   are counted together (against itself only). So one address failing on many routes takes
//!   one place, and the table's memory has a fixed ceiling (a few tens of MB).
//! - A full table first forgets what belongs to finished windows, then the clients no count
//!   blocks and with nothing in flight, fewest failures first (then the longest unseen), down to
//!   nine tenths of the bound. A client blocked in the current window, or with a check
//!   running, is never forgotten while the window lasts: flooding the table with new addresses
//!   does not give an offender a clean slate. What a forgotten client gets back is at most the
//!   failures it had, fewer than the limit, and only once more than nine tenths of the table
//!   have as many or more.
//! - When every place is held by a client that may not be forgotten (more than
//!   [`MAX_CLIENTS`] subscribers each used up their failures this minute), a new client is not
//!   counted until places free up (the next window at the latest): it is never refused for what
//!   others did. That gives an attacker nothing: one who owns that many subscribers already has
//!   [`MAX_FAILURES`] guesses per minute on each of them, far more than the gateway can check.
//!   (Until this rule, new clients of a full table shared one count per route, and whoever
//!   filled it could block everyone else.)

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

/// Wrong credentials allowed in a window; the next attempts are refused until it ends.
pub const MAX_FAILURES: u32 = 10;
/// Credential checks one client may have running at once.
pub const MAX_IN_FLIGHT: u32 = 2;
/// Clients tracked at once.
pub const MAX_CLIENTS: usize = 100_000;
/// Routes (the sign-in callbacks count as one) a client has counts of its own for; its
/// failures on further routes in a window are counted together.
pub const MAX_SCOPES_PER_CLIENT: usize = 4;
const WINDOW_S: u64 = 60;

/// Which limit a request belongs to: a route, or the sign-in callbacks (which belong to none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    Route(u64),
    Callback,
}

/// A client as the limit counts it: its address, an IPv6 one cut to its /64.
type ClientKey = IpAddr;

fn client_key(ip: IpAddr) -> ClientKey {
    match crate::forwarding::canonical_ip(ip) {
        IpAddr::V6(v6) => {
            let mut s = v6.segments();
            s[4..].fill(0);
            IpAddr::from(s)
        }
        v4 => v4,
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Window {
    index: u64,
    failures: u32,
    in_flight: u32,
}

impl Window {
    /// Brought to window `index`: the failures of an earlier one are forgotten, the checks
    /// still running are not.
    fn roll(&mut self, index: u64) -> &mut Window {
        if self.index != index {
            *self = Window {
                index,
                failures: 0,
                in_flight: self.in_flight,
            };
        }
        self
    }

    fn failures_in(&self, index: u64) -> u32 {
        if self.index == index {
            self.failures
        } else {
            0
        }
    }

    /// Holds nothing for window `index`.
    fn idle(&self, index: u64) -> bool {
        self.in_flight == 0 && self.failures_in(index) == 0
    }
}

/// One client's counts.
#[derive(Debug, Default)]
struct Client {
    /// Its counts per route, at most [`MAX_SCOPES_PER_CLIENT`].
    scopes: Vec<(Scope, Window)>,
    /// Its further routes' counts, together.
    others: Window,
    /// When it was last counted or refused (Unix seconds): the longest unseen goes first.
    last_seen: u64,
}

impl Client {
    /// Where `scope`'s counts are: its own place, a new one, or (the places all taken) the
    /// client's further routes' count. `None` only when `make` is false and it has none yet.
    fn window(&mut self, scope: Scope, index: u64, make: bool) -> Option<&mut Window> {
        if let Some(at) = self.scopes.iter().position(|(s, _)| *s == scope) {
            return Some(self.scopes[at].1.roll(index));
        }
        // Once further routes are counted together in this window, a new route joins them:
        // a place freed meanwhile would otherwise give it a clean count.
        if self.others.idle(index) {
            if let Some(at) = self.scopes.iter().position(|(_, w)| w.idle(index)) {
                if !make {
                    return None;
                }
                self.scopes[at] = (scope, Window::default());
                return Some(self.scopes[at].1.roll(index));
            }
            if self.scopes.len() < MAX_SCOPES_PER_CLIENT {
                if !make {
                    return None;
                }
                self.scopes.push((scope, Window::default()));
                return self.scopes.last_mut().map(|(_, w)| w.roll(index));
            }
        }
        Some(self.others.roll(index))
    }

    fn windows(&self) -> impl Iterator<Item = &Window> {
        self.scopes.iter().map(|(_, w)| w).chain([&self.others])
    }

    /// Holds nothing for window `index`: it can go.
    fn idle(&self, index: u64) -> bool {
        self.windows().all(|w| w.idle(index))
    }

    /// May be forgotten in window `index`: nothing running, nothing blocked.
    fn evictable(&self, index: u64) -> bool {
        self.windows()
            .all(|w| w.in_flight == 0 && w.failures_in(index) < MAX_FAILURES)
    }

    fn failures(&self, index: u64) -> u32 {
        self.windows().map(|w| w.failures_in(index)).sum()
    }
}

/// Why an attempt may not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The window's failures are used up: retry after this many seconds.
    Blocked { retry_after: u64 },
    /// The client already has [`MAX_IN_FLIGHT`] checks running.
    Busy,
}

#[derive(Debug)]
struct Table {
    clients: HashMap<ClientKey, Client>,
    /// The most clients held.
    capacity: usize,
    /// The window in which a full table had nothing it could forget: no new look until the
    /// next one, or until a client leaves of itself.
    stuck_in: Option<u64>,
}

impl Default for Table {
    fn default() -> Self {
        Table::with_capacity(MAX_CLIENTS)
    }
}

/// The limiter; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct Limiter {
    table: Arc<Mutex<Table>>,
    /// Unix seconds: the clock, or a test's.
    clock: fn() -> u64,
}

impl Default for Limiter {
    fn default() -> Self {
        Limiter {
            table: Arc::default(),
            clock: now_s,
        }
    }
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
    fn with_capacity(capacity: usize) -> Table {
        Table {
            clients: HashMap::new(),
            capacity,
            stuck_in: None,
        }
    }

    /// The counts of `key` on `scope` in the current window, made if missing; `None` when the
    /// table is full of clients it may not forget (the attempt goes uncounted).
    fn window(&mut self, key: ClientKey, scope: Scope, now: u64) -> Option<&mut Window> {
        let index = now / WINDOW_S;
        if !self.clients.contains_key(&key) {
            if self.clients.len() >= self.capacity {
                self.make_room(index);
            }
            if self.clients.len() >= self.capacity {
                return None;
            }
            self.clients.insert(key, Client::default());
        }
        let client = self.clients.get_mut(&key)?;
        client.last_seen = now;
        client.window(scope, index, true)
    }

    /// Frees places: what belongs to finished windows, then the clients that may be forgotten,
    /// fewest failures and longest unseen first, down to nine tenths of the capacity.
    fn make_room(&mut self, index: u64) {
        if self.stuck_in == Some(index) {
            return;
        }
        self.clients.retain(|_, c| !c.idle(index));
        let low_water = self.capacity - self.capacity / 10;
        let excess = self.clients.len().saturating_sub(low_water);
        if excess > 0 {
            let mut evictable: Vec<(u32, u64, ClientKey)> = self
                .clients
                .iter()
                .filter(|(_, c)| c.evictable(index))
                .map(|(key, c)| (c.failures(index), c.last_seen, *key))
                .collect();
            if evictable.len() > excess {
                evictable.select_nth_unstable(excess);
                evictable.truncate(excess);
            }
            for (_, _, key) in evictable {
                self.clients.remove(&key);
            }
        }
        self.stuck_in = (self.clients.len() >= self.capacity).then_some(index);
    }
}

impl Limiter {
    /// A limiter of `capacity` clients on the test's `clock`.
    #[cfg(test)]
    fn for_test(capacity: usize, clock: fn() -> u64) -> Limiter {
        Limiter {
            table: Arc::new(Mutex::new(Table::with_capacity(capacity))),
            clock,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `Some(seconds)` when `client` has used up its failures on `scope` in this window.
    pub fn blocked(&self, client: IpAddr, scope: Scope) -> Option<u64> {
        let now = (self.clock)();
        let index = now / WINDOW_S;
        let mut table = self.lock();
        let entry = table.clients.get_mut(&client_key(client))?;
        let failures = entry.window(scope, index, false)?.failures_in(index);
        if failures < MAX_FAILURES {
            return None;
        }
        // Still at it: the last to be forgotten.
        entry.last_seen = now;
        Some(retry_after(now))
    }

    /// Starts a credential check: counted at once as if it will fail.
    pub fn begin(&self, client: IpAddr, scope: Scope) -> Result<Attempt, Refusal> {
        let now = (self.clock)();
        let key = client_key(client);
        let mut table = self.lock();
        let tracked = match table.window(key, scope, now) {
            None => false,
            Some(w) => {
                if w.failures + w.in_flight >= MAX_FAILURES {
                    return Err(Refusal::Blocked {
                        retry_after: retry_after(now),
                    });
                }
                if w.in_flight >= MAX_IN_FLIGHT {
                    return Err(Refusal::Busy);
                }
                w.in_flight += 1;
                true
            }
        };
        Ok(Attempt {
            limiter: self.clone(),
            key,
            scope,
            settled: !tracked,
        })
    }

    /// Counts a failure of a check that was not reserved (a cheap one, or malformed
    /// credentials).
    pub fn fail(&self, client: IpAddr, scope: Scope) {
        let now = (self.clock)();
        if let Some(w) = self.lock().window(client_key(client), scope, now) {
            w.failures = w.failures.saturating_add(1);
        }
    }

    fn settle(&self, key: ClientKey, scope: Scope, failed: bool) {
        let now = (self.clock)();
        let index = now / WINDOW_S;
        let mut table = self.lock();
        // A client with a check running is never forgotten, so it is still there.
        let Some(client) = table.clients.get_mut(&key) else {
            return;
        };
        if let Some(w) = client.window(scope, index, false) {
            w.in_flight = w.in_flight.saturating_sub(1);
            if failed {
                w.failures = w.failures.saturating_add(1);
            }
        }
        // A client that only ever sent right credentials leaves nothing behind.
        if client.idle(index) {
            table.clients.remove(&key);
        }
    }
}

/// A credential check in progress. Dropped without a verdict (the client went away mid-check)
/// it counts as a failure: an attacker gains nothing by hanging up early.
#[derive(Debug)]
#[must_use = "an attempt counts as failed unless it is settled"]
pub struct Attempt {
    limiter: Limiter,
    key: ClientKey,
    scope: Scope,
    /// Settled already, or never counted (a full table).
    settled: bool,
}

impl Attempt {
    /// The credentials were right: the attempt is not counted.
    pub fn succeeded(mut self) {
        if !self.settled {
            self.settled = true;
            self.limiter.settle(self.key, self.scope, false);
        }
    }

    /// The credentials were wrong.
    pub fn failed(mut self) {
        if !self.settled {
            self.settled = true;
            self.limiter.settle(self.key, self.scope, true);
        }
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.settled {
            self.limiter.settle(self.key, self.scope, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Scope = Scope::Route(0);

    thread_local! {
        /// The test's time (each test runs on its own thread): a count never straddles two
        /// windows by chance, and a test moves to the next one when it means to.
        static NOW: std::cell::Cell<u64> = const { std::cell::Cell::new(60 * 1_000_000 + 5) };
    }

    fn test_clock() -> u64 {
        NOW.with(std::cell::Cell::get)
    }

    fn next_window() {
        NOW.with(|now| now.set(now.get() + WINDOW_S));
    }

    fn limiter() -> Limiter {
        Limiter::for_test(MAX_CLIENTS, test_clock)
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))
    }

    /// The `i`th address of an attacker holding many: IPv4 from 10.0.0.0 on.
    fn nth(i: u32) -> IpAddr {
        IpAddr::from((0x0a00_0000 + i).to_be_bytes())
    }

    fn clients(l: &Limiter) -> usize {
        l.lock().clients.len()
    }

    #[test]
    fn the_eleventh_failure_is_blocked_per_route_and_client() {
        let l = limiter();
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
        let l = limiter();
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
        let l = limiter();
        let a = ip("192.0.2.1");
        for _ in 0..100 {
            l.begin(a, A).map(Attempt::succeeded).ok();
        }
        assert!(l.blocked(a, A).is_none());
        assert_eq!(clients(&l), 0, "right credentials leave no entry");
        for _ in 0..MAX_FAILURES {
            drop(l.begin(a, A));
        }
        assert!(l.blocked(a, A).is_some());
    }

    #[test]
    fn ipv6_clients_are_limited_by_their_64() {
        let l = limiter();
        for i in 0..MAX_FAILURES {
            l.begin(ip(&format!("2001:db8:1:2::{i:x}")), A)
                .map(Attempt::failed)
                .ok();
        }
        assert!(l.blocked(ip("2001:db8:1:2:ffff::1"), A).is_some());
        assert!(l.blocked(ip("2001:db8:1:3::1"), A).is_none());
        assert_eq!(clients(&l), 1);
    }

    /// The attack on the table itself: an attacker with more addresses (or IPv6 /64s) than the
    /// table holds fills it with blocked clients, then fails with fresh addresses. Whoever comes
    /// next, and was never wrong, is never refused for it, and the table does not grow.
    #[test]
    fn a_full_table_never_locks_a_client_out_for_what_others_did() {
        let l = limiter();
        for i in 0..MAX_CLIENTS as u32 {
            for _ in 0..MAX_FAILURES {
                l.fail(nth(i), A);
            }
        }
        for i in 0..10 * MAX_FAILURES {
            l.fail(nth(MAX_CLIENTS as u32 + i), A);
        }
        let newcomer = ip("203.0.113.1");
        assert!(l.blocked(newcomer, A).is_none(), "a new client was blocked");
        assert!(l.begin(newcomer, A).map(Attempt::succeeded).is_ok());
        // Every attacker address that was counted is still blocked.
        assert!(l.blocked(nth(0), A).is_some());
        assert!(l.blocked(nth(MAX_CLIENTS as u32 - 1), A).is_some());
        assert!(clients(&l) <= MAX_CLIENTS);
    }

    /// A blocked client is never forgotten while its window lasts, however many new addresses
    /// flood the table; the clients forgotten to make room are those with the fewest failures,
    /// so an offender one failure short of the block is among the last.
    #[test]
    fn making_room_never_forgets_an_offender_and_forgets_the_lightest_first() {
        let capacity = 1000;
        let l = Limiter::for_test(capacity, test_clock);
        let (blocked, nearly) = (ip("198.51.100.1"), ip("198.51.100.2"));
        for _ in 0..MAX_FAILURES {
            l.fail(blocked, A);
        }
        for _ in 0..MAX_FAILURES - 1 {
            l.fail(nearly, A);
        }
        for i in 0..5 * capacity as u32 {
            l.fail(nth(i), A);
            assert!(clients(&l) <= capacity);
            assert!(l.blocked(blocked, A).is_some(), "forgotten after {i}");
        }
        // One more failure blocks the one that was nearly blocked: its count was kept.
        l.fail(nearly, A);
        assert!(l.blocked(nearly, A).is_some());
        // Room is made for whoever comes, and what it does is counted.
        let newcomer = ip("203.0.113.1");
        for _ in 0..MAX_FAILURES {
            l.fail(newcomer, A);
        }
        assert!(l.blocked(newcomer, A).is_some());
        // The next window starts everyone afresh: what the last one held makes room for as
        // many new clients as the table takes, each counted.
        next_window();
        assert!(l.blocked(blocked, A).is_none());
        for i in 0..capacity as u32 {
            for _ in 0..MAX_FAILURES {
                l.fail(nth(1_000_000 + i), A);
            }
            assert!(l.blocked(nth(1_000_000 + i), A).is_some(), "{i}");
        }
    }

    /// One address failing on many routes takes one place; past its own counts for a few
    /// routes, its failures on the others are counted together, against itself alone.
    #[test]
    fn one_client_failing_on_many_routes_takes_one_place() {
        let l = limiter();
        let a = ip("198.51.100.7");
        for route in 0..1000 {
            l.fail(a, Scope::Route(route));
        }
        assert_eq!(clients(&l), 1);
        assert!(l.blocked(a, Scope::Route(999)).is_some());
        assert!(
            l.blocked(a, Scope::Route(0)).is_none(),
            "its own count is 1"
        );
        assert!(l.blocked(ip("198.51.100.8"), Scope::Route(999)).is_none());
        // A route it had no place for, once further routes are counted together, joins them.
        assert!(l.blocked(a, Scope::Route(5000)).is_some());
    }
}
