//! Item 7: the change feed's delivery lag. Two fresh server processes on one database; a change
//! made through B reaches A's watch cache through PostgreSQL's notification. Each round PATCHes
//! a cluster's description through B, then reads the cluster on A (no `Cache-Control`, so from
//! A's cache) until the new description shows: the lag runs from B's answer to A's first answer
//! showing it. A keeps serving the old copy until the notification drops it, so the lag is the
//! feed's delivery plus the read that showed it (a cache miss, which reads the database); that
//! read's own time is kept beside it.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};
use uuid::Uuid;

use super::Bench;
use crate::results::FeedLag;
use crate::stats::{Counts, Summary};

/// How long one change may take to show before the round counts as missed.
const ROUND_LIMIT: Duration = Duration::from_secs(5);
/// Between rounds, so one change's notification is not still in flight during the next.
const ROUND_GAP: Duration = Duration::from_millis(10);

async fn description(
    http: &reqwest::Client,
    url: &str,
    token: &str,
) -> anyhow::Result<Option<String>> {
    let v: Value = http
        .get(url)
        .bearer_auth(token)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(v["description"].as_str().map(str::to_owned))
}

/// `rounds` changes of `cluster` through `write_url`, each awaited on `read_url`, with a
/// pause of `poll` between two reads.
pub async fn measure(
    read_url: &str,
    write_url: &str,
    token: &str,
    cluster: Uuid,
    rounds: usize,
    poll: Duration,
) -> anyhow::Result<FeedLag> {
    let (reader, writer) = (
        super::one_connection_client()?,
        super::one_connection_client()?,
    );
    let read = format!("{read_url}/v1/public/clusters/{cluster}");
    let write = format!("{write_url}/v1/public/clusters/{cluster}");
    // Caches the cluster on A, and warms both token caches and connections.
    description(&reader, &read, token).await?;
    description(&writer, &write, token).await?;
    let (mut lags, mut reads, mut patches, mut showing) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for n in 0..rounds {
        let want = format!("lag-{n}");
        let sent = Instant::now();
        writer
            .patch(&write)
            .bearer_auth(token)
            .json(&json!({ "description": want }))
            .send()
            .await?
            .error_for_status()
            .with_context(|| format!("PATCH of cluster {cluster}"))?
            .bytes()
            .await?;
        let answered = Instant::now();
        patches.push(answered - sent);
        let mut count = 0u64;
        loop {
            count += 1;
            let asked = Instant::now();
            let shown = description(&reader, &read, token).await?;
            if shown.as_deref() == Some(want.as_str()) {
                lags.push(answered.elapsed());
                showing.push(asked.elapsed());
                reads.push(count);
                break;
            }
            if answered.elapsed() > ROUND_LIMIT {
                break;
            }
            if !poll.is_zero() {
                // tokio's timer rounds sleeps up to a millisecond, far coarser than the lag;
                // nothing else runs on this runtime meanwhile, so blocking briefly is harmless.
                std::thread::sleep(poll);
            }
        }
        tokio::time::sleep(ROUND_GAP).await;
    }
    Ok(FeedLag {
        rounds,
        seen: lags.len(),
        poll_us: poll.as_micros() as u64,
        lag: Summary::of(&lags),
        showing_read: Summary::of(&showing),
        reads: Counts::of(&reads),
        patch: Summary::of(&patches),
    })
}

pub async fn run(b: &Bench<'_>) -> anyhow::Result<FeedLag> {
    let s = b.settings;
    crate::say!(
        "item 7: change feed lag, {} changes through server B awaited on server A",
        s.lag_rounds
    );
    let a = b.env.start("lag-a", 60).await?;
    let writer = b.env.start("lag-b", 60).await?;
    let result = measure(
        &a.url,
        &writer.url,
        b.token,
        b.first_cluster()?,
        s.lag_rounds,
        Duration::from_micros(s.lag_poll_us),
    )
    .await;
    a.stop().await?;
    writer.stop().await?;
    let result = result?;
    std::fs::write(
        b.raw.join("feed-lag.json"),
        serde_json::to_string_pretty(&result)? + "\n",
    )?;
    Ok(result)
}
