//! `ClusterRepository`: clusters and everything under them. A write is one transaction that
//! raises the cluster's revision (compare-and-set on the revision read), applies every change,
//! schedules the reconcile, completes the idempotency key and records the change in
//! `cluster_change_log`, or does nothing. The change notification goes out after the commit
//! (`notifier`), never from inside the transaction.

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;

use async_trait::async_trait;
use diesel::dsl::sql;
use diesel::pg::PgConnection;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Text};
use domain::model::cluster::{Cluster, ClusterPhase, Exposure};
use domain::model::elastic_ip::{ElasticIp, ElasticIpStatus};
use domain::model::firewall::FirewallRule;
use domain::model::kubeconfig::SealedCredentials;
use domain::model::maintenance_window::{OpenWindows, format_start_time};
use domain::model::node::Node;
use domain::model::secret::SealedSecret;
use domain::ports::storage::{
    Change, ClusterRepository, ClusterWrite, Freshness, Page, PageRequest, StoreError,
};
use uuid::Uuid;

use crate::PgStore;
use crate::create::Create;
use crate::error::{TxError, corrupt, map};
use crate::idempotency::complete_in;
use crate::rows::{
    ClusterRow, ClusterUpdate, ElasticIpRow, FirewallRuleRow, NodeRow, PoolRow, parse_address,
};
use crate::schema::{
    cluster_change_log, cluster_credentials, clusters, elastic_ips, firewall_rules, node_pools,
    nodes, operations, zone_usage,
};
use crate::watch_cache::{Membership, OrgIndex};

/// Reads that take more than one statement see one snapshot: a page's clusters and pools, or a
/// cluster and its pools, are never torn by a concurrent write.
fn snapshot<T>(
    conn: &mut PgConnection,
    f: impl FnOnce(&mut PgConnection) -> Result<T, TxError>,
) -> Result<T, StoreError> {
    conn.build_transaction()
        .repeatable_read()
        .read_only()
        .run(f)
        .map_err(StoreError::from)
}

fn into_cluster(row: ClusterRow, pools: Vec<PoolRow>) -> Result<Cluster, StoreError> {
    let pools = pools
        .into_iter()
        .map(PoolRow::into_domain)
        .collect::<Result<_, _>>()?;
    row.into_domain(pools)
}

fn not_found(what: &str, id: impl std::fmt::Display) -> TxError {
    TxError::Store(StoreError::Internal(format!("{what} {id} not found")))
}

/// Fails when an update or delete that the domain decided on matched no row.
fn one_row(n: usize, what: &str, id: impl std::fmt::Display) -> Result<(), TxError> {
    if n == 1 {
        Ok(())
    } else {
        Err(not_found(what, id))
    }
}

/// Asks for a reconcile: a new operation, or a raised generation on the cluster's one. A
/// running operation stays running; its worker's `finish` sees the new generation and leaves
/// it pending, so the new work is never lost. The request that asked (when one did) is kept
/// for the reconciler's log lines.
fn schedule_reconcile(
    conn: &mut PgConnection,
    cluster_id: Uuid,
    request_id: Option<&str>,
) -> Result<i64, TxError> {
    #[derive(QueryableByName)]
    struct Scheduled {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        generation: i64,
    }
    let scheduled: Scheduled = diesel::sql_query(
        "INSERT INTO operations (cluster_id, id, state, generation, run_after, attempts, created_at, updated_at, request_id) \
         VALUES ($1, $2, 'pending', 1, now(), 0, now(), now(), $3) \
         ON CONFLICT (cluster_id) DO UPDATE SET \
           generation = operations.generation + 1, \
           state = CASE WHEN operations.state = 'running' THEN 'running' ELSE 'pending' END, \
           run_after = now(), \
           attempts = CASE WHEN operations.state = 'done' THEN 0 ELSE operations.attempts END, \
           last_error = CASE WHEN operations.state = 'done' THEN NULL ELSE operations.last_error END, \
           request_id = COALESCE(EXCLUDED.request_id, operations.request_id), \
           updated_at = now() \
         RETURNING generation",
    )
    .bind::<diesel::sql_types::Uuid, _>(cluster_id)
    .bind::<diesel::sql_types::Uuid, _>(Uuid::new_v4())
    .bind::<diesel::sql_types::Nullable<diesel::sql_types::Text>, _>(request_id)
    .get_result(conn)?;
    Ok(scheduled.generation)
}

