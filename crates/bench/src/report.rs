//! Builds docs/benchmarks.md from the raw tool output of one `make bench` run: each figure next
//! to its goal or limit, the ratios, and the machine it ran on.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde_json::Value;

use crate::chart::Point;
use crate::parse::{self, PgbenchRun, WrkRun};

/// `KEY=value` or `key: value` lines, in file order.
fn pairs(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.split_once('=').or_else(|| l.split_once(": ")))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn read(raw: &Path, name: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(raw.join(name)).with_context(|| format!("reading {name}"))
}

fn wrk_file(raw: &Path, name: &str) -> anyhow::Result<WrkRun> {
    parse::wrk(&read(raw, name)?).with_context(|| format!("{name}: not a wrk report"))
}

fn pgbench_file(raw: &Path, name: &str) -> anyhow::Result<PgbenchRun> {
    parse::pgbench(&read(raw, name)?).with_context(|| format!("{name}: not a pgbench report"))
}

fn json_file(raw: &Path, name: &str) -> anyhow::Result<Value> {
    serde_json::from_str(&read(raw, name)?).with_context(|| format!("{name}: not JSON"))
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.2} ms")
    }
}

fn num(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "meets" } else { "**misses**" }
}

/// A note when a wrk run had errors, which make its figures suspect.
fn errors(r: &WrkRun) -> String {
    if r.non_2xx + r.socket_errors == 0 {
        String::new()
    } else {
        format!(
            " (**{} non-2xx, {} socket errors**)",
            r.non_2xx, r.socket_errors
        )
    }
}

/// The rows and ratios of item 6 (the gateway beside nginx and Caddy) at one connection count.
struct GatewayRows {
    rows: Vec<[String; 5]>,
    ratios: Vec<String>,
}

fn wrk_cell(w: &WrkRun) -> String {
    format!(
        "{} req/s, p50 {}, p99 {}{}",
        num(w.rps),
        ms(w.p50_ms),
        ms(w.p99_ms),
        errors(w)
    )
}

/// Item 6 at `c` connections: the proxies users would otherwise pick, then the gateway's
/// routes, each goal against the proxy it is measured by.
fn gateway_rows(raw: &Path, c: u32) -> anyhow::Result<GatewayRows> {
    let run = |name: &str| wrk_file(raw, &format!("gw-{name}-c{c}.wrk.txt"));
    let nginx = run("nginx")?;
    let nginx_basic = run("nginx-basic")?;
    let caddy = run("caddy-basic")?;
    let basic = run("gateway-basic")?;
    let token = run("gateway-token")?;
    let oidc = run("gateway-oidc")?;
    let clean = |w: &WrkRun| w.non_2xx + w.socket_errors == 0;
    let mut rows = Vec::new();
    for (what, w) in [
        ("nginx, plain reverse proxy (the ceiling)", &nginx),
        ("nginx `auth_basic` (htpasswd, apr1)", &nginx_basic),
        ("Caddy `basicauth` (bcrypt)", &caddy),
    ] {
        rows.push([
            "6".into(),
            format!("{what}, {c} connections"),
            wrk_cell(w),
            "— (reference)".into(),
            "—".into(),
        ]);
    }
    let basic_ratio = basic.rps / nginx_basic.rps.max(1e-9);
    rows.push([
        "6".into(),
        format!("Gateway, Basic route (Argon2id, cached checks), {c} connections"),
        format!(
            "{}; **{basic_ratio:.2} × nginx `auth_basic`**",
            wrk_cell(&basic)
        ),
        format!(
            "≥ 1.5 × nginx `auth_basic` req/s, p99 ≤ its {}",
            ms(nginx_basic.p99_ms)
        ),
        verdict(basic_ratio >= 1.5 && basic.p99_ms <= nginx_basic.p99_ms && clean(&basic)).into(),
    ]);
    let mut ratios = vec![
        format!("gateway Basic / nginx `auth_basic` at {c}: {basic_ratio:.2}"),
        format!(
            "gateway Basic / Caddy `basicauth` at {c}: {:.2}",
            basic.rps / caddy.rps.max(1e-9)
        ),
    ];
    for (what, short, w) in [
        ("Token route (static bearer token)", "Token", &token),
        ("OIDC-Bearer route (RS256 JWT)", "OIDC-Bearer", &oidc),
    ] {
        let ratio = w.rps / nginx.rps.max(1e-9);
        ratios.push(format!("gateway {short} / plain nginx at {c}: {ratio:.2}"));
        rows.push([
            "6".into(),
            format!("Gateway, {what}, {c} connections"),
            format!("{}; **{ratio:.2} × plain nginx**", wrk_cell(w)),
            format!("≥ 0.5 × plain nginx ({} req/s)", num(nginx.rps)),
            verdict(ratio >= 0.5 && clean(w)).into(),
        ]);
    }
    Ok(GatewayRows { rows, ratios })
}

