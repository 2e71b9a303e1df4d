//! The data of a scale run, made in bulk: audit events first, on the schema of the release
//! before partitioning, so that the conversion to monthly partitions is measured on them while
//! a writer keeps writing; then clusters cloned by set-based SQL from one cluster written
//! through the store (so every column is what the store writes), their pools, and their
//! operations. Triggers are off while cloning (`session_replication_role = replica`); what
//! they keep is then made exact in one statement (the zone's node counts).

use std::time::{Duration, Instant};

use anyhow::Context;
use diesel::connection::SimpleConnection;
use diesel::pg::PgConnection;
use diesel::{Connection, QueryableByName, RunQueryDsl};
use diesel_migrations::MigrationHarness;
use domain::ports::storage::{ClusterRepository, ClusterWrite};
use store_postgres::{MIGRATIONS, PgStore};
use uuid::Uuid;

use super::Shape;

/// The id of organization `n` (1-based) of the many small ones.
pub fn org_id(n: u32) -> Uuid {
    Uuid::parse_str(&format!("5ca1e000-0000-4000-8000-{n:012x}")).unwrap_or_default()
}

/// The SQL expression of [`org_id`] for the integer expression `n`.
fn org_id_sql(n: &str) -> String {
    format!("('5ca1e000-0000-4000-8000-' || lpad(to_hex({n}), 12, '0'))::uuid")
}

fn connect(url: &str) -> anyhow::Result<PgConnection> {
    PgConnection::establish(url).context("connecting to the scale database")
}

/// What the conversion to monthly partitions cost the writes going on meanwhile.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct Conversion {
    pub events: u64,
    pub seconds: f64,
    /// Writes made while it ran, one at a time by one writer.
    pub writes: u64,
    /// The longest of them: how long the conversion stopped writes at most.
    pub longest_write_ms: f64,
}

/// The migrations as the release before partitioning left them (the conversion is not a
/// migration: it runs at start), then `shape.events` audit events spread over the last 13
/// months, a tenth of them the big organization's.
pub async fn events(url: &str, shape: Shape, big_org: Uuid) -> anyhow::Result<()> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let start = Instant::now();
        let mut conn = connect(&url)?;
        conn.run_pending_migrations(MIGRATIONS)
            .map_err(|e| anyhow::anyhow!("migrations: {e}"))?;
        let orgs = shape.small_orgs().max(1);
        conn.batch_execute(&format!(
            "INSERT INTO audit_events (id, organization_id, actor, action, details, at, \
                 resource, resource_id, actor_client, via, outcome) \
             SELECT gen_random_uuid(), \
                    CASE WHEN i % 10 = 0 THEN '{big_org}'::uuid ELSE {} END, \
                    'scale-user', 'created', '{{}}', \
                    now() - make_interval(secs => (i * 3.1) % (395 * 86400)), \
                    'cluster', i::text, 'api', 'api', 'applied' \
             FROM generate_series(1, {}) i",
            org_id_sql(&format!("1 + i % {orgs}")),
            shape.events
        ))
        .context("inserting the audit events")?;
        conn.batch_execute("ANALYZE audit_events")?;
        crate::say!(
            "{} audit events in {:.0} s",
            shape.events,
            start.elapsed().as_secs_f64()
        );
        Ok(())
    })
    .await
    .context("seed task")?
}

/// Runs the start's migrations (the conversion) while one writer inserts events one by one.
pub async fn convert_under_writes(url: &str, events: u64) -> anyhow::Result<Conversion> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (url, stop) = (url.clone(), stop.clone());
            std::thread::spawn(move || -> anyhow::Result<(u64, Duration)> {
                let mut conn = connect(&url)?;
                let (mut n, mut longest) = (0u64, Duration::ZERO);
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let t = Instant::now();
                    conn.batch_execute(
                        "INSERT INTO audit_events (id, organization_id, actor, action, details, \
                             at, resource, actor_client, via, outcome) \
                         VALUES (gen_random_uuid(), gen_random_uuid(), 'writer', 'created', \
                             '{}', now(), 'cluster', 'api', 'api', 'applied')",
                    )?;
                    longest = longest.max(t.elapsed());
                    n += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Ok((n, longest))
            })
        };
        let start = Instant::now();
        let converted = store_postgres::run_migrations(&url);
        let seconds = start.elapsed().as_secs_f64();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let written = writer
            .join()
            .map_err(|_| anyhow::anyhow!("the writer panicked"))?;
        converted.context("the conversion")?;
        let (writes, longest) = written.context("the writer")?;
        crate::say!(
            "converted {events} events to monthly partitions in {seconds:.1} s; {writes} writes \
             meanwhile, the longest {:.1} ms",
            longest.as_secs_f64() * 1e3
        );
        Ok(Conversion {
            events,
            seconds,
            writes,
            longest_write_ms: longest.as_secs_f64() * 1e3,
        })
    })
    .await
    .context("conversion task")?
}

