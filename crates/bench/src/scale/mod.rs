//! `make scale`: the service at a million clusters, beside the same figures at ten thousand.
//! For each size: a database of its own, made in bulk ([`seed`]); the conversion of its audit
//! events to monthly partitions measured under a writer; a platform stub knowing every
//! organization (a super_admin token each); one release `server`; then GET by id over
//! uniformly random ids of all clusters next to `pgbench -S` on the same database (scale
//! factor as many accounts as clusters), pages of 100 of the big organization (first,
//! middle, last; after its first list, timed alone), its audit trail (first page, and one a year back), the time from start to
//! `/readyz` and the resident memory after it all. `docs/scale.md` gets the figures with the
//! goals' verdicts ([`report`]).

pub mod report;
pub mod seed;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use account_platform::dev::{Directory, DirectoryUser};
use anyhow::Context;
use domain::model::identity::{
    Billing, Caller, ClientKind, Membership, OrgSummary, Organization, Plan, Role, User,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::results::{LongPoll, PgbenchRun, WrkRun};
use crate::run::database::Databases;
use crate::run::longpoll::Waiting;
use crate::run::server::{ServerEnv, Stub, random_hex};
use crate::run::wrk::Wrk;
use crate::run::{Setup, pgbench};

/// How many clusters, how many of them the big organization's, how many audit events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    pub clusters: u32,
    pub big: u32,
    pub events: u64,
}

impl Shape {
    /// `n` clusters 100 to an organization, plus one organization of `n / 10` (at a
    /// million: 10,000 organizations of 100 and one of 100,000), and `events_per_cluster`
    /// audit events for each of the `n`.
    pub fn of(n: u32, events_per_cluster: u32) -> Shape {
        Shape {
            clusters: n + n / 10,
            big: n / 10,
            events: u64::from(n) * u64::from(events_per_cluster),
        }
    }

    pub fn small_orgs(&self) -> u32 {
        self.clusters.saturating_sub(self.big).div_ceil(100)
    }
}

/// `SCALE_*` settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    pub clusters: u32,
    pub baseline: u32,
    pub events_per_cluster: u32,
    pub duration_s: u32,
    pub connections: u32,
    pub pool_size: u32,
    /// State long-polls parked at once on one server.
    pub waiters: u32,
}

impl Settings {
    pub fn from_env() -> anyhow::Result<Settings> {
        let get = |name: &str, default: u32| -> anyhow::Result<u32> {
            match std::env::var(name) {
                Ok(v) => v
                    .replace('_', "")
                    .parse()
                    .with_context(|| format!("{name}={v}: a whole number")),
                Err(_) => Ok(default),
            }
        };
        Ok(Settings {
            clusters: get("SCALE_CLUSTERS", 1_000_000)?,
            baseline: get("SCALE_BASELINE", 10_000)?,
            events_per_cluster: get("SCALE_EVENTS_PER_CLUSTER", 10)?,
            duration_s: get("SCALE_DURATION", 10)?,
            connections: get("SCALE_CONNECTIONS", 16)?,
            pool_size: get("SCALE_DB_POOL_SIZE", 16)?,
            waiters: get("SCALE_WAITERS", 50_000)?,
        })
    }
}

/// Everything measured at one size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizeResult {
    pub shape: Shape,
    pub conversion: seed::Conversion,
    pub seed_seconds: f64,
    pub ready_seconds: f64,
    pub get_by_id: WrkRun,
    pub pgbench: PgbenchRun,
    /// (which page, the run)
    pub pages: Vec<(String, WrkRun)>,
    /// The big organization's first list after the start (its index read), before the runs.
    pub first_list_ms: f64,
    pub audit_pages: Vec<(String, WrkRun)>,
    pub rss_kb: u64,
    /// Creates of new clusters in the big organization, one after another on each connection.
    pub creates: WrkRun,
    pub long_polls: Option<LongPoll>,
}

/// A whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScaleResults {
    pub machine: Vec<(String, String)>,
    pub settings: Settings,
    pub sizes: Vec<SizeResult>,
}

/// The stub's directory: the big organization (acme) and the small ones, a super_admin each,
/// whose token is `scale-<slug>`.
fn directory(shape: Shape, big_org: Uuid) -> Directory {
    let org = |id: Uuid, slug: String| Organization {
        id,
        slug,
        billing: Billing {
            plan: Plan::Postpaid,
            credit_cents: 0,
        },
    };
    let mut organizations = vec![org(big_org, "acme".into())];
    organizations
        .extend((1..=shape.small_orgs()).map(|n| org(seed::org_id(n), format!("org-{n}"))));
    let users = organizations
        .iter()
        .map(|o| DirectoryUser {
            description: format!("super_admin of {}", o.slug),
            token: format!("scale-{}", o.slug),
            caller: Caller {
                user: User {
                    id: format!("admin-{}", o.slug),
                    email: None,
                },
                preferred_organization: Some(o.id),
                memberships: vec![Membership {
                    organization: OrgSummary {
                        id: o.id,
                        slug: o.slug.clone(),
                    },
                    role: Role::SuperAdmin,
                }],
                client: ClientKind::default(),
            },
        })
        .collect();
    Directory {
        organizations,
        users,
    }
}

