//! `OperationLog`: the operations clients follow, in `cluster_operations`. A change's write
//! inserts its operation ([`insert_in`], or the create's one call with [`to_json`]) filed under
//! the generation of work the write scheduled; the reconciler settles them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::pg::PgConnection;
use diesel::prelude::*;
use domain::model::audit::{Actor, AuditResource};
use domain::model::identity::ClientKind;
use domain::model::operation::{ClusterOperation, OperationKind, OperationStatus, Settled};
use domain::ports::storage::{OperationLog, Page, PageRequest, StoreError};
use uuid::Uuid;

use crate::PgStore;
use crate::error::{TxError, map};
use crate::schema::cluster_operations as o;

#[derive(Debug, Insertable, Queryable, Selectable, serde::Serialize)]
#[diesel(table_name = o)]
pub(crate) struct OperationRow {
    id: Uuid,
    cluster_id: Uuid,
    organization_id: Uuid,
    kind: String,
    resource: String,
    resource_id: String,
    requested_by: String,
    requested_by_email: Option<String>,
    requested_by_client: String,
    request_id: Option<String>,
    generation: i64,
    status: String,
    attempts: i32,
    last_error: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    finished_at: Option<DateTime<Utc>>,
    progress: Option<String>,
}

impl OperationRow {
    fn from_domain(op: &ClusterOperation, generation: i64) -> OperationRow {
        OperationRow {
            id: op.id,
            cluster_id: op.cluster_id,
            organization_id: op.organization_id,
            kind: op.kind.as_str().to_owned(),
            resource: op.resource.as_str().to_owned(),
            resource_id: op.resource_id.clone(),
            requested_by: op.requested_by.user_id.clone(),
            requested_by_email: op.requested_by.email.clone(),
            requested_by_client: op.requested_by.client.as_str().to_owned(),
            request_id: op.request_id.clone(),
            generation,
            status: op.status.as_str().to_owned(),
            attempts: op.attempts,
            last_error: op.last_error.clone(),
            created_at: op.created_at,
            updated_at: op.updated_at,
            finished_at: op.finished_at,
            progress: op.progress.clone(),
        }
    }

    pub(crate) fn into_domain(self) -> Result<ClusterOperation, StoreError> {
        let word = |column: &str, value: &str| {
            StoreError::Internal(format!("cluster_operations.{column} holds {value:?}"))
        };
        Ok(ClusterOperation {
            id: self.id,
            cluster_id: self.cluster_id,
            organization_id: self.organization_id,
            kind: OperationKind::parse(&self.kind).ok_or_else(|| word("kind", &self.kind))?,
            resource: AuditResource::parse(&self.resource)
                .ok_or_else(|| word("resource", &self.resource))?,
            resource_id: self.resource_id,
            requested_by: Actor {
                user_id: self.requested_by,
                email: self.requested_by_email,
                client: ClientKind::parse(&self.requested_by_client),
            },
            request_id: self.request_id,
            status: OperationStatus::parse(&self.status)
                .ok_or_else(|| word("status", &self.status))?,
            attempts: self.attempts,
            last_error: self.last_error,
            progress: self.progress,
            created_at: self.created_at,
            updated_at: self.updated_at,
            finished_at: self.finished_at,
        })
    }
}

/// Writes an operation in the caller's transaction, under the work generation `generation`.
pub(crate) fn insert_in(
    conn: &mut PgConnection,
    op: &ClusterOperation,
    generation: i64,
) -> Result<(), TxError> {
    diesel::insert_into(o::table)
        .values(OperationRow::from_domain(op, generation))
        .execute(conn)?;
    Ok(())
}

/// An operation as the JSON of its row, for SQL that inserts it with `jsonb_populate_record`.
pub(crate) fn to_json(
    op: &ClusterOperation,
    generation: i64,
) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(OperationRow::from_domain(op, generation))
        .map_err(|e| StoreError::Internal(format!("operation row to JSON: {e}")))
}

fn rows(rows: Vec<OperationRow>) -> Result<Vec<ClusterOperation>, StoreError> {
    rows.into_iter().map(OperationRow::into_domain).collect()
}

const RUNNING: &str = "running";

