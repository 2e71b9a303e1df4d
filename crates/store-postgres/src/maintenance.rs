//! `MaintenanceStore`: the operator's reads and repairs, across organizations.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text, Uuid as SqlUuid};
use domain::model::cluster::ClusterPhase;
use domain::model::operation::{ClusterOperation, OperationStatus};
use domain::ports::maintenance::{
    ClusterWithoutCredentials, MaintenanceStore, OrphanedElasticIp, QueueEntry, QueueState,
    ZoneUsageDrift,
};
use domain::ports::storage::StoreError;
use uuid::Uuid;

use crate::PgStore;
use crate::cluster_operations::OperationRow;
use crate::error::{TxError, map};
use crate::schema::{cluster_operations as o, operations as q};

/// Each zone's recorded usage against the sum of its live pools, per shard (a shard's rows are
/// the pools of the clusters it holds), where the two differ; summed per zone. The same rule
/// as the trigger that keeps the count: pools being deleted and deleted clusters count nothing.
const ZONE_DRIFT: &str = "\
    WITH actual AS ( \
        SELECT c.zone, kubesvc_zone_shard(c.id) AS shard, sum(p.count)::bigint AS nodes \
        FROM node_pools p JOIN clusters c ON c.id = p.cluster_id \
        WHERE c.deleted_at IS NULL AND p.status <> 'Deleting' \
        GROUP BY 1, 2), \
    diff AS ( \
        SELECT COALESCE(u.zone, a.zone) AS zone, COALESCE(u.nodes, 0) AS recorded, \
               COALESCE(a.nodes, 0) AS actual \
        FROM zone_usage u FULL JOIN actual a ON a.zone = u.zone AND a.shard = u.shard) \
    SELECT zone, sum(recorded)::bigint AS recorded, sum(actual)::bigint AS actual \
    FROM diff GROUP BY zone HAVING bool_or(recorded <> actual) ORDER BY zone";

/// Recounts one zone. The table lock waits for every transaction that changed the zone's usage
/// and holds off new ones until the recount commits, so the pools read are exactly those the
/// count must match.
const ZONE_RECOUNT: [&str; 3] = [
    "LOCK TABLE zone_usage IN EXCLUSIVE MODE",
    "DELETE FROM zone_usage WHERE zone = $1",
    "INSERT INTO zone_usage (zone, shard, nodes) \
     SELECT c.zone, kubesvc_zone_shard(c.id), sum(p.count) \
     FROM node_pools p JOIN clusters c ON c.id = p.cluster_id \
     WHERE c.zone = $1 AND c.deleted_at IS NULL AND p.status <> 'Deleting' \
     GROUP BY c.zone, kubesvc_zone_shard(c.id)",
];

#[derive(QueryableByName)]
struct DriftRow {
    #[diesel(sql_type = Text)]
    zone: String,
    #[diesel(sql_type = BigInt)]
    recorded: i64,
    #[diesel(sql_type = BigInt)]
    actual: i64,
}

#[derive(QueryableByName)]
struct NoCredentialsRow {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    phase: String,
}

#[derive(QueryableByName)]
struct OrphanRow {
    #[diesel(sql_type = SqlUuid)]
    id: Uuid,
    #[diesel(sql_type = SqlUuid)]
    cluster_id: Uuid,
    #[diesel(sql_type = Text)]
    address: String,
}

#[async_trait]
impl MaintenanceStore for PgStore {
    async fn operation(&self, id: Uuid) -> Result<Option<ClusterOperation>, StoreError> {
        self.run_blocking(move |conn| {
            let found: Option<OperationRow> = o::table
                .find(id)
                .select(OperationRow::as_select())
                .first(conn)
                .optional()
                .map_err(map)?;
            found.map(OperationRow::into_domain).transpose()
        })
        .await
    }