/// `shape.clusters` clusters: `shape.big` of `big_org` (the first written through the store,
/// the model of the others), the rest 100 to each small organization; 3 pools each; one
/// finished operation each. Returns the seconds it took.
pub async fn clusters(url: &str, shape: Shape, big_org: Uuid) -> anyhow::Result<f64> {
    let start = Instant::now();
    let owned = url.to_owned();
    let store =
        tokio::task::spawn_blocking(move || PgStore::connect(&owned, 2, Duration::from_secs(30)))
            .await
            .context("store task")?
            .context("connecting the store")?;
    let model = crate::run::seed::cluster(0, 3, big_org)?;
    let model_id = model.id;
    store
        .commit(ClusterWrite::insert(model))
        .await
        .context("the model cluster")?;
    drop(store);
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut conn = connect(&url)?;
        // Cluster i (1-based): the first `big - 1` are the big organization's (the model is
        // its first), the rest go 100 to each small organization.
        let sql = format!(
            "SET session_replication_role = replica;
             CREATE TEMP TABLE scale_clusters AS
               SELECT gen_random_uuid() AS id,
                      CASE WHEN i < {big} THEN '{big_org}'::uuid ELSE {org} END AS org,
                      CASE WHEN i < {big} THEN 'acme' ELSE 'org-' || (1 + (i - {big}) / 100) END AS slug,
                      'scale-' || i AS name,
                      timestamptz '2025-01-01' + make_interval(secs => i) AS at
               FROM generate_series(1, {last}) i;
             INSERT INTO clusters
               SELECT (jsonb_populate_record(m, jsonb_build_object(
                   'id', s.id, 'organization_id', s.org, 'organization_slug', s.slug,
                   'name', s.name, 'created_at', s.at, 'updated_at', s.at))).*
               FROM clusters m, scale_clusters s WHERE m.id = '{model_id}';
             INSERT INTO node_pools
               SELECT (jsonb_populate_record(p, jsonb_build_object('cluster_id', s.id))).*
               FROM node_pools p, scale_clusters s WHERE p.cluster_id = '{model_id}';
             INSERT INTO cluster_operations (id, cluster_id, organization_id, kind, resource,
                 resource_id, requested_by, requested_by_client, generation, status, created_at,
                 updated_at, finished_at)
               SELECT gen_random_uuid(), s.id, s.org, 'create', 'cluster', s.id::text,
                      'scale-user', 'api', 1, 'succeeded', now() - make_interval(secs => n),
                      now() - make_interval(secs => n), now() - make_interval(secs => n)
               FROM (SELECT *, row_number() OVER () * 17 % (395 * 86400) AS n
                     FROM scale_clusters) s;
             SET session_replication_role = DEFAULT;
             DELETE FROM zone_usage;
             INSERT INTO zone_usage (zone, shard, nodes)
               SELECT c.zone, kubesvc_zone_shard(c.id), sum(p.count)
               FROM node_pools p JOIN clusters c ON c.id = p.cluster_id
               WHERE p.status <> 'Deleting' GROUP BY 1, 2;
             ANALYZE;",
            big = shape.big,
            org = org_id_sql(&format!("1 + (i - {}) / 100", shape.big)),
            last = shape.clusters.saturating_sub(1),
        );
        conn.batch_execute(&sql).context("cloning the clusters")?;
        Ok::<_, anyhow::Error>(())
    })
    .await
    .context("seed task")??;
    let seconds = start.elapsed().as_secs_f64();
    crate::say!(
        "{} clusters × 3 pools and their operations in {seconds:.0} s",
        shape.clusters
    );
    Ok(seconds)
}

#[derive(QueryableByName)]
struct IdOrg {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    organization_id: Uuid,
}

/// Every cluster's id with its organization.
pub async fn ids(url: &str) -> anyhow::Result<Vec<(Uuid, Uuid)>> {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut conn = connect(&url)?;
        let rows: Vec<IdOrg> =
            diesel::sql_query("SELECT id, organization_id FROM clusters").load(&mut conn)?;
        Ok(rows
            .into_iter()
            .map(|r| (r.id, r.organization_id))
            .collect())
    })
    .await
    .context("ids task")?
}
