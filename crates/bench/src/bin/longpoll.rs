//! `bench-longpoll`: item 4 of `make bench` (run by `kubesvc-bench`): many concurrent `/state` long-polls on one server process, the process's
//! RSS while they wait, and the time from each change (a PATCH sent through a second process)
//! to the answer of each waiter of that cluster. Load tools cannot time change → answer.
//!
//! `bench-longpoll --url URL --patch-url URL2 --token T --server-pid PID [--org acme]
//! [--waiters 10000] [--clusters 100] [--connect-concurrency 128] [--settle-ms 3000]
//! [--source-addresses 1] (more: waiters connect from 127.0.0.1, .2, … in turn)
//! [--gap-ms 100] [--poll-timeout 60] --out FILE.json`
//!
//! The waiters speak raw HTTP/1.1 (one request per connection, `Connection: close`) so that
//! 10,000 of them cost the client little more than their sockets.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use bench::args::Args;
use bench::results::LongPoll;
use bench::stats::Summary;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;

#[derive(Debug)]
enum Outcome {
    /// 200 with `changed: true`, at this instant.
    Changed(Instant),
    /// 200 with `changed: false`: the change never reached this waiter in time.
    Unchanged,
    /// Another status, or a transport failure.
    Failed(String),
}

struct Waiter {
    cluster: usize,
    outcome: Outcome,
}

fn proc_kb(pid: Option<u32>, field: &str) -> Option<u64> {
    bench::parse::proc_kb(pid?, field)
}

/// `http://host:port` → `host:port`.
fn authority(url: &str) -> anyhow::Result<String> {
    let rest = url
        .strip_prefix("http://")
        .context("only http:// URLs are supported")?;
    Ok(rest.trim_end_matches('/').to_owned())
}

async fn cluster_ids(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    org: &str,
    n: usize,
) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::new();
    let mut page = 1;
    while ids.len() < n {
        let v: Value = client
            .get(format!("{url}/v1/public/clusters?size=100&page={page}"))
            .bearer_auth(token)
            .header("X-Platform-Organization", org)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let items = v["items"].as_array().context("a list without items")?;
        if items.is_empty() {
            break;
        }
        ids.extend(
            items
                .iter()
                .filter_map(|c| c["id"].as_str().map(str::to_owned)),
        );
        page += 1;
    }
    anyhow::ensure!(
        ids.len() >= n,
        "only {} clusters to wait on, {n} wanted",
        ids.len()
    );
    ids.truncate(n);
    Ok(ids)
}

/// A connection to `addr`, from `source` when given (a loopback address of its own, so that
/// more waiters than one address has ephemeral ports can connect).
async fn connect(addr: &str, source: Option<std::net::IpAddr>) -> std::io::Result<TcpStream> {
    let Some(source) = source else {
        return TcpStream::connect(addr).await;
    };
    let target: std::net::SocketAddr = tokio::net::lookup_host(addr)
        .await?
        .next()
        .ok_or_else(|| std::io::Error::other("no address"))?;
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.bind(std::net::SocketAddr::new(source, 0))?;
    socket.connect(target).await
}

