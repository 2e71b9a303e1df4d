//! One `make bench` run: where its output goes, the order of its items, and the clean-up that
//! happens whatever the outcome (every process stopped, every database of the run dropped).
//!
//! The order: the seed (through the store), then item 8 (it wants the seed alone and a fresh
//! process), server A for items 1, 2, 5 (cache on) and 3, a fresh pair for item 4, server C for
//! item 5 (cache off), a fresh pair for item 7, and the proxies and gateway of item 6.

pub mod cache_rss;
pub mod cpu;
pub mod database;
pub mod faces;
pub mod feed_lag;
pub mod gateway;
pub mod gateway_reload;
pub mod get_by_id;
pub mod idempotency;
pub mod list;
pub mod longpoll;
pub mod machine;
pub mod pgbench;
pub mod platform;
pub mod process;
pub mod seed;
pub mod server;
pub mod upgrade;
pub mod websocket;
pub mod wrk;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use uuid::Uuid;

use self::database::Databases;
use self::server::{ServerEnv, Stub, random_hex};
use self::wrk::Wrk;
use crate::results::{Items, Results};
use crate::settings::Settings;

/// What scripts/bench.sh hands over.
#[derive(Debug, Clone)]
pub struct Setup {
    /// An admin URL to the `postgres` database of the server to use.
    pub admin_url: String,
    /// Where the release binaries are.
    pub bin_dir: PathBuf,
    /// The checkout.
    pub root: PathBuf,
}

/// A client that keeps one connection per host alive, so a measured request never includes a
/// connect (items 6 and 7 time one request at a time).
pub fn one_connection_client() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(1)
        .timeout(std::time::Duration::from_secs(10))
        .build()
}

/// Where the report goes: `BENCH_OUT`, else docs/ for a full release run and .local/bench/out
/// for a partial or non-release one, which must not replace the published figures.
pub fn out_dir(root: &Path, s: &Settings) -> anyhow::Result<PathBuf> {
    let docs = root.join("docs");
    let partial = s.only.is_some() || s.profile != "release";
    let Some(out) = &s.out else {
        return Ok(if partial {
            root.join(".local/bench/out")
        } else {
            docs
        });
    };
    let out = if out.is_absolute() {
        out.clone()
    } else {
        root.join(out)
    };
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    if partial && same(&out, &docs) {
        bail!(
            "a partial (BENCH_ONLY) or non-release (BENCH_PROFILE={}) run does not write docs/: \
             set BENCH_OUT to another directory",
            s.profile
        );
    }
    Ok(out)
}

/// Everything the items share.
pub struct Bench<'a> {
    pub settings: &'a Settings,
    pub run_id: String,
    pub bin: PathBuf,
    pub raw: PathBuf,
    /// Scratch files of the run (configurations, the wrk script).
    pub work: PathBuf,
    /// Every process's output.
    pub logs: PathBuf,
    pub http: reqwest::Client,
    pub wrk: Wrk,
    pub dbs: &'a Databases,
    pub env: ServerEnv,
    /// The seeded clusters, `bench-1` first.
    pub ids: Vec<Uuid>,
    /// The demo super_admin of acme.
    pub token: &'static str,
}

impl Bench<'_> {
    /// `bench-1`, the cluster the single-cluster items read.
    pub fn first_cluster(&self) -> anyhow::Result<Uuid> {
        self.ids
            .first()
            .copied()
            .context("no seeded cluster (BENCH_CLUSTERS)")
    }

    /// The `Authorization` header of the demo super_admin, for wrk.
    pub fn auth(&self) -> String {
        format!("Authorization: Bearer {}", self.token)
    }

    fn save(&self, results: &Results) -> anyhow::Result<()> {
        let text = serde_json::to_string_pretty(results)?;
        std::fs::write(self.raw.join("results.json"), text + "\n")
            .context("writing raw/results.json")
    }
}

/// Resolves when the run is asked to stop (Ctrl-C, or the TERM scripts/bench.sh forwards).
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => "SIGINT",
        _ = term.recv() => "SIGTERM",
    }
}

