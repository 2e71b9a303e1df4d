//! `Notifier`: sends this process's cluster change notifications after their writes committed.
//!
//! A `NOTIFY` inside a write would make PostgreSQL take its database-wide notification lock at
//! that write's pre-commit and hold it through the commit flush: every notifying writer of the
//! database would then commit one at a time (docs/performance.md measures it). So a write only
//! records its change in `cluster_change_log`, and once it committed hands its payload to this
//! notifier's thread. The thread sends whatever has accumulated meanwhile in one statement, on
//! its own connection, with `synchronous_commit` off for that statement's transaction only: the
//! notifying transaction writes nothing that must survive a crash, so it does not wait for a
//! flush and holds the lock for microseconds. Nothing is set on the session, so the connection
//! may go through a pooler in transaction mode, as the store's pool does (a NOTIFY reaches every
//! listener of the database whichever session sends it).
//!
//! Losing a notification is allowed (the process dies right after a commit, the database is
//! away, the queue is full): every change feed reads `cluster_change_log` once a second and
//! catches up. A notification is never sent for a write that did not commit.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use diesel::pg::PgConnection;
use diesel::sql_types::{Array, Text};
use diesel::{Connection, RunQueryDsl};

use crate::{CLUSTER_CHANNEL, with_connect_timeout, with_param};

/// Payloads waiting to be sent at most; past it a ring is dropped (the log catches it up).
const QUEUE: usize = 16_384;
/// Payloads sent in one statement at most.
const BATCH: usize = 512;
/// After a failed connection attempt, rings are dropped for this long rather than each one
/// waiting out a connect timeout.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// The notifier's `application_name`.
pub const APPLICATION_NAME: &str = "kubesvc-notifier";

/// What the thread is handed.
enum Message {
    Notify(String),
    /// Send what came before, then end (the receiver goes, so later rings are dropped).
    Stop,
}

/// The sending end; cheap to clone. The thread ends when [`Notifier::close`] is called or the
/// last clone is dropped.
#[derive(Clone)]
pub(crate) struct Notifier {
    queue: SyncSender<Message>,
    thread: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier").finish_non_exhaustive()
    }
}

impl Notifier {
    /// Starts the thread; it connects on the first ring. Never fails: without a thread, rings
    /// are dropped and the feeds' reads of the log deliver the changes.
    pub fn start(database_url: &str) -> Notifier {
        let (queue, rx) = sync_channel(QUEUE);
        let url = with_param(
            &with_connect_timeout(database_url, Duration::from_secs(5)),
            "application_name",
            APPLICATION_NAME,
        );
        let spawned = std::thread::Builder::new()
            .name("pg-notifier".into())
            .spawn(move || run(&url, &rx));
        let thread = match spawned {
            Ok(handle) => Some(handle),
            Err(error) => {
                tracing::error!(%error, "cannot start the notifier thread; other processes will see changes within a second");
                None
            }
        };
        Notifier {
            queue,
            thread: Arc::new(Mutex::new(thread)),
        }
    }

    /// Queues a committed change's payload; never blocks (nor locks: it is on every write).
    pub fn ring(&self, payload: String) {
        match self.queue.try_send(Message::Notify(payload)) {
            Ok(()) | Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                tracing::debug!(
                    "notifier queue full; the change feeds will read the change from the log"
                );
            }
        }
    }

    /// Sends what is queued and ends the thread, waiting for it (at most a connect timeout):
    /// for a process about to exit, which must not leave libpq working on another thread while
    /// the C library's exit handlers run (the TLS library's cleanup then crashes the process).
    /// Later rings are dropped. Blocks.
    pub fn close(&self) {
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            // Waits for room when the queue is full: the thread is draining it.
            let _ = self.queue.send(Message::Stop);
            let _ = thread.join();
        }
    }
}

fn run(url: &str, rx: &Receiver<Message>) {
    let mut conn: Option<PgConnection> = None;
    let mut failed_at: Option<Instant> = None;
    let mut stopping = false;
    while !stopping {
        let Ok(Message::Notify(first)) = rx.recv() else {
            return;
        };
        let mut batch = vec![first];
        while batch.len() < BATCH {
            match rx.try_recv() {
                Ok(Message::Notify(p)) => batch.push(p),
                Ok(Message::Stop) => {
                    stopping = true;
                    break;
                }
                Err(_) => break,
            }
        }
        if conn.is_none() {
            if failed_at.is_some_and(|t| t.elapsed() < RETRY_AFTER) {
                continue;
            }
            match connect(url) {
                Ok(c) => {
                    conn = Some(c);
                    failed_at = None;
                }
                Err(error) => {
                    tracing::warn!(%error, "the notifier cannot connect; other processes will see changes within a second");
                    failed_at = Some(Instant::now());
                    continue;
                }
            }
        }
        if let Some(c) = conn.as_mut()
            && let Err(error) = send(c, &batch)
        {
            tracing::warn!(%error, "the notifier lost its connection; other processes will see changes within a second");
            conn = None;
        }
    }
}

/// A plain connection: its one statement is a `sql_query`, which diesel never keeps prepared,
/// so it passes a pooler in transaction mode as it is.
fn connect(url: &str) -> Result<PgConnection, String> {
    PgConnection::establish(url).map_err(|e| e.to_string())
}

/// One autocommit statement: one transaction, one round trip, however many payloads. The
/// setting is local to that transaction (`set_config(…, true)` is `SET LOCAL`), read when it
/// commits; the aggregate makes it one row, so `set_config` runs once.
fn send(conn: &mut PgConnection, payloads: &[String]) -> Result<(), String> {
    diesel::sql_query(
        "SELECT set_config('synchronous_commit', 'off', true), count(pg_notify($1, p)) \
         FROM unnest($2::text[]) AS p",
    )
    .bind::<Text, _>(CLUSTER_CHANNEL)
    .bind::<Array<Text>, _>(payloads)
    .execute(conn)
    .map(drop)
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The notifications reach a listener, and the session is left as it was: nothing of the
    /// notifier's stays on a server session a pooler would hand to another client next.
    #[cfg(feature = "test-support")]
    #[test]
    fn a_batch_is_notified_and_leaves_no_setting_on_the_session() {
        use crate::listener::Listener;
        use diesel::QueryableByName;

        #[derive(QueryableByName)]
        struct Setting {
            #[diesel(sql_type = Text)]
            v: String,
        }
        let db = crate::TestDatabase::create();
        let timeout = Duration::from_secs(10);
        let mut listener = Listener::connect(&db.url).unwrap_or_else(|e| panic!("{e}"));
        listener
            .execute(&format!("LISTEN {CLUSTER_CHANNEL}"), timeout)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut conn = connect(&db.url).unwrap_or_else(|e| panic!("{e}"));
        send(&mut conn, &["a".to_owned(), "b".to_owned()]).unwrap_or_else(|e| panic!("{e}"));

        let mut heard = Vec::new();
        let deadline = Instant::now() + timeout;
        while heard.len() < 2 && Instant::now() < deadline {
            let got = listener
                .wait(Duration::from_millis(200))
                .unwrap_or_else(|e| panic!("{e}"));
            heard.extend(got.into_iter().map(|n| n.payload));
        }
        assert_eq!(heard, ["a", "b"]);
        let after: Vec<Setting> =
            diesel::sql_query("SELECT current_setting('synchronous_commit') AS v")
                .load(&mut conn)
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            after.first().map(|s| s.v.as_str()),
            Some("on"),
            "synchronous_commit was set for the notifying transaction only"
        );
    }
}
