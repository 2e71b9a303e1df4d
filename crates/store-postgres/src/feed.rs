//! `PgChangeFeed`: one LISTEN connection per process, on a dedicated thread, fans
//! `cluster_changes` notifications out to the long-polls waiting on each cluster.
//!
//! Why diesel's `notifications_iter()` on a thread rather than an async driver: it keeps one
//! PostgreSQL client library in the build, and the cost is one parked thread polling its
//! socket every 50 ms (a non-blocking `PQconsumeInput`), independent of the number of waiters.
//! Waiters are plain tokio futures on a `watch` channel per cluster: they hold no connection
//! and no thread.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use diesel::pg::PgConnection;
use diesel::{Connection, RunQueryDsl};
use domain::ports::storage::ChangeFeed;
use tokio::sync::watch;
use uuid::Uuid;

use crate::{CLUSTER_CHANNEL, with_connect_timeout, with_param};

const POLL: Duration = Duration::from_millis(50);
/// How often the listener proves its connection alive (a dead peer sends no notification).
const HEARTBEAT: Duration = Duration::from_secs(2);
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

    fn notified(&self, payload: &str) {
        let Some((id, revision)) = payload.split_once(':') else {
            tracing::warn!(payload, "unexpected cluster change notification");
            return;
        };
        let (Ok(id), Ok(revision)) = (id.parse::<Uuid>(), revision.parse::<i64>()) else {
            tracing::warn!(payload, "unexpected cluster change notification");
            return;
        };
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

/// Wakes state long-polls when a cluster's revision moves, across server processes.
#[derive(Clone)]
pub struct PgChangeFeed {
    shared: Arc<Shared>,
    _alive: Arc<Alive>,
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
    pub fn start(database_url: &str) -> PgChangeFeed {
        let shared = Arc::new(Shared::default());
        let alive = Arc::new(Alive);
        let url = with_connect_timeout(database_url, Duration::from_secs(5));
        // Named, so an operator sees the one listener per process in pg_stat_activity.
        let url = with_param(&url, "application_name", APPLICATION_NAME);
        let (thread_shared, thread_alive) = (shared.clone(), Arc::downgrade(&alive));
        let spawned = std::thread::Builder::new()
            .name("pg-change-feed".into())
            .spawn(move || listen(&url, &thread_shared, &thread_alive));
        if let Err(error) = spawned {
            tracing::error!(%error, "cannot start the change feed thread; long-polls will wait out their timeout");
        }
        PgChangeFeed {
            shared,
            _alive: alive,
        }
    }

    /// Whether the LISTEN connection is up now (for readiness and tests): notifications sent
    /// while it is down are not seen, but every waiter is woken once it is back.
    pub fn is_listening(&self) -> bool {
        self.shared.listening.load(Ordering::SeqCst)
    }
}

fn listen(url: &str, shared: &Shared, alive: &Weak<Alive>) {
    let mut backoff = Duration::from_millis(100);
    while alive.strong_count() > 0 {
        let mut conn = match PgConnection::establish(url) {
            Ok(conn) => conn,
            Err(error) => {
                tracing::warn!(%error, retry_in_ms = backoff.as_millis() as u64, "change feed cannot connect");
                sleep_while_alive(backoff, alive);
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        if let Err(error) =
            diesel::sql_query(format!("LISTEN {CLUSTER_CHANNEL}")).execute(&mut conn)
        {
            tracing::warn!(%error, "change feed cannot LISTEN");
            sleep_while_alive(backoff, alive);
            backoff = (backoff * 2).min(MAX_BACKOFF);
            continue;
        }
        backoff = Duration::from_millis(100);
        tracing::debug!("change feed listening");
        // Whatever changed while no LISTEN was active is unknown: every waiter looks again.
        shared.listening.store(true, Ordering::SeqCst);
        shared.wake_all();
        poll(&mut conn, shared, alive);
        shared.listening.store(false, Ordering::SeqCst);
    }
}

/// Drains notifications until the connection fails or the feed is dropped.
fn poll(conn: &mut PgConnection, shared: &Shared, alive: &Weak<Alive>) {
    let mut last_beat = Instant::now();
    while alive.strong_count() > 0 {
        for notification in conn.notifications_iter() {
            match notification {
                Ok(n) => shared.notified(&n.payload),
                Err(error) => {
                    tracing::warn!(%error, "change feed connection lost; reconnecting");
                    return;
                }
            }
        }
        if last_beat.elapsed() >= HEARTBEAT {
            if let Err(error) = diesel::sql_query("SELECT 1").execute(conn) {
                tracing::warn!(%error, "change feed connection lost; reconnecting");
                return;
            }
            shared.forget_idle();
            last_beat = Instant::now();
        }
        std::thread::sleep(POLL);
    }
}

fn sleep_while_alive(total: Duration, alive: &Weak<Alive>) {
    let until = Instant::now() + total;
    while alive.strong_count() > 0 && Instant::now() < until {
        std::thread::sleep(POLL);
    }
}

#[async_trait]
impl ChangeFeed for PgChangeFeed {
    async fn wait(&self, cluster_id: Uuid, since: i64, timeout: Duration) {
        let mut rx = self.shared.subscribe(cluster_id);
        if *rx.borrow_and_update() > since {
            return;
        }
        // Either a notification (any revision: the caller reads it again) or a reconnect.
        let _ = tokio::time::timeout(timeout, rx.changed()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_notification_before_the_wait_is_remembered() {
        let shared = Arc::new(Shared::default());
        let feed = PgChangeFeed {
            shared: shared.clone(),
            _alive: Arc::new(Alive),
        };
        let id = Uuid::new_v4();
        shared.notified(&format!("{id}:3"));
        // Returns at once: the timeout would make this test hang for an hour otherwise.
        feed.wait(id, 2, Duration::from_secs(3600)).await;
    }

    #[tokio::test]
    #[expect(clippy::expect_used, reason = "a test: a panicking waiter fails it")]
    async fn a_notification_wakes_a_waiter_and_a_reconnect_wakes_every_waiter() {
        let shared = Arc::new(Shared::default());
        let feed = PgChangeFeed {
            shared: shared.clone(),
            _alive: Arc::new(Alive),
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
        shared.notified(&format!("{a}:6"));
        wa.await.expect("waiter a");
        shared.wake_all();
        wb.await.expect("waiter b");
    }

    #[test]
    fn idle_entries_are_forgotten_but_watched_ones_kept() {
        let shared = Shared::default();
        let watched = Uuid::new_v4();
        let _rx = shared.subscribe(watched);
        shared.notified(&format!("{}:1", Uuid::new_v4()));
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