/// Raises the cluster's revision (compare-and-set when `expected` is given); returns the new
/// revision and the cluster's organization (for the notification).
fn raise_revision(
    conn: &mut PgConnection,
    id: Uuid,
    expected: Option<i64>,
) -> Result<(i64, Uuid), TxError> {
    let target = clusters::table.filter(clusters::id.eq(id));
    let returning = (clusters::revision, clusters::organization_id);
    let raised: Option<(i64, Uuid)> = match expected {
        Some(expected) => diesel::update(target.filter(clusters::revision.eq(expected)))
            .set(clusters::revision.eq(clusters::revision + 1))
            .returning(returning)
            .get_result(conn)
            .optional()?,
        None => diesel::update(target)
            .set(clusters::revision.eq(clusters::revision + 1))
            .returning(returning)
            .get_result(conn)
            .optional()?,
    };
    match (raised, expected) {
        (Some(r), _) => Ok(r),
        (None, Some(_)) => Err(StoreError::RevisionMismatch.into()),
        (None, None) => Err(not_found("cluster", id)),
    }
}

fn apply(conn: &mut PgConnection, w: &ClusterWrite, change: &Change) -> Result<(), TxError> {
    let cid = w.cluster_id;
    match change {
        Change::InsertCluster(c) => {
            if c.id != cid {
                return Err(
                    StoreError::Internal("InsertCluster for another cluster id".into()).into(),
                );
            }
            diesel::insert_into(clusters::table)
                .values(ClusterRow::from_domain(c, 1))
                .execute(conn)?;
            let pools = c
                .node_pools
                .iter()
                .map(|p| PoolRow::from_domain(cid, p))
                .collect::<Result<Vec<_>, _>>()?;
            diesel::insert_into(node_pools::table)
                .values(&pools)
                .execute(conn)?;
        }
        Change::UpdateCluster(c) => {
            if c.id != cid {
                return Err(
                    StoreError::Internal("UpdateCluster for another cluster id".into()).into(),
                );
            }
            let n = diesel::update(clusters::table.find(cid))
                .set(ClusterUpdate::from(ClusterRow::from_domain(c, 1)))
                .execute(conn)?;
            one_row(n, "cluster", cid)?;
        }
        Change::RemoveCluster => {
            // Nodes first (they reference pools), then every other child; an Elastic IP row
            // gone frees its address for the pool.
            diesel::delete(nodes::table.filter(nodes::cluster_id.eq(cid))).execute(conn)?;
            diesel::delete(node_pools::table.filter(node_pools::cluster_id.eq(cid)))
                .execute(conn)?;
            diesel::delete(elastic_ips::table.filter(elastic_ips::cluster_id.eq(cid)))
                .execute(conn)?;
            diesel::delete(firewall_rules::table.filter(firewall_rules::cluster_id.eq(cid)))
                .execute(conn)?;
            diesel::delete(
                cluster_credentials::table.filter(cluster_credentials::cluster_id.eq(cid)),
            )
            .execute(conn)?;
            diesel::delete(operations::table.filter(operations::cluster_id.eq(cid)))
                .execute(conn)?;
            let n = diesel::update(clusters::table.find(cid))
                .set((clusters::deleted_at.eq(w.at), clusters::updated_at.eq(w.at)))
                .execute(conn)?;
            one_row(n, "cluster", cid)?;
        }
        Change::InsertPool(p) => {
            diesel::insert_into(node_pools::table)
                .values(PoolRow::from_domain(cid, p)?)
                .execute(conn)?;
        }
        Change::UpdatePool(p) => {
            let n = diesel::update(node_pools::table.find((cid, p.name.as_str())))
                .set(PoolRow::from_domain(cid, p)?)
                .execute(conn)?;
            one_row(n, "node pool", &p.name)?;
        }
        Change::DeletePool(name) => {
            // The pool's nodes go with it (ON DELETE CASCADE).
            let n = diesel::delete(node_pools::table.find((cid, name.as_str()))).execute(conn)?;
            one_row(n, "node pool", name)?;
        }
        Change::InsertNode(node) => {
            diesel::insert_into(nodes::table)
                .values(NodeRow::from_domain(cid, node))
                .execute(conn)?;
        }
        Change::UpdateNode(node) => {
            let n = diesel::update(nodes::table.find((cid, node.name.as_str())))
                .set(NodeRow::from_domain(cid, node))
                .execute(conn)?;
            one_row(n, "node", &node.name)?;
        }
        Change::DeleteNode(name) => {
            let n = diesel::delete(nodes::table.find((cid, name.as_str()))).execute(conn)?;
            one_row(n, "node", name)?;
        }
        Change::InsertElasticIp(e) => {
            diesel::insert_into(elastic_ips::table)
                .values(ElasticIpRow::from_domain(cid, e))
                .execute(conn)?;
        }
        Change::UpdateElasticIp(e) => {
            let n = diesel::update(
                elastic_ips::table
                    .filter(elastic_ips::id.eq(e.id))
                    .filter(elastic_ips::cluster_id.eq(cid)),
            )
            .set(ElasticIpRow::from_domain(cid, e))
            .execute(conn)?;
            one_row(n, "Elastic IP", e.id)?;
        }
        Change::DeleteElasticIp(id) => {
            let n = diesel::delete(
                elastic_ips::table
                    .filter(elastic_ips::id.eq(id))
                    .filter(elastic_ips::cluster_id.eq(cid)),
            )
            .execute(conn)?;
            one_row(n, "Elastic IP", id)?;
        }
        Change::InsertFirewallRule(r) => {
            diesel::insert_into(firewall_rules::table)
                .values(FirewallRuleRow::from_domain(cid, r))
                .execute(conn)?;
        }
        Change::UpdateFirewallRule(r) => {
            let n = diesel::update(
                firewall_rules::table
                    .filter(firewall_rules::id.eq(r.id))
                    .filter(firewall_rules::cluster_id.eq(cid)),
            )
            .set(FirewallRuleRow::from_domain(cid, r))
            .execute(conn)?;
            one_row(n, "firewall rule", r.id)?;
        }
        Change::DeleteFirewallRule(id) => {
            let n = diesel::delete(
                firewall_rules::table
                    .filter(firewall_rules::id.eq(id))
                    .filter(firewall_rules::cluster_id.eq(cid)),
            )
            .execute(conn)?;
            one_row(n, "firewall rule", id)?;
        }
        Change::SetCredentials(c) => {
            diesel::insert_into(cluster_credentials::table)
                .values((
                    cluster_credentials::cluster_id.eq(cid),
                    cluster_credentials::ca_certificate_pem.eq(&c.ca_certificate_pem),
                    cluster_credentials::sealed_token.eq(&c.token.0),
                ))
                .on_conflict(cluster_credentials::cluster_id)
                .do_update()
                .set((
                    cluster_credentials::ca_certificate_pem.eq(&c.ca_certificate_pem),
                    cluster_credentials::sealed_token.eq(&c.token.0),
                ))
                .execute(conn)?;
        }
    }
    Ok(())
}