/// The figures and their chart points.
pub struct Rendered {
    pub markdown: String,
    pub chart: Vec<Point>,
}

/// `raw`: the directory of raw output; `chart_link`: the PNG's path relative to the report.
pub fn render(raw: &Path, chart_link: &str) -> anyhow::Result<Rendered> {
    let params: BTreeMap<String, String> = pairs(&read(raw, "params.txt")?).into_iter().collect();
    let param = |k: &str| params.get(k).cloned().unwrap_or_default();
    let list = |k: &str| -> Vec<u32> {
        param(k)
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect()
    };
    let machine = pairs(&read(raw, "machine.txt")?);

    let mut rows: Vec<[String; 5]> = Vec::new();
    let mut chart = Vec::new();
    let mut ratios = Vec::new();
    // 1. GET by id next to pgbench -S.
    for c in list("BENCH_CONNECTIONS") {
        let w = wrk_file(raw, &format!("get-by-id-c{c}.wrk.txt"))?;
        let p = pgbench_file(raw, &format!("pgbench-c{c}.txt"))?;
        let ratio = w.rps / p.tps.max(1e-9);
        ratios.push(format!("GET by id / pgbench -S at {c}: {ratio:.2}"));
        chart.push(Point {
            connections: c,
            p50_ms: w.p50_ms,
            p99_ms: w.p99_ms,
        });
        let (goal, ok) = if c == 16 {
            (
                "≥ 1.0 × pgbench -S (reported, not a gate)".to_owned(),
                verdict(ratio >= 1.0).to_owned(),
            )
        } else {
            ("— (reported)".to_owned(), "—".to_owned())
        };
        rows.push([
            "1".into(),
            format!("`GET /v1/public/clusters/{{id}}`, {c} connection(s)"),
            format!(
                "{} req/s, p50 {}, p99 {}; pgbench -S {} tps; **ratio {ratio:.2}**{}",
                num(w.rps),
                ms(w.p50_ms),
                ms(w.p99_ms),
                num(p.tps),
                errors(&w)
            ),
            goal,
            ok,
        ]);
    }
    // 2. The list of 100 in an organization of many clusters.
    for c in list("BENCH_LIST_CONNECTIONS") {
        let w = wrk_file(raw, &format!("list-c{c}.wrk.txt"))?;
        rows.push([
            "2".into(),
            format!(
                "`GET /v1/public/clusters?size=100`, {} clusters × {} pools, {c} connection(s)",
                param("BENCH_CLUSTERS"),
                param("BENCH_POOLS")
            ),
            format!(
                "p50 {}, p99 {} ({} req/s){}",
                ms(w.p50_ms),
                ms(w.p99_ms),
                num(w.rps),
                errors(&w)
            ),
            "p99 < 20 ms".into(),
            verdict(w.p99_ms < 20.0).into(),
        ]);
    }
    // 3. Creates and replays with Idempotency-Key.
    let idem = json_file(raw, "idempotency.json")?;
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let (creates, replays) = (&idem["creates"], &idem["replays"]);
    let replay_ratio = f(replays, "per_second") / f(creates, "per_second").max(1e-9);
    ratios.push(format!("replays / creates per second: {replay_ratio:.2}"));
    for (name, p) in [("creates", creates), ("replays", replays)] {
        let expected = p["expected"].as_u64().unwrap_or(0);
        let requests = p["requests"].as_u64().unwrap_or(0);
        let bad = if expected == requests {
            String::new()
        } else {
            format!(
                " (**only {expected} of {requests} as expected: {}**)",
                p["statuses"]
            )
        };
        rows.push([
            "3".into(),
            format!(
                "Cluster {name} with `Idempotency-Key`, {} keys, {} at a time",
                idem["count"], idem["concurrency"]
            ),
            format!(
                "{} {name}/s (p50 {}, p99 {}){bad}",
                num(f(p, "per_second")),
                ms(f(&p["latency"], "p50_ms")),
                ms(f(&p["latency"], "p99_ms"))
            ),
            "— (reported)".into(),
            "—".into(),
        ]);
    }
    // 4. Long-polls: memory while waiting, change → answer.
    let lp = json_file(raw, "longpoll.json")?;
    let rss_mb = lp["rss_waiting_kb"].as_f64().unwrap_or(f64::NAN) / 1024.0;
    let idle_mb = lp["rss_idle_kb"].as_f64().unwrap_or(f64::NAN) / 1024.0;
    let waiters = lp["waiters"].as_u64().unwrap_or(0);
    let changed = lp["changed"].as_u64().unwrap_or(0);
    let missing = if changed == waiters {
        String::new()
    } else {
        format!(
            " (**{changed} of {waiters} answered with the change; unchanged {}, failed {}, early {}**)",
            lp["unchanged"], lp["failed"], lp["answered_early"]
        )
    };
    rows.push([
        "4".into(),
        format!(
            "{waiters} `/state` long-polls over {} clusters: server RSS while they wait",
            lp["clusters"]
        ),
        format!("{rss_mb:.0} MB (idle before: {idle_mb:.0} MB)"),
        "< 300 MB".into(),
        verdict(rss_mb < 300.0).into(),
    ]);
    let cta = &lp["change_to_answer"];
    rows.push([
        "4".into(),
        "Change (PATCH through a second process) → each waiter's answer".into(),
        format!(
            "p50 {}, p99 {}, max {}{missing}",
            ms(f(cta, "p50_ms")),
            ms(f(cta, "p99_ms")),
            ms(f(cta, "max_ms"))
        ),
        "p99 < 100 ms".into(),
        verdict(f(cta, "p99_ms") < 100.0 && changed == waiters).into(),
    ]);
    // 5. Account-platform calls per 1,000 requests.
    let mut per_k = Vec::new();
    for (mode, ttl) in [
        ("on", "TOKEN_CACHE_TTL_S=10"),
        ("off", "TOKEN_CACHE_TTL_S=0"),
    ] {
        let w = wrk_file(raw, &format!("platform-cache-{mode}.wrk.txt"))?;
        let before = read(raw, &format!("platform-cache-{mode}.metrics-before.txt"))?;
        let after = read(raw, &format!("platform-cache-{mode}.metrics-after.txt"))?;
        let calls = parse::metric_sum(&after, "account_platform_calls_total")
            - parse::metric_sum(&before, "account_platform_calls_total");
        let per = calls / (w.requests.max(1) as f64) * 1000.0;
        per_k.push(per);
        rows.push([
            "5".into(),
            format!("Account-platform calls per 1,000 requests, token cache {mode} ({ttl})"),
            format!(
                "{per:.2} ({calls:.0} calls for {} requests, {} req/s){}",
                w.requests,
                num(w.rps),
                errors(&w)
            ),
            "— (reported)".into(),
            "—".into(),
        ]);
    }
    if let [on, off] = per_k.as_slice() {
        ratios.push(format!(
            "platform calls, cache off / cache on: {}",
            if *on > 0.0 {
                format!("{:.0}×", off / on)
            } else {
                "∞ (no call with the cache on)".into()
            }
        ));
    }
    // 6. The gateway next to nginx and Caddy, in front of the same upstream.
    for c in list("BENCH_GATEWAY_CONNECTIONS") {
        let g = gateway_rows(raw, c)?;
        rows.extend(g.rows);
        ratios.extend(g.ratios);
    }

    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Written by `make bench` (scripts/bench.sh) from release builds; the raw tool output is in \
         [benchmarks/raw/](benchmarks/raw/). Client, server, account-platform stub and PostgreSQL \
         share the machine below, so every figure includes the load tool's own CPU use.\n"
    );
    let _ = writeln!(md, "## Machine\n");
    for (k, v) in &machine {
        let _ = writeln!(md, "- {k}: {v}");
    }
    let _ = writeln!(md, "\n## Figures\n");
    let _ = writeln!(md, "| # | Figure | Measured | Goal / limit | Verdict |");
    let _ = writeln!(md, "|---|---|---|---|---|");
    for r in &rows {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} |",
            r[0], r[1], r[2], r[3], r[4]
        );
    }
    let _ = writeln!(md, "\nRatios:\n");
    for r in &ratios {
        let _ = writeln!(md, "- {r}");
    }
    let _ = writeln!(
        md,
        "\n![p50 and p99 of GET /v1/public/clusters/{{id}} against connections]({chart_link})\n"
    );
    let _ = writeln!(md, "## How it was run\n");
    let _ = writeln!(
        md,
        "Settings of this run (environment variables of `make bench`):\n"
    );
    let _ = writeln!(md, "| Setting | Value |\n|---|---|");
    for (k, v) in &params {
        let _ = writeln!(md, "| `{k}` | `{v}` |");
    }
    let _ = writeln!(md, "\n{}", METHOD);
    Ok(Rendered {
        markdown: md,
        chart,
    })
}

