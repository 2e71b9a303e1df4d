//! Sessions ended before their time, in memory: every sign-out still in force, read from
//! PostgreSQL at start, again whenever the database notifies one (`SessionRevocationChanges`:
//! the LISTEN on `session_revocations`, on the auth servers' connection), and every
//! `reload_interval` as a safety net for a notification that never came. A request presenting
//! a session looks it up here, in a hash set and a hash map: nothing per request goes to the
//! database.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use domain::model::session::{SessionRevocations, SessionStanding, SessionSubject};
use domain::ports::storage::{SessionStore, StoreError};
use store_postgres::{PgStore, SessionRevocationChanges};
use uuid::Uuid;

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

    /// Puts in force at once what this gateway has just recorded (its notification would put
    /// it in force a few milliseconds later): the sessions `ended`, and each subject's
    /// sessions issued up to its instant.
    pub async fn add(&self, ended: &[Uuid], subjects: &[(SessionSubject, DateTime<Utc>)]) {
        if ended.is_empty() && subjects.is_empty() {
            return;
        }
        let _swap = self.swaps.lock().await;
        let mut next = SessionRevocations::clone(&self.current.get());
        next.ended.extend(ended.iter().copied());
        for (subject, at) in subjects {
            let instant = next.not_before.entry(subject.clone()).or_insert(*at);
            *instant = (*instant).max(*at);
        }
        self.current.set(next);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(s, 0).unwrap_or_default()
    }

    fn standing(id: u128, who: &str, issued: i64) -> SessionStanding {
        SessionStanding {
            id: Some(Uuid::from_u128(id)),
            subject: SessionSubject::gateway("https://id.example", who),
            issued_at: at(issued),
            expires_at: at(issued + 3600),
        }
    }

    #[tokio::test]
    async fn what_this_gateway_records_is_in_force_at_once_and_never_moves_back() {
        let revocations = Revocations::default();
        let alice = SessionSubject::gateway("https://id.example", "alice");
        assert!(!revocations.ends(&standing(1, "alice", 10)));
        revocations
            .add(&[Uuid::from_u128(1)], &[(alice.clone(), at(100))])
            .await;
        revocations.add(&[], &[(alice, at(50))]).await;
        assert!(revocations.ends(&standing(1, "bob", 500)), "by its id");
        assert!(
            revocations.ends(&standing(2, "alice", 100)),
            "by its person"
        );
        assert!(
            !revocations.ends(&standing(3, "alice", 101)),
            "signed in after"
        );
        assert!(!revocations.ends(&standing(4, "bob", 10)));
    }
}
