//! Item 8: what the watch cache costs in memory. A fresh server process (nothing cached), its
//! VmRSS, then every seeded cluster read once by id and every page of the list, then VmRSS and
//! `cluster_cache_entries` again.

use anyhow::Context;
use futures::StreamExt;
use serde_json::Value;

use super::Bench;
use crate::parse::metric_sum;
use crate::results::CacheRss;

/// GETs in flight at once (the servers' pool size by default).
const CONCURRENCY: usize = 16;

pub async fn run(b: &Bench<'_>) -> anyhow::Result<CacheRss> {
    let s = b.settings;
    crate::say!(
        "item 8: RSS of a fresh server before and after reading {} clusters",
        b.ids.len()
    );
    // Without the prefill, so the cache starts empty and fills from the reads measured: with
    // it, the clusters would be cached before the first RSS is taken.
    let m = b
        .env
        .start_with("rss", 60, "warn", &[("CLUSTER_CACHE_PREFILL", "false")])
        .await?;
    // Lets the process finish starting (its first feed round trip, pool connections).
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let rss_before_kb = m.rss_kb()?;
    let gets: Vec<bool> = futures::stream::iter(&b.ids)
        .map(|id| {
            let req = b
                .http
                .get(format!("{}/v1/public/clusters/{id}", m.url))
                .bearer_auth(b.token);
            async move {
                match req.send().await {
                    Ok(r) => r.status().is_success() && r.bytes().await.is_ok(),
                    Err(_) => false,
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let gets_ok = gets.iter().filter(|ok| **ok).count();
    let mut pages = 0;
    loop {
        let page: Value = b
            .http
            .get(format!(
                "{}/v1/public/clusters?size=100&page={}",
                m.url,
                pages + 1
            ))
            .bearer_auth(b.token)
            .header("X-Platform-Organization", "acme")
            .send()
            .await?
            .error_for_status()?
            .json()
            .await
            .context("a page of the list")?;
        let n = page["items"].as_array().map_or(0, Vec::len);
        if n == 0 {
            break;
        }
        pages += 1;
        if n < 100 {
            break;
        }
    }
    let rss_after_kb = m.rss_kb()?;
    let metrics = m.metrics(&b.http).await?;
    std::fs::write(b.raw.join("cache-rss.metrics.txt"), &metrics)?;
    m.stop().await?;
    let result = CacheRss {
        clusters: s.clusters,
        pools: s.pools,
        gets_ok,
        gets_failed: gets.len() - gets_ok,
        pages,
        rss_before_kb,
        rss_after_kb,
        cache_entries: metric_sum(&metrics, "cluster_cache_entries") as u64,
    };
    std::fs::write(
        b.raw.join("cache-rss.json"),
        serde_json::to_string_pretty(&result)? + "\n",
    )?;
    Ok(result)
}
