//! `kubesvc-bench`: `make bench`. scripts/bench.sh installs the tools, builds the release
//! binaries, chooses PostgreSQL and runs
//! `kubesvc-bench --admin-url URL --bin-dir DIR --root CHECKOUT`.
//!
//! It starts and stops every process itself (platform-stub, servers, nginx, Caddy, the gateway,
//! bench-oidc-issuer, bench-longpoll; each on a free loopback port, each killed if the run
//! fails or is interrupted), creates the databases `kubesvc_bench_<random>` and
//! `kubesvc_bench_<random>_pgbench` and drops them at the end (it touches no other database),
//! seeds the clusters through the store, runs the items, writes their typed results to
//! `benchmarks/raw/results.json` beside each tool's raw output, then `benchmarks.md` and
//! `benchmarks/latency.svg`. `--report-only` writes the report again from results.json.
//!
//! Items (the row numbers of the report): 1 GET by id next to `pgbench -S`; 2 a page of 100 of
//! many clusters; 3 creates and replays with `Idempotency-Key`; 4 10,000 `/state` long-polls
//! (RSS, change → answer); 5 account-platform calls per 1,000 requests; 6 the gateway next to
//! nginx and Caddy; 7 the change feed's delivery lag between two processes; 8 server RSS with
//! every seeded cluster cached; 9 a read through `/mcp` beside the API's, and the API's with
//! its spans at `info` beside `warn`.
//!
//! Settings (environment, defaults in brackets; `--help` prints the same list):
//! - `BENCH_ONLY` [all]: the items to run, e.g. `1,3` (`--only` overrides it); a partial run
//!   never writes docs/
//! - `BENCH_DURATION` [10]: seconds of each wrk and pgbench run (items 1, 2 and 6)
//! - `BENCH_CONNECTIONS` [1 16 64]: item 1, wrk connections and pgbench clients
//! - `BENCH_CLUSTERS` [10000], `BENCH_POOLS` [3]: items 2 and 8, the seed for acme
//! - `BENCH_LIST_CONNECTIONS` [1 16]: item 2, wrk connections of the list
//! - `BENCH_CREATES` [2000], `BENCH_CREATE_CONCURRENCY` [16]: item 3
//! - `BENCH_WAITERS` [10000], `BENCH_WAIT_CLUSTERS` [100], `BENCH_GAP_MS` [100],
//!   `BENCH_SETTLE_MS` [3000]: item 4
//! - `BENCH_PLATFORM_DURATION` [5], `BENCH_PLATFORM_CONNECTIONS` [16]: item 5
//! - `BENCH_GATEWAY_CONNECTIONS` [16 64], `BENCH_GATEWAY_ROUNDS` [3]: item 6
//! - `BENCH_LAG_ROUNDS` [200], `BENCH_LAG_POLL_US` [100]: item 7
//! - `BENCH_DB_POOL_SIZE` [16]: the servers' `DATABASE_POOL_SIZE`
//! - `BENCH_PROFILE` [release]: the binaries' cargo profile (only release writes docs/)
//! - `BENCH_OUT` [docs]: where benchmarks.md and benchmarks/ go; a partial or non-release run
//!   defaults to .local/bench/out
//! - `BENCH_SKIP_BUILD` [0]: read by scripts/bench.sh only (1: no cargo build)

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use bench::run::Setup;
use bench::settings::{Settings, help, parse_only};

enum Command {
    Help,
    Run(Setup, Settings),
    ReportOnly(PathBuf, Settings),
}

fn parse(args: Vec<String>) -> anyhow::Result<Command> {
    let mut settings = Settings::from_env()?;
    let (mut admin_url, mut bin_dir, mut root, mut report_only) = (None, None, None, false);
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--admin-url" => admin_url = Some(value()?),
            "--bin-dir" => bin_dir = Some(PathBuf::from(value()?)),
            "--root" => root = Some(PathBuf::from(value()?)),
            "--only" => settings.only = parse_only(&value()?)?,
            "--report-only" => report_only = true,
            other => bail!("unknown argument {other} (see --help)"),
        }
    }
    let root = match root {
        Some(r) => r,
        None => std::env::current_dir()?,
    };
    if report_only {
        return Ok(Command::ReportOnly(root, settings));
    }
    let (Some(admin_url), Some(bin_dir)) = (admin_url, bin_dir) else {
        bail!("--admin-url and --bin-dir are required (see --help)");
    };
    Ok(Command::Run(
        Setup {
            admin_url,
            bin_dir,
            root,
        },
        settings,
    ))
}

fn main() -> ExitCode {
    let command = match parse(std::env::args().skip(1).collect()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kubesvc-bench: {e:#}");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        Command::Help => {
            print!("{}", help());
            return ExitCode::SUCCESS;
        }
        Command::ReportOnly(root, settings) => bench::run::report_only(&root, &settings),
        Command::Run(setup, settings) => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("starting the runtime")
            .and_then(|rt| rt.block_on(bench::run::main(setup, settings))),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("==> error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