/// One waiter: connect, send, then wait for the whole answer (the server closes after it).
async fn wait_once(
    addr: &str,
    source: Option<std::net::IpAddr>,
    request: &[u8],
    permits: &Semaphore,
    sent: &AtomicUsize,
    deadline: Duration,
) -> Outcome {
    let stream = {
        let _permit = permits.acquire().await;
        let mut stream = match connect(addr, source).await {
            Ok(s) => s,
            Err(e) => return Outcome::Failed(format!("connect: {}", e.kind())),
        };
        if let Err(e) = stream.write_all(request).await {
            return Outcome::Failed(format!("write: {}", e.kind()));
        }
        stream
    };
    sent.fetch_add(1, Ordering::SeqCst);
    let mut stream = stream;
    let mut buf = Vec::with_capacity(512);
    match tokio::time::timeout(deadline, stream.read_to_end(&mut buf)).await {
        Err(_) => return Outcome::Failed("no answer".into()),
        Ok(Err(e)) => return Outcome::Failed(format!("read: {}", e.kind())),
        Ok(Ok(_)) => {}
    }
    let at = Instant::now();
    let text = String::from_utf8_lossy(&buf);
    let status = text.split_whitespace().nth(1).unwrap_or("none").to_owned();
    if status != "200" {
        return Outcome::Failed(format!("status {status}"));
    }
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    match serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["changed"].as_bool())
    {
        Some(true) => Outcome::Changed(at),
        Some(false) => Outcome::Unchanged,
        None => Outcome::Failed("unexpected body".into()),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::from_env()?;
    let url = args.required("url")?;
    let patch_url = args.required("patch-url")?;
    let token = args.required("token")?;
    let org = args.or("org", "acme".to_owned())?;
    let out = args.required("out")?;
    let pid: Option<u32> = args.optional("server-pid").map(|p| p.parse()).transpose()?;
    let waiters: usize = args.or("waiters", 10_000)?;
    let n_clusters: usize = args.or("clusters", 100)?;
    let connect_concurrency: usize = args.or("connect-concurrency", 128)?;
    let settle_ms: u64 = args.or("settle-ms", 3000)?;
    let gap_ms: u64 = args.or("gap-ms", 100)?;
    let poll_timeout: u64 = args.or("poll-timeout", 60)?;
    let source_addresses: u8 = args.or("source-addresses", 1)?;
    let addr = authority(&url)?;
    let host = addr.clone();

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let ids = cluster_ids(&client, &url, &token, &org, n_clusters).await?;
    let mut versions = Vec::with_capacity(ids.len());
    for id in &ids {
        let v: Value = client
            .get(format!(
                "{url}/v1/public/clusters/{id}/state?since=0&timeout_seconds=0"
            ))
            .bearer_auth(&token)
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        versions.push(v["version"].as_i64().context("a state without version")?);
    }
    let rss_idle_kb = proc_kb(pid, "VmRSS");

    let permits = Arc::new(Semaphore::new(connect_concurrency.max(1)));
    let sent = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let deadline = Duration::from_secs(poll_timeout + 15);
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(waiters);
    for w in 0..waiters {
        let cluster = w % ids.len();
        let request = format!(
            "GET /v1/public/clusters/{}/state?since={}&timeout_seconds={poll_timeout} HTTP/1.1\r\n\
             Host: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n",
            ids[cluster], versions[cluster]
        );
        // Waiter w connects from 127.0.0.(1 + w % N) when N > 1 (all of 127/8 is loopback).
        let source = (source_addresses > 1).then(|| {
            std::net::IpAddr::from([127, 0, 0, 1 + (w % usize::from(source_addresses)) as u8])
        });
        let (permits, sent, finished, addr) = (
            permits.clone(),
            sent.clone(),
            finished.clone(),
            addr.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let outcome =
                wait_once(&addr, source, request.as_bytes(), &permits, &sent, deadline).await;
            finished.fetch_add(1, Ordering::SeqCst);
            Waiter { cluster, outcome }
        }));
    }
    // Every request written (or failed), then a pause so the server has read and parked them.
    while sent.load(Ordering::SeqCst) + finished.load(Ordering::SeqCst) < waiters
        && started.elapsed() < Duration::from_secs(poll_timeout / 2)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let connect_seconds = started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(settle_ms)).await;
    let answered_early = finished.load(Ordering::SeqCst);
    let rss_waiting_kb = proc_kb(pid, "VmRSS");
    eprintln!(
        "bench-longpoll: {waiters} waiters sent in {connect_seconds:.1}s, {answered_early} answered early, RSS {rss_waiting_kb:?} kB"
    );

    let mut changed_at = Vec::with_capacity(ids.len());
    let mut patch_latencies = Vec::with_capacity(ids.len());
    for (k, id) in ids.iter().enumerate() {
        let t0 = Instant::now();
        client
            .patch(format!("{patch_url}/v1/public/clusters/{id}"))
            .bearer_auth(&token)
            .json(&json!({"description": format!("bench change {k}")}))
            .send()
            .await?
            .error_for_status()
            .with_context(|| format!("PATCH of cluster {id}"))?;
        patch_latencies.push(t0.elapsed());
        changed_at.push(t0);
        tokio::time::sleep(Duration::from_millis(gap_ms)).await;
    }

    let mut latencies = Vec::with_capacity(waiters);
    let (mut unchanged, mut failed) = (0, BTreeMap::new());
    for t in tasks {
        let w = t.await?;
        match w.outcome {
            Outcome::Changed(at) => {
                let t0 = changed_at[w.cluster];
                match at.checked_duration_since(t0) {
                    Some(d) => latencies.push(d),
                    None => {
                        *failed
                            .entry("answered before the change".to_owned())
                            .or_insert(0) += 1
                    }
                }
            }
            Outcome::Unchanged => unchanged += 1,
            Outcome::Failed(why) => *failed.entry(why).or_insert(0) += 1,
        }
    }
    let report = LongPoll {
        waiters,
        clusters: ids.len(),
        connect_seconds,
        settle_ms,
        gap_ms,
        answered_early,
        rss_idle_kb,
        rss_waiting_kb,
        rss_peak_kb: proc_kb(pid, "VmHWM"),
        changed: latencies.len(),
        unchanged,
        failed,
        change_to_answer: Summary::of(&latencies),
        patch: Summary::of(&patch_latencies),
    };
    let text = serde_json::to_string_pretty(&report)?;
    std::fs::write(&out, format!("{text}\n"))?;
    println!("{text}");
    anyhow::ensure!(
        report.changed == waiters,
        "{} of {waiters} waiters saw their change",
        report.changed
    );
    Ok(())
}