/// Runs the items, then writes the report. The databases are dropped and the processes
/// stopped before it returns, on success, failure or interruption alike.
pub async fn main(setup: Setup, settings: Settings) -> anyhow::Result<()> {
    let out = out_dir(&setup.root, &settings)?;
    let raw = out.join("benchmarks/raw");
    let work = setup.root.join(".local/bench");
    let logs = work.join("logs");
    for dir in [&raw, &logs] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    // The previous run's files; a run writes all of its own again.
    for dir in [&raw, &logs] {
        for entry in std::fs::read_dir(dir)?.flatten() {
            let p = entry.path();
            let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
            if p.is_file() && matches!(ext, "txt" | "json" | "log") {
                std::fs::remove_file(&p)?;
            }
        }
    }
    let run_id = random_hex(6);
    crate::say!(
        "make bench: run {run_id}, profile {}, items {}, results in {}",
        settings.profile,
        settings.only.as_ref().map_or("all".to_owned(), |o| {
            o.iter().map(u8::to_string).collect::<Vec<_>>().join(",")
        }),
        out.display()
    );
    check_open_files(&settings);
    let dbs = Databases::new(&setup.admin_url, &run_id);
    let outcome = tokio::select! {
        r = run(&setup, &settings, &dbs, &run_id, &raw, &work, &logs) => r,
        signal = interrupted() => Err(anyhow!("stopped by {signal}")),
    };
    // The run's future is gone: each process it had started was killed with it.
    let dropped = dbs.drop_all().await;
    if let Err(e) = &dropped {
        crate::say!("error: could not drop every database of the run: {e:#}");
    }
    if outcome.is_err() {
        crate::say!("the processes' output is in {}", logs.display());
    }
    let results = outcome?;
    dropped?;
    write_report(&out, &results)?;
    crate::say!(
        "make bench: done (report: {})",
        out.join("benchmarks.md").display()
    );
    Ok(())
}

