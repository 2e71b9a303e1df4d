//! A cluster's create in one round trip: the write of a new cluster (its zone's capacity
//! checked, its row, its pools, its first operation, the answer on its idempotency key, its
//! change log row, its audit event and the operation clients follow) is one call of the PL/pgSQL function `kubesvc_create_cluster_replayed`, in
//! autocommit. The generic path ([`crate::clusters`]) would send the same work as eight
//! statements, the capacity's read and `BEGIN` to `COMMIT`.
//!
//! The function raises on any failure, so the call commits everything or nothing, like the
//! transaction it replaces; errors map through [`crate::error::map`] as before (a unique
//! violation still names its index).

use diesel::pg::PgConnection;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Binary, Jsonb, Nullable, Text, Uuid as SqlUuid};
use domain::model::cluster::Cluster;
use domain::ports::storage::{Change, ClusterWrite, StoreError};
use serde_json::Value;
use uuid::Uuid;

use crate::error::map;
use crate::rows::{ClusterRow, PoolRow};

diesel::define_sql_function! {
    /// The migration `idempotency_replay` defines it; `true` once everything is written.
    #[allow(clippy::too_many_arguments)]
    fn kubesvc_create_cluster_replayed(
        cluster: Jsonb,
        pools: Jsonb,
        operation_id: Nullable<SqlUuid>,
        request_id: Nullable<Text>,
        key_organization: Nullable<SqlUuid>,
        idempotency_key: Nullable<Text>,
        lease: Nullable<SqlUuid>,
        replay: Nullable<Binary>,
        capacity_zone: Nullable<Text>,
        capacity_adds: Nullable<BigInt>,
        capacity: Nullable<BigInt>,
        audit: Nullable<Jsonb>,
        cluster_operation: Nullable<Jsonb>,
    ) -> Bool;
}

/// What the function raises when the request no longer holds its idempotency key.
const LEASE_LOST: &str = "kubesvc: idempotency lease lost";
/// What the function raises when the zone has no room for the cluster's nodes.
const CAPACITY_EXHAUSTED: &str = "kubesvc: zone capacity exhausted";

/// A write that creates a cluster and does nothing else: the one this module runs.
pub(crate) struct Create<'a> {
    write: &'a ClusterWrite,
    cluster: &'a Cluster,
}

impl<'a> Create<'a> {
    /// The write, when it is exactly a create.
    pub(crate) fn of(write: &'a ClusterWrite) -> Option<Create<'a>> {
        match write.changes.as_slice() {
            [Change::InsertCluster(cluster)]
                if write.expected_revision.is_none() && cluster.id == write.cluster_id =>
            {
                Some(Create { write, cluster })
            }
            _ => None,
        }
    }

    pub(crate) fn organization_id(&self) -> Uuid {
        self.cluster.organization_id
    }

    /// Writes the cluster; its revision is 1.
    pub(crate) fn run(&self, conn: &mut PgConnection) -> Result<(), StoreError> {
        let cluster = to_json(&ClusterRow::from_domain(self.cluster, 1))?;
        let pools = self
            .cluster
            .node_pools
            .iter()
            .map(|p| PoolRow::from_domain(self.cluster.id, p))
            .collect::<Result<Vec<_>, _>>()?;
        let pools = to_json(&pools)?;
        let audit = self
            .write
            .audit
            .as_ref()
            .map(crate::audit::to_json)
            .transpose()?;
        // The create schedules the cluster's first work: generation 1.
        let operation = self
            .write
            .operation
            .as_ref()
            .map(|op| crate::cluster_operations::to_json(op, 1))
            .transpose()?;
        let key = self.write.idempotency.as_ref();
        let limit = self.write.zone_capacity.as_ref();
        let done: bool = diesel::select(kubesvc_create_cluster_replayed(
            cluster,
            pools,
            self.write.reconcile.then(Uuid::new_v4),
            self.write.cause.as_deref(),
            key.map(|k| k.scope.organization_id),
            key.map(|k| k.scope.key.as_str()),
            key.map(|k| k.lease_id),
            key.map(|k| k.replay.0.as_slice()),
            limit.map(|z| z.zone.as_str()),
            limit.map(|z| clamp(z.adds)),
            limit.map(|z| clamp(z.capacity)),
            audit,
            operation,
        ))
        .get_result(conn)
        .map_err(|e| match &e {
            diesel::result::Error::DatabaseError(_, info) if info.message() == LEASE_LOST => {
                StoreError::LeaseLost
            }
            diesel::result::Error::DatabaseError(_, info)
                if info.message() == CAPACITY_EXHAUSTED =>
            {
                StoreError::CapacityExhausted
            }
            _ => map(e),
        })?;
        if done {
            Ok(())
        } else {
            Err(StoreError::Internal(
                "kubesvc_create_cluster_replayed answered false".into(),
            ))
        }
    }
}

/// A count as PostgreSQL's bigint; no zone holds 2^63 nodes, so the clamp never changes one.
pub(crate) fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_json<T: serde::Serialize>(row: &T) -> Result<Value, StoreError> {
    serde_json::to_value(row).map_err(|e| StoreError::Internal(format!("row to JSON: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `kubesvc_create_cluster_replayed` fills each column from the JSON key of its name and leaves a
    /// column without one NULL (not its default): the rows' fields and the tables' columns must
    /// be the same names, in both directions.
    #[cfg(feature = "test-support")]
    #[test]
    fn the_rows_as_json_name_every_column_of_their_tables() {
        use domain::model::cluster::ClusterPhase;
        use std::collections::BTreeSet;

        #[derive(diesel::QueryableByName)]
        struct Column {
            #[diesel(sql_type = Text)]
            column_name: String,
        }
        let db = crate::TestDatabase::create();
        let mut conn = PgConnection::establish(&db.url).unwrap_or_else(|e| panic!("{e}"));
        let columns = |conn: &mut PgConnection, table: &str| -> BTreeSet<String> {
            diesel::sql_query(
                "SELECT column_name::text FROM information_schema.columns WHERE table_name = $1",
            )
            .bind::<Text, _>(table)
            .load::<Column>(conn)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|c| c.column_name)
            .collect()
        };
        let keys = |row: Value| -> BTreeSet<String> {
            row.as_object()
                .unwrap_or_else(|| panic!("{row} is not an object"))
                .keys()
                .cloned()
                .collect()
        };
        let cluster = domain::testing::cluster(Uuid::new_v4(), ClusterPhase::Pending);
        let pool = PoolRow::from_domain(cluster.id, &cluster.node_pools[0])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            keys(to_json(&ClusterRow::from_domain(&cluster, 1)).unwrap_or_else(|e| panic!("{e}"))),
            columns(&mut conn, "clusters")
        );
        assert_eq!(
            keys(to_json(&pool).unwrap_or_else(|e| panic!("{e}"))),
            columns(&mut conn, "node_pools")
        );
    }
}
