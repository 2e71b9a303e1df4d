//! Item 3: cluster creates with an `Idempotency-Key` per second (N distinct keys, so N
//! clusters), then replays per second (the same N requests again, each answered from its key).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;

use super::cpu::CpuClock;
use super::{Bench, pgbench};
use crate::results::{Idempotency, IdempotencyPhase};
use crate::stats::Summary;

struct Setup {
    client: reqwest::Client,
    url: String,
    token: &'static str,
    prefix: String,
    /// The prefix of the run's database names, whose backends' CPU counts.
    databases: String,
}

/// One create: (status, replayed?, latency); a transport error is status "error".
async fn create(s: &Setup, i: usize) -> (String, bool, Duration) {
    let body = json!({
        "organization": "acme",
        "name": format!("idem-{}-{i}", s.prefix),
        "description": "created by make bench",
        "node_pools": [{"name": "default", "size": "kube.c5.large", "count": 1}],
    });
    let start = Instant::now();
    let res = s
        .client
        .post(format!("{}/v1/public/clusters", s.url))
        .bearer_auth(s.token)
        .header("Idempotency-Key", format!("bench-{}-{i:06}", s.prefix))
        .json(&body)
        .send()
        .await;
    match res {
        Ok(r) => {
            let status = r.status().as_u16().to_string();
            let replayed = r
                .headers()
                .get("idempotency-replay")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.eq_ignore_ascii_case("true"));
            let _ = r.bytes().await;
            (status, replayed, start.elapsed())
        }
        Err(_) => ("error".to_owned(), false, start.elapsed()),
    }
}

async fn phase(
    s: &Setup,
    count: usize,
    concurrency: usize,
    replay: bool,
    server_pid: u32,
) -> IdempotencyPhase {
    let cpu_before = CpuClock::read(server_pid, &s.databases);
    let start = Instant::now();
    let results: Vec<(String, bool, Duration)> = futures::stream::iter(0..count)
        .map(|i| create(s, i))
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let seconds = start.elapsed().as_secs_f64();
    let cpu_after = CpuClock::read(server_pid, &s.databases);
    let mut statuses = BTreeMap::new();
    let mut expected = 0;
    for (status, replayed, _) in &results {
        if status == "201" && *replayed == replay {
            expected += 1;
        }
        *statuses.entry(status.clone()).or_insert(0) += 1;
    }
    let latencies: Vec<Duration> = results.iter().map(|r| r.2).collect();
    IdempotencyPhase {
        requests: count,
        seconds,
        per_second: count as f64 / seconds.max(1e-9),
        expected,
        statuses,
        latency: Summary::of(&latencies),
        cpu: cpu_before
            .zip(cpu_after)
            .map(|(before, after)| before.per_request(&after, count)),
    }
}

/// Against the server at `url` (process `server_pid`); the run's id keeps names and keys apart
/// from any other run's.
pub async fn run(b: &Bench<'_>, url: &str, server_pid: u32) -> anyhow::Result<Idempotency> {
    let s = b.settings;
    let (count, concurrency) = (s.creates, s.create_concurrency);
    crate::say!(
        "item 3: {count} creates with Idempotency-Key, {concurrency} at a time, then their replays"
    );
    let setup = Setup {
        client: reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency)
            .timeout(Duration::from_secs(30))
            .build()?,
        url: url.to_owned(),
        token: b.token,
        prefix: b.run_id.clone(),
        databases: b.dbs.name(""),
    };
    let creates = phase(&setup, count, concurrency, false, server_pid).await;
    let replays = phase(&setup, count, concurrency, true, server_pid).await;
    // The database's own small write beside it: machines differ, the ratio travels.
    let name = b.dbs.name("_pgbench");
    let pg_url = b.dbs.create(&name).await?;
    pgbench::init(&pg_url, &b.raw).await?;
    let clients = u32::try_from(concurrency)?;
    let pgbench_write = pgbench::write(&pg_url, clients, s.duration_s, &b.raw).await;
    b.dbs.drop(&name).await?;
    let result = Idempotency {
        count,
        concurrency,
        creates,
        replays,
        pgbench_write: Some(pgbench_write?),
    };
    std::fs::write(
        b.raw.join("idempotency.json"),
        serde_json::to_string_pretty(&result)? + "\n",
    )?;
    if result.creates.expected != count || result.replays.expected != count {
        crate::say!(
            "warning: not every create answered 201 (or not every replay was a replay): {:?} / {:?}",
            result.creates.statuses,
            result.replays.statuses
        );
    }
    Ok(result)
}
