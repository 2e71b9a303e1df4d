//! The `BENCH_*` settings of `make bench`: environment variables with the defaults the goals of
//! docs/benchmarks.md are stated for. One table ([`TABLE`]) gives each name, default and meaning;
//! `kubesvc-bench --help` prints it and [`Settings::from_lookup`] reads it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::str::FromStr;

use anyhow::{Context, anyhow, bail};
use serde::{Deserialize, Serialize};

/// The items of the report, numbered as its rows are.
pub const ITEMS: [(u8, &str); 10] = [
    (1, "GET /v1/public/clusters/{id} next to pgbench -S"),
    (2, "a page of 100 of BENCH_CLUSTERS clusters"),
    (3, "creates with Idempotency-Key, then their replays"),
    (
        4,
        "BENCH_WAITERS /state long-polls: RSS while waiting, change → answer",
    ),
    (
        5,
        "account-platform calls per 1,000 requests, token cache on and off",
    ),
    (6, "the gateway next to nginx and Caddy"),
    (
        7,
        "the change feed's delivery lag between two server processes",
    ),
    (8, "server RSS with every seeded cluster in the watch cache"),
    (
        9,
        "a read through /mcp beside the API's, and the API's with its spans at info beside warn",
    ),
    (
        10,
        "a 3-pool, 9-node cluster upgraded at the default step time: its duration and CPU per node replaced",
    ),
];

/// `(name, default, meaning)` of every setting.
pub const TABLE: &[(&str, &str, &str)] = &[
    (
        "BENCH_ONLY",
        "",
        "the items to run, e.g. `1,3` (empty: all); a partial run never writes docs/",
    ),
    (
        "BENCH_DURATION",
        "10",
        "seconds of each wrk and pgbench run (items 1, 2 and 6)",
    ),
    (
        "BENCH_CONNECTIONS",
        "1 16 64",
        "item 1: wrk connections and pgbench clients",
    ),
    (
        "BENCH_CLUSTERS",
        "10000",
        "items 2 and 8: clusters seeded through the store for acme",
    ),
    (
        "BENCH_POOLS",
        "3",
        "items 2 and 8: node pools of each seeded cluster",
    ),
    (
        "BENCH_LIST_CONNECTIONS",
        "1 16",
        "item 2: wrk connections of the list",
    ),
    (
        "BENCH_CREATES",
        "2000",
        "item 3: distinct Idempotency-Keys (then replayed once each)",
    ),
    (
        "BENCH_CREATE_CONCURRENCY",
        "16",
        "item 3: creates in flight at once",
    ),
    (
        "BENCH_WAITERS",
        "10000",
        "item 4: concurrent /state long-polls on one server process",
    ),
    (
        "BENCH_WAIT_CLUSTERS",
        "100",
        "item 4: over this many clusters",
    ),
    (
        "BENCH_GAP_MS",
        "100",
        "item 4: pause between two clusters' changes",
    ),
    (
        "BENCH_SETTLE_MS",
        "3000",
        "item 4: pause after the last waiter is sent, before RSS and changes",
    ),
    (
        "BENCH_PLATFORM_DURATION",
        "5",
        "item 5: seconds of each wrk run (cache on, cache off)",
    ),
    (
        "BENCH_PLATFORM_CONNECTIONS",
        "16",
        "item 5: wrk connections",
    ),
    (
        "BENCH_GATEWAY_CONNECTIONS",
        "16 64",
        "item 6: wrk connections through each proxy and gateway route",
    ),
    (
        "BENCH_GATEWAY_ROUNDS",
        "3",
        "item 6: rounds over every proxy and route in turn; each figure is the round with the median req/s",
    ),
    (
        "BENCH_LAG_ROUNDS",
        "200",
        "item 7: changes made through one process and awaited on the other",
    ),
    (
        "BENCH_LAG_POLL_US",
        "100",
        "item 7: pause between two reads while waiting for a change (microseconds)",
    ),
    (
        "BENCH_DB_POOL_SIZE",
        "16",
        "the servers' DATABASE_POOL_SIZE",
    ),
    (
        "BENCH_PROFILE",
        "release",
        "cargo profile of the binaries (only release writes docs/)",
    ),
    (
        "BENCH_OUT",
        "docs",
        "where benchmarks.md and benchmarks/ go (relative to the checkout); a partial or \
         non-release run defaults to .local/bench/out",
    ),
    (
        "BENCH_SKIP_BUILD",
        "0",
        "1: scripts/bench.sh uses the binaries as built",
    ),
];

