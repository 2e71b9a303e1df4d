//! The typed results of one `make bench` run: what `kubesvc-bench` measured, written as
//! raw/results.json and read back by the report. An item not run is empty (`None` or no rows).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::settings::Settings;
use crate::stats::{Counts, Summary};

/// One wrk run, from the JSON line its `done()` script prints.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct WrkRun {
    pub requests: u64,
    pub seconds: f64,
    pub rps: f64,
    pub bytes: u64,
    pub p50_ms: f64,
    pub p75_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Answers that were not 2xx/3xx: a run with any is not a clean measurement.
    pub non_2xx: u64,
    /// connect + read + write + timeout socket errors.
    pub socket_errors: u64,
}

impl WrkRun {
    pub fn clean(&self) -> bool {
        self.non_2xx + self.socket_errors == 0
    }
}

/// pgbench's figures.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PgbenchRun {
    pub tps: f64,
    pub latency_avg_ms: f64,
}

/// Item 1 at one connection count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GetById {
    pub connections: u32,
    pub wrk: WrkRun,
    pub pgbench: PgbenchRun,
}

/// Item 2 at one connection count.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct List {
    pub connections: u32,
    pub clusters: u32,
    pub pools: u32,
    pub wrk: WrkRun,
}

/// One phase of item 3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IdempotencyPhase {
    pub requests: usize,
    pub seconds: f64,
    pub per_second: f64,
    /// The answers the phase expects: 201 (creates), 201 with `Idempotency-Replay: true` (replays).
    pub expected: usize,
    pub statuses: BTreeMap<String, usize>,
    pub latency: Summary,
    /// CPU the server and PostgreSQL spent per request during the phase.
    #[serde(default)]
    pub cpu: Option<PhaseCpu>,
}

/// CPU milliseconds per request: the server process, and every PostgreSQL process.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseCpu {
    pub server_ms: f64,
    pub postgres_ms: f64,
}

/// Item 3.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Idempotency {
    pub count: usize,
    pub concurrency: usize,
    pub creates: IdempotencyPhase,
    pub replays: IdempotencyPhase,
    /// `pgbench -N` (a small write transaction) at the same concurrency, on a scratch database:
    /// what this machine's PostgreSQL does for a small write, to read creates against.
    #[serde(default)]
    pub pgbench_write: Option<PgbenchRun>,
}

/// Item 4, as `bench-longpoll` writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LongPoll {
    pub waiters: usize,
    pub clusters: usize,
    pub connect_seconds: f64,
    pub settle_ms: u64,
    pub gap_ms: u64,
    /// Answers that came before any change was made (a failure to wait).
    pub answered_early: usize,
    pub rss_idle_kb: Option<u64>,
    pub rss_waiting_kb: Option<u64>,
    /// The process's peak RSS by the end of the run.
    pub rss_peak_kb: Option<u64>,
    pub changed: usize,
    pub unchanged: usize,
    pub failed: BTreeMap<String, usize>,
    /// From sending the PATCH to each waiter's full answer.
    pub change_to_answer: Summary,
    /// The PATCH requests themselves (through the second process).
    pub patch: Summary,
}

/// Item 5 with the token cache on or off.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Platform {
    pub cache_on: bool,
    pub token_cache_ttl_s: u32,
    /// `account_platform_calls_total` (both endpoints) after the run minus before.
    pub calls: f64,
    pub wrk: WrkRun,
}

/// Item 5 for tokens the platform refuses: 1,000 requests from one address, all with one
/// made-up token or each with a new one, against a server with the default limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvalidTokens {
    /// Whether every request carried a token of its own.
    pub distinct: bool,
    pub requests: u64,
    /// `account_platform_calls_total{endpoint="me"}` after minus before.
    pub calls: f64,
    /// Answers by status (401, 429).
    pub statuses: BTreeMap<u16, u64>,
    /// How long the requests took, for the refill the bound allows.
    pub elapsed_s: f64,
    /// The server's `RATE_LIMIT_UNAUTHENTICATED_PER_ADDRESS` and `TOKEN_REFUSAL_CACHE_TTL_S`.
    pub address_quota: u32,
    pub refusal_ttl_s: u32,
}

/// Item 6 at one connection count: the proxies users would otherwise pick, then the gateway's
/// routes, all in front of one upstream.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Gateway {
    pub connections: u32,
    pub nginx: WrkRun,
    pub nginx_basic: WrkRun,
    pub caddy_basic: WrkRun,
    pub gateway_basic: WrkRun,
    pub gateway_token: WrkRun,
    pub gateway_oidc: WrkRun,
    /// nginx proxying over TLS, and the gateway's Token route over TLS, one certificate.
    #[serde(default)]
    pub nginx_tls: Option<WrkRun>,
    #[serde(default)]
    pub gateway_token_tls: Option<WrkRun>,
    /// CPU per request of nginx's plain proxy and of the gateway's Token route, in the runs
    /// their figures come from (older results have neither).
    #[serde(default)]
    pub nginx_cpu: Option<ProxyCpu>,
    #[serde(default)]
    pub gateway_token_cpu: Option<ProxyCpu>,
}

