//! `IdempotencyStore`: the key is claimed by one `INSERT … ON CONFLICT DO
//! NOTHING` in its own transaction, so a second request with the same key never waits on the
//! first: it reads the row and the domain decides (replay, reused, in progress, take over).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::pg::PgConnection;
use diesel::prelude::*;
use domain::model::idempotency::{
    Fingerprint, IdempotencyCompletion, IdempotencyRecord, IdempotencyScope, IdempotencyState,
    Replay,
};
use domain::names::IdempotencyKey;
use domain::ports::storage::{ClaimOutcome, IdempotencyStore, StoreError};
use uuid::Uuid;

use crate::PgStore;
use crate::error::{TxError, corrupt, map};
use crate::schema::idempotency_keys as k;

const IN_PROGRESS: &str = "in_progress";
const COMPLETED: &str = "completed";

#[derive(Debug, Queryable, Selectable, Insertable)]
#[diesel(
    table_name = k,
    check_for_backend(diesel::pg::Pg),
    treat_none_as_default_value = false
)]
struct KeyRow {
    organization_id: Uuid,
    key: String,
    state: String,
    lease_id: Option<Uuid>,
    lease_expires_at: Option<DateTime<Utc>>,
    fingerprint: Vec<u8>,
    replay: Option<Vec<u8>>,
    created_at: DateTime<Utc>,
}

impl KeyRow {
    fn from_domain(r: &IdempotencyRecord) -> Self {
        let (state, lease_id, lease_expires_at, replay) = match &r.state {
            IdempotencyState::InProgress {
                lease_id,
                lease_expires_at,
            } => (IN_PROGRESS, Some(*lease_id), Some(*lease_expires_at), None),
            IdempotencyState::Completed { replay } => {
                (COMPLETED, None, None, Some(replay.0.clone()))
            }
        };
        KeyRow {
            organization_id: r.scope.organization_id,
            key: r.scope.key.as_str().to_owned(),
            state: state.to_owned(),
            lease_id,
            lease_expires_at,
            fingerprint: r.fingerprint.0.to_vec(),
            replay,
            created_at: r.created_at,
        }
    }

    fn into_domain(self) -> Result<IdempotencyRecord, StoreError> {
        let state = match (self.state.as_str(), self.lease_id, self.lease_expires_at) {
            (COMPLETED, _, _) => IdempotencyState::Completed {
                replay: Replay(
                    self.replay
                        .ok_or_else(|| corrupt("idempotency answer of key", &self.key))?,
                ),
            },
            (IN_PROGRESS, Some(lease_id), Some(lease_expires_at)) => IdempotencyState::InProgress {
                lease_id,
                lease_expires_at,
            },
            (other, _, _) => return Err(corrupt("idempotency state", other)),
        };
        let fingerprint: [u8; 32] = self
            .fingerprint
            .as_slice()
            .try_into()
            .map_err(|_| corrupt("idempotency fingerprint of key", &self.key))?;
        Ok(IdempotencyRecord {
            scope: IdempotencyScope {
                organization_id: self.organization_id,
                key: IdempotencyKey::parse(&self.key)
                    .ok_or_else(|| corrupt("idempotency key", &self.key))?,
            },
            fingerprint: Fingerprint(fingerprint),
            state,
            created_at: self.created_at,
        })
    }
}

fn scoped(scope: &IdempotencyScope) -> k::BoxedQuery<'static, diesel::pg::Pg> {
    k::table
        .filter(k::organization_id.eq(scope.organization_id))
        .filter(k::key.eq(scope.key.as_str().to_owned()))
        .into_boxed()
}

/// Stores the answer on a key this request still holds; `LeaseLost` otherwise. Runs inside the
/// caller's transaction so the answer commits with the change it describes.
pub(crate) fn complete_in(
    conn: &mut PgConnection,
    c: &IdempotencyCompletion,
) -> Result<(), TxError> {
    if store_answer(conn, c)? == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost.into())
    }
}

/// Marks the key completed with the answer if `c.lease_id` still holds it; the rows changed.
fn store_answer(
    conn: &mut PgConnection,
    c: &IdempotencyCompletion,
) -> Result<usize, diesel::result::Error> {
    diesel::update(k::table)
        .filter(k::organization_id.eq(c.scope.organization_id))
        .filter(k::key.eq(c.scope.key.as_str()))
        .filter(k::state.eq(IN_PROGRESS))
        .filter(k::lease_id.eq(c.lease_id))
        .set((k::state.eq(COMPLETED), k::replay.eq(&c.replay.0)))
        .execute(conn)
}

#[async_trait]
impl IdempotencyStore for PgStore {
    async fn claim(&self, record: IdempotencyRecord) -> Result<ClaimOutcome, StoreError> {
        self.run_blocking(move |conn| {
            let row = KeyRow::from_domain(&record);
            // A key released or purged between the insert and the read is simply claimed on
            // the next round; two rounds cover every interleaving but a pathological one.
            for _ in 0..3 {
                let inserted = diesel::insert_into(k::table)
                    .values(&row)
                    .on_conflict_do_nothing()
                    .execute(conn)
                    .map_err(map)?;
                if inserted == 1 {
                    return Ok(ClaimOutcome::Claimed);
                }
                let existing: Option<KeyRow> = scoped(&record.scope)
                    .select(KeyRow::as_select())
                    .first(conn)
                    .optional()
                    .map_err(map)?;
                if let Some(existing) = existing {
                    return Ok(ClaimOutcome::Existing(existing.into_domain()?));
                }
            }
            Err(StoreError::Unavailable(
                "the idempotency key keeps changing; retry".into(),
            ))
        })
        .await
    }

    async fn take_over(
        &self,
        scope: IdempotencyScope,
        stale_lease_id: Uuid,
        new_lease_id: Uuid,
        lease_expires_at: DateTime<Utc>,
    ) -> Result<bool, StoreError> {
        self.run_blocking(move |conn| {
            let n = diesel::update(k::table)
                .filter(k::organization_id.eq(scope.organization_id))
                .filter(k::key.eq(scope.key.as_str()))
                .filter(k::state.eq(IN_PROGRESS))
                .filter(k::lease_id.eq(stale_lease_id))
                .set((
                    k::lease_id.eq(new_lease_id),
                    k::lease_expires_at.eq(lease_expires_at),
                ))
                .execute(conn)
                .map_err(map)?;
            Ok(n == 1)
        })
        .await
    }

    async fn complete(&self, completion: IdempotencyCompletion) -> Result<(), StoreError> {
        // Per the port: an answer already committed with the change, or a key another lease
        // holds, is left as it is.
        self.run_blocking(move |conn| store_answer(conn, &completion).map(|_| ()).map_err(map))
            .await
    }

    async fn release(&self, scope: IdempotencyScope, lease_id: Uuid) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            diesel::delete(k::table)
                .filter(k::organization_id.eq(scope.organization_id))
                .filter(k::key.eq(scope.key.as_str()))
                .filter(k::state.eq(IN_PROGRESS))
                .filter(k::lease_id.eq(lease_id))
                .execute(conn)
                .map_err(map)?;
            Ok(())
        })
        .await
    }

    async fn purge_created_before(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        self.run_blocking(move |conn| {
            let n = diesel::delete(k::table.filter(k::created_at.lt(before)))
                .execute(conn)
                .map_err(map)?;
            Ok(n as u64)
        })
        .await
    }
}