/// One line per cluster for the random reads: its path and its organization's token.
fn ids_file(path: &Path, ids: &[(Uuid, Uuid)], dir: &Directory) -> anyhow::Result<()> {
    use std::collections::HashMap;
    use std::fmt::Write as _;
    let tokens: HashMap<Uuid, &str> = dir
        .organizations
        .iter()
        .zip(&dir.users)
        .map(|(o, u)| (o.id, u.token.as_str()))
        .collect();
    let mut text = String::with_capacity(ids.len() * 64);
    for (id, org) in ids {
        let token = tokens
            .get(org)
            .with_context(|| format!("no token for organization {org}"))?;
        let _ = writeln!(text, "/v1/public/clusters/{id} {token}");
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// wrk's `request` over the lines of [`ids_file`], one uniformly at random each time.
fn random_reads_lua(file: &Path) -> String {
    format!(
        r#"local paths, tokens = {{}}, {{}}
for line in io.lines("{}") do
   local p, t = line:match("^(%S+) (%S+)$")
   paths[#paths + 1] = p
   tokens[#tokens + 1] = "Bearer " .. t
end
math.randomseed(os.time() + math.floor(os.clock() * 1000000))
request = function()
   local i = math.random(#paths)
   return wrk.format("GET", paths[i], {{ ["Authorization"] = tokens[i] }})
end"#,
        file.display()
    )
}

/// The waiters one process can hold: `wanted`, or fewer when the open-files limit (the
/// server's and bench-longpoll's alike, both started from here) is lower, leaving 1,000
/// descriptors for everything else. A machine whose hard limit cannot be raised (a sandbox
/// without the capability) caps the run; the report says so.
fn waiters_within_open_files(wanted: u32) -> u32 {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    let room = u32::try_from(limit.saturating_sub(1_000)).unwrap_or(u32::MAX);
    if room < wanted {
        crate::say!(
            "warning: the open files limit ({limit}) holds {room} waiters, not {wanted}: \
             measuring {room}"
        );
    }
    wanted.min(room)
}

/// wrk's `request`: a create in acme with a name no other request of the run has (each
/// thread numbered by `setup`, each of its requests counted).
const CREATES_LUA: &str = r#"local threads = 0
setup = function(thread)
   threads = threads + 1
   thread:set("tid", threads)
end
local sent = 0
request = function()
   sent = sent + 1
   local body = string.format('{"organization":"acme","name":"new-%d-%d",'
      .. '"node_pools":[{"name":"default","size":"kube.c5.large","count":1}]}', tid, sent)
   return wrk.format("POST", "/v1/public/clusters", {
      ["Authorization"] = "Bearer scale-acme",
      ["Content-Type"] = "application/json",
   }, body)
end"#;

struct Run<'a> {
    setup: &'a Setup,
    settings: &'a Settings,
    work: PathBuf,
    raw: PathBuf,
    logs: PathBuf,
    http: reqwest::Client,
    wrk: Wrk,
}

/// Waits until the server's watch cache holds `clusters` clusters, or has held the same number
/// for ten seconds (a fleet with fewer live clusters, or a cache that stopped growing); how
/// long that took from now. Gives up after half an hour.
async fn prefilled(
    server: &crate::run::server::Server,
    http: &reqwest::Client,
    clusters: u64,
) -> anyhow::Result<f64> {
    let started = Instant::now();
    let (mut last, mut since) = (0u64, Instant::now());
    loop {
        let metrics = server.metrics(http).await?;
        let held = crate::parse::metric_sum(&metrics, "cluster_cache_entries") as u64;
        if held >= clusters || (held > 0 && since.elapsed() >= Duration::from_secs(10)) {
            return Ok(started.elapsed().as_secs_f64());
        }
        if held != last {
            (last, since) = (held, Instant::now());
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(1800),
            "the watch cache's prefill held {held} of {clusters} clusters after half an hour"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

impl Run<'_> {
    async fn size(&self, shape: Shape) -> anyhow::Result<SizeResult> {
        let dbs = Databases::new(&self.setup.admin_url, &random_hex(6));
        let result = self.size_on(&dbs, shape).await;
        dbs.drop_all().await?;
        result
    }

    async fn size_on(&self, dbs: &Databases, shape: Shape) -> anyhow::Result<SizeResult> {
        let s = self.settings;
        let n = shape.clusters;
        let big_org = account_platform::dev::ACME_ID;
        let name = dbs.name("");
        crate::say!("{n} clusters: the database {name} (dropped at the end)");
        let url = dbs.create(&name).await?;
        seed::events(&url, shape, big_org).await?;
        let conversion = seed::convert_under_writes(&url, shape.events).await?;
        let seed_seconds = seed::clusters(&url, shape, big_org).await?;
        let ids = seed::ids(&url).await?;
        let dir = directory(shape, big_org);
        let dir_file = self.work.join(format!("scale-directory-{n}.json"));
        std::fs::write(&dir_file, serde_json::to_vec(&dir)?)?;
        let lines = self.work.join(format!("scale-ids-{n}.txt"));
        ids_file(&lines, &ids, &dir)?;
        drop(ids);

        let stub = Stub::start_with_directory(
            &self.setup.bin_dir,
            &self.logs,
            &self.http,
            Some(&dir_file),
        )
        .await?;
        let env = ServerEnv::new(
            &self.setup.bin_dir,
            &self.logs,
            &url,
            &stub,
            s.pool_size,
            &self.http,
        );
        let started = Instant::now();
        // Tokens cached for the whole run: the stub is not what is measured. The watch cache
        // holds the whole fleet (about 0.7 KB a cluster, docs/configuration.md), with room.
        let cache_size = (u64::from(n) + u64::from(n) / 10).to_string();
        let server = env
            .start_with(
                &format!("scale-{n}"),
                3600,
                "warn",
                &[("CLUSTER_CACHE_SIZE", cache_size.as_str())],
            )
            .await?;
        let ready_seconds = started.elapsed().as_secs_f64();
        crate::say!("{n} clusters: /readyz 200 {ready_seconds:.2} s after the start");
        // The prefill goes on after readiness; reads by id are measured once it is done.
        let prefill_seconds = prefilled(&server, &self.http, u64::from(n)).await?;
        crate::say!(
            "{n} clusters: the watch cache's prefill done {prefill_seconds:.1} s after readiness"
        );

        let get_by_id = self
            .wrk
            .run_lua(
                &format!("scale-{n}-get-by-id"),
                s.connections,
                s.duration_s,
                &server.url,
                &[],
                &random_reads_lua(&lines),
            )
            .await?;
        // pgbench's accounts, as many as clusters (100,000 a scale step), in the same database.
        let factor = (n / 100_000).max(1);
        pgbench::init_scale(&url, factor, &self.raw).await?;
        let pgbench = pgbench::select_only(&url, s.connections, s.duration_s, &self.raw).await?;

        let auth = "Authorization: Bearer scale-acme";
        // The organization's first list after the start reads its whole index from the
        // database (the watch cache's list of it); timed alone, then the runs measure the
        // steady state.
        let cold = Instant::now();
        self.http
            .get(format!("{}/v1/public/clusters?size=100&page=1", server.url))
            .bearer_auth("scale-acme")
            .header("X-Platform-Organization", "acme")
            .send()
            .await?
            .error_for_status()
            .context("the first list of the big organization")?;
        let first_list_ms = cold.elapsed().as_secs_f64() * 1e3;
        crate::say!("{n} clusters: the big organization's first list took {first_list_ms:.0} ms");
        let mut pages = Vec::new();
        let last = shape.big.div_ceil(100).max(1);
        for (which, page) in [("first", 1), ("middle", last.div_ceil(2)), ("last", last)] {
            let run = self
                .wrk
                .run(
                    &format!("scale-{n}-page-{which}"),
                    s.connections,
                    s.duration_s,
                    &format!("{}/v1/public/clusters?size=100&page={page}", server.url),
                    &[auth, "X-Platform-Organization: acme"],
                )
                .await?;
            pages.push((format!("{which} (page {page} of {last})"), run));
        }
        let year_ago = (chrono::Utc::now() - chrono::Duration::days(365))
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string();
        let mut audit_pages = Vec::new();
        for (which, query) in [
            ("first", String::new()),
            ("a year back", format!("&until={year_ago}")),
        ] {
            let run = self
                .wrk
                .run(
                    &format!("scale-{n}-audit-{}", which.replace(' ', "-")),
                    s.connections,
                    s.duration_s,
                    &format!(
                        "{}/v1/public/audit-events?organization=acme&limit=100{query}",
                        server.url
                    ),
                    &[auth],
                )
                .await?;
            audit_pages.push((which.to_owned(), run));
        }
        let rss_kb = server.rss_kb()?;
        crate::say!(
            "{n} clusters: server RSS {} MiB after it all",
            rss_kb / 1024
        );
        let creates = self
            .wrk
            .run_lua(
                &format!("scale-{n}-creates"),
                s.connections,
                s.duration_s,
                &server.url,
                &[],
                CREATES_LUA,
            )
            .await?;
        server.stop().await?;
        let long_polls = self.long_polls(&env, n).await?;
        stub.stop().await?;
        Ok(SizeResult {
            shape,
            conversion,
            seed_seconds,
            ready_seconds,
            get_by_id,
            pgbench,
            pages,
            first_list_ms,
            audit_pages,
            rss_kb,
            creates,
            long_polls,
        })
    }

    /// `SCALE_WAITERS` state long-polls on a fresh server L over 100 of acme's clusters, the
    /// changes made through a second server; `None` when switched off (0).
    async fn long_polls(&self, env: &ServerEnv, n: u32) -> anyhow::Result<Option<LongPoll>> {
        let waiters = waiters_within_open_files(self.settings.waiters);
        if waiters == 0 {
            return Ok(None);
        }
        crate::say!("{n} clusters: {waiters} long-polls on a fresh server");
        let l = env.start(&format!("scale-{n}-l"), 3600).await?;
        let patcher = env.start(&format!("scale-{n}-b"), 3600).await?;
        let waiting = Waiting {
            token: "scale-acme",
            waiters: waiters as usize,
            clusters: 100,
            gap_ms: 100,
            settle_ms: 3000,
            // An address for every 12,500 waiters: one address's ephemeral ports (28,000 by
            // default) cannot hold 50,000 connections to one server port.
            source_addresses: u8::try_from(waiters.div_ceil(12_500).max(1)).unwrap_or(u8::MAX),
        };
        let out = self.raw.join(format!("scale-{n}-longpoll.json"));
        let result = waiting.run(&self.setup.bin_dir, &l, &patcher, &out).await;
        l.stop().await?;
        patcher.stop().await?;
        Ok(Some(result?))
    }
}

/// Runs both sizes and writes docs/scale.md (or `SCALE_OUT`).
pub async fn main(setup: Setup, settings: Settings) -> anyhow::Result<()> {
    let work = setup.root.join(".local/scale");
    let raw = work.join("raw");
    let logs = work.join("logs");
    for dir in [&raw, &logs] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()?;
    let run = Run {
        setup: &setup,
        settings: &settings,
        wrk: Wrk::new(&work, &raw)?,
        work: work.clone(),
        raw,
        logs,
        http,
    };
    let machine =
        crate::run::machine::describe(&Databases::new(&setup.admin_url, "0"), "release").await;
    let mut sizes = Vec::new();
    for clusters in [settings.baseline, settings.clusters] {
        let shape = Shape::of(clusters, settings.events_per_cluster);
        sizes.push(run.size(shape).await?);
    }
    let results = ScaleResults {
        machine,
        settings: settings.clone(),
        sizes,
    };
    std::fs::write(
        work.join("results.json"),
        serde_json::to_string_pretty(&results)? + "\n",
    )?;
    let out = std::env::var_os("SCALE_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| setup.root.join("docs/scale.md"));
    std::fs::write(&out, report::markdown(&results))
        .with_context(|| format!("writing {}", out.display()))?;
    crate::say!("make scale: done (report: {})", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_million_is_ten_thousand_organizations_of_100_and_one_of_100_000() {
        let shape = Shape::of(1_000_000, 10);
        assert_eq!((shape.clusters, shape.big), (1_100_000, 100_000));
        assert_eq!(shape.small_orgs(), 10_000);
        assert_eq!(shape.events, 10_000_000);
    }

    #[test]
    fn every_organization_has_a_super_admin_token_of_its_own() {
        let shape = Shape::of(1_000, 1);
        let dir = directory(shape, account_platform::dev::ACME_ID);
        assert_eq!(dir.organizations.len(), 11);
        assert_eq!(dir.users.len(), 11);
        assert_eq!(dir.users[0].token, "scale-acme");
        assert_eq!(dir.organizations[3].id, seed::org_id(3));
        assert!(dir.users.iter().zip(&dir.organizations).all(|(u, o)| {
            u.caller.memberships.len() == 1
                && u.caller.memberships[0].organization.id == o.id
                && u.caller.memberships[0].role == Role::SuperAdmin
        }));
        let back: Directory = serde_json::from_slice(&serde_json::to_vec(&dir).unwrap()).unwrap();
        assert_eq!(back.users.len(), 11);
    }
}
