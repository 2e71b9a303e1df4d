//! docs/benchmarks.md from the typed results of one run: each figure next to its goal or
//! limit, the ratios, the machine and the settings. Items not run have no rows.

use std::fmt::Write as _;

use crate::chart::Point;
use crate::results::{Gateway, ProxyCpu, Results, WrkRun};
use crate::stats::Summary;

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

fn mb(kb: Option<u64>) -> f64 {
    kb.map_or(f64::NAN, |kb| kb as f64 / 1024.0)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "meets" } else { "**misses**" }
}

/// A note when a wrk run had errors, which make its figures suspect.
fn errors(r: &WrkRun) -> String {
    if r.clean() {
        String::new()
    } else {
        format!(
            " (**{} non-2xx, {} socket errors**)",
            r.non_2xx, r.socket_errors
        )
    }
}

/// Two latency summaries in one cell: `a p50 x, p99 y; b p50 x, p99 y`.
fn side_by_side(a: (&str, &Summary), b: (&str, &Summary)) -> String {
    format!(
        "{} p50 {}, p99 {}; {} p50 {}, p99 {}",
        a.0,
        ms(a.1.p50_ms),
        ms(a.1.p99_ms),
        b.0,
        ms(b.1.p50_ms),
        ms(b.1.p99_ms)
    )
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

/// A proxy's CPU per request, after its wrk figures.
fn cpu_cell(cpu: ProxyCpu) -> String {
    format!(
        "; CPU {:.1} µs/request (user {:.1} + system {:.1})",
        cpu.total_us(),
        cpu.user_us,
        cpu.system_us
    )
}

type Row = [String; 5];

fn row(item: u8, figure: String, measured: String, goal: &str, verdict: &str) -> Row {
    [
        item.to_string(),
        figure,
        measured,
        goal.to_owned(),
        verdict.to_owned(),
    ]
}

/// Item 6 at one connection count: the proxies users would otherwise pick, then the gateway's
/// routes, each goal against the proxy it is measured by.
fn gateway_rows(g: &Gateway, rows: &mut Vec<Row>, ratios: &mut Vec<String>) {
    let c = g.connections;
    for (what, w, cpu) in [
        (
            "nginx, plain reverse proxy (the ceiling)",
            &g.nginx,
            g.nginx_cpu,
        ),
        ("nginx `auth_basic` (htpasswd, apr1)", &g.nginx_basic, None),
        ("Caddy `basicauth` (bcrypt)", &g.caddy_basic, None),
    ] {
        rows.push(row(
            6,
            format!("{what}, {c} connections"),
            format!("{}{}", wrk_cell(w), cpu.map(cpu_cell).unwrap_or_default()),
            "— (reference)",
            "—",
        ));
    }
    let basic = &g.gateway_basic;
    let basic_ratio = basic.rps / g.nginx_basic.rps.max(1e-9);
    rows.push(row(
        6,
        format!("Gateway, Basic route (Argon2id, cached checks), {c} connections"),
        format!(
            "{}; **{basic_ratio:.2} × nginx `auth_basic`**",
            wrk_cell(basic)
        ),
        &format!(
            "≥ 3 × nginx `auth_basic` req/s, p99 ≤ its {}",
            ms(g.nginx_basic.p99_ms)
        ),
        verdict(basic_ratio >= 3.0 && basic.p99_ms <= g.nginx_basic.p99_ms && basic.clean()),
    ));
    ratios.push(format!(
        "gateway Basic / nginx `auth_basic` at {c}: {basic_ratio:.2}"
    ));
    ratios.push(format!(
        "gateway Basic / Caddy `basicauth` at {c}: {:.2}",
        basic.rps / g.caddy_basic.rps.max(1e-9)
    ));
    // The Token route is held to plain nginx itself: as many requests, a p99 no longer, and no
    // more CPU per request (when the run read it; older results did not).
    let token = &g.gateway_token;
    let ratio = token.rps / g.nginx.rps.max(1e-9);
    ratios.push(format!("gateway Token / plain nginx at {c}: {ratio:.2}"));
    let cpu = g.nginx_cpu.zip(g.gateway_token_cpu);
    if let Some((nginx_cpu, token_cpu)) = cpu {
        ratios.push(format!(
            "gateway Token CPU per request / plain nginx's at {c}: {:.2}",
            token_cpu.total_us() / nginx_cpu.total_us().max(1e-9)
        ));
    }
    let cpu_goal = g
        .nginx_cpu
        .map(|n| format!(", CPU per request ≤ its {:.1} µs", n.total_us()))
        .unwrap_or_default();
    rows.push(row(
        6,
        format!("Gateway, Token route (static bearer token), {c} connections"),
        format!(
            "{}{}; **{ratio:.2} × plain nginx**",
            wrk_cell(token),
            g.gateway_token_cpu.map(cpu_cell).unwrap_or_default()
        ),
        &format!(
            "≥ 1 × plain nginx ({} req/s), p99 ≤ its {}{cpu_goal}",
            num(g.nginx.rps),
            ms(g.nginx.p99_ms)
        ),
        verdict(
            ratio >= 1.0
                && token.p99_ms <= g.nginx.p99_ms
                && cpu.is_none_or(|(n, t)| t.total_us() <= n.total_us())
                && token.clean(),
        ),
    ));
    let oidc = &g.gateway_oidc;
    let ratio = oidc.rps / g.nginx.rps.max(1e-9);
    ratios.push(format!(
        "gateway OIDC-Bearer / plain nginx at {c}: {ratio:.2}"
    ));
    rows.push(row(
        6,
        format!("Gateway, OIDC-Bearer route (RS256 JWT), {c} connections"),
        format!("{}; **{ratio:.2} × plain nginx**", wrk_cell(oidc)),
        &format!("≥ 0.7 × plain nginx ({} req/s)", num(g.nginx.rps)),
        verdict(ratio >= 0.7 && oidc.clean()),
    ));
    // Over TLS (HTTP/1.1, one certificate, kept-alive connections): measured when the run
    // had both (older results have neither).
    if let (Some(nginx_tls), Some(token_tls)) = (&g.nginx_tls, &g.gateway_token_tls) {
        rows.push(row(
            6,
            format!("nginx, TLS reverse proxy (the ceiling over TLS), {c} connections"),
            wrk_cell(nginx_tls),
            "— (reference)",
            "—",
        ));
        let ratio = token_tls.rps / nginx_tls.rps.max(1e-9);
        ratios.push(format!(
            "gateway Token over TLS / nginx over TLS at {c}: {ratio:.2}"
        ));
        rows.push(row(
            6,
            format!("Gateway, Token route over TLS, {c} connections"),
            format!("{}; **{ratio:.2} × nginx over TLS**", wrk_cell(token_tls)),
            "— (reported)",
            "—",
        ));
    }
}

/// The report's markdown; `chart_link`: the chart's path relative to the report, `None` when
/// no chart was drawn (item 1 not run).
pub fn markdown(r: &Results, chart_link: Option<&str>) -> String {
    let items = &r.items;
    let mut rows: Vec<Row> = Vec::new();
    let mut ratios = Vec::new();
    // 1. GET by id next to pgbench -S.
    for g in &items.get_by_id {
        let (c, w) = (g.connections, &g.wrk);
        let ratio = w.rps / g.pgbench.tps.max(1e-9);
        ratios.push(format!("GET by id / pgbench -S at {c}: {ratio:.2}"));
        let (goal, ok) = if c == 16 {
            (
                "≥ 1.0 × pgbench -S (reported, not a gate)",
                verdict(ratio >= 1.0),
            )
        } else {
            ("— (reported)", "—")
        };
        rows.push(row(
            1,
            format!("`GET /v1/public/clusters/{{id}}`, {c} connection(s)"),
            format!(
                "{} req/s, p50 {}, p99 {}; pgbench -S {} tps; **ratio {ratio:.2}**{}",
                num(w.rps),
                ms(w.p50_ms),
                ms(w.p99_ms),
                num(g.pgbench.tps),
                errors(w)
            ),
            goal,
            ok,
        ));
    }
    // 2. The list of 100 in an organization of many clusters.
    for l in &items.list {
        let w = &l.wrk;
        rows.push(row(
            2,
            format!(
                "`GET /v1/public/clusters?size=100`, {} clusters × {} pools, {} connection(s)",
                l.clusters, l.pools, l.connections
            ),
            format!(
                "p50 {}, p99 {} ({} req/s){}",
                ms(w.p50_ms),
                ms(w.p99_ms),
                num(w.rps),
                errors(w)
            ),
            "p99 < 20 ms",
            verdict(w.p99_ms < 20.0),
        ));
    }
    // 3. Creates and replays with Idempotency-Key.
    if let Some(idem) = &items.idempotency {
        let replay_ratio = idem.replays.per_second / idem.creates.per_second.max(1e-9);
        ratios.push(format!("replays / creates per second: {replay_ratio:.2}"));
        // Against the database's own small write on the same machine: comparable across runs.
        let beside_write = idem.pgbench_write.map(|w| {
            let ratio = idem.creates.per_second / w.tps.max(1e-9);
            ratios.push(format!(
                "creates / pgbench -N at {}: {ratio:.3}",
                idem.concurrency
            ));
            format!("; pgbench -N {} tps: **ratio {ratio:.3}**", num(w.tps))
        });
        if let Some(cpu) = idem.creates.cpu {
            ratios.push(format!(
                "CPU per create: server {:.2} ms + PostgreSQL {:.2} ms = {:.2} ms",
                cpu.server_ms,
                cpu.postgres_ms,
                cpu.server_ms + cpu.postgres_ms
            ));
        }
        for (name, p) in [("creates", &idem.creates), ("replays", &idem.replays)] {
            let cpu = p.cpu.map_or(String::new(), |c| {
                format!(
                    "; CPU per request: server {:.2} ms, PostgreSQL {:.2} ms",
                    c.server_ms, c.postgres_ms
                )
            });
            let bad = if p.expected == p.requests {
                String::new()
            } else {
                format!(
                    " (**only {} of {} as expected: {:?}**)",
                    p.expected, p.requests, p.statuses
                )
            };
            rows.push(row(
                3,
                format!(
                    "Cluster {name} with `Idempotency-Key`, {} keys, {} at a time",
                    idem.count, idem.concurrency
                ),
                format!(
                    "{} {name}/s (p50 {}, p99 {}){bad}{cpu}{}",
                    num(p.per_second),
                    ms(p.latency.p50_ms),
                    ms(p.latency.p99_ms),
                    if name == "creates" {
                        beside_write.as_deref().unwrap_or("")
                    } else {
                        ""
                    }
                ),
                "— (reported)",
                "—",
            ));
        }
    }
    // 4. Long-polls: memory while waiting, change → answer.
    if let Some(lp) = &items.longpoll {
        let rss_mb = mb(lp.rss_waiting_kb);
        let missing = if lp.changed == lp.waiters {
            String::new()
        } else {
            format!(
                " (**{} of {} answered with the change; unchanged {}, failed {:?}, early {}**)",
                lp.changed, lp.waiters, lp.unchanged, lp.failed, lp.answered_early
            )
        };
        rows.push(row(
            4,
            format!(
                "{} `/state` long-polls over {} clusters: server RSS while they wait",
                lp.waiters, lp.clusters
            ),
            format!("{rss_mb:.0} MB (idle before: {:.0} MB)", mb(lp.rss_idle_kb)),
            "< 300 MB",
            verdict(rss_mb < 300.0),
        ));
        let cta = &lp.change_to_answer;
        rows.push(row(
            4,
            "Change (PATCH through a second process) → each waiter's answer".into(),
            format!(
                "p50 {}, p99 {}, max {}{missing}",
                ms(cta.p50_ms),
                ms(cta.p99_ms),
                ms(cta.max_ms)
            ),
            "p99 < 100 ms",
            verdict(cta.p99_ms < 100.0 && lp.changed == lp.waiters),
        ));
    }
    // 5. Account-platform calls per 1,000 requests.
    let mut per_k = Vec::new();
    for p in &items.platform {
        let w = &p.wrk;
        let per = p.calls / (w.requests.max(1) as f64) * 1000.0;
        per_k.push((p.cache_on, per));
        rows.push(row(
            5,
            format!(
                "Account-platform calls per 1,000 requests, token cache {} (TOKEN_CACHE_TTL_S={})",
                if p.cache_on { "on" } else { "off" },
                p.token_cache_ttl_s
            ),
            format!(
                "{per:.2} ({:.0} calls for {} requests, {} req/s){}",
                p.calls,
                w.requests,
                num(w.rps),
                errors(w)
            ),
            "— (reported)",
            "—",
        ));
    }
    for r in &items.invalid_tokens {
        let per = r.calls / (r.requests.max(1) as f64) * 1000.0;
        let bound = crate::run::platform::invalid_token_bound(r);
        let answers: Vec<String> = r
            .statuses
            .iter()
            .map(|(status, n)| format!("{n} × {status}"))
            .collect();
        rows.push(row(
            5,
            format!(
                "Account-platform calls per 1,000 requests with {} (one address)",
                if r.distinct {
                    "a new made-up token each"
                } else {
                    "one made-up token"
                }
            ),
            format!(
                "{per:.0} ({:.0} calls; answers {} in {:.1} s)",
                r.calls,
                answers.join(", "),
                r.elapsed_s
            ),
            &format!(
                "≤ {bound:.0} ({})",
                if r.distinct {
                    format!(
                        "the address's {} a minute and their refill",
                        r.address_quota
                    )
                } else {
                    format!("one per {} s of refusal cache", r.refusal_ttl_s)
                }
            ),
            verdict(r.calls <= bound),
        ));
    }
    if let [(true, on), (false, off)] = per_k.as_slice() {
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
    for g in &items.gateway {
        gateway_rows(g, &mut rows, &mut ratios);
    }
    if let Some(r) = &items.gateway_reload {
        let missed = if r.missed == 0 {
            String::new()
        } else {
            format!(" (**{} changes never showed**)", r.missed)
        };
        rows.push(row(
            6,
            format!(
                "Gateway reload: a token added (then removed) through the API → first answer of \
                 the gateway accepting (refusing) it, {} rounds",
                r.rounds
            ),
            format!(
                "{}{missed}",
                side_by_side(("added", &r.added), ("removed", &r.removed))
            ),
            "p99 < 100 ms",
            verdict(r.missed == 0 && r.added.p99_ms < 100.0 && r.removed.p99_ms < 100.0),
        ));
    }
    if let Some(w) = &items.websocket {
        rows.push(row(
            6,
            format!(
                "WebSocket echo, {} messages of {} bytes one at a time over one connection: \
                 round trip through the gateway's Token route, beside straight to the upstream",
                w.messages, w.message_bytes
            ),
            side_by_side(("gateway", &w.gateway), ("direct", &w.direct)),
            "— (reported)",
            "—",
        ));
    }
    // 7. The change feed's delivery lag between two processes.
    if let Some(f) = &items.feed_lag {
        let missed = if f.seen == f.rounds {
            String::new()
        } else {
            format!(" (**only {} of {} changes showed**)", f.seen, f.rounds)
        };
        let showing = if f.showing_read.count == 0 {
            String::new()
        } else {
            format!(
                " (of which the read that showed it, p50 {})",
                ms(f.showing_read.p50_ms)
            )
        };
        rows.push(row(
            7,
            format!(
                "Change feed delivery lag: PATCH answered by process B → first read from process A's \
                 watch cache showing it, {} changes",
                f.rounds
            ),
            format!(
                "p50 {}, p99 {}, max {}{showing}; reads until shown p50 {:.0}, max {:.0}{missed}",
                ms(f.lag.p50_ms),
                ms(f.lag.p99_ms),
                ms(f.lag.max_ms),
                f.reads.p50,
                f.reads.max
            ),
            "— (reported)",
            "—",
        ));
    }
    // 8. Memory of the watch cache.
    if let Some(c) = &items.cache_rss {
        let failed = if c.gets_failed == 0 {
            String::new()
        } else {
            format!(" (**{} GETs failed**)", c.gets_failed)
        };
        let per = c
            .kb_per_cluster()
            .map_or_else(|| "—".to_owned(), |kb| format!("{kb:.1} KB"));
        rows.push(row(
            8,
            format!(
                "Server RSS with the clusters cached: a fresh process, then each of {} clusters × {} \
                 pools read by id and every page of 100",
                c.clusters, c.pools
            ),
            format!(
                "{:.0} MB → {:.0} MB (+{:.1} MB), `cluster_cache_entries` {}: **{per} per cluster**{failed}",
                mb(Some(c.rss_before_kb)),
                mb(Some(c.rss_after_kb)),
                mb(Some(c.rss_after_kb.saturating_sub(c.rss_before_kb))),
                c.cache_entries
            ),
            "— (reported)",
            "—",
        ));
    }
    // 9. A read through the assistant's face, and the API's with its spans on.
    if let Some(f) = &items.faces {
        let c = f.connections;
        let traced = f.traced_ratio;
        let cpu = match (&f.traced_cpu, &f.quiet_cpu) {
            (Some(info), Some(warn)) => format!(
                "; server CPU per request: info {:.1} µs, warn {:.1} µs ({:+.0} %)",
                info.total_us(),
                warn.total_us(),
                (info.total_us() / warn.total_us().max(1e-9) - 1.0) * 100.0
            ),
            _ => String::new(),
        };
        ratios.push(format!(
            "GET by id at info / at warn, {c} connections: {traced:.2}"
        ));
        rows.push(row(
            9,
            format!(
                "`GET /v1/public/clusters/{{id}}` with its log at `info` (the request's fields and the access line), beside `warn`, {c} connections, {} rounds (the median of each round's info / warn)",
                f.rounds
            ),
            format!(
                "info {}; warn {}; **{traced:.2} × warn**{cpu}",
                wrk_cell(&f.rest_traced),
                wrk_cell(&f.rest_quiet)
            ),
            "≥ 0.95 × warn (at most 5 % lost)",
            verdict(traced >= 0.95 && f.rest_traced.clean() && f.rest_quiet.clean()),
        ));
        let mcp = f.mcp.rps / f.rest_quiet.rps.max(1e-9);
        ratios.push(format!(
            "get_cluster through /mcp / GET by id, {c} connections: {mcp:.2}"
        ));
        rows.push(row(
            9,
            format!(
                "`tools/call get_cluster` through `/mcp` beside `GET /v1/public/clusters/{{id}}`, {c} connections, median of {} rounds",
                f.rounds
            ),
            format!("{}; **{mcp:.2} × the REST route**", wrk_cell(&f.mcp)),
            "≥ 0.8 × the REST route",
            verdict(mcp >= 0.8 && f.mcp.clean()),
        ));
    }
    // 10. An upgrade at the default step time.
    if let Some(u) = &items.upgrade {
        // The provider steps it cannot do without: the control plane, then a create and a
        // delete per node, each taking the step time.
        let floor = (1 + 2 * u.nodes) as f64 * u.step_ms as f64 / 1000.0;
        rows.push(row(
            10,
            format!(
                "an upgrade of a cluster of {} pools, {} nodes, provider steps of {} ms (at least {floor:.1} s of them)",
                u.pools, u.nodes, u.step_ms
            ),
            format!(
                "{:.1} s; CPU per node replaced: server {:.1} ms, PostgreSQL {:.1} ms",
                u.seconds, u.cpu_per_node.server_ms, u.cpu_per_node.postgres_ms
            ),
            "— (reported)",
            "—",
        ));
    }

    let mut md = String::new();
    let _ = writeln!(md, "# Benchmarks\n");
    let _ = writeln!(
        md,
        "Written by `make bench` (`kubesvc-bench`, crates/bench) from release builds; the typed \
         results and each tool's raw output are in [benchmarks/raw/](benchmarks/raw/). Client, \
         server, account-platform stub and PostgreSQL share the machine below, so every figure \
         includes the load tool's own CPU use.\n"
    );
    if let Some(only) = &r.settings.only {
        let list: Vec<String> = only.iter().map(u8::to_string).collect();
        let _ = writeln!(
            md,
            "**A partial run: items {} only (`BENCH_ONLY`).**\n",
            list.join(", ")
        );
    }
    let _ = writeln!(md, "## Machine\n");
    for (k, v) in &r.machine {
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
    if !ratios.is_empty() {
        let _ = writeln!(md, "\nRatios:\n");
        for r in &ratios {
            let _ = writeln!(md, "- {r}");
        }
    }
    if let Some(link) = chart_link {
        let _ = writeln!(
            md,
            "\n![p50 and p99 of GET /v1/public/clusters/{{id}} against connections]({link})"
        );
    }
    let _ = writeln!(md, "\n## How it was run\n");
    let _ = writeln!(
        md,
        "Settings of this run (environment variables of `make bench`):\n"
    );
    let _ = writeln!(md, "| Setting | Value |\n|---|---|");
    for (k, v) in r.settings.table() {
        let _ = writeln!(md, "| `{k}` | `{v}` |");
    }
    let _ = writeln!(md, "\n{METHOD}");
    md
}

/// The chart's points: item 1's latencies, in the order measured.
pub fn chart_points(r: &Results) -> Vec<Point> {
    r.items
        .get_by_id
        .iter()
        .map(|g| Point {
            connections: g.connections,
            p50_ms: g.wrk.p50_ms,
            p99_ms: g.wrk.p99_ms,
        })
        .collect()
}

const METHOD: &str = "\
- The server runs with `RECONCILER_WORKERS=0` (no provisioning work competes), `RUST_LOG=warn`, \
  the account platform is the `platform-stub` process, and the database is a fresh \
  `kubesvc_bench_*` database, dropped at the end. wrk's figures come from the JSON its `done()` \
  script prints (crates/bench/assets/wrk-report.lua); its own text report is kept in raw/.
- 1: `wrk --latency` with the demo super_admin's bearer token on one seeded cluster, after a \
  warm-up request (token cache warm); `pgbench -S` on a scratch database initialised by \
  `pgbench -i` (scale 1), same client counts and duration. The ratio is wrk req/s over pgbench tps.
- 2: the clusters and their pools are seeded for acme through the store \
  (`ClusterRepository::commit`, as the API's creates are, 16 at a time), not through the API, \
  then `ANALYZE`; wrk asks for the first page of 100.
- 3: `kubesvc-bench` (crates/bench): N creates with N distinct keys, then the same N requests \
  again, which must answer 201 with `Idempotency-Replay: true`; beside them `pgbench -N` (its \
  simple-update write transaction, scale 1, the creates' client count, item 1's duration) on a \
  scratch database, whose tps the creates are divided by (machines differ; the ratio travels).
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
  so the ratios say more than the absolute figures. Every proxy and route is measured in turn, \
  `BENCH_GATEWAY_ROUNDS` rounds over all of them (3 by default), and each figure is that \
  proxy's round with the median req/s: a machine shared with others drifts over a minute, and \
  a ratio of two runs taken far apart would carry the drift. The CPU each request takes, for nginx's plain \
  proxy and the gateway's Token route: user and system time (`utime`, `stime` in \
  `/proc/<pid>/stat`; nginx's master and its worker processes, every thread of the gateway) \
  read before and after each wrk run, over the run's requests, in the median round; the \
  upstream's and wrk's own time are not counted. Over TLS, nginx (`listen … ssl`) and the \
  gateway's TLS listener serve one ECDSA P-256 certificate made by openssl for the run (for `bench.test` and 127.0.0.1); wrk \
  speaks HTTP/1.1 over TLS to each, its connections kept alive. Then the reload: 20 times, a token is added \
  to the Token route's auth server through a server process and the gateway is asked with it, \
  back to back, until it answers 200; then the token is removed and asked with until it answers \
  401. Each lag runs from the API's answer to the gateway's first answer showing the change. \
  Last, WebSocket: an echo upstream in kubesvc-bench, one connection, 256-byte binary messages \
  sent one at a time and each awaited back, straight to the upstream, then through the \
  gateway's `/ws` route (the Token auth server).
- 7: two fresh server processes A and B on the same database; cluster bench-1 is read once on A \
  (so A's watch cache holds it). Each round PATCHes its description through B, then reads it on \
  A (keep-alive connection, no `Cache-Control`, so from A's cache) in a loop with a \
  `BENCH_LAG_POLL_US` pause until the new description shows; the lag runs from B's answer to \
  A's first answer showing it, so it includes that read, a cache miss that reads the database \
  (the notification dropped A's copy); its own time is given beside. One read until shown \
  means the notification was in before A was asked.
- 8: a fresh server process (`CLUSTER_CACHE_PREFILL=false`), with the seed of item 2 in the \
  database and nothing cached: VmRSS \
  from /proc, then one `GET /v1/public/clusters/{id}` of every seeded cluster (16 at a time) and \
  every page of `GET /v1/public/clusters?size=100`, then VmRSS and `/metrics` \
  `cluster_cache_entries` again. The cost per cluster is the RSS growth over the entries cached; \
  it includes the organization's index and the allocator's slack.";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::BTreeMap;

    use super::*;
    use crate::results::*;
    use crate::settings::Settings;
    use crate::stats::{Counts, Summary};

    fn wrk(rps: f64, p50: f64, p99: f64) -> WrkRun {
        WrkRun {
            requests: (rps * 10.0) as u64,
            seconds: 10.0,
            rps,
            p50_ms: p50,
            p99_ms: p99,
            ..WrkRun::default()
        }
    }

    fn latency(p50: f64, p99: f64, max: f64) -> Summary {
        Summary {
            count: 100,
            p50_ms: p50,
            p90_ms: p99,
            p99_ms: p99,
            max_ms: max,
        }
    }

    fn phase(per_second: f64, p50: f64, p99: f64) -> IdempotencyPhase {
        IdempotencyPhase {
            requests: 2000,
            seconds: 2000.0 / per_second,
            per_second,
            expected: 2000,
            statuses: BTreeMap::from([("201".to_owned(), 2000)]),
            latency: latency(p50, p99, p99),
            cpu: None,
        }
    }

    /// The figures of the report this one replaces, as typed results.
    fn results() -> Results {
        let settings = Settings::from_lookup(|_| None).unwrap();
        let get = |c, rps, p50, p99, tps| GetById {
            connections: c,
            wrk: wrk(rps, p50, p99),
            pgbench: PgbenchRun {
                tps,
                latency_avg_ms: 0.1,
            },
        };
        let gw = |c, n: [(f64, f64, f64); 6]| Gateway {
            connections: c,
            nginx: wrk(n[0].0, n[0].1, n[0].2),
            nginx_basic: wrk(n[1].0, n[1].1, n[1].2),
            caddy_basic: wrk(n[2].0, n[2].1, n[2].2),
            gateway_basic: wrk(n[3].0, n[3].1, n[3].2),
            gateway_token: wrk(n[4].0, n[4].1, n[4].2),
            gateway_oidc: wrk(n[5].0, n[5].1, n[5].2),
            nginx_tls: Some(wrk(40000.0, 0.35, 1.5)),
            gateway_token_tls: Some(wrk(18000.0, 0.8, 2.6)),
            nginx_cpu: Some(ProxyCpu {
                user_us: 2.5,
                system_us: 11.0,
            }),
            gateway_token_cpu: Some(ProxyCpu {
                user_us: 5.5,
                system_us: 15.3,
            }),
        };
        Results {
            machine: vec![("cores (nproc)".into(), "2".into())],
            settings,
            items: Items {
                get_by_id: vec![
                    get(1, 11770.0, 0.08, 0.21, 7552.0),
                    get(16, 58467.0, 0.26, 1.18, 30314.0),
                    get(64, 54824.0, 1.05, 3.35, 27221.0),
                ],
                list: vec![
                    List {
                        connections: 1,
                        clusters: 10_000,
                        pools: 3,
                        wrk: wrk(1911.0, 0.50, 0.98),
                    },
                    List {
                        connections: 16,
                        clusters: 10_000,
                        pools: 3,
                        wrk: wrk(4075.0, 3.86, 6.87),
                    },
                ],
                idempotency: Some(Idempotency {
                    count: 2000,
                    concurrency: 16,
                    creates: phase(469.0, 26.3, 119.0),
                    replays: phase(3492.0, 3.78, 12.2),
                    pgbench_write: None,
                }),
                longpoll: Some(LongPoll {
                    waiters: 10_000,
                    clusters: 100,
                    connect_seconds: 1.0,
                    settle_ms: 3000,
                    gap_ms: 100,
                    answered_early: 0,
                    rss_idle_kb: Some(32 * 1024),
                    rss_waiting_kb: Some(264 * 1024),
                    rss_peak_kb: None,
                    changed: 10_000,
                    unchanged: 0,
                    failed: BTreeMap::new(),
                    change_to_answer: latency(13.8, 23.6, 43.2),
                    patch: latency(1.0, 2.0, 3.0),
                }),
                platform: vec![
                    Platform {
                        cache_on: true,
                        token_cache_ttl_s: 10,
                        calls: 0.0,
                        wrk: WrkRun {
                            requests: 254_246,
                            ..wrk(50827.0, 0.3, 1.0)
                        },
                    },
                    Platform {
                        cache_on: false,
                        token_cache_ttl_s: 0,
                        calls: 104_816.0,
                        wrk: WrkRun {
                            requests: 104_802,
                            ..wrk(20552.0, 0.7, 2.0)
                        },
                    },
                ],
                invalid_tokens: vec![
                    InvalidTokens {
                        distinct: false,
                        requests: 1000,
                        calls: 1.0,
                        statuses: [(401, 1000)].into(),
                        elapsed_s: 0.4,
                        address_quota: 120,
                        refusal_ttl_s: 5,
                    },
                    InvalidTokens {
                        distinct: true,
                        requests: 1000,
                        calls: 121.0,
                        statuses: [(401, 121), (429, 879)].into(),
                        elapsed_s: 0.9,
                        address_quota: 120,
                        refusal_ttl_s: 5,
                    },
                ],
                gateway: vec![gw(
                    16,
                    [
                        (48147.0, 0.31, 0.77),
                        (7797.0, 3.13, 5.86),
                        (14977.0, 0.94, 4.82),
                        (25210.0, 0.60, 1.96),
                        (21298.0, 0.71, 2.21),
                        (21633.0, 0.69, 2.65),
                    ],
                )],
                websocket: Some(WebSocketEcho {
                    messages: 10_000,
                    message_bytes: 256,
                    direct: latency(0.05, 0.1, 0.3),
                    gateway: latency(0.12, 0.3, 0.9),
                }),
                gateway_reload: Some(GatewayReload {
                    rounds: 20,
                    missed: 0,
                    added: latency(3.1, 5.0, 6.0),
                    removed: latency(2.9, 4.0, 4.5),
                }),
                feed_lag: Some(FeedLag {
                    rounds: 200,
                    seen: 200,
                    poll_us: 100,
                    lag: latency(0.4, 1.2, 2.5),
                    showing_read: latency(0.3, 0.9, 1.0),
                    reads: Counts {
                        count: 200,
                        mean: 2.5,
                        p50: 2.0,
                        p99: 6.0,
                        max: 9.0,
                    },
                    patch: latency(3.0, 5.0, 6.0),
                }),
                cache_rss: Some(CacheRss {
                    clusters: 10_000,
                    pools: 3,
                    gets_ok: 10_000,
                    gets_failed: 0,
                    pages: 100,
                    rss_before_kb: 30 * 1024,
                    rss_after_kb: 30 * 1024 + 30_000,
                    cache_entries: 10_000,
                }),
                faces: Some(Faces {
                    connections: 16,
                    rounds: 3,
                    rest_quiet: wrk(20000.0, 0.7, 2.0),
                    rest_traced: wrk(19400.0, 0.72, 2.1),
                    mcp: wrk(12000.0, 1.2, 3.0),
                    traced_ratio: 0.97,
                    quiet_cpu: Some(ProxyCpu {
                        user_us: 15.0,
                        system_us: 8.0,
                    }),
                    traced_cpu: Some(ProxyCpu {
                        user_us: 16.0,
                        system_us: 8.2,
                    }),
                }),
                upgrade: Some(Upgrade {
                    pools: 3,
                    nodes: 9,
                    step_ms: 500,
                    seconds: 14.25,
                    cpu_per_node: PhaseCpu {
                        server_ms: 3.5,
                        postgres_ms: 6.25,
                    },
                }),
            },
        }
    }

    #[test]
    fn keeps_every_row_ratio_goal_and_verdict() {
        let md = markdown(&results(), Some("benchmarks/latency.svg"));
        for want in [
            "| 10 | an upgrade of a cluster of 3 pools, 9 nodes, provider steps of 500 ms (at least 9.5 s of them) | 14.2 s; CPU per node replaced: server 3.5 ms, PostgreSQL 6.2 ms | — (reported) | — |",
            "| 1 | `GET /v1/public/clusters/{id}`, 16 connection(s) | 58467 req/s, p50 0.26 ms, p99 1.18 ms; pgbench -S 30314 tps; **ratio 1.93** | ≥ 1.0 × pgbench -S (reported, not a gate) | meets |",
            "| 1 | `GET /v1/public/clusters/{id}`, 1 connection(s) | 11770 req/s, p50 0.08 ms, p99 0.21 ms; pgbench -S 7552 tps; **ratio 1.56** | — (reported) | — |",
            "| 2 | `GET /v1/public/clusters?size=100`, 10000 clusters × 3 pools, 16 connection(s) | p50 3.86 ms, p99 6.87 ms (4075 req/s) | p99 < 20 ms | meets |",
            "| 3 | Cluster creates with `Idempotency-Key`, 2000 keys, 16 at a time | 469 creates/s (p50 26.3 ms, p99 119 ms) | — (reported) | — |",
            "| 3 | Cluster replays with `Idempotency-Key`, 2000 keys, 16 at a time | 3492 replays/s (p50 3.78 ms, p99 12.2 ms) | — (reported) | — |",
            "| 4 | 10000 `/state` long-polls over 100 clusters: server RSS while they wait | 264 MB (idle before: 32 MB) | < 300 MB | meets |",
            "| 4 | Change (PATCH through a second process) → each waiter's answer | p50 13.8 ms, p99 23.6 ms, max 43.2 ms | p99 < 100 ms | meets |",
            "| 5 | Account-platform calls per 1,000 requests, token cache on (TOKEN_CACHE_TTL_S=10) | 0.00 (0 calls for 254246 requests, 50827 req/s) | — (reported) | — |",
            "| 5 | Account-platform calls per 1,000 requests, token cache off (TOKEN_CACHE_TTL_S=0) | 1000.13 (104816 calls for 104802 requests, 20552 req/s) | — (reported) | — |",
            "| 5 | Account-platform calls per 1,000 requests with one made-up token (one address) | 1 (1 calls; answers 1000 × 401 in 0.4 s) | ≤ 2 (one per 5 s of refusal cache) | meets |",
            "| 5 | Account-platform calls per 1,000 requests with a new made-up token each (one address) | 121 (121 calls; answers 121 × 401, 879 × 429 in 0.9 s) | ≤ 122 (the address's 120 a minute and their refill) | meets |",
            "| 6 | nginx `auth_basic` (htpasswd, apr1), 16 connections | 7797 req/s, p50 3.13 ms, p99 5.86 ms | — (reference) | — |",
            "| 6 | Gateway, Basic route (Argon2id, cached checks), 16 connections | 25210 req/s, p50 0.60 ms, p99 1.96 ms; **3.23 × nginx `auth_basic`** | ≥ 3 × nginx `auth_basic` req/s, p99 ≤ its 5.86 ms | meets |",
            "| 6 | nginx, plain reverse proxy (the ceiling), 16 connections | 48147 req/s, p50 0.31 ms, p99 0.77 ms; CPU 13.5 µs/request (user 2.5 + system 11.0) | — (reference) | — |",
            "| 6 | Gateway, Token route (static bearer token), 16 connections | 21298 req/s, p50 0.71 ms, p99 2.21 ms; CPU 20.8 µs/request (user 5.5 + system 15.3); **0.44 × plain nginx** | ≥ 1 × plain nginx (48147 req/s), p99 ≤ its 0.77 ms, CPU per request ≤ its 13.5 µs | **misses** |",
            "- gateway Token CPU per request / plain nginx's at 16: 1.54",
            "| 6 | Gateway reload: a token added (then removed) through the API → first answer of the gateway accepting (refusing) it, 20 rounds | added p50 3.10 ms, p99 5.00 ms; removed p50 2.90 ms, p99 4.00 ms | p99 < 100 ms | meets |",
            "| 6 | Gateway, Token route over TLS, 16 connections | 18000 req/s, p50 0.80 ms, p99 2.60 ms; **0.45 × nginx over TLS** | — (reported) | — |",
            "- gateway Token over TLS / nginx over TLS at 16: 0.45",
            "| 6 | WebSocket echo, 10000 messages of 256 bytes one at a time over one connection: round trip through the gateway's Token route, beside straight to the upstream | gateway p50 0.12 ms, p99 0.30 ms; direct p50 0.05 ms, p99 0.10 ms | — (reported) | — |",
            "| 7 | Change feed delivery lag: PATCH answered by process B → first read from process A's watch cache showing it, 200 changes | p50 0.40 ms, p99 1.20 ms, max 2.50 ms (of which the read that showed it, p50 0.30 ms); reads until shown p50 2, max 9 | — (reported) | — |",
            "(+29.3 MB), `cluster_cache_entries` 10000: **3.0 KB per cluster**",
            "- GET by id / pgbench -S at 64: 2.01",
            "- replays / creates per second: 7.45",
            "- platform calls, cache off / cache on: ∞ (no call with the cache on)",
            "- gateway Basic / Caddy `basicauth` at 16: 1.68",
            "- gateway OIDC-Bearer / plain nginx at 16: 0.45",
            "](benchmarks/latency.svg)",
            "| `BENCH_CLUSTERS` | `10000` |",
            "| 9 | `GET /v1/public/clusters/{id}` with its log at `info` (the request's fields and the access line), beside `warn`, 16 connections, 3 rounds (the median of each round's info / warn) | info 19400 req/s, p50 0.72 ms, p99 2.10 ms; warn 20000 req/s, p50 0.70 ms, p99 2.00 ms; **0.97 × warn**; server CPU per request: info 24.2 µs, warn 23.0 µs (+5 %) | ≥ 0.95 × warn (at most 5 % lost) | meets |",
            "| 9 | `tools/call get_cluster` through `/mcp` beside `GET /v1/public/clusters/{id}`, 16 connections, median of 3 rounds | 12000 req/s, p50 1.20 ms, p99 3.00 ms; **0.60 × the REST route** | ≥ 0.8 × the REST route | **misses** |",
        ] {
            assert!(md.contains(want), "missing {want:?} in\n{md}");
        }
        assert!(!md.contains("partial run"));
    }

    #[test]
    fn a_partial_run_has_only_its_rows() {
        let mut r = results();
        r.settings.only = Some([3].into());
        r.items = Items {
            idempotency: r.items.idempotency.take(),
            ..Items::default()
        };
        let md = markdown(&r, None);
        assert!(md.contains("items 3 only"));
        assert!(md.contains("| 3 | Cluster creates"));
        assert!(!md.contains("| 1 |") && !md.contains("| 6 |") && !md.contains("!["));
        assert!(chart_points(&r).is_empty());
    }

    #[test]
    fn creates_are_read_against_the_databases_own_write() {
        let mut r = results();
        if let Some(idem) = r.items.idempotency.as_mut() {
            idem.pgbench_write = Some(PgbenchRun {
                tps: 2000.0,
                latency_avg_ms: 8.0,
            });
        }
        let md = markdown(&r, None);
        assert!(
            md.contains(
                "469 creates/s (p50 26.3 ms, p99 119 ms); pgbench -N 2000 tps: **ratio 0.234**"
            ),
            "{md}"
        );
        assert!(md.contains("- creates / pgbench -N at 16: 0.234"));
        assert!(!md.contains("replays/s (p50 3.78 ms, p99 12.2 ms); pgbench"));
    }

    #[test]
    fn the_cpu_of_a_create_is_reported_when_measured() {
        let mut r = results();
        // Item 10 always reports its CPU, item 6 when it read it; this is about item 3's.
        r.items.upgrade = None;
        for g in &mut r.items.gateway {
            g.nginx_cpu = None;
            g.gateway_token_cpu = None;
        }
        if let Some(f) = r.items.faces.as_mut() {
            f.quiet_cpu = None;
            f.traced_cpu = None;
        }
        assert!(!markdown(&r, None).contains("CPU per"));
        if let Some(idem) = r.items.idempotency.as_mut() {
            idem.creates.cpu = Some(PhaseCpu {
                server_ms: 1.25,
                postgres_ms: 2.5,
            });
        }
        let md = markdown(&r, None);
        assert!(
            md.contains(
                "(p50 26.3 ms, p99 119 ms); CPU per request: server 1.25 ms, PostgreSQL 2.50 ms"
            ),
            "{md}"
        );
        assert!(md.contains("- CPU per create: server 1.25 ms + PostgreSQL 2.50 ms = 3.75 ms"));
    }

    #[test]
    fn failures_are_marked_in_the_rows() {
        let mut r = results();
        r.items.list[1].wrk.non_2xx = 3;
        if let Some(lp) = r.items.longpoll.as_mut() {
            lp.changed = 9_990;
            lp.unchanged = 10;
        }
        let md = markdown(&r, None);
        assert!(md.contains("(**3 non-2xx, 0 socket errors**) | p99 < 20 ms |"));
        assert!(md.contains("**9990 of 10000 answered with the change"));
    }

    #[test]
    fn results_survive_json() {
        let r = results();
        let text = serde_json::to_string(&r).unwrap();
        let back: Results = serde_json::from_str(&text).unwrap();
        assert_eq!(back, r);
        assert_eq!(
            chart_points(&back)
                .iter()
                .map(|p| p.connections)
                .collect::<Vec<_>>(),
            [1, 16, 64]
        );
    }
}