/// What a committed write did, for the change feed's notification and the watch cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Committed {
    pub revision: i64,
    pub organization_id: Uuid,
    pub membership: Membership,
}

impl Committed {
    /// How `cluster_change_log` and the notification's payload name the membership.
    fn membership_word(&self) -> &'static str {
        match self.membership {
            Membership::Created => "created",
            Membership::Removed => "removed",
            Membership::Unchanged | Membership::Unknown => "changed",
        }
    }
}

/// The change notification's payload: `<cluster>:<revision>:<organization>:<membership>`,
/// membership one of `created`, `removed`, `changed`. (A payload of only the first two parts,
/// from an older server, is still understood.)
pub(crate) fn payload(cluster_id: Uuid, c: &Committed) -> String {
    format!(
        "{cluster_id}:{}:{}:{}",
        c.revision,
        c.organization_id,
        c.membership_word()
    )
}

/// Records the change in `cluster_change_log`, in the write's transaction: the feed of every
/// process reads it from there when no notification told it (see the migration that made it).
fn log_change(conn: &mut PgConnection, cluster_id: Uuid, c: &Committed) -> Result<(), TxError> {
    // The query builder rather than `sql_query`: diesel prepares it once per connection.
    diesel::insert_into(cluster_change_log::table)
        .values((
            cluster_change_log::cluster_id.eq(cluster_id),
            cluster_change_log::revision.eq(c.revision),
            cluster_change_log::organization_id.eq(c.organization_id),
            cluster_change_log::membership.eq(c.membership_word()),
        ))
        .execute(conn)?;
    Ok(())
}

