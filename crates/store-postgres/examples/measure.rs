//! Measures a cluster get-by-id and a page of 100 clusters (with their pools) when the
//! organization has 10,000 clusters. Run once: `cargo run --release -p store-postgres
//! --features test-support --example measure` (needs the test PostgreSQL server).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use diesel::{Connection, RunQueryDsl};
use domain::ports::storage::{ClusterRepository, Freshness, PageRequest};
use store_postgres::{PgStore, TestDatabase};
use uuid::Uuid;

const CLUSTERS: i64 = 10_000;

fn seed(url: &str, org: Uuid) {
    let mut conn = diesel::pg::PgConnection::establish(url).unwrap();
    diesel::sql_query(format!(
        "INSERT INTO clusters (id, organization_id, organization_slug, name, description, tags, zone, version,
            control_plane_option_id, exposure, network_mode, phase, hub_registration_status,
            default_environment_status, revision, created_at, updated_at)
         SELECT gen_random_uuid(), '{org}', 'acme', 'c-' || i, 'seeded', ARRAY['team-a'], 'zone-1', 'v1.32.4',
            'cp-standard', 'private', 'intranet', 'Provisioned', 'ready', 'ready', 1,
            now() - (i || ' seconds')::interval, now()
         FROM generate_series(1, {CLUSTERS}) AS i"
    ))
    .execute(&mut conn)
    .unwrap();
    // Two pools per cluster, as a real organization would have.
    diesel::sql_query(
        "INSERT INTO node_pools (cluster_id, name, size, count, auto_scale, min_nodes, max_nodes, labels, tags,
            root_volume_size_gib, status, created_at, updated_at)
         SELECT c.id, p.name, 'kube.c5.xlarge', 3, false, 1, 5, '{\"team\": \"a\"}', '{}', 80, 'Ready', c.created_at, now()
         FROM clusters c CROSS JOIN (VALUES ('default'), ('workers')) AS p(name)",
    )
    .execute(&mut conn)
    .unwrap();
    diesel::sql_query("VACUUM ANALYZE")
        .execute(&mut conn)
        .unwrap();
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let mean = samples.iter().sum::<Duration>() / u32::try_from(samples.len()).unwrap();
    let p50 = samples[samples.len() / 2];
    let p95 = samples[samples.len() * 95 / 100];
    println!(
        "{what}: n={} mean={mean:?} p50={p50:?} p95={p95:?}",
        samples.len()
    );
}

#[tokio::main]
async fn main() {
    let db = TestDatabase::create();
    let org = Uuid::new_v4();
    seed(&db.url, org);
    let store = PgStore::connect(&db.url, 4, Duration::from_secs(10)).unwrap();
    let first = store
        .list_clusters(
            org,
            None,
            PageRequest { page: 1, size: 100 },
            Freshness::Latest,
        )
        .await
        .unwrap();
    assert_eq!(first.total, CLUSTERS as u64);
    assert!(first.items.iter().all(|c| c.node_pools.len() == 2));
    let ids: Vec<Uuid> = first.items.iter().map(|c| c.id).collect();

    // Warm-up, then measure.
    for id in &ids {
        store.cluster(*id, Freshness::Latest).await.unwrap();
    }
    let mut by_id = Vec::new();
    for round in 0..5 {
        for id in &ids {
            let t = Instant::now();
            let c = store.cluster(*id, Freshness::Latest).await.unwrap();
            by_id.push(t.elapsed());
            assert!(c.is_some(), "round {round}");
        }
    }
    report("get cluster by id (with pools)", by_id);

    for page in [1, 50, 100] {
        let mut pages = Vec::new();
        for _ in 0..50 {
            let t = Instant::now();
            let p = store
                .list_clusters(
                    org,
                    None,
                    PageRequest { page, size: 100 },
                    Freshness::Latest,
                )
                .await
                .unwrap();
            pages.push(t.elapsed());
            assert_eq!(p.items.len(), 100);
        }
        report(
            &format!("page {page} of 100 clusters with pools (10,000 in the organization)"),
            pages,
        );
    }
}
