//! Ending signed-in sessions before their time: one (sign out), or every one of a person
//! (sign out everywhere). The faces that keep sessions in cookies ask here whether the one
//! presented has been ended.

use chrono::{DateTime, Utc};

use super::{Services, store_error};
use crate::error::DomainError;
use crate::model::session::{SessionStanding, SessionSubject};

impl Services {
    /// Ends `session`: from now on it is refused wherever it is presented, by every process
    /// sharing the database.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn sign_out(&self, session: &SessionStanding) -> Result<(), DomainError> {
        let Some(id) = session.id else {
            // A session sealed before sessions had ids can only be ended with all of its
            // subject's; the face clears its cookie either way.
            return Ok(());
        };
        self.ports
            .sessions
            .end_session(id, session.expires_at)
            .await
            .map_err(store_error)?;
        Ok(())
    }

    /// Ends every session of `subject` issued until now; sessions last at most `longest`, so
    /// the record goes once the last of them would have expired.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn sign_out_everywhere(
        &self,
        subject: &SessionSubject,
        longest: chrono::Duration,
    ) -> Result<DateTime<Utc>, DomainError> {
        let now = self.ports.clock.now();
        self.ports
            .sessions
            .end_sessions_of(subject, now, now + longest)
            .await
            .map_err(store_error)?;
        Ok(now)
    }

    /// Whether `session` has been ended by a sign-out.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn session_ended(&self, session: &SessionStanding) -> Result<bool, DomainError> {
        self.ports
            .sessions
            .session_ended(session)
            .await
            .map_err(store_error)
    }
}