/// Every setting, parsed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// The items to run; `None`: all of them.
    pub only: Option<BTreeSet<u8>>,
    pub duration_s: u32,
    pub connections: Vec<u32>,
    pub clusters: u32,
    pub pools: u32,
    pub list_connections: Vec<u32>,
    pub creates: usize,
    pub create_concurrency: usize,
    pub waiters: usize,
    pub wait_clusters: usize,
    pub gap_ms: u64,
    pub settle_ms: u64,
    pub platform_duration_s: u32,
    pub platform_connections: u32,
    pub gateway_connections: Vec<u32>,
    /// Item 6's rounds: on a shared machine every proxy's speed drifts over a minute, and a
    /// ratio of two runs far apart in time carries the drift; taken in turn, round after
    /// round, each proxy's median run stands beside the others'.
    #[serde(default = "one")]
    pub gateway_rounds: u32,
    pub lag_rounds: usize,
    pub lag_poll_us: u64,
    pub db_pool_size: u32,
    pub profile: String,
    /// `BENCH_OUT` as given; `None` when unset.
    pub out: Option<PathBuf>,
}

/// Runs recorded before rounds existed were one round.
fn one() -> u32 {
    1
}

fn number<T: FromStr>(name: &str, v: &str) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    v.trim()
        .parse()
        .map_err(|e| anyhow!("{name}={v:?}: {e} (a whole number is expected)"))
}

/// `"1 16 64"`: whole numbers separated by spaces or commas, at least one.
fn numbers(name: &str, v: &str) -> anyhow::Result<Vec<u32>> {
    let list = v
        .split([' ', ','])
        .filter(|w| !w.is_empty())
        .map(|w| number(name, w))
        .collect::<anyhow::Result<Vec<u32>>>()?;
    if list.is_empty() {
        bail!("{name} is empty: give at least one number");
    }
    if list.contains(&0) {
        bail!("{name}={v:?}: 0 connections measure nothing");
    }
    Ok(list)
}

/// `BENCH_ONLY`: item numbers separated by commas or spaces; empty means every item.
pub fn parse_only(v: &str) -> anyhow::Result<Option<BTreeSet<u8>>> {
    let mut set = BTreeSet::new();
    for w in v.split([' ', ',']).filter(|w| !w.is_empty()) {
        let n: u8 = number("BENCH_ONLY", w)?;
        if !ITEMS.iter().any(|(i, _)| *i == n) {
            bail!(
                "BENCH_ONLY: there is no item {n} (items are 1 to {})",
                ITEMS.len()
            );
        }
        set.insert(n);
    }
    Ok((!set.is_empty()).then_some(set))
}

