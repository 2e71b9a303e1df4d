//! `OperationQueue`: one row per cluster in `operations`, claimed with `FOR UPDATE SKIP
//! LOCKED` and a lease, so server processes share the work, none runs one twice, and the work
//! of a worker that died is claimed again once its lease ran out.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Integer, Nullable, Text, Timestamptz};
use domain::ports::storage::{Operation, OperationLease, OperationQueue, StoreError};
use uuid::Uuid;

use crate::PgStore;
use crate::error::map;
use crate::schema::operations as o;

#[derive(Debug, QueryableByName)]
struct Claimed {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    cluster_id: Uuid,
    #[diesel(sql_type = BigInt)]
    generation: i64,
    #[diesel(sql_type = Integer)]
    attempts: i32,
    #[diesel(sql_type = Nullable<Text>)]
    last_error: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    request_id: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    lease_expires_at: DateTime<Utc>,
}

/// The oldest due pending row, or a running one whose lease ran out; rows another worker is
/// claiming right now are skipped, never waited for. One statement, so one transaction.
const CLAIM: &str = "\
WITH candidate AS (
    SELECT cluster_id FROM operations
    WHERE (state = 'pending' AND run_after <= now())
       OR (state = 'running' AND lease_expires_at < now())
    ORDER BY run_after, cluster_id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
)
UPDATE operations SET
    state = 'running',
    lease_id = $1,
    lease_expires_at = now() + make_interval(secs => $2),
    leased_by = $3,
    attempts = operations.attempts + 1,
    updated_at = now()
FROM candidate
WHERE operations.cluster_id = candidate.cluster_id
RETURNING operations.id, operations.cluster_id, operations.generation, operations.attempts,
          operations.last_error, operations.request_id, operations.lease_expires_at";

#[async_trait]
impl OperationQueue for PgStore {
    async fn claim(
        &self,
        worker: String,
        lease: Duration,
    ) -> Result<Option<OperationLease>, StoreError> {
        let lease_id = Uuid::new_v4();
        self.run_blocking(move |conn| {
            let claimed: Option<Claimed> = diesel::sql_query(CLAIM)
                .bind::<diesel::sql_types::Uuid, _>(lease_id)
                .bind::<diesel::sql_types::Double, _>(lease.as_secs_f64())
                .bind::<Text, _>(&worker)
                .get_result(conn)
                .optional()
                .map_err(map)?;
            Ok(claimed.map(|c| OperationLease {
                operation: Operation {
                    id: c.id,
                    cluster_id: c.cluster_id,
                    generation: c.generation,
                    attempts: c.attempts,
                    last_error: c.last_error,
                    request_id: c.request_id,
                },
                lease_id,
                expires_at: c.lease_expires_at,
            }))
        })
        .await
    }

    /// Done if no more work was asked since the claim (same generation), else pending again.
    /// A lease that was lost (expired and claimed by another worker, or the cluster removed)
    /// changes nothing: the newer holder decides.
    async fn finish(&self, lease: OperationLease) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            let n = diesel::sql_query(
                "UPDATE operations SET \
                   state = CASE WHEN generation = $3 THEN 'done' ELSE 'pending' END, \
                   run_after = now(), \
                   attempts = CASE WHEN generation = $3 THEN 0 ELSE attempts END, \
                   last_error = CASE WHEN generation = $3 THEN NULL ELSE last_error END, \
                   lease_id = NULL, lease_expires_at = NULL, leased_by = NULL, updated_at = now() \
                 WHERE cluster_id = $1 AND state = 'running' AND lease_id = $2",
            )
            .bind::<diesel::sql_types::Uuid, _>(lease.operation.cluster_id)
            .bind::<diesel::sql_types::Uuid, _>(lease.lease_id)
            .bind::<BigInt, _>(lease.operation.generation)
            .execute(conn)
            .map_err(map)?;
            if n == 0 {
                // A finished deletion removes the operation with its cluster: nothing was lost.
                let still_there: i64 = o::table
                    .filter(o::cluster_id.eq(lease.operation.cluster_id))
                    .count()
                    .get_result(conn)
                    .map_err(map)?;
                if still_there > 0 {
                    tracing::warn!(cluster_id = %lease.operation.cluster_id, "finished an operation whose lease was lost");
                }
            }
            Ok(())
        })
        .await
    }

    async fn retry(
        &self,
        lease: OperationLease,
        error: String,
        retry_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            let n = diesel::update(o::table)
                .filter(o::cluster_id.eq(lease.operation.cluster_id))
                .filter(o::state.eq("running"))
                .filter(o::lease_id.eq(lease.lease_id))
                .set((
                    o::state.eq("pending"),
                    o::run_after.eq(retry_at),
                    o::last_error.eq(&error),
                    o::lease_id.eq(None::<Uuid>),
                    o::lease_expires_at.eq(None::<DateTime<Utc>>),
                    o::leased_by.eq(None::<String>),
                    o::updated_at.eq(diesel::dsl::now),
                ))
                .execute(conn)
                .map_err(map)?;
            if n == 0 {
                tracing::warn!(cluster_id = %lease.operation.cluster_id, "retried an operation whose lease was lost");
            }
            Ok(())
        })
        .await
    }

    async fn requeue(&self, lease: OperationLease) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            let n = diesel::update(o::table)
                .filter(o::cluster_id.eq(lease.operation.cluster_id))
                .filter(o::state.eq("running"))
                .filter(o::lease_id.eq(lease.lease_id))
                .set((
                    o::state.eq("pending"),
                    o::run_after.eq(diesel::dsl::now),
                    o::attempts.eq(0),
                    o::lease_id.eq(None::<Uuid>),
                    o::lease_expires_at.eq(None::<DateTime<Utc>>),
                    o::leased_by.eq(None::<String>),
                    o::updated_at.eq(diesel::dsl::now),
                ))
                .execute(conn)
                .map_err(map)?;
            if n == 0 {
                tracing::warn!(cluster_id = %lease.operation.cluster_id, "requeued an operation whose lease was lost");
            }
            Ok(())
        })
        .await
    }

    async fn depth(&self) -> Result<u64, StoreError> {
        self.run_blocking(|conn| {
            let n: i64 = o::table
                .filter(o::state.ne("done"))
                .count()
                .get_result(conn)
                .map_err(map)?;
            Ok(n as u64)
        })
        .await
    }
}
