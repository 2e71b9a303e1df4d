//! `bench-idempotency`: cluster creates with an Idempotency-Key per second (N distinct keys),
//! then replays per second (the same N requests again), written as JSON.
//!
//! `bench-idempotency --url URL --token T [--org acme] [--count 2000] [--concurrency 16]
//! [--prefix RUN] --out FILE.json`

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bench::args::Args;
use bench::stats::Summary;
use futures::StreamExt;
use serde::Serialize;
use serde_json::json;

#[derive(Debug, Serialize)]
struct Phase {
    requests: usize,
    seconds: f64,
    per_second: f64,
    /// The answers the phase expects: 201 (creates), 201 with `Idempotency-Replay: true` (replays).
    expected: usize,
    statuses: BTreeMap<String, usize>,
    latency: Summary,
}

#[derive(Debug, Serialize)]
struct Report {
    count: usize,
    concurrency: usize,
    creates: Phase,
    replays: Phase,
}

struct Setup {
    client: reqwest::Client,
    url: String,
    token: String,
    org: String,
    prefix: String,
}

/// One create: (status, replayed?, latency); a transport error is status "error".
async fn create(s: &Setup, i: usize) -> (String, bool, Duration) {
    let body = json!({
        "organization": s.org,
        "name": format!("idem-{}-{i}", s.prefix),
        "description": "created by make bench",
        "node_pools": [{"name": "default", "size": "kube.c5.large", "count": 1}],
    });
    let start = Instant::now();
    let res = s
        .client
        .post(format!("{}/v1/public/clusters", s.url))
        .bearer_auth(&s.token)
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

async fn phase(s: &Setup, count: usize, concurrency: usize, replay: bool) -> Phase {
    let start = Instant::now();
    let results: Vec<(String, bool, Duration)> = futures::stream::iter(0..count)
        .map(|i| create(s, i))
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let seconds = start.elapsed().as_secs_f64();
    let mut statuses = BTreeMap::new();
    let mut expected = 0;
    for (status, replayed, _) in &results {
        if status == "201" && *replayed == replay {
            expected += 1;
        }
        *statuses.entry(status.clone()).or_insert(0) += 1;
    }
    let latencies: Vec<Duration> = results.iter().map(|r| r.2).collect();
    Phase {
        requests: count,
        seconds,
        per_second: count as f64 / seconds.max(1e-9),
        expected,
        statuses,
        latency: Summary::of(&latencies),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::from_env()?;
    let count: usize = args.or("count", 2000)?;
    let concurrency: usize = args.or("concurrency", 16)?;
    let out = args.required("out")?;
    let setup = Setup {
        client: reqwest::Client::builder()
            .pool_max_idle_per_host(concurrency)
            .timeout(Duration::from_secs(30))
            .build()?,
        url: args.required("url")?,
        token: args.required("token")?,
        org: args.or("org", "acme".to_owned())?,
        prefix: args.or("prefix", std::process::id().to_string())?,
    };
    let creates = phase(&setup, count, concurrency, false).await;
    let replays = phase(&setup, count, concurrency, true).await;
    let report = Report {
        count,
        concurrency,
        creates,
        replays,
    };
    let text = serde_json::to_string_pretty(&report)?;
    std::fs::write(&out, format!("{text}\n"))?;
    println!("{text}");
    anyhow::ensure!(
        report.creates.expected == count && report.replays.expected == count,
        "not every create answered 201 (or not every replay was a replay): {:?} / {:?}",
        report.creates.statuses,
        report.replays.statuses
    );
    Ok(())
}