/// `--report-only`: the report and chart again from raw/results.json.
pub fn report_only(root: &Path, settings: &Settings) -> anyhow::Result<()> {
    let out = out_dir(root, settings)?;
    let path = out.join("benchmarks/raw/results.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let results: Results =
        serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
    write_report(&out, &results)?;
    crate::say!("wrote {}", out.join("benchmarks.md").display());
    Ok(())
}

/// benchmarks.md, and benchmarks/latency.svg when item 1 ran.
pub fn write_report(out: &Path, results: &Results) -> anyhow::Result<()> {
    let points = crate::report::chart_points(results);
    let link = if points.is_empty() {
        None
    } else {
        crate::chart::write_latency_svg(
            &out.join("benchmarks/latency.svg"),
            "GET /v1/public/clusters/{id}: latency against connections",
            &points,
        )?;
        Some("benchmarks/latency.svg")
    };
    let md = crate::report::markdown(results, link);
    std::fs::write(out.join("benchmarks.md"), md).context("writing benchmarks.md")
}

/// 10,000 waiters need as many descriptors in the server and in bench-longpoll; the limit is
/// raised by scripts/bench.sh as far as the hard limit allows.
fn check_open_files(s: &Settings) {
    if !s.runs(4) {
        return;
    }
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    match limit {
        Some(n) if (s.waiters as u64) + 200 >= n => crate::say!(
            "warning: the open files limit ({n}) is below BENCH_WAITERS={}: some waiters will fail",
            s.waiters
        ),
        _ => {}
    }
}

async fn run(
    setup: &Setup,
    settings: &Settings,
    dbs: &Databases,
    run_id: &str,
    raw: &Path,
    work: &Path,
    logs: &Path,
) -> anyhow::Result<Results> {
    let machine = machine::describe(dbs, &settings.profile).await;
    let name = dbs.name("");
    crate::say!("creating the database {name} (dropped at the end)");
    let db_url = dbs.create(&name).await?;
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()?;
    let stub = Stub::start(&setup.bin_dir, logs, &http).await?;
    let env = ServerEnv::new(
        &setup.bin_dir,
        logs,
        &db_url,
        &stub,
        settings.db_pool_size,
        &http,
    );
    // Items 3, 6 and 10 need no seeded cluster; every other item reads the seed.
    let ids = if [1, 2, 4, 5, 7, 8, 9].iter().any(|n| settings.runs(*n)) {
        crate::say!(
            "seeding {} clusters × {} pools for acme through the store",
            settings.clusters,
            settings.pools
        );
        seed::clusters(&db_url, settings.clusters, settings.pools).await?
    } else {
        // The servers run the migrations; the store is not needed.
        Vec::new()
    };
    let b = Bench {
        settings,
        run_id: run_id.to_owned(),
        bin: setup.bin_dir.clone(),
        raw: raw.to_owned(),
        work: work.to_owned(),
        logs: logs.to_owned(),
        wrk: Wrk::new(work, raw)?,
        http,
        dbs,
        env,
        ids,
        token: account_platform::dev::TOKEN_ACME_SUPER_ADMIN,
    };
    let mut results = Results {
        machine,
        settings: settings.clone(),
        items: Items::default(),
    };
    b.save(&results)?;
    let runs = |n: u8| settings.runs(n);

    if runs(8) {
        results.items.cache_rss = Some(cache_rss::run(&b).await?);
        b.save(&results)?;
    }
    if runs(1) || runs(2) || runs(3) || runs(5) {
        let a = b.env.start("a", 10).await?;
        // One request first: the token cache is warm for every measured one.
        let warm = match b.ids.first() {
            Some(id) => format!("{}/v1/public/clusters/{id}", a.url),
            None => format!("{}/v1/public/clusters?organization=acme&size=1", a.url),
        };
        b.http
            .get(&warm)
            .bearer_auth(b.token)
            .send()
            .await?
            .error_for_status()
            .context("the warm-up request")?;
        if runs(1) {
            results.items.get_by_id = get_by_id::run(&b, &a).await?;
            b.save(&results)?;
        }
        if runs(2) {
            results.items.list = list::run(&b, &a).await?;
            b.save(&results)?;
        }
        if runs(5) {
            results
                .items
                .platform
                .push(platform::run(&b, &a, 10).await?);
            for distinct in [false, true] {
                let r = platform::invalid_tokens(&b, &a, distinct).await?;
                results.items.invalid_tokens.push(r);
            }
            b.save(&results)?;
        }
        if runs(3) {
            results.items.idempotency = Some(idempotency::run(&b, &a.url, a.pid()).await?);
            b.save(&results)?;
        }
        a.stop().await?;
    }
    if runs(4) {
        results.items.longpoll = Some(longpoll::run(&b).await?);
        b.save(&results)?;
    }
    if runs(5) {
        let c = b.env.start("c", 0).await?;
        results.items.platform.push(platform::run(&b, &c, 0).await?);
        c.stop().await?;
        b.save(&results)?;
    }
    if runs(7) {
        results.items.feed_lag = Some(feed_lag::run(&b).await?);
        b.save(&results)?;
    }
    if runs(6) {
        let item = gateway::run(&b).await?;
        results.items.gateway = item.rows;
        results.items.gateway_reload = Some(item.reload);
        results.items.websocket = Some(item.websocket);
        b.save(&results)?;
    }
    if runs(9) {
        results.items.faces = Some(faces::run(&b).await?);
        b.save(&results)?;
    }
    if runs(10) {
        results.items.upgrade = Some(upgrade::run(&b).await?);
        b.save(&results)?;
    }
    stub.stop().await?;
    Ok(results)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_lookup(|k| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
            .unwrap()
    }

    #[test]
    fn only_a_full_release_run_writes_docs() {
        let root = Path::new("/nowhere/checkout");
        assert_eq!(out_dir(root, &settings(&[])).unwrap(), root.join("docs"));
        assert_eq!(
            out_dir(root, &settings(&[("BENCH_ONLY", "7")])).unwrap(),
            root.join(".local/bench/out")
        );
        assert_eq!(
            out_dir(root, &settings(&[("BENCH_PROFILE", "dev")])).unwrap(),
            root.join(".local/bench/out")
        );
        assert_eq!(
            out_dir(
                root,
                &settings(&[("BENCH_OUT", "/tmp/b"), ("BENCH_ONLY", "1")])
            )
            .unwrap(),
            PathBuf::from("/tmp/b")
        );
        assert_eq!(
            out_dir(root, &settings(&[("BENCH_OUT", "out")])).unwrap(),
            root.join("out")
        );
        assert!(
            out_dir(
                root,
                &settings(&[("BENCH_OUT", "docs"), ("BENCH_ONLY", "1")])
            )
            .is_err()
        );
    }
}
