//! `PgChangeFeed`: one connection per process, on a dedicated thread, applies each cluster
//! change to the watch cache and then wakes the long-polls waiting on that cluster (in that
//! order: a long-poll's answer is never newer than the cache it reads).
//!
//! Changes arrive two ways. Fast: the `cluster_changes` notification every writer sends after
//! its commit (`notifier`); the thread sleeps on the connection's socket (`listener.rs`, libpq)
//! and wakes the moment one arrives. Sure: once a second the thread reads `cluster_change_log`
//! from where it left off (`change_log`), which catches up any notification that was never sent
//! and proves the connection alive; that read is what vouches for the cache (see
//! `watch_cache`). Waiters are plain tokio futures on a `watch` channel per cluster: they hold
//! no connection and no thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use domain::ports::storage::{ChangeFeed, Wake};
use tokio::sync::watch;
use uuid::Uuid;

use crate::change_log::{self, LogCursor, LoggedChange};
use crate::listener::{Listener, Notification};
use crate::watch_cache::{Membership, WatchState};
use crate::{CLUSTER_CHANNEL, with_connect_timeout, with_param};

/// How often the feed reads the log, proving its connection alive (a dead peer sends no
/// notification) and catching up on changes nobody notified.
const HEARTBEAT: Duration = Duration::from_secs(1);
/// How long a statement on the LISTEN connection may take before the connection counts as lost.
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a reconnect backoff looks whether the feed was dropped or stopped.
const STOP_CHECK: Duration = Duration::from_millis(50);
/// The longest the listener waits for a notification before it looks whether it was stopped.
const STOP_WAIT: Duration = Duration::from_millis(200);
/// How long the latest revision of a cluster is remembered after its last notification or
/// waiter: a long-poll that subscribes just after a notification still sees it.
const REMEMBER: Duration = Duration::from_secs(30);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// The listener's `application_name`.
pub const APPLICATION_NAME: &str = "kubesvc-change-feed";

struct Entry {
    /// The highest revision notified for the cluster (0: none seen).
    tx: watch::Sender<i64>,
    touched: Instant,
}

#[derive(Default)]
struct Shared {
    clusters: Mutex<HashMap<Uuid, Entry>>,
    listening: AtomicBool,
    /// Set once the process is stopping: every wait, present and future, ends at once.
    closing: AtomicBool,
    /// Set when the process is about to exit: the listener thread ends (see `stop`).
    stopped: AtomicBool,
    closed: tokio::sync::Notify,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Uuid, Entry>> {
        // A panic while holding the lock leaves a map that is still consistent.
        self.clusters
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn subscribe(&self, cluster_id: Uuid) -> watch::Receiver<i64> {
        let mut map = self.lock();
        let entry = map.entry(cluster_id).or_insert_with(|| Entry {
            tx: watch::channel(0).0,
            touched: Instant::now(),
        });
        entry.touched = Instant::now();
        entry.tx.subscribe()
    }

    fn notified(&self, id: Uuid, revision: i64) {
        let mut map = self.lock();
        let entry = map.entry(id).or_insert_with(|| Entry {
            tx: watch::channel(0).0,
            touched: Instant::now(),
        });
        entry.touched = Instant::now();
        entry.tx.send_if_modified(|seen| {
            let moved = revision > *seen;
            if moved {
                *seen = revision;
            }
            moved
        });
    }

    /// After the listener was away every waiter wakes once and reads the revision again.
    fn wake_all(&self) {
        for entry in self.lock().values() {
            entry.tx.send_modify(|_| {});
        }
    }

    fn forget_idle(&self) {
        let now = Instant::now();
        self.lock()
            .retain(|_, e| e.tx.receiver_count() > 0 || now.duration_since(e.touched) < REMEMBER);
    }
}

/// Dropped with the last clone of the feed: tells the listener thread to stop.
struct Alive;

/// A `cluster_changes` payload: `<cluster>:<revision>:<organization>:<membership>`, or the
/// older `<cluster>:<revision>` (membership unknown).
fn parse(payload: &str) -> Option<(Uuid, i64, Option<Uuid>, Membership)> {
    let mut parts = payload.split(':');
    let id = parts.next()?.parse().ok()?;
    let revision = parts.next()?.parse().ok()?;
    match (parts.next(), parts.next(), parts.next()) {
        (None, _, _) => Some((id, revision, None, Membership::Unknown)),
        (Some(org), Some(kind), None) => {
            let membership = match kind {
                "created" => Membership::Created,
                "removed" => Membership::Removed,
                "changed" => Membership::Unchanged,
                _ => Membership::Unknown,
            };
            Some((id, revision, Some(org.parse().ok()?), membership))
        }
        _ => None,
    }
}

/// Wakes state long-polls when a cluster's revision moves, across server processes, and keeps
/// the watch cache exact.
#[derive(Clone)]
pub struct PgChangeFeed {
    shared: Arc<Shared>,
    watch: Arc<WatchState>,
    _alive: Arc<Alive>,
    thread: Arc<Mutex<Option<std::thread::JoinHandle<()>>>>,
}

impl std::fmt::Debug for PgChangeFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgChangeFeed")
            .field("clusters", &self.shared.lock().len())
            .finish()
    }
}

