//! Sessions ended before their time, in memory: every sign-out still in force, read from
//! PostgreSQL at start, again whenever the database notifies one (`SessionRevocationChanges`:
//! the LISTEN on `session_revocations`, on the auth servers' connection), and every
//! `reload_interval` as a safety net for a notification that never came. A request presenting
//! a session looks it up here, in a hash set and a hash map: nothing per request goes to the
//! database.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use domain::model::session::{SessionRevocations, SessionStanding};
use domain::ports::storage::{SessionStore, StoreError};
use store_postgres::{PgStore, SessionRevocationChanges};

use crate::current::Current;

/// The shared, swappable set of sign-outs in force.
#[derive(Debug, Clone, Default)]
pub struct Revocations {
    current: Current<SessionRevocations>,
    /// Held from a read until what it read is in force, and while this gateway adds what it
    /// just wrote: a read that began before a sign-out committed can never put its older set
    /// in force after that sign-out was added.
    swaps: Arc<tokio::sync::Mutex<()>>,
}

impl Revocations {
    /// Whether `session` was ended early.
    pub fn ends(&self, session: &SessionStanding) -> bool {
        self.current.get().ends(session)
    }

    /// Reads every sign-out in force again; on failure the previous set stays in force.
    /// Returns how many records are in force.
    pub async fn reload(&self, store: &PgStore) -> Result<usize, StoreError> {
        let _swap = self.swaps.lock().await;
        let read = store.session_revocations(Utc::now()).await?;
        let count = read.ended.len() + read.not_before.len();
        self.current.set(read);
        Ok(count)
    }

    /// Reloads forever: when `changes` wakes it, and at the latest every `interval`.
    pub async fn keep_fresh(
        self,
        store: PgStore,
        changes: SessionRevocationChanges,
        interval: Duration,
    ) {
        loop {
            tokio::select! {
                () = changes.changed() => {}
                () = tokio::time::sleep(interval) => {}
            }
            if let Err(error) = self.reload(&store).await {
                tracing::warn!(%error, "cannot reload the sign-outs; keeping the last ones");
            }
        }
    }
}
