//! Item 10: the time a 3-pool, 9-node cluster takes to upgrade with the simulated provider's
//! steps at their default delay, and what the server (and PostgreSQL) spend per node replaced.
//! A server of its own, with provisioning workers on; the cluster is made through the API and
//! left Provisioned first, so only the upgrade is measured.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::{Value, json};

use super::Bench;
use super::cpu::CpuClock;
use crate::results::Upgrade;

/// `PROVISIONER_STEP_MS`'s default, the delay every simulated step takes.
const DEFAULT_STEP_MS: u64 = 500;
const POOLS: u32 = 3;
const NODES_PER_POOL: u32 = 3;
const POLL: Duration = Duration::from_millis(100);

async fn cluster(b: &Bench<'_>, url: &str) -> anyhow::Result<Value> {
    Ok(b.http
        .get(url)
        .bearer_auth(b.token)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?)
}

/// Polls the cluster at `url` until `done` holds, for at most `limit`.
async fn wait(
    b: &Bench<'_>,
    url: &str,
    limit: Duration,
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        if done(&cluster(b, url).await?) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the cluster was never {what} within {limit:?}");
        }
        tokio::time::sleep(POLL).await;
    }
}

pub async fn run(b: &Bench<'_>) -> anyhow::Result<Upgrade> {
    let server = b
        .env
        .start_with("upgrade", 10, "warn", &[("RECONCILER_WORKERS", "2")])
        .await?;
    let pools: Vec<Value> = (1..=POOLS)
        .map(|p| json!({"name": format!("pool-{p}"), "size": "kube.c5.large", "count": NODES_PER_POOL}))
        .collect();
    let body = json!({"organization": "acme", "name": format!("upgrade-{}", b.run_id),
        "version": "v1.32.4", "node_pools": pools});
    let made: Value = b
        .http
        .post(format!("{}/v1/public/clusters", server.url))
        .bearer_auth(b.token)
        .json(&body)
        .send()
        .await?
        .error_for_status()
        .context("creating the cluster to upgrade")?
        .json()
        .await?;
    let url = format!(
        "{}/v1/public/clusters/{}",
        server.url,
        made["id"].as_str().unwrap_or_default()
    );
    crate::say!(
        "item 10: a cluster of {POOLS} pools × {NODES_PER_POOL} nodes, waiting for it to be Provisioned"
    );
    wait(b, &url, Duration::from_secs(600), "Provisioned", |c| {
        c["phase"] == "Provisioned"
    })
    .await?;

    let databases = b.dbs.name("");
    let before = CpuClock::read(server.pid(), &databases);
    let started = Instant::now();
    b.http
        .post(format!("{url}/upgrade"))
        .bearer_auth(b.token)
        .json(&json!({"version": "v1.32.6"}))
        .send()
        .await?
        .error_for_status()
        .context("starting the upgrade")?;
    crate::say!("item 10: upgrading to v1.32.6");
    wait(b, &url, Duration::from_secs(1200), "upgraded", |c| {
        c["upgrade"].is_null() && c["version"] == "v1.32.6"
    })
    .await?;
    let seconds = started.elapsed().as_secs_f64();
    let after = CpuClock::read(server.pid(), &databases);
    let nodes = POOLS * NODES_PER_POOL;
    let cpu_per_node = match (before, after) {
        (Some(a), Some(z)) => a.per_request(&z, nodes as usize),
        _ => bail!("the server's CPU time could not be read from /proc"),
    };
    server.stop().await?;
    Ok(Upgrade {
        pools: POOLS,
        nodes,
        step_ms: DEFAULT_STEP_MS,
        seconds,
        cpu_per_node,
    })
}
