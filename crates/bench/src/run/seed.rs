//! The clusters of item 2 (and 1, 4, 5, 7, 8), written through the store
//! (`ClusterRepository::commit`), the path every create of the API takes, so the seed follows
//! the schema and its triggers as they are. The store runs the migrations when it connects.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use chrono::{DateTime, TimeZone, Utc};
use domain::model::cluster::{Cluster, ClusterPhase, Exposure, NetworkMode, Registration};
use domain::model::node_pool::{NodePool, PoolStatus};
use domain::names::DnsLabel;
use domain::ports::storage::{ClusterRepository, ClusterWrite};
use futures::{StreamExt, TryStreamExt};
use store_postgres::PgStore;
use uuid::Uuid;

/// Commits in flight at once.
const CONCURRENCY: usize = 16;

fn label(s: String) -> anyhow::Result<DnsLabel> {
    DnsLabel::parse(&s).map_err(|e| anyhow::anyhow!("{s}: {e}"))
}

/// Cluster `bench-i` of acme: created `i` seconds after 2025-01-01, so the list's order
/// (creation time) is the names' order.
pub fn cluster(i: u32, pools: u32, organization_id: Uuid) -> anyhow::Result<Cluster> {
    let at: DateTime<Utc> = Utc
        .with_ymd_and_hms(2025, 1, 1, 0, 0, 0)
        .single()
        .context("2025-01-01")?
        + chrono::Duration::seconds(i64::from(i));
    let node_pools = (1..=pools)
        .map(|p| {
            Ok(NodePool {
                name: label(format!("pool-{p}"))?,
                size: "kube.c5.large".into(),
                count: 1,
                auto_scale: false,
                min_nodes: 1,
                max_nodes: None,
                labels: BTreeMap::new(),
                taints: Vec::new(),
                tags: BTreeMap::new(),
                root_volume_size_gib: 50,
                version: "v1.32.4".into(),
                surge: domain::model::upgrade::SurgeSettings::DEFAULT,
                status: PoolStatus::Provisioning,
                created_at: at,
                updated_at: at,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Cluster {
        id: Uuid::new_v4(),
        organization_id,
        organization_slug: "acme".into(),
        name: label(format!("bench-{i}"))?,
        description: Some("seeded by make bench".into()),
        tags: Vec::new(),
        zone: "zone-1".into(),
        version: "v1.32.4".into(),
        control_plane_option_id: "cp-standard".into(),
        exposure: Exposure::Private,
        network_mode: NetworkMode::Intranet,
        phase: ClusterPhase::Pending,
        failure_reason: None,
        public_hostname: None,
        api_endpoint: None,
        node_pools,
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
    })
}

/// Seeds `clusters` clusters of `pools` pools each for acme on the database at `url`, then
/// `ANALYZE`; returns their ids in creation order (`bench-1` first).
pub async fn clusters(url: &str, clusters: u32, pools: u32) -> anyhow::Result<Vec<Uuid>> {
    let start = Instant::now();
    let owned = url.to_owned();
    let store = tokio::task::spawn_blocking(move || {
        PgStore::connect(&owned, CONCURRENCY as u32, Duration::from_secs(30))
    })
    .await
    .context("store task")?
    .context("connecting the store (and running the migrations)")?;
    let acme = account_platform::dev::ACME_ID;
    let all = (1..=clusters)
        .map(|i| cluster(i, pools, acme))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let ids: Vec<Uuid> = all.iter().map(|c| c.id).collect();
    futures::stream::iter(all)
        .map(|c| {
            let store = &store;
            async move {
                store
                    .commit(ClusterWrite::insert(c))
                    .await
                    .context("seeding a cluster")
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<i64>>()
        .await?;
    drop(store);
    super::database::analyze(url).await?;
    crate::say!(
        "seeded {clusters} clusters × {pools} pools through the store in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    Ok(ids)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn seeded_clusters_are_what_the_sql_seed_was() {
        let org = account_platform::dev::ACME_ID;
        let c = cluster(3, 2, org).unwrap();
        assert_eq!(c.name.as_str(), "bench-3");
        assert_eq!(c.created_at.to_rfc3339(), "2025-01-01T00:00:03+00:00");
        assert_eq!(
            c.organization_id.to_string(),
            "0a0c0e00-0000-4000-8000-000000000001"
        );
        assert_eq!(
            (c.exposure, c.network_mode),
            (Exposure::Private, NetworkMode::Intranet)
        );
        assert_eq!((c.phase, c.revision), (ClusterPhase::Pending, 1));
        let names: Vec<&str> = c.node_pools.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["pool-1", "pool-2"]);
        assert!(c.node_pools.iter().all(|p| p.size == "kube.c5.large"
            && p.count == 1
            && p.root_volume_size_gib == 50
            && p.status == PoolStatus::Provisioning));
    }
}