/// The nodes the live clusters of a zone ask for: the sum of its rows of `zone_usage` (at most
/// 64, kept by a trigger on node_pools; spread so that creates do not queue on one). Summed
/// here rather than by `sum()` in SQL: the query builder's statement is prepared once per
/// connection, a `sql_query` is parsed and planned on every call.
fn zone_demand(conn: &mut PgConnection, zone: &str) -> QueryResult<i64> {
    let rows: Vec<i64> = zone_usage::table
        .filter(zone_usage::zone.eq(zone))
        .select(zone_usage::nodes)
        .load(conn)?;
    Ok(rows.iter().sum())
}

fn commit_in(conn: &mut PgConnection, w: &ClusterWrite) -> Result<Committed, TxError> {
    let inserted = w.changes.iter().find_map(|c| match c {
        Change::InsertCluster(c) => Some(c.organization_id),
        _ => None,
    });
    let (revision, organization_id) = match (inserted, w.expected_revision) {
        (Some(org), None) => (1, org),
        _ => raise_revision(conn, w.cluster_id, w.expected_revision)?,
    };
    // After the revision's compare-and-set: a write decided on a stale cluster is decided
    // again (RevisionMismatch) rather than refused for a capacity it may not need.
    if let Some(limit) = &w.zone_capacity {
        let demand = zone_demand(conn, &limit.zone)?;
        if !limit.admits(u64::try_from(demand).unwrap_or(0)) {
            return Err(StoreError::CapacityExhausted.into());
        }
    }
    for change in &w.changes {
        apply(conn, w, change)?;
    }
    let removed = w.changes.iter().any(|c| matches!(c, Change::RemoveCluster));
    if w.reconcile && !removed {
        let generation = schedule_reconcile(conn, w.cluster_id, w.cause.as_deref())?;
        if let Some(op) = &w.operation {
            crate::cluster_operations::insert_in(conn, op, generation)?;
        }
    }
    if let Some(completion) = &w.idempotency {
        complete_in(conn, completion)?;
    }
    if let Some(event) = &w.audit {
        crate::audit::insert_in(conn, event)?;
    }
    let committed = Committed {
        revision,
        organization_id,
        membership: if inserted.is_some() {
            Membership::Created
        } else if removed {
            Membership::Removed
        } else {
            Membership::Unchanged
        },
    };
    log_change(conn, w.cluster_id, &committed)?;
    Ok(committed)
}

/// Clusters with their pools, in one snapshot.
fn load_clusters(
    conn: &mut PgConnection,
    filter: impl FnOnce(
        clusters::BoxedQuery<'static, diesel::pg::Pg>,
    ) -> clusters::BoxedQuery<'static, diesel::pg::Pg>,
) -> Result<Vec<Cluster>, StoreError> {
    let (rows, pools) = snapshot(conn, |conn| {
        let rows: Vec<ClusterRow> = filter(clusters::table.into_boxed())
            .select(ClusterRow::as_select())
            .load(conn)?;
        if rows.is_empty() {
            return Ok((rows, Vec::new()));
        }
        let pools = pools_of(conn, rows.iter().map(|r| r.id).collect())?;
        Ok((rows, pools))
    })?;
    assemble(rows, pools)
}

/// The pools of these clusters, each cluster's in their order.
fn pools_of(conn: &mut PgConnection, ids: Vec<Uuid>) -> QueryResult<Vec<PoolRow>> {
    node_pools::table
        .filter(node_pools::cluster_id.eq_any(ids))
        .order((
            node_pools::cluster_id,
            node_pools::created_at.asc(),
            node_pools::name.asc(),
        ))
        .select(PoolRow::as_select())
        .load(conn)
}

/// Clusters in the rows' order, each with its pools.
fn assemble(rows: Vec<ClusterRow>, pools: Vec<PoolRow>) -> Result<Vec<Cluster>, StoreError> {
    let mut by_cluster: HashMap<Uuid, Vec<PoolRow>> = HashMap::new();
    for p in pools {
        by_cluster.entry(p.cluster_id).or_default().push(p);
    }
    rows.into_iter()
        .map(|r| {
            let pools = by_cluster.remove(&r.id).unwrap_or_default();
            into_cluster(r, pools)
        })
        .collect()
}

