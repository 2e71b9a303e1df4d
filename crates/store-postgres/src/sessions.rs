//! `SessionStore`: sessions ended before their time, in `session_revocations` (one session)
//! and `session_sign_outs` (every session of a subject up to an instant). Each write notifies
//! [`crate::SESSION_CHANNEL`] in its transaction, so gateways holding the records in memory
//! reload them at once.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use domain::model::session::{SessionRevocations, SessionStanding, SessionSubject};
use domain::ports::storage::{SessionStore, StoreError};
use uuid::Uuid;

use crate::PgStore;
use crate::error::map;
use crate::schema::{session_revocations as r, session_sign_outs as o};

fn notify(conn: &mut PgConnection) -> QueryResult<usize> {
    diesel::sql_query(format!("NOTIFY {}", crate::SESSION_CHANNEL)).execute(conn)
}

#[async_trait]
impl SessionStore for PgStore {
    async fn end_session(&self, id: Uuid, expires_at: DateTime<Utc>) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            conn.transaction(|conn| {
                diesel::insert_into(r::table)
                    .values((r::session_id.eq(id), r::expires_at.eq(expires_at)))
                    .on_conflict(r::session_id)
                    .do_nothing()
                    .execute(conn)?;
                notify(conn)
            })
            .map(|_| ())
            .map_err(map)
        })
        .await
    }

    async fn end_sessions_of(
        &self,
        subject: &SessionSubject,
        at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let subject = subject.as_str().to_owned();
        self.run_blocking(move |conn| {
            conn.transaction(|conn| {
                // GREATEST: a slower process's earlier instant never undoes a later sign-out.
                diesel::sql_query(
                    "INSERT INTO session_sign_outs (subject, not_before, expires_at) \
                     VALUES ($1, $2, $3) \
                     ON CONFLICT (subject) DO UPDATE SET \
                       not_before = GREATEST(session_sign_outs.not_before, EXCLUDED.not_before), \
                       expires_at = GREATEST(session_sign_outs.expires_at, EXCLUDED.expires_at)",
                )
                .bind::<diesel::sql_types::Text, _>(&subject)
                .bind::<diesel::sql_types::Timestamptz, _>(at)
                .bind::<diesel::sql_types::Timestamptz, _>(expires_at)
                .execute(conn)?;
                notify(conn)
            })
            .map(|_| ())
            .map_err(map)
        })
        .await
    }

    async fn session_ended(&self, session: &SessionStanding) -> Result<bool, StoreError> {
        let id = session.id;
        let subject = session.subject.as_str().to_owned();
        let issued_at = session.issued_at;
        self.run_blocking(move |conn| {
            let by_id = match id {
                Some(id) => {
                    diesel::select(diesel::dsl::exists(r::table.filter(r::session_id.eq(id))))
                        .get_result::<bool>(conn)
                        .map_err(map)?
                }
                None => false,
            };
            if by_id {
                return Ok(true);
            }
            diesel::select(diesel::dsl::exists(
                o::table
                    .filter(o::subject.eq(&subject))
                    .filter(o::not_before.ge(issued_at)),
            ))
            .get_result::<bool>(conn)
            .map_err(map)
        })
        .await
    }

    async fn session_revocations(
        &self,
        now: DateTime<Utc>,
    ) -> Result<SessionRevocations, StoreError> {
        self.run_blocking(move |conn| {
            let ended: HashSet<Uuid> = r::table
                .filter(r::expires_at.gt(now))
                .select(r::session_id)
                .load::<Uuid>(conn)
                .map_err(map)?
                .into_iter()
                .collect();
            let not_before: HashMap<SessionSubject, DateTime<Utc>> = o::table
                .filter(o::expires_at.gt(now))
                .select((o::subject, o::not_before))
                .load::<(String, DateTime<Utc>)>(conn)
                .map_err(map)?
                .into_iter()
                .map(|(s, at)| (SessionSubject::from_stored(s), at))
                .collect();
            Ok(SessionRevocations { ended, not_before })
        })
        .await
    }

    async fn purge_session_revocations(&self, now: DateTime<Utc>) -> Result<u64, StoreError> {
        self.run_blocking(move |conn| {
            let a = diesel::delete(r::table.filter(r::expires_at.le(now)))
                .execute(conn)
                .map_err(map)?;
            let b = diesel::delete(o::table.filter(o::expires_at.le(now)))
                .execute(conn)
                .map_err(map)?;
            Ok((a + b) as u64)
        })
        .await
    }
}