const METHOD: &str = "\
- The server runs with `RECONCILER_WORKERS=0` (no provisioning work competes), `RUST_LOG=warn`, \
  the account platform is the `platform-stub` process, and the database is a fresh \
  `kubesvc_bench_*` database, dropped at the end.
- 1: `wrk --latency` with the demo super_admin's bearer token on one seeded cluster, after a \
  warm-up request (token cache warm); `pgbench -S` on a scratch database initialised by \
  `pgbench -i` (scale 1), same client counts and duration. The ratio is wrk req/s over pgbench tps.
- 2: the clusters and their pools are seeded with SQL (not through the API) for acme; wrk asks \
  for the first page of 100.
- 3: `bench-idempotency` (crates/bench): N creates with N distinct keys, then the same N requests \
  again, which must answer 201 with `Idempotency-Replay: true`.
- 4: `bench-longpoll` (crates/bench) opens every waiter (raw HTTP/1.1, `since` = the cluster's \
  version, `timeout_seconds=60`) on one server process, reads its VmRSS from /proc while they \
  wait, then PATCHes each cluster's description through a second server process on the same \
  database, one cluster at a time with a pause between; the latency runs from sending the PATCH \
  to each waiter's complete answer.
- 5: the server's `/metrics` counter `account_platform_calls_total` (both endpoints) before and \
  after a wrk run of `GET /v1/public/clusters/{id}`, once with the token cache on and once off.
- 6: one upstream for every proxy: nginx answering `return 200` with a 3-byte body. In front of \
  it, each with its own generated configuration on loopback ports: nginx as a plain reverse proxy \
  and nginx with `auth_basic` (one process, two ports; htpasswd from `openssl passwd -apr1`, \
  checked on every request), Caddy with `basicauth` (hash from `caddy hash-password`, bcrypt), \
  and the `gateway` binary with three routes whose auth servers were created through the API: \
  Basic (one user, Argon2id; the gateway caches successful checks), Token (one static token) and \
  OIDC (issuer `bench-oidc-issuer` from crates/bench on loopback, RS256; wrk sends one access \
  token it signed). nginx and the gateway keep upstream connections alive (`keepalive` with \
  HTTP/1.1 for nginx; Caddy and the gateway pool them by default). Each is measured alone after \
  a request through it answered 200; wrk, the proxy and the upstream share the two cores, \
  so the ratios say more than the absolute figures.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_pair_styles() {
        let p = pairs("A=1\ncpu: x86 thing\nnoise\n");
        assert_eq!(
            p,
            vec![("A".into(), "1".into()), ("cpu".into(), "x86 thing".into())]
        );
    }
}