/// Reads the watch cache needs beyond the port's.
impl PgStore {
    /// Applies a write like [`ClusterRepository::commit`], saying what it did.
    pub(crate) async fn commit_write(&self, write: ClusterWrite) -> Result<Committed, StoreError> {
        let cluster_id = write.cluster_id;
        let committed = self
            .run_blocking(move |conn| match Create::of(&write) {
                // The hottest write, in one round trip instead of seven.
                Some(create) => {
                    create.run(conn)?;
                    Ok(Committed {
                        revision: 1,
                        organization_id: create.organization_id(),
                        membership: Membership::Created,
                    })
                }
                None => conn
                    .transaction(|conn| commit_in(conn, &write))
                    .map_err(StoreError::from),
            })
            .await?;
        self.notifier.ring(payload(cluster_id, &committed));
        Ok(committed)
    }

    /// The clusters of these ids that exist (tombstones included), in no particular order.
    pub(crate) async fn clusters_by_ids(&self, ids: Vec<Uuid>) -> Result<Vec<Cluster>, StoreError> {
        self.run_blocking(move |conn| {
            load_clusters(conn, |q| q.filter(clusters::id.eq_any(ids.clone())))
        })
        .await
    }

    /// Up to `limit` live clusters with their pools, in id order, after `after`: the watch
    /// cache's prefill walks the fleet with it (keyset pages, so each costs the same).
    pub(crate) async fn live_clusters_after(
        &self,
        after: Option<Uuid>,
        limit: u32,
    ) -> Result<Vec<Cluster>, StoreError> {
        self.run_blocking(move |conn| {
            load_clusters(conn, |q| {
                let q = q.filter(clusters::deleted_at.is_null());
                let q = match after {
                    Some(after) => q.filter(clusters::id.gt(after)),
                    None => q,
                };
                q.order(clusters::id.asc()).limit(i64::from(limit))
            })
        })
        .await
    }

    /// Every live cluster of an organization, as its list index (one index-only scan).
    pub(crate) async fn org_index(&self, organization_id: Uuid) -> Result<OrgIndex, StoreError> {
        self.run_blocking(move |conn| {
            let rows: Vec<(Uuid, chrono::DateTime<chrono::Utc>, String)> = clusters::table
                .filter(clusters::organization_id.eq(organization_id))
                .filter(clusters::deleted_at.is_null())
                .select((clusters::id, clusters::created_at, clusters::zone))
                .load(conn)
                .map_err(map)?;
            let mut index = OrgIndex::default();
            for (id, created_at, zone) in rows {
                index.insert(id, created_at, &zone);
            }
            Ok(index)
        })
        .await
    }
}

#[async_trait]
impl ClusterRepository for PgStore {
    async fn cluster(&self, id: Uuid, _: Freshness) -> Result<Option<Cluster>, StoreError> {
        // One statement (a left join) is one round trip and one consistent snapshot: the
        // hottest read of the API.
        self.run_blocking(move |conn| {
            let rows: Vec<(ClusterRow, Option<PoolRow>)> = clusters::table
                .left_join(node_pools::table)
                .filter(clusters::id.eq(id))
                .order((node_pools::created_at.asc(), node_pools::name.asc()))
                .select((ClusterRow::as_select(), Option::<PoolRow>::as_select()))
                .load(conn)
                .map_err(map)?;
            let mut rows = rows.into_iter();
            let Some((row, first)) = rows.next() else {
                return Ok(None);
            };
            let pools: Vec<PoolRow> = first
                .into_iter()
                .chain(rows.filter_map(|(_, p)| p))
                .collect();
            into_cluster(row, pools).map(Some)
        })
        .await
    }