impl PgChangeFeed {
    /// Starts the listener thread; it connects (and reconnects, with backoff) by itself, so
    /// this never fails. The thread ends once every clone of the feed is dropped.
    /// `cache_capacity` bounds the watch cache (clusters held; 0 turns it off).
    pub fn start(database_url: &str, cache_capacity: usize) -> PgChangeFeed {
        let shared = Arc::new(Shared::default());
        let watch = Arc::new(WatchState::new(cache_capacity));
        let alive = Arc::new(Alive);
        let url = with_connect_timeout(database_url, Duration::from_secs(5));
        // Named, so an operator sees the one listener per process in pg_stat_activity.
        let url = with_param(&url, "application_name", APPLICATION_NAME);
        let (thread_shared, thread_watch, thread_alive) =
            (shared.clone(), watch.clone(), Arc::downgrade(&alive));
        let spawned = std::thread::Builder::new()
            .name("pg-change-feed".into())
            .spawn(move || listen(&url, &thread_shared, &thread_watch, &thread_alive));
        let thread = match spawned {
            Ok(handle) => Some(handle),
            Err(error) => {
                tracing::error!(%error, "cannot start the change feed thread; long-polls will wait out their timeout");
                None
            }
        };
        PgChangeFeed {
            shared,
            watch,
            _alive: alive,
            thread: Arc::new(Mutex::new(thread)),
        }
    }

    /// Whether the LISTEN connection is up now (for readiness and tests): notifications sent
    /// while it is down are not seen, but every waiter is woken once it is back.
    pub fn is_listening(&self) -> bool {
        self.shared.listening.load(Ordering::SeqCst)
    }

    /// Whether [`Self::stop`] was called: the cache's background work ends then.
    pub(crate) fn is_stopped(&self) -> bool {
        self.shared.stopped.load(Ordering::SeqCst)
    }

    pub(crate) fn watch(&self) -> Arc<WatchState> {
        self.watch.clone()
    }

    /// Applies one notification: the cache first, then the waiters.
    fn deliver(shared: &Shared, watch: &WatchState, notification: &Notification) {
        if notification.channel != CLUSTER_CHANNEL {
            return;
        }
        let Some((id, revision, org, membership)) = parse(&notification.payload) else {
            tracing::warn!(payload = %notification.payload, "unexpected cluster change notification");
            return;
        };
        watch.changed(id, revision, org, membership);
        shared.notified(id, revision);
    }

    /// Applies the changes read from the log, the same way.
    fn catch_up(shared: &Shared, watch: &WatchState, changes: &[LoggedChange]) {
        for c in changes {
            watch.changed(
                c.cluster_id,
                c.revision,
                Some(c.organization_id),
                c.membership,
            );
            shared.notified(c.cluster_id, c.revision);
        }
    }

    /// A commit of this process: its own long-polls wake at once rather than when the
    /// notification comes back (the cache was told by the committer).
    pub(crate) fn committed(&self, cluster_id: Uuid, revision: i64) {
        self.shared.notified(cluster_id, revision);
    }
}

/// Whether the listener goes on: the feed is not dropped, nor stopped.
fn running(alive: &Weak<Alive>, shared: &Shared) -> bool {
    alive.strong_count() > 0 && !shared.stopped.load(Ordering::SeqCst)
}

