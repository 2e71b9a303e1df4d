//! `Notifier`: sends this process's cluster change notifications after their writes committed.
//!
//! A `NOTIFY` inside a write would make PostgreSQL take its database-wide notification lock at
//! that write's pre-commit and hold it through the commit flush: every notifying writer of the
//! database would then commit one at a time (docs/performance.md measures it). So a write only
//! records its change in `cluster_change_log`, and once it committed hands its payload to this
//! notifier's thread. The thread sends whatever has accumulated meanwhile in one statement, on
//! its own connection, with `synchronous_commit` off: the notifying transaction writes nothing
//! that must survive a crash, so it does not wait for a flush and holds the lock for
//! microseconds.
//!
//! Losing a notification is allowed (the process dies right after a commit, the database is
//! away, the queue is full): every change feed reads `cluster_change_log` once a second and
//! catches up. A notification is never sent for a write that did not commit.

use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use diesel::connection::SimpleConnection;
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

fn connect(url: &str) -> Result<PgConnection, String> {
    let mut conn = PgConnection::establish(url).map_err(|e| e.to_string())?;
    conn.batch_execute("SET synchronous_commit = off")
        .map_err(|e| e.to_string())?;
    Ok(conn)
}

/// One autocommit statement: one transaction, one round trip, however many payloads.
fn send(conn: &mut PgConnection, payloads: &[String]) -> Result<(), String> {
    diesel::sql_query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
        .bind::<Text, _>(CLUSTER_CHANNEL)
        .bind::<Array<Text>, _>(payloads)
        .execute(conn)
        .map(drop)
        .map_err(|e| e.to_string())
}