    async fn list_clusters(
        &self,
        organization_id: Uuid,
        zone: Option<String>,
        page: PageRequest,
        _: Freshness,
    ) -> Result<Page<Cluster>, StoreError> {
        let limit = i64::from(page.size);
        let offset = i64::try_from(page.offset())
            .map_err(|_| StoreError::Internal("page offset overflow".into()))?;
        self.run_blocking(move |conn| {
            let (rows, total, pools) = snapshot(conn, |conn| {
                let filtered = || {
                    let mut q = clusters::table
                        .filter(clusters::organization_id.eq(organization_id))
                        .filter(clusters::deleted_at.is_null())
                        .into_boxed();
                    if let Some(z) = &zone {
                        q = q.filter(clusters::zone.eq(z.clone()));
                    }
                    q
                };
                // The total rides along on every row as a scalar subquery
                // (computed once, from the list index alone), so a page costs two statements:
                // this one and the pools of all its clusters. A window `count(*) OVER ()`
                // would read every row of the organization in full instead.
                let total_sql =
                    sql::<BigInt>("(SELECT count(*) FROM clusters t WHERE t.organization_id = ")
                        .bind::<diesel::sql_types::Uuid, _>(organization_id)
                        .sql(" AND t.deleted_at IS NULL AND (")
                        .bind::<diesel::sql_types::Nullable<Text>, _>(zone.clone())
                        .sql("::text IS NULL OR t.zone = ")
                        .bind::<diesel::sql_types::Nullable<Text>, _>(zone.clone())
                        .sql("))");
                // The page's ids first, skipping `offset` entries of the list index alone (an
                // index-only scan), then their rows: an OFFSET over whole rows would fetch every
                // skipped row from the table (page 100 of 10,000 took 3.4 times page 1).
                let page_ids = filtered()
                    .order((clusters::created_at.asc(), clusters::id.asc()))
                    .limit(limit)
                    .offset(offset)
                    .select(clusters::id);
                let rows: Vec<(ClusterRow, i64)> = clusters::table
                    .filter(clusters::id.eq_any(page_ids))
                    .order((clusters::created_at.asc(), clusters::id.asc()))
                    .select((ClusterRow::as_select(), total_sql))
                    .load(conn)?;
                let Some(&(_, total)) = rows.first() else {
                    // Past the last page (or none at all): count instead of loading pools.
                    let total: i64 = if offset == 0 {
                        0
                    } else {
                        filtered().count().get_result(conn)?
                    };
                    return Ok((Vec::new(), total, Vec::new()));
                };
                let pools = pools_of(conn, rows.iter().map(|(r, _)| r.id).collect())?;
                Ok((rows.into_iter().map(|(r, _)| r).collect(), total, pools))
            })?;
            let items = assemble(rows, pools)?;
            let total = u64::try_from(total).map_err(|_| corrupt("count", &total.to_string()))?;
            Ok(Page { items, total })
        })
        .await
    }

    /// `None` for an unknown cluster and for a tombstone (gone for every read).
    async fn revision(&self, id: Uuid) -> Result<Option<(i64, ClusterPhase)>, StoreError> {
        self.run_blocking(move |conn| {
            let row: Option<(i64, String)> = clusters::table
                .find(id)
                .filter(clusters::deleted_at.is_null())
                .select((clusters::revision, clusters::phase))
                .first(conn)
                .optional()
                .map_err(map)?;
            row.map(|(r, phase)| match ClusterPhase::parse(&phase) {
                Some(p) => Ok((r, p)),
                None => Err(corrupt("phase", &phase)),
            })
            .transpose()
        })
        .await
    }

    async fn nodes(&self, cluster_id: Uuid, pool: Option<String>) -> Result<Vec<Node>, StoreError> {
        self.run_blocking(move |conn| {
            let mut q = nodes::table
                .filter(nodes::cluster_id.eq(cluster_id))
                .into_boxed();
            if let Some(pool) = pool.clone() {
                q = q.filter(nodes::pool.eq(pool));
            }
            let rows: Vec<NodeRow> = q
                .order(nodes::name.asc())
                .select(NodeRow::as_select())
                .load(conn)
                .map_err(map)?;
            rows.into_iter().map(NodeRow::into_domain).collect()
        })
        .await
    }

    async fn elastic_ips(&self, cluster_id: Uuid) -> Result<Vec<ElasticIp>, StoreError> {
        self.run_blocking(move |conn| {
            let rows: Vec<ElasticIpRow> = elastic_ips::table
                .filter(elastic_ips::cluster_id.eq(cluster_id))
                .order((elastic_ips::created_at.asc(), elastic_ips::id.asc()))
                .select(ElasticIpRow::as_select())
                .load(conn)
                .map_err(map)?;
            rows.into_iter().map(ElasticIpRow::into_domain).collect()
        })
        .await
    }