fn listen(url: &str, shared: &Shared, watch: &WatchState, alive: &Weak<Alive>) {
    let mut backoff = Duration::from_millis(100);
    while running(alive, shared) {
        // LISTEN before the log position is taken: whatever commits after the position was
        // taken is either notified or read from the log at the next beat.
        let listening = Listener::connect(url).and_then(|mut conn| {
            conn.execute(
                &format!("LISTEN {CLUSTER_CHANNEL}; SET synchronous_commit = off"),
                STATEMENT_TIMEOUT,
            )?;
            let (rows, _) = conn.query(change_log::START, STATEMENT_TIMEOUT)?;
            Ok((conn, LogCursor::new(&rows, Instant::now())?))
        });
        let (mut conn, mut cursor) = match listening {
            Ok(listening) => listening,
            Err(error) => {
                tracing::warn!(%error, retry_in_ms = backoff.as_millis() as u64, "change feed cannot listen");
                sleep_while_running(backoff, alive, shared);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        backoff = Duration::from_millis(100);
        tracing::debug!("change feed listening");
        // Whatever changed while no LISTEN was active is unknown: the cache starts empty and
        // every waiter looks again.
        watch.connected(Instant::now());
        shared.listening.store(true, Ordering::SeqCst);
        shared.wake_all();
        let lost = serve(&mut conn, &mut cursor, shared, watch, alive);
        shared.listening.store(false, Ordering::SeqCst);
        watch.lost();
        if let Some(error) = lost {
            tracing::warn!(%error, "change feed connection lost; reconnecting");
        }
    }
}

/// Delivers notifications as they arrive and reads the log once a beat, until the connection
/// fails (its error) or the feed is dropped (`None`).
fn serve(
    conn: &mut Listener,
    cursor: &mut LogCursor,
    shared: &Shared,
    watch: &WatchState,
    alive: &Weak<Alive>,
) -> Option<String> {
    let mut next_beat = Instant::now() + HEARTBEAT;
    let mut last_read = Instant::now();
    while running(alive, shared) {
        match conn.wait(
            next_beat
                .saturating_duration_since(Instant::now())
                .min(STOP_WAIT),
        ) {
            Ok(notifications) => {
                for n in &notifications {
                    PgChangeFeed::deliver(shared, watch, n);
                }
            }
            Err(error) => return Some(error),
        }
        if Instant::now() >= next_beat {
            if last_read.elapsed() > change_log::MAX_READ_GAP {
                // The process was stopped, or the thread starved: rows it never read may be
                // purged by now, so it starts over with an empty cache.
                return Some("the change feed did not read the log for too long".into());
            }
            // Every change committed before `sent` is visible to the read, which takes its
            // snapshot after.
            let sent = Instant::now();
            let read =
                conn.query(&cursor.read(), STATEMENT_TIMEOUT)
                    .and_then(|(rows, notifications)| {
                        for n in &notifications {
                            PgChangeFeed::deliver(shared, watch, n);
                        }
                        cursor.advance(&rows, sent)
                    });
            match read {
                Ok(changes) => {
                    PgChangeFeed::catch_up(shared, watch, &changes);
                    watch.beat(sent);
                    last_read = sent;
                }
                Err(error) => return Some(error),
            }
            if let Some(purge) = cursor.purge(sent)
                && let Err(error) = conn.execute(&purge, STATEMENT_TIMEOUT)
            {
                if !conn.is_open() {
                    return Some(error);
                }
                tracing::warn!(%error, "cannot purge the cluster change log; trying again later");
            }
            shared.forget_idle();
            next_beat = Instant::now() + HEARTBEAT;
        }
    }
    None
}

fn sleep_while_running(total: Duration, alive: &Weak<Alive>, shared: &Shared) {
    let until = Instant::now() + total;
    while running(alive, shared) && Instant::now() < until {
        std::thread::sleep(STOP_CHECK);
    }
}

#[async_trait]
impl ChangeFeed for PgChangeFeed {
    async fn wait(&self, cluster_id: Uuid, since: i64, timeout: Duration) -> Wake {
        let closed = self.shared.closed.notified();
        tokio::pin!(closed);
        // Registered before the flag is read, so a close in between is not missed.
        closed.as_mut().enable();
        if self.shared.closing.load(Ordering::SeqCst) {
            return Wake::Closing;
        }
        let mut rx = self.shared.subscribe(cluster_id);
        if *rx.borrow_and_update() > since {
            return Wake::Maybe;
        }
        // A notification (any revision: the caller reads it again), a reconnect, the time
        // running out, or the process stopping.
        tokio::select! {
            _ = tokio::time::timeout(timeout, rx.changed()) => Wake::Maybe,
            () = closed => Wake::Closing,
        }
    }
}

impl PgChangeFeed {
    /// The process is stopping: every waiting long-poll answers now with what there is, and
    /// any later one at once (its client asks again, of another process).
    pub fn close(&self) {
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.closed.notify_waiters();
    }

    /// Ends the listener thread and waits for it (at most a wait slice, or the connect or
    /// statement timeout it is in): for a process about to exit, which must not leave libpq
    /// working on another thread while the C library's exit handlers run. The cache is exact
    /// no longer after it. Blocks: call it off the async workers.
    pub fn stop(&self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn closing_answers_every_waiter_now_and_every_later_wait_at_once() {
        let feed = PgChangeFeed {
            shared: Arc::new(Shared::default()),
            watch: Arc::new(WatchState::new(0)),
            _alive: Arc::new(Alive),
            thread: Arc::new(Mutex::new(None)),
        };
        let id = Uuid::new_v4();
        let waiting = {
            let feed = feed.clone();
            tokio::spawn(async move { feed.wait(id, 0, Duration::from_secs(3600)).await })
        };
        tokio::task::yield_now().await;
        feed.close();
        // Both would take an hour otherwise.
        assert_eq!(waiting.await.ok(), Some(Wake::Closing));
        assert_eq!(
            feed.wait(id, 0, Duration::from_secs(3600)).await,
            Wake::Closing
        );
    }

    #[tokio::test]
    async fn a_notification_before_the_wait_is_remembered() {
        let shared = Arc::new(Shared::default());
        let feed = PgChangeFeed {
            shared: shared.clone(),
            watch: Arc::new(WatchState::new(0)),
            _alive: Arc::new(Alive),
            thread: Arc::new(Mutex::new(None)),
        };
        let id = Uuid::new_v4();
        shared.notified(id, 3);
        // Returns at once: the timeout would make this test hang for an hour otherwise.
        feed.wait(id, 2, Duration::from_secs(3600)).await;
    }

    #[tokio::test]
    #[expect(clippy::expect_used, reason = "a test: a panicking waiter fails it")]
    async fn a_notification_wakes_a_waiter_and_a_reconnect_wakes_every_waiter() {
        let shared = Arc::new(Shared::default());
        let feed = PgChangeFeed {
            shared: shared.clone(),
            watch: Arc::new(WatchState::new(0)),
            _alive: Arc::new(Alive),
            thread: Arc::new(Mutex::new(None)),
        };
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let wa = tokio::spawn({
            let feed = feed.clone();
            async move { feed.wait(a, 5, Duration::from_secs(3600)).await }
        });
        let wb = tokio::spawn({
            let feed = feed.clone();
            async move { feed.wait(b, 5, Duration::from_secs(3600)).await }
        });
        while shared
            .lock()
            .values()
            .map(|e| e.tx.receiver_count())
            .sum::<usize>()
            < 2
        {
            tokio::task::yield_now().await;
        }
        shared.notified(a, 6);
        wa.await.expect("waiter a");
        shared.wake_all();
        wb.await.expect("waiter b");
    }

    #[test]
    fn payloads_of_this_and_older_servers_are_read_and_others_refused() {
        let (id, org) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let cases = [
            (
                format!("{id}:7:{org}:created"),
                Some((id, 7, Some(org), Membership::Created)),
            ),
            (
                format!("{id}:8:{org}:removed"),
                Some((id, 8, Some(org), Membership::Removed)),
            ),
            (
                format!("{id}:9:{org}:changed"),
                Some((id, 9, Some(org), Membership::Unchanged)),
            ),
            (
                format!("{id}:9:{org}:renamed"),
                Some((id, 9, Some(org), Membership::Unknown)),
            ),
            (format!("{id}:3"), Some((id, 3, None, Membership::Unknown))),
            (format!("{id}:x"), None),
            (format!("{id}:3:not-a-uuid:created"), None),
            (format!("{id}:3:{org}:created:extra"), None),
            ("garbage".to_owned(), None),
        ];
        for (payload, expected) in cases {
            assert_eq!(parse(&payload), expected, "{payload}");
        }
    }

    #[test]
    fn idle_entries_are_forgotten_but_watched_ones_kept() {
        let shared = Shared::default();
        let watched = Uuid::new_v4();
        let _rx = shared.subscribe(watched);
        shared.notified(Uuid::new_v4(), 1);
        for e in shared.lock().values_mut() {
            e.touched = Instant::now()
                .checked_sub(REMEMBER * 2)
                .unwrap_or_else(Instant::now);
        }
        shared.forget_idle();
        let map = shared.lock();
        assert_eq!(map.keys().collect::<Vec<_>>(), vec![&watched]);
    }
}