/// The CPU time a proxy's processes took during a wrk run (user and system, all threads, and
/// for nginx its worker processes), over the run's requests: microseconds per request.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct ProxyCpu {
    pub user_us: f64,
    pub system_us: f64,
}

impl ProxyCpu {
    pub fn total_us(&self) -> f64 {
        self.user_us + self.system_us
    }
}

/// Item 6, last part: credential changes made through the API, awaited on the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GatewayReload {
    pub rounds: usize,
    /// Changes that did not show within the round's limit.
    pub missed: usize,
    /// From the API's 201 to the gateway's first 200 with the new token.
    pub added: Summary,
    /// From the API's 204 to the gateway's first 401 with the removed token.
    pub removed: Summary,
}

/// Item 6, WebSocket: messages sent one at a time over one connection and awaited back from an
/// echo upstream, straight and through the gateway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebSocketEcho {
    pub messages: usize,
    pub message_bytes: usize,
    pub direct: Summary,
    pub gateway: Summary,
}

/// Item 7: changes made through one server process, awaited on another's watch cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedLag {
    pub rounds: usize,
    /// Rounds whose change showed on the reading process in time.
    pub seen: usize,
    pub poll_us: u64,
    /// From the PATCH's answer (process B) to the first answer of process A showing it.
    pub lag: Summary,
    /// The read that showed the change, alone: its first read after the notification dropped
    /// A's copy, so one that goes to the database.
    #[serde(default)]
    pub showing_read: Summary,
    /// Reads of process A per round until it showed the change (the last one included).
    pub reads: Counts,
    /// The PATCH requests themselves.
    pub patch: Summary,
}

/// Item 8: a fresh server's memory before and after every seeded cluster was read once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheRss {
    pub clusters: u32,
    pub pools: u32,
    /// GETs by id that answered 200, and list pages read.
    pub gets_ok: usize,
    pub gets_failed: usize,
    pub pages: usize,
    pub rss_before_kb: u64,
    pub rss_after_kb: u64,
    /// `cluster_cache_entries` of `/metrics` after the reads.
    pub cache_entries: u64,
}

impl CacheRss {
    /// The memory the reads added, per cached cluster, in KB; `None` when nothing was cached.
    pub fn kb_per_cluster(&self) -> Option<f64> {
        (self.cache_entries > 0).then(|| {
            (self.rss_after_kb as f64 - self.rss_before_kb as f64) / self.cache_entries as f64
        })
    }
}

/// Where it ran: `(label, value)` in report order.
pub type Machine = Vec<(String, String)>;

/// Every figure of one run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Items {
    #[serde(default)]
    pub get_by_id: Vec<GetById>,
    #[serde(default)]
    pub list: Vec<List>,
    #[serde(default)]
    pub idempotency: Option<Idempotency>,
    #[serde(default)]
    pub longpoll: Option<LongPoll>,
    #[serde(default)]
    pub platform: Vec<Platform>,
    #[serde(default)]
    pub invalid_tokens: Vec<InvalidTokens>,
    #[serde(default)]
    pub gateway: Vec<Gateway>,
    #[serde(default)]
    pub gateway_reload: Option<GatewayReload>,
    #[serde(default)]
    pub websocket: Option<WebSocketEcho>,
    #[serde(default)]
    pub feed_lag: Option<FeedLag>,
    #[serde(default)]
    pub cache_rss: Option<CacheRss>,
    #[serde(default)]
    pub faces: Option<Faces>,
    #[serde(default)]
    pub upgrade: Option<Upgrade>,
}

/// Item 10: an upgrade of a 3-pool, 9-node cluster, its simulated steps at the default delay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Upgrade {
    pub pools: u32,
    pub nodes: u32,
    /// `PROVISIONER_STEP_MS` of the run (the server's default).
    pub step_ms: u64,
    /// From the 202 to the cluster showing no upgrade in flight.
    pub seconds: f64,
    /// CPU of the server and of PostgreSQL for the whole upgrade, per node replaced.
    pub cpu_per_node: PhaseCpu,
}

/// Item 9: one read through the assistant's face beside the API's, and the API's with its
/// spans and access log at `info` beside `warn`; each its median round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Faces {
    pub connections: u32,
    pub rounds: u32,
    /// `GET /v1/public/clusters/{id}`, server at `RUST_LOG=warn` (no span enabled).
    pub rest_quiet: WrkRun,
    /// The same, server at `RUST_LOG=info` (request, use case and change spans, access line).
    pub rest_traced: WrkRun,
    /// `tools/call get_cluster` through `/mcp` on the `warn` server.
    pub mcp: WrkRun,
    /// The `info` server's req/s over the `warn` server's in the same round, the median of
    /// the rounds: the two runs of a round are seconds apart, so a machine whose speed drifts
    /// between rounds moves both.
    #[serde(default)]
    pub traced_ratio: f64,
    /// Each server's CPU per request (user + system, all its threads), the median round.
    #[serde(default)]
    pub quiet_cpu: Option<ProxyCpu>,
    #[serde(default)]
    pub traced_cpu: Option<ProxyCpu>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    pub machine: Machine,
    pub settings: Settings,
    pub items: Items,
}