#[async_trait]
impl OperationLog for PgStore {
    async fn cluster_operations(
        &self,
        cluster_id: Uuid,
        status: Option<OperationStatus>,
        page: PageRequest,
    ) -> Result<Page<ClusterOperation>, StoreError> {
        self.run_blocking(move |conn| {
            let filtered = || {
                let mut q = o::table.filter(o::cluster_id.eq(cluster_id)).into_boxed();
                if let Some(s) = status {
                    q = q.filter(o::status.eq(s.as_str()));
                }
                q
            };
            let total: i64 = filtered().count().get_result(conn).map_err(map)?;
            let found: Vec<OperationRow> = filtered()
                .order((o::created_at.desc(), o::id.desc()))
                .offset(i64::try_from(page.offset()).unwrap_or(i64::MAX))
                .limit(i64::from(page.size))
                .select(OperationRow::as_select())
                .load(conn)
                .map_err(map)?;
            Ok(Page {
                items: rows(found)?,
                total: u64::try_from(total).unwrap_or(0),
            })
        })
        .await
    }

    async fn cluster_operation(
        &self,
        cluster_id: Uuid,
        id: Uuid,
    ) -> Result<Option<ClusterOperation>, StoreError> {
        self.run_blocking(move |conn| {
            let found: Option<OperationRow> = o::table
                .filter(o::cluster_id.eq(cluster_id).and(o::id.eq(id)))
                .select(OperationRow::as_select())
                .first(conn)
                .optional()
                .map_err(map)?;
            found.map(OperationRow::into_domain).transpose()
        })
        .await
    }

    async fn open_operations(
        &self,
        cluster_id: Uuid,
        generation: i64,
    ) -> Result<Vec<ClusterOperation>, StoreError> {
        self.run_blocking(move |conn| {
            let found: Vec<OperationRow> = o::table
                .filter(o::cluster_id.eq(cluster_id))
                .filter(o::status.eq(RUNNING))
                .filter(o::generation.le(generation))
                .order((o::created_at.asc(), o::id.asc()))
                .select(OperationRow::as_select())
                .load(conn)
                .map_err(map)?;
            rows(found)
        })
        .await
    }

    async fn settle_operations(
        &self,
        cluster_id: Uuid,
        settled: Vec<Settled>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            conn.transaction(|conn| {
                for s in &settled {
                    diesel::update(
                        o::table
                            .filter(o::cluster_id.eq(cluster_id))
                            .filter(o::id.eq(s.id))
                            .filter(o::status.eq(RUNNING)),
                    )
                    .set((
                        o::status.eq(s.status.as_str()),
                        o::last_error.eq(s.reason.as_deref()),
                        o::updated_at.eq(at),
                        o::finished_at.eq(Some(at)),
                    ))
                    .execute(conn)?;
                }
                Ok::<_, diesel::result::Error>(())
            })
            .map_err(map)
        })
        .await
    }

    async fn record_attempt(
        &self,
        cluster_id: Uuid,
        attempts: i32,
        error: String,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            diesel::update(
                o::table
                    .filter(o::cluster_id.eq(cluster_id))
                    .filter(o::status.eq(RUNNING)),
            )
            .set((
                o::attempts.eq(attempts.max(0)),
                o::last_error.eq(Some(&error)),
                o::updated_at.eq(at),
            ))
            .execute(conn)
            .map_err(map)?;
            Ok(())
        })
        .await
    }

    async fn record_progress(
        &self,
        cluster_id: Uuid,
        kind: OperationKind,
        progress: String,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            diesel::update(
                o::table
                    .filter(o::cluster_id.eq(cluster_id))
                    .filter(o::status.eq(RUNNING))
                    .filter(o::kind.eq(kind.as_str())),
            )
            .set((o::progress.eq(Some(&progress)), o::updated_at.eq(at)))
            .execute(conn)
            .map_err(map)?;
            Ok(())
        })
        .await
    }

    async fn purge_finished_before(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        self.run_blocking(move |conn| {
            crate::partitions::purge_before(conn, crate::partitions::CLUSTER_OPERATIONS, before)
                .map(|purged| purged.rows)
                .map_err(map)
        })
        .await
    }
}