    async fn running_operations(
        &self,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<Vec<ClusterOperation>, StoreError> {
        self.run_blocking(move |conn| {
            let rows: Vec<OperationRow> = o::table
                .filter(o::status.eq(OperationStatus::Running.as_str()))
                .filter(o::created_at.lt(before))
                .order((o::created_at.asc(), o::id.asc()))
                .limit(limit)
                .select(OperationRow::as_select())
                .load(conn)
                .map_err(map)?;
            rows.into_iter().map(OperationRow::into_domain).collect()
        })
        .await
    }

    async fn queue_entry(&self, cluster_id: Uuid) -> Result<Option<QueueEntry>, StoreError> {
        type Row = (
            String,
            i64,
            i32,
            Option<String>,
            DateTime<Utc>,
            Option<String>,
            Option<DateTime<Utc>>,
        );
        self.run_blocking(move |conn| {
            let row: Option<Row> = q::table
                .find(cluster_id)
                .select((
                    q::state,
                    q::generation,
                    q::attempts,
                    q::last_error,
                    q::run_after,
                    q::leased_by,
                    q::lease_expires_at,
                ))
                .first(conn)
                .optional()
                .map_err(map)?;
            row.map(
                |(state, generation, attempts, last_error, run_after, by, until)| {
                    Ok(QueueEntry {
                        cluster_id,
                        state: match state.as_str() {
                            "pending" => QueueState::Pending,
                            "running" => QueueState::Running,
                            "done" => QueueState::Done,
                            other => {
                                return Err(StoreError::Internal(format!(
                                    "operations.state holds {other:?}"
                                )));
                            }
                        },
                        generation,
                        attempts,
                        last_error,
                        run_after,
                        leased_by: by,
                        lease_expires_at: until,
                    })
                },
            )
            .transpose()
        })
        .await
    }

    async fn zone_usage_drift(&self) -> Result<Vec<ZoneUsageDrift>, StoreError> {
        self.run_blocking(|conn| {
            let rows: Vec<DriftRow> = diesel::sql_query(ZONE_DRIFT).load(conn).map_err(map)?;
            Ok(rows
                .into_iter()
                .map(|r| ZoneUsageDrift {
                    zone: r.zone,
                    recorded: r.recorded,
                    actual: r.actual,
                })
                .collect())
        })
        .await
    }

    async fn recount_zone_usage(&self, zone: String) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            conn.transaction::<_, TxError, _>(|conn| {
                diesel::sql_query(ZONE_RECOUNT[0]).execute(conn)?;
                for sql in &ZONE_RECOUNT[1..] {
                    diesel::sql_query(*sql)
                        .bind::<Text, _>(&zone)
                        .execute(conn)?;
                }
                Ok(())
            })
            .map_err(StoreError::from)
        })
        .await
    }

    async fn clusters_without_credentials(
        &self,
    ) -> Result<Vec<ClusterWithoutCredentials>, StoreError> {
        self.run_blocking(|conn| {
            let rows: Vec<NoCredentialsRow> = diesel::sql_query(
                "SELECT c.id, c.phase FROM clusters c \
                 WHERE c.deleted_at IS NULL AND c.phase IN ('ControlPlaneReady', 'Provisioned') \
                   AND NOT EXISTS (SELECT 1 FROM cluster_credentials k WHERE k.cluster_id = c.id) \
                 ORDER BY c.created_at, c.id",
            )
            .load(conn)
            .map_err(map)?;
            rows.into_iter()
                .map(|r| {
                    Ok(ClusterWithoutCredentials {
                        cluster_id: r.id,
                        phase: ClusterPhase::parse(&r.phase).ok_or_else(|| {
                            StoreError::Internal(format!("clusters.phase holds {:?}", r.phase))
                        })?,
                    })
                })
                .collect()
        })
        .await
    }

    async fn orphaned_elastic_ips(&self) -> Result<Vec<OrphanedElasticIp>, StoreError> {
        self.run_blocking(|conn| {
            let rows: Vec<OrphanRow> = diesel::sql_query(
                "SELECT e.id, e.cluster_id, e.address FROM elastic_ips e \
                 JOIN clusters c ON c.id = e.cluster_id \
                 WHERE c.deleted_at IS NOT NULL ORDER BY e.created_at, e.id",
            )
            .load(conn)
            .map_err(map)?;
            rows.into_iter()
                .map(|r| {
                    Ok(OrphanedElasticIp {
                        id: r.id,
                        cluster_id: r.cluster_id,
                        address: r.address.parse().map_err(|_| {
                            StoreError::Internal(format!(
                                "elastic_ips.address holds {:?}",
                                r.address
                            ))
                        })?,
                    })
                })
                .collect()
        })
        .await
    }

    async fn remove_orphaned_elastic_ip(&self, id: Uuid) -> Result<bool, StoreError> {
        self.run_blocking(move |conn| {
            let n = diesel::sql_query(
                "DELETE FROM elastic_ips e USING clusters c \
                 WHERE e.id = $1 AND c.id = e.cluster_id AND c.deleted_at IS NOT NULL",
            )
            .bind::<SqlUuid, _>(id)
            .execute(conn)
            .map_err(map)?;
            Ok(n == 1)
        })
        .await
    }
}