    async fn auto_upgrade_candidates(
        &self,
        open: &[OpenWindows],
        limit: u32,
    ) -> Result<Vec<Uuid>, StoreError> {
        if open.is_empty() {
            return Ok(Vec::new());
        }
        // One clause per open window set; its bounds are the domain's (`open_windows`), so
        // the rule of when a window is open stays there. Start times are `HH:MM` text, which
        // orders as the times do.
        let mut windows = Vec::with_capacity(open.len());
        for (i, _) in open.iter().enumerate() {
            let n = 2 + i * 4;
            windows.push(format!(
                "(maintenance_day IN ('any', ${n}) \
                  AND maintenance_start_time BETWEEN ${} AND ${} \
                  AND (last_auto_upgrade_window IS NULL \
                       OR last_auto_upgrade_window < \
                          (${}::date + maintenance_start_time::time) AT TIME ZONE 'UTC'))",
                n + 1,
                n + 2,
                n + 3
            ));
        }
        let sql = format!(
            "SELECT id FROM clusters \
             WHERE auto_upgrade AND deleted_at IS NULL AND phase = $1 AND upgrade_to IS NULL \
               AND ({}) \
             ORDER BY updated_at, id LIMIT {}",
            windows.join(" OR "),
            limit
        );
        let open = open.to_vec();
        self.run_blocking(move |conn| {
            #[derive(QueryableByName)]
            struct Id {
                #[diesel(sql_type = diesel::sql_types::Uuid)]
                id: Uuid,
            }
            let mut q = diesel::sql_query(sql.clone())
                .into_boxed::<diesel::pg::Pg>()
                .bind::<Text, _>(ClusterPhase::Provisioned.as_str());
            for o in &open {
                q = q
                    .bind::<Text, _>(o.weekday.as_str())
                    .bind::<Text, _>(format_start_time(o.from))
                    .bind::<Text, _>(format_start_time(o.to))
                    .bind::<Text, _>(o.date.to_string());
            }
            let ids: Vec<Id> = q.load(conn).map_err(map)?;
            Ok(ids.into_iter().map(|r| r.id).collect())
        })
        .await
    }

    async fn firewall_rules(&self, cluster_id: Uuid) -> Result<Vec<FirewallRule>, StoreError> {
        self.run_blocking(move |conn| {
            let rows: Vec<FirewallRuleRow> = firewall_rules::table
                .filter(firewall_rules::cluster_id.eq(cluster_id))
                .order((firewall_rules::created_at.asc(), firewall_rules::id.asc()))
                .select(FirewallRuleRow::as_select())
                .load(conn)
                .map_err(map)?;
            rows.into_iter().map(FirewallRuleRow::into_domain).collect()
        })
        .await
    }

    async fn addresses_in_use(&self, exposure: Exposure) -> Result<HashSet<Ipv4Addr>, StoreError> {
        self.run_blocking(move |conn| {
            let rows: Vec<String> = elastic_ips::table
                .filter(elastic_ips::exposure.eq(exposure.as_str()))
                .filter(elastic_ips::status.ne(ElasticIpStatus::Deleted.as_str()))
                .select(elastic_ips::address)
                .load(conn)
                .map_err(map)?;
            rows.iter().map(|a| parse_address(a)).collect()
        })
        .await
    }

    async fn zone_node_demand(&self, zone: String) -> Result<u64, StoreError> {
        self.run_blocking(move |conn| {
            let sum = zone_demand(conn, &zone).map_err(map)?;
            u64::try_from(sum).map_err(|_| corrupt("node demand", &sum.to_string()))
        })
        .await
    }

    async fn credentials(&self, cluster_id: Uuid) -> Result<Option<SealedCredentials>, StoreError> {
        self.run_blocking(move |conn| {
            let row: Option<(String, String)> = cluster_credentials::table
                .find(cluster_id)
                .select((
                    cluster_credentials::ca_certificate_pem,
                    cluster_credentials::sealed_token,
                ))
                .first(conn)
                .optional()
                .map_err(map)?;
            Ok(row.map(|(ca, token)| SealedCredentials {
                ca_certificate_pem: ca,
                token: SealedSecret(token),
            }))
        })
        .await
    }

    async fn commit(&self, write: ClusterWrite) -> Result<i64, StoreError> {
        Ok(self.commit_write(write).await?.revision)
    }
}
