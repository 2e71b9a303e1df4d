//! Measures a cluster get-by-id and a page of 100 clusters (with their pools) when the
//! organization has 10,000 clusters. Run once: `cargo run --release -p store-postgres
//! --features test-support --example measure` (needs the test PostgreSQL server).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chrono::Utc;
use diesel::{Connection, RunQueryDsl};
use domain::model::cluster::{Cluster, ClusterPhase, Exposure, NetworkMode, Registration};
use domain::model::node_pool::{NodePool, PoolStatus};
use domain::names::DnsLabel;
use domain::ports::storage::{ClusterRepository, ClusterWrite, Freshness, PageRequest};
use futures::StreamExt;
use store_postgres::{PgStore, TestDatabase};
use uuid::Uuid;

const CLUSTERS: i64 = 10_000;

/// The organization's clusters, committed through the store as the API would (two pools
/// each, as a real organization would have), 16 at a time.
async fn seed(store: &PgStore, url: &str, org: Uuid) {
    let start = Utc::now() - chrono::Duration::seconds(CLUSTERS);
    let clusters = (1..=CLUSTERS).map(|i| {
        let at = start + chrono::Duration::seconds(i);
        let pool = |name: &str| NodePool {
            name: DnsLabel::parse(name).unwrap(),
            size: "kube.c5.xlarge".into(),
            count: 3,
            auto_scale: false,
            min_nodes: 1,
            max_nodes: Some(5),
            labels: BTreeMap::from([("team".to_owned(), "a".to_owned())]),
            taints: Vec::new(),
            tags: BTreeMap::new(),
            root_volume_size_gib: 80,
            version: "v1.32.4".into(),
            surge: domain::model::upgrade::SurgeSettings::DEFAULT,
            status: PoolStatus::Ready,
            created_at: at,
            updated_at: at,
        };
        Cluster {
            id: Uuid::new_v4(),
            organization_id: org,
            organization_slug: "acme".into(),
            name: DnsLabel::parse(&format!("c-{i}")).unwrap(),
            description: Some("seeded".into()),
            tags: vec![DnsLabel::parse("team-a").unwrap()],
            zone: "zone-1".into(),
            version: "v1.32.4".into(),
            control_plane_option_id: "cp-standard".into(),
            exposure: Exposure::Private,
            network_mode: NetworkMode::Intranet,
            phase: ClusterPhase::Provisioned,
            failure_reason: None,
            public_hostname: None,
            api_endpoint: None,
            node_pools: vec![pool("default"), pool("workers")],
            hub_registration: Registration::PENDING,
            default_environment: Registration::PENDING,
            exposure_change: None,
            upgrade: None,
            maintenance_window: Default::default(),
            auto_upgrade: false,
            last_auto_upgrade_window: None,
            control_plane_firewall: Default::default(),
            control_plane_firewall_change: None,
            created_at: at,
            updated_at: at,
            revision: 1,
            deleted_at: None,
        }
    });
    let commits = futures::stream::iter(clusters.map(|c| store.commit(ClusterWrite::insert(c))))
        .buffer_unordered(16);
    commits
        .for_each(|r| {
            r.unwrap();
            async {}
        })
        .await;
    let mut conn = diesel::pg::PgConnection::establish(url).unwrap();
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
    let store = PgStore::connect(&db.url, 16, Duration::from_secs(10)).unwrap();
    let t = Instant::now();
    seed(&store, &db.url, org).await;
    let took = t.elapsed();
    println!(
        "seed: {CLUSTERS} cluster inserts (2 pools each) through the store, 16 at a time: {took:?}, {:.0} commits/s",
        CLUSTERS as f64 / took.as_secs_f64()
    );
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
