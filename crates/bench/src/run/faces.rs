//! Item 9: what one read costs through each face and with its spans on, on one seeded cluster
//! at the first of `BENCH_GATEWAY_CONNECTIONS`, `BENCH_GATEWAY_ROUNDS` rounds taken in turn
//! (each figure its median round):
//! - `GET /v1/public/clusters/{id}` on a server at `RUST_LOG=warn` (no span is enabled) and on
//!   one at `RUST_LOG=info` (the request's fields and the access line, written to its log file
//!   as in production), with each server's CPU per request; their ratio is the median of the
//!   rounds' own ratios;
//! - `tools/call get_cluster` through `/mcp` on the `warn` server, the assistant's face of
//!   the same use case.

use anyhow::Context;
use serde_json::json;

use super::Bench;
use super::cpu::ProcessTimes;
use crate::results::{Faces, ProxyCpu, WrkRun};

pub async fn run(b: &Bench<'_>) -> anyhow::Result<Faces> {
    let s = b.settings;
    let connections = s.gateway_connections.first().copied().unwrap_or(16);
    let rounds = s.gateway_rounds.max(1);
    crate::say!(
        "item 9: GET by id at warn and at info, get_cluster through /mcp, {connections} connections, {rounds} rounds"
    );
    let quiet = b.env.start_logging("quiet", 10, "warn").await?;
    let traced = b.env.start_logging("traced", 10, "info").await?;
    let id = b.first_cluster()?;
    for server in [&quiet, &traced] {
        b.http
            .get(format!("{}/v1/public/clusters/{id}", server.url))
            .bearer_auth(b.token)
            .send()
            .await?
            .error_for_status()
            .context("the warm-up request")?;
    }
    let call = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "get_cluster", "arguments": {"organization": "acme", "cluster": id},
                   "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                             "io.modelcontextprotocol/clientCapabilities": {}}}
    })
    .to_string();
    let auth = b.auth();
    let mcp_headers = [
        auth.as_str(),
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        "Mcp-Method: tools/call",
        "Mcp-Name: get_cluster",
        "MCP-Protocol-Version: 2026-07-28",
    ];
    let (mut rest_quiet, mut rest_traced, mut mcp) = (Vec::new(), Vec::new(), Vec::new());
    let (mut quiet_cpu, mut traced_cpu, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        let d = s.duration_s;
        let c = connections;
        // A read by id on `server`, with that server's CPU per request.
        let by_id = |server: &super::server::Server, label: String| {
            let url = format!("{}/v1/public/clusters/{id}", server.url);
            let pid = server.pid();
            let auth = &auth;
            async move {
                let before = ProcessTimes::read(pid);
                let run = b.wrk.run(&label, c, d, &url, &[auth]).await?;
                let cpu = before
                    .zip(ProcessTimes::read(pid))
                    .map(|(before, after)| before.per_request(&after, run.requests));
                anyhow::Ok((run, cpu))
            }
        };
        let (warn, warn_cpu) = by_id(&quiet, format!("faces-rest-warn-r{round}")).await?;
        let (info, info_cpu) = by_id(&traced, format!("faces-rest-info-r{round}")).await?;
        ratios.push(info.rps / warn.rps.max(1e-9));
        rest_quiet.push(warn);
        rest_traced.push(info);
        quiet_cpu.extend(warn_cpu);
        traced_cpu.extend(info_cpu);
        mcp.push(
            b.wrk
                .post(
                    &format!("faces-mcp-r{round}"),
                    c,
                    d,
                    &format!("{}/mcp", quiet.url),
                    &mcp_headers,
                    &call,
                )
                .await?,
        );
    }
    quiet.stop().await?;
    traced.stop().await?;
    Ok(Faces {
        connections,
        rounds,
        rest_quiet: median(&rest_quiet),
        rest_traced: median(&rest_traced),
        mcp: median(&mcp),
        traced_ratio: middle(ratios, |r| *r).unwrap_or_default(),
        quiet_cpu: middle(quiet_cpu, ProxyCpu::total_us),
        traced_cpu: middle(traced_cpu, ProxyCpu::total_us),
    })
}

/// The median of `values` by `key` (the lower middle one of an even count).
fn middle<T>(mut values: Vec<T>, key: impl Fn(&T) -> f64) -> Option<T> {
    values.sort_by(|a, b| key(a).total_cmp(&key(b)));
    let at = values.len().checked_sub(1)? / 2;
    values.into_iter().nth(at)
}

/// The round with the median req/s (the lower middle one of an even count).
fn median(runs: &[WrkRun]) -> WrkRun {
    let mut sorted = runs.to_vec();
    sorted.sort_by(|a, b| a.rps.total_cmp(&b.rps));
    sorted
        .get(sorted.len().saturating_sub(1) / 2)
        .copied()
        .unwrap_or_default()
}