impl Settings {
    /// Reads every setting through `get` (the environment, in the binary), defaults from
    /// [`TABLE`] for those it does not have.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Settings> {
        let value = |name: &str| -> anyhow::Result<String> {
            let default = TABLE
                .iter()
                .find(|(n, _, _)| *n == name)
                .map(|(_, d, _)| *d)
                .with_context(|| format!("{name} is not in the settings table"))?;
            Ok(get(name).unwrap_or_else(|| default.to_owned()))
        };
        let num = |name: &str| -> anyhow::Result<u64> { number(name, &value(name)?) };
        let positive = |name: &str| -> anyhow::Result<u64> {
            let n = num(name)?;
            if n == 0 {
                bail!("{name} must be at least 1");
            }
            Ok(n)
        };
        let small = |name: &str| -> anyhow::Result<u32> {
            u32::try_from(positive(name)?).map_err(|_| anyhow!("{name} is too large"))
        };
        let size = |name: &str| -> anyhow::Result<usize> {
            usize::try_from(positive(name)?).map_err(|_| anyhow!("{name} is too large"))
        };
        let list = |name: &str| -> anyhow::Result<Vec<u32>> { numbers(name, &value(name)?) };
        let out = get("BENCH_OUT")
            .filter(|v| !v.trim().is_empty())
            .map(PathBuf::from);
        let profile = value("BENCH_PROFILE")?.trim().to_owned();
        if profile.is_empty() {
            bail!("BENCH_PROFILE is empty");
        }
        Ok(Settings {
            only: parse_only(&value("BENCH_ONLY")?)?,
            duration_s: small("BENCH_DURATION")?,
            connections: list("BENCH_CONNECTIONS")?,
            clusters: small("BENCH_CLUSTERS")?,
            pools: small("BENCH_POOLS")?,
            list_connections: list("BENCH_LIST_CONNECTIONS")?,
            creates: size("BENCH_CREATES")?,
            create_concurrency: size("BENCH_CREATE_CONCURRENCY")?,
            waiters: size("BENCH_WAITERS")?,
            wait_clusters: size("BENCH_WAIT_CLUSTERS")?,
            gap_ms: num("BENCH_GAP_MS")?,
            settle_ms: num("BENCH_SETTLE_MS")?,
            platform_duration_s: small("BENCH_PLATFORM_DURATION")?,
            platform_connections: small("BENCH_PLATFORM_CONNECTIONS")?,
            gateway_connections: list("BENCH_GATEWAY_CONNECTIONS")?,
            gateway_rounds: small("BENCH_GATEWAY_ROUNDS")?.max(1),
            lag_rounds: size("BENCH_LAG_ROUNDS")?,
            lag_poll_us: num("BENCH_LAG_POLL_US")?,
            db_pool_size: small("BENCH_DB_POOL_SIZE")?,
            profile,
            out,
        })
    }

    pub fn from_env() -> anyhow::Result<Settings> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Whether item `n` runs.
    pub fn runs(&self, n: u8) -> bool {
        self.only.as_ref().is_none_or(|only| only.contains(&n))
    }

    /// The settings that shape the figures, as the environment spelled them: the report's
    /// "Settings of this run" table.
    pub fn table(&self) -> BTreeMap<String, String> {
        let join = |v: &[u32]| v.iter().map(u32::to_string).collect::<Vec<_>>().join(" ");
        let mut t: BTreeMap<String, String> = [
            ("BENCH_DURATION", self.duration_s.to_string()),
            ("BENCH_CONNECTIONS", join(&self.connections)),
            ("BENCH_CLUSTERS", self.clusters.to_string()),
            ("BENCH_POOLS", self.pools.to_string()),
            ("BENCH_LIST_CONNECTIONS", join(&self.list_connections)),
            ("BENCH_CREATES", self.creates.to_string()),
            (
                "BENCH_CREATE_CONCURRENCY",
                self.create_concurrency.to_string(),
            ),
            ("BENCH_WAITERS", self.waiters.to_string()),
            ("BENCH_WAIT_CLUSTERS", self.wait_clusters.to_string()),
            ("BENCH_GAP_MS", self.gap_ms.to_string()),
            ("BENCH_SETTLE_MS", self.settle_ms.to_string()),
            (
                "BENCH_PLATFORM_DURATION",
                self.platform_duration_s.to_string(),
            ),
            (
                "BENCH_PLATFORM_CONNECTIONS",
                self.platform_connections.to_string(),
            ),
            ("BENCH_GATEWAY_CONNECTIONS", join(&self.gateway_connections)),
            ("BENCH_GATEWAY_ROUNDS", self.gateway_rounds.to_string()),
            ("BENCH_LAG_ROUNDS", self.lag_rounds.to_string()),
            ("BENCH_LAG_POLL_US", self.lag_poll_us.to_string()),
            ("BENCH_DB_POOL_SIZE", self.db_pool_size.to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        if let Some(only) = &self.only {
            let items: Vec<String> = only.iter().map(u8::to_string).collect();
            t.insert("BENCH_ONLY".into(), items.join(","));
        }
        t
    }
}

/// `kubesvc-bench --help`: the usage, the items and every setting with its default.
pub fn help() -> String {
    let mut s = String::from(
        "usage: kubesvc-bench --admin-url URL --bin-dir DIR [--root DIR] [--only 1,3]\n\
         \x20      kubesvc-bench --report-only [--root DIR]\n\
         \n\
         Runs the items of `make bench` against release builds of server, platform-stub and\n\
         gateway (in --bin-dir, beside bench-longpoll and bench-oidc-issuer), on databases\n\
         kubesvc_bench_<random> it creates on the server of --admin-url and drops at the end,\n\
         then writes BENCH_OUT/benchmarks.md, BENCH_OUT/benchmarks/latency.svg and the typed\n\
         results with each tool's raw output in BENCH_OUT/benchmarks/raw/.\n\
         --report-only writes the report and chart again from raw/results.json.\n\
         --only overrides BENCH_ONLY. --root is the checkout (default: the current directory).\n\
         \n\
         Items:\n",
    );
    for (n, what) in ITEMS {
        let _ = writeln!(s, "  {n}  {what}");
    }
    s.push_str("\nSettings (environment, default in brackets):\n");
    for (name, default, what) in TABLE {
        let default = if default.is_empty() { "all" } else { default };
        let _ = writeln!(s, "  {name:<27} [{default}] {what}");
    }
    s
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn with(pairs: &[(&str, &str)]) -> anyhow::Result<Settings> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_are_the_sizes_of_the_goals() {
        let s = with(&[]).unwrap();
        assert_eq!(s.only, None);
        assert_eq!(s.duration_s, 10);
        assert_eq!(s.connections, [1, 16, 64]);
        assert_eq!((s.clusters, s.pools), (10_000, 3));
        assert_eq!(s.list_connections, [1, 16]);
        assert_eq!((s.creates, s.create_concurrency), (2000, 16));
        assert_eq!((s.waiters, s.wait_clusters), (10_000, 100));
        assert_eq!((s.gap_ms, s.settle_ms), (100, 3000));
        assert_eq!((s.platform_duration_s, s.platform_connections), (5, 16));
        assert_eq!(s.gateway_connections, [16, 64]);
        assert_eq!((s.lag_rounds, s.lag_poll_us), (200, 100));
        assert_eq!(s.db_pool_size, 16);
        assert_eq!(s.profile, "release");
        assert_eq!(s.out, None);
        assert!((1..=9).all(|n| s.runs(n)));
    }

    #[test]
    fn values_from_the_environment() {
        let s = with(&[
            ("BENCH_ONLY", "1, 3"),
            ("BENCH_CONNECTIONS", "1 16"),
            ("BENCH_GATEWAY_CONNECTIONS", "16"),
            ("BENCH_CLUSTERS", "500"),
            ("BENCH_OUT", "/tmp/x"),
        ])
        .unwrap();
        assert_eq!(s.only, Some(BTreeSet::from([1, 3])));
        assert!(s.runs(1) && s.runs(3) && !s.runs(2));
        assert_eq!(s.connections, [1, 16]);
        assert_eq!(s.gateway_connections, [16]);
        assert_eq!(s.clusters, 500);
        assert_eq!(s.out, Some(PathBuf::from("/tmp/x")));
        let t = s.table();
        assert_eq!(t["BENCH_ONLY"], "1,3");
        assert_eq!(t["BENCH_CONNECTIONS"], "1 16");
        assert!(!t.contains_key("BENCH_OUT"));
    }

    #[test]
    fn refuses_what_cannot_be_measured() {
        assert!(with(&[("BENCH_ONLY", "11")]).is_err());
        assert!(with(&[("BENCH_ONLY", "x")]).is_err());
        assert!(with(&[("BENCH_CONNECTIONS", "")]).is_err());
        assert!(with(&[("BENCH_CONNECTIONS", "1 0")]).is_err());
        assert!(with(&[("BENCH_DURATION", "0")]).is_err());
        assert!(with(&[("BENCH_DURATION", "ten")]).is_err());
        assert_eq!(with(&[("BENCH_ONLY", " ")]).unwrap().only, None);
    }

    #[test]
    fn help_and_the_binary_doc_name_every_setting() {
        let help = help();
        let doc = include_str!("bin/bench.rs");
        for (name, default, _) in TABLE {
            assert!(help.contains(name), "{name} missing from --help");
            assert!(doc.contains(name), "{name} missing from the binary's doc");
            if !default.is_empty() {
                assert!(help.contains(&format!("[{default}]")));
            }
        }
    }
}
