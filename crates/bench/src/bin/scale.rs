//! `kubesvc-scale`: `make scale` (scripts/scale.sh builds the release binaries, chooses
//! PostgreSQL and runs `kubesvc-scale --admin-url URL --bin-dir DIR --root CHECKOUT`). It
//! creates the databases `kubesvc_bench_<random>` it needs and drops them at the end, starts
//! and stops its processes, and writes docs/scale.md (`SCALE_OUT` to write elsewhere).
//!
//! Settings (environment, defaults in brackets): `SCALE_CLUSTERS` [1000000], `SCALE_BASELINE`
//! [10000] (the size measured beside it), `SCALE_EVENTS_PER_CLUSTER` [10], `SCALE_DURATION`
//! [10] (seconds of each wrk and pgbench run), `SCALE_CONNECTIONS` [16], `SCALE_DB_POOL_SIZE`
//! [16].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use bench::run::Setup;
use bench::scale::Settings;

fn parse(args: Vec<String>) -> anyhow::Result<(Setup, Settings)> {
    let (mut admin_url, mut bin_dir, mut root) = (None, None, None);
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--admin-url" => admin_url = Some(value()?),
            "--bin-dir" => bin_dir = Some(PathBuf::from(value()?)),
            "--root" => root = Some(PathBuf::from(value()?)),
            other => bail!("unknown argument {other}"),
        }
    }
    let (Some(admin_url), Some(bin_dir)) = (admin_url, bin_dir) else {
        bail!("--admin-url and --bin-dir are required");
    };
    let root = match root {
        Some(r) => r,
        None => std::env::current_dir()?,
    };
    Ok((
        Setup {
            admin_url,
            bin_dir,
            root,
        },
        Settings::from_env()?,
    ))
}

fn main() -> ExitCode {
    let (setup, settings) = match parse(std::env::args().skip(1).collect()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("kubesvc-scale: {e:#}");
            return ExitCode::from(2);
        }
    };
    let result = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
        .and_then(|rt| rt.block_on(bench::scale::main(setup, settings)));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("==> error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
