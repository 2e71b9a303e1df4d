//! Faults: the account platform failing in every way, a private PostgreSQL cluster
//! stopped and restarted under load, SIGKILL of the real server binary during a burst of
//! idempotent creates, and secrets that must never reach a response or a log line.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use blackbox::process::{Scratch, ServerProcess, free_port};
use blackbox::*;
use platform_stub::{DEFAULT_SERVICE_TOKEN, Directory, Fault, StubPlatform};
use reqwest::{Client, Method};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use uuid::Uuid;

/// Faults injected by every test of this file, printed at the end of each (the count
/// shows how much the run exercised).
static FAULTS: AtomicUsize = AtomicUsize::new(0);

fn fault_injected(what: &str) {
    let n = FAULTS.fetch_add(1, Ordering::SeqCst) + 1;
    eprintln!("fault #{n} (this process): {what}");
}

// ---------------------------------------------------------------------------------------------
// The real binary, talked to over HTTP.
// ---------------------------------------------------------------------------------------------

/// HTTP to a server at `base`, answers read whole.
#[derive(Clone)]
struct Http {
    base: String,
    client: Client,
}

impl Http {
    fn new(base: &str, timeout: Duration) -> Http {
        Http {
            base: base.to_owned(),
            client: Client::builder().timeout(timeout).build().unwrap(),
        }
    }

    /// `None` when the request failed below HTTP (refused, reset, timed out).
    async fn try_send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Answer, reqwest::Error> {
        let mut r = self.client.request(method, format!("{}{path}", self.base));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        if let Some(b) = body {
            r = r.json(b);
        }
        let res = r.send().await?;
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let body = res.bytes().await?.to_vec();
        Ok(Answer {
            status,
            headers,
            body,
        })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Answer {
        let what = format!("{method} {path}");
        self.try_send(method, path, token, headers, body)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"))
    }

    async fn get(&self, path: &str) -> Answer {
        self.send(Method::GET, path, Some(TOKEN_ACME_SUPER_ADMIN), &[], None)
            .await
    }

    async fn post(&self, path: &str, body: &Value) -> Answer {
        self.send(
            Method::POST,
            path,
            Some(TOKEN_ACME_SUPER_ADMIN),
            &[],
            Some(body),
        )
        .await
    }

    async fn patch(&self, path: &str, body: &Value) -> Answer {
        self.send(
            Method::PATCH,
            path,
            Some(TOKEN_ACME_SUPER_ADMIN),
            &[],
            Some(body),
        )
        .await
    }

    async fn wait_status(&self, path: &str, want: u16, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let got = self
                .try_send(Method::GET, path, None, &[], None)
                .await
                .map(|a| a.status)
                .unwrap_or(0);
            if got == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{path} never answered {want} (last {got})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Until `/readyz` answers 200 (panics after a minute).
    async fn wait_ready(&self) {
        self.wait_status("/readyz", 200, Duration::from_secs(60))
            .await;
    }

    /// Polls a cluster until `pred` holds.
    async fn wait_cluster(&self, id: &str, limit: Duration, pred: impl Fn(&Value) -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            let a = self.get(&format!("{CLUSTERS}/{id}")).await;
            if a.status == 200 && pred(&a.json()) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "cluster {id} never reached the expected state: {}",
                a.text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The server binary's settings over this platform and database, with `extra` on top.
fn binary_env(
    platform: &platform_stub::StubHandle,
    db: &str,
    extra: &[(&'static str, &str)],
) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("DATABASE_URL", db.to_owned()),
        ("ACCOUNT_PLATFORM_URL", platform.url()),
        (
            "ACCOUNT_PLATFORM_SERVICE_TOKEN",
            platform.service_token().to_owned(),
        ),
        ("SECRETS_KEY", TEST_SECRETS_KEY.to_owned()),
    ];
    env.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    env
}

/// The server binary on `port` with `env`, its output in `log`, and a client of it whose
/// timeout no answer may exceed (30 s), once `/readyz` answers 200.
async fn start_ready(env: &[(&str, String)], port: u16, log: PathBuf) -> (ServerProcess, Http) {
    let server = ServerProcess::start(env, port, log);
    let http = Http::new(&server.base, Duration::from_secs(30));
    http.wait_ready().await;
    (server, http)
}

/// Runs a query answering one bigint column `n`.
fn count(url: &str, sql: &str) -> i64 {
    use diesel::{Connection, QueryableByName, RunQueryDsl, sql_types::BigInt};
    #[derive(QueryableByName)]
    struct N {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let mut conn = diesel::PgConnection::establish(url).unwrap_or_else(|e| panic!("{e}"));
    let rows: Vec<N> = diesel::sql_query(sql)
        .load(&mut conn)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.first().map(|r| r.n).unwrap_or(-1)
}

fn assert_problem(a: &Answer, status: u16, code: &str, what: &str) {
    assert_eq!(a.status, status, "{what}: {}", a.text());
    assert_eq!(a.problem_code(), code, "{what}: {}", a.text());
}

// ---------------------------------------------------------------------------------------------
// 1. The account platform down in every way.
// ---------------------------------------------------------------------------------------------

/// Every route of the route table with its parameters filled in and a body that would succeed,
/// so the platform is the only thing that can fail.
fn every_route(cluster: &str, node: &str, auth_server: &str, credential: &str) -> Vec<Req> {
    let fill = |p: &str| {
        let p = if p.starts_with(AUTH_SERVERS) {
            p.replace("{id}", auth_server)
        } else {
            p.replace("{id}", cluster)
        };
        p.replace("{pool}", "default")
            .replace("{node}", node)
            .replace("{eip}", &Uuid::new_v4().to_string())
            .replace("{rule}", &Uuid::new_v4().to_string())
            .replace("{credential_id}", credential)
    };
    api::routes::ROUTES
        .iter()
        .map(|r| {
            let mut path = fill(r.path);
            if r.method == "GET"
                && matches!(r.org, api::routes::OrgSource::Collection)
                && !path.starts_with(AUTH_SERVERS)
            {
                path.push_str("?organization=acme");
            }
            if r.method == "GET" && r.path == AUTH_SERVERS {
                path.push_str("?organization=acme&environment=production");
            }
            let body = r.body.then(|| match (r.method, r.path) {
                ("POST", CLUSTERS) => cluster_body("acme", "during-outage"),
                ("PATCH", "/v1/public/clusters/{id}") => json!({"description": "x"}),
                ("PATCH", p) if p.ends_with("/exposure") => json!({"exposure": "private"}),
                ("POST", p) if p.ends_with("/node-pools") => {
                    json!({"name": "extra", "size": "kube.c5.large", "count": 1})
                }
                ("PATCH", p) if p.ends_with("/node-pools/{pool}") => json!({"count": 3}),
                ("POST", p) if p.ends_with("/elastic-ips") => {
                    json!({"name": "web", "exposure": "private"})
                }
                ("POST", p) if p.ends_with("/firewall-rules") => {
                    json!({"name": "https", "protocol": "tcp", "source_cidrs": ["203.0.113.0/24"],
                           "port_range": {"from": 443, "to": 443}})
                }
                ("POST", AUTH_SERVERS) => token_server("during-outage", "outage-static-token-0001"),
                ("PATCH", _) => json!({"name": "renamed"}),
                ("POST", p) if p.ends_with("/credentials") => {
                    json!({"token": "outage-static-token-0002"})
                }
                other => panic!("no body for {other:?}: add one"),
            });
            Req {
                method: Method::from_bytes(r.method.as_bytes()).unwrap(),
                path,
                public: matches!(r.role, api::routes::RequiredRole::Public),
                idempotent: r.idempotent,
                body,
            }
        })
        .collect()
}

struct Req {
    method: Method,
    path: String,
    public: bool,
    idempotent: bool,
    body: Option<Value>,
}

fn token_server(name: &str, token: &str) -> Value {
    json!({"organization": "acme", "name": name, "environment": "production", "type": "token",
           "config": {"tokens": [token]}})
}

/// Sends every route at once and checks each answer: 502 `auth_backend_unavailable`, or 200
/// for the routes without authentication.
async fn every_route_is_502(app: &TestApp, reqs: &[Req], what: &str) {
    let answers = futures::future::join_all(reqs.iter().map(|r| {
        let mut b = app.request(r.method.clone(), &r.path, Some(TOKEN_ACME_SUPER_ADMIN));
        if r.idempotent {
            b = b.header("Idempotency-Key", format!("outage-{}", Uuid::new_v4()));
        }
        if let Some(body) = &r.body {
            b = b.json(body);
        }
        app.send(b)
    }))
    .await;
    for (r, a) in reqs.iter().zip(answers) {
        let label = format!("{what}: {} {}", r.method, r.path);
        if r.public {
            assert_eq!(a.status, 200, "{label}: {}", a.text());
        } else {
            assert_problem(&a, 502, "auth_backend_unavailable", &label);
            assert!(!a.text().contains(TOKEN_ACME_SUPER_ADMIN), "{label}");
        }
    }
}

async fn healthy(app: &TestApp, id: &str) {
    let a = app
        .get(&format!("{CLUSTERS}/{id}"), TOKEN_ACME_MEMBER)
        .await;
    assert_eq!(a.status, 200, "after recovery: {}", a.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn account_platform_outages_are_502_change_nothing_and_heal_without_a_restart() {
    let mut app = TestApp::spawn_with(&[
        ("ACCOUNT_PLATFORM_TIMEOUT_MS", "300"),
        ("TOKEN_CACHE_TTL_S", "0"),
        ("RECONCILER_POLL_MS", "20"),
    ])
    .await;
    // Something for every by-id route to name: a provisioned cluster with its nodes and a
    // token auth server with a second credential.
    let cluster = app.create_cluster("outage-1").await;
    let id = cluster["id"].as_str().unwrap().to_owned();
    app.wait_for(&format!("{CLUSTERS}/{id}"), Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned" && c["node_pools"][0]["status"] == "Ready"
    })
    .await;
    let nodes = app
        .get(&format!("{CLUSTERS}/{id}/nodes"), TOKEN_ACME_MEMBER)
        .await
        .json();
    let node = nodes["items"][0]["name"].as_str().unwrap().to_owned();
    let s = app
        .post(
            AUTH_SERVERS,
            TOKEN_ACME_SUPER_ADMIN,
            &token_server("edge", "outage-static-token-aaaa"),
        )
        .await;
    assert_eq!(s.status, 201, "{}", s.text());
    let sid = s.json()["id"].as_str().unwrap().to_owned();
    let c = app
        .post(
            &format!("{AUTH_SERVERS}/{sid}/credentials"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"token": "outage-static-token-bbbb"}),
        )
        .await;
    assert_eq!(c.status, 201, "{}", c.text());
    let cid = c.json()["id"].as_str().unwrap().to_owned();
    let reqs = every_route(&id, &node, &sid, &cid);
    let before = app.counts();
    let cluster_before = app
        .get(&format!("{CLUSTERS}/{id}"), TOKEN_ACME_MEMBER)
        .await
        .text();

    for fault in [Fault::Status500, Fault::Garbage, Fault::Hang] {
        app.platform.set_fault(fault);
        fault_injected(&format!("account platform {fault:?}"));
        every_route_is_502(&app, &reqs, &format!("{fault:?}")).await;
        assert_eq!(app.counts(), before, "{fault:?} changed rows");
        app.platform.set_fault(Fault::Normal);
        healthy(&app, &id).await;
    }

    // Refusing connections: the stub stopped; then a new one on the same port.
    let addr = app.platform.addr();
    let stopped = std::mem::replace(&mut app.platform, StubPlatform::start_demo());
    stopped.stop();
    fault_injected("account platform refusing connections");
    every_route_is_502(&app, &reqs, "refused").await;
    assert_eq!(app.counts(), before, "refused changed rows");
    app.platform = StubPlatform::start_on(addr, Directory::demo(), DEFAULT_SERVICE_TOKEN)
        .expect("restart the platform stub on its old port");
    healthy(&app, &id).await;

    // Nothing any failed request could have touched moved, and the service is whole again:
    // reads, and a write through the same server process.
    assert_eq!(
        app.get(&format!("{CLUSTERS}/{id}"), TOKEN_ACME_MEMBER)
            .await
            .text(),
        cluster_before
    );
    let a = app
        .post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body("acme", "after-outage"),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.text());
    assert_eq!(app.count_rows("clusters"), before[0] + 1);
}

// ---------------------------------------------------------------------------------------------
// 2. PostgreSQL stopped and started again under a running server.
// ---------------------------------------------------------------------------------------------

/// A throwaway PostgreSQL cluster of this test only, on its own port.
struct PrivatePostgres {
    bin: PathBuf,
    dir: Scratch,
    port: u16,
    as_postgres: bool,
}

impl PrivatePostgres {
    /// The newest installed server's binaries, if any.
    fn find_bin() -> Option<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .flatten()
            .map(|e| e.path().join("bin"))
            .filter(|b| b.join("initdb").exists() && b.join("pg_ctl").exists())
            .collect();
        found.sort_by_key(|p| {
            p.parent()
                .and_then(|v| v.file_name())
                .and_then(|v| v.to_str())
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0)
        });
        found.pop()
    }

    fn command(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        let mut cmd = if self.as_postgres {
            // initdb and postgres refuse to run as root.
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        cmd.current_dir(&self.dir.0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    }

    fn data(&self) -> PathBuf {
        self.dir.0.join("data")
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.0.join("pg.log")).unwrap_or_default()
    }

    /// `None` (with the reason printed) when PostgreSQL's server binaries are not installed.
    fn create() -> Option<PrivatePostgres> {
        let Some(bin) = Self::find_bin() else {
            eprintln!(
                "SKIPPED: no PostgreSQL server binaries under /usr/lib/postgresql/*/bin \
                 (apt-get install postgresql): the database outage test needs a private cluster"
            );
            return None;
        };
        let uid = Command::new("id").arg("-u").output().unwrap();
        let as_postgres = String::from_utf8_lossy(&uid.stdout).trim() == "0";
        let dir = Scratch::new("pg");
        if as_postgres {
            let st = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&dir.0)
                .status()
                .unwrap();
            assert!(st.success(), "chown the private cluster's directory");
        }
        let pg = PrivatePostgres {
            bin,
            dir,
            port: free_port(),
            as_postgres,
        };
        let st = pg
            .command("initdb")
            .arg("-D")
            .arg(pg.data())
            .args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-locale",
                "--no-sync",
            ])
            .status()
            .unwrap();
        assert!(st.success(), "initdb failed");
        pg.start();
        Some(pg)
    }

    fn start(&self) {
        // fsync off is safe here: a stopped postmaster leaves its writes in the OS cache.
        // synchronous_commit stays on, so a commit the server saw is in the WAL when the
        // cluster is killed (immediate stop is a crash).
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off",
            self.port,
            self.dir.0.display()
        );
        let st = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.0.join("pg.log"))
            .args(["-w", "-t", "30", "start", "-o", &opts])
            .status()
            .unwrap();
        assert!(st.success(), "pg_ctl start failed: {}", self.log());
    }

    /// Like a crash: no checkpoint, every connection cut.
    fn stop_immediate(&self) {
        let st = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .status()
            .unwrap();
        assert!(st.success(), "pg_ctl stop failed: {}", self.log());
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .status();
    }
}

/// What the load sent during the outage saw.
#[derive(Default)]
struct LoadLog {
    answers: Vec<(String, u16, String, Option<String>)>,
    created: Vec<String>,
    failures: Vec<String>,
}

impl LoadLog {
    fn extend(&mut self, other: LoadLog) {
        self.answers.extend(other.answers);
        self.created.extend(other.created);
        self.failures.extend(other.failures);
    }
}

/// Reads, writes and creates in a loop until `stop` is set.
async fn load(http: Http, id: String, worker: usize, stop: Arc<AtomicBool>) -> LoadLog {
    let mut log = LoadLog::default();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let name = format!("load-{worker}-{n}");
        let reqs: Vec<(Method, String, Option<Value>)> = vec![
            (Method::GET, format!("{CLUSTERS}/{id}"), None),
            (Method::GET, format!("{CLUSTERS}?organization=acme"), None),
            (
                Method::PATCH,
                format!("{CLUSTERS}/{id}"),
                Some(json!({"description": format!("load {n}")})),
            ),
            (
                Method::POST,
                CLUSTERS.to_owned(),
                Some(cluster_body("acme", &name)),
            ),
            (
                Method::GET,
                format!("{CLUSTERS}/{id}/state?since=1000000&timeout_seconds=1"),
                None,
            ),
        ];
        for (method, path, body) in reqs {
            let label = format!("{method} {path}");
            match http
                .try_send(
                    method.clone(),
                    &path,
                    Some(TOKEN_ACME_SUPER_ADMIN),
                    &[],
                    body.as_ref(),
                )
                .await
            {
                Ok(a) => {
                    let code = if a.status >= 400 {
                        a.json()["code"].as_str().unwrap_or("").to_owned()
                    } else {
                        String::new()
                    };
                    if method == Method::POST && a.status == 201 {
                        log.created.push(name.clone());
                    }
                    log.answers
                        .push((label, a.status, code, a.header("retry-after")));
                }
                Err(e) => log.failures.push(format!("{label}: {e}")),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    log
}

/// The load running across the outage: the loaders, the flag that stops them, and a long-poll
/// in flight when the database goes.
struct LoadAcrossTheOutage {
    stop: Arc<AtomicBool>,
    loaders: Vec<JoinHandle<LoadLog>>,
    in_flight: JoinHandle<Result<Answer, reqwest::Error>>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_outage_is_503_and_heals_without_a_restart() {
    let Some(pg) = tokio::task::spawn_blocking(PrivatePostgres::create)
        .await
        .unwrap()
    else {
        return;
    };
    let platform = StubPlatform::start_demo();
    let scratch = Scratch::new("db-outage");
    let env = binary_env(
        &platform,
        &pg.url(),
        &[
            ("PROVISIONER_STEP_MS", "0"),
            ("RECONCILER_POLL_MS", "50"),
            ("DATABASE_POOL_SIZE", "4"),
        ],
    );
    let (server, http) = start_ready(&env, free_port(), scratch.path("server.log")).await;

    let id = commit_a_provisioned_cluster_before_the_outage(&http).await;
    let load = start_load_that_runs_across_the_outage(&http, &id);
    stop_the_database_under_load(&pg).await;
    every_kind_of_request_is_503_with_retry_after_while_the_database_is_down(&http, &id).await;
    readiness_fails_and_liveness_holds_while_the_database_is_down(&http).await;
    restart_the_database(&pg);
    another_process_writes_as_soon_as_the_database_is_back(&pg, &id).await;
    http.wait_ready().await;

    let (load, in_flight) = stop_the_load(load).await;
    the_long_poll_in_flight_answered_200_or_503(&in_flight);
    the_load_saw_only_successes_and_clear_503s_and_nothing_hung(&load, &server);
    every_change_committed_or_answered_201_survived_the_outage(&http, &id, &load.created).await;
    the_write_made_as_the_database_returned_is_never_hidden_by_the_cache(&http, &id).await;

    let new_id = writes_and_creates_succeed_again(&http, &id).await;
    the_change_feed_gets_its_listen_connection_back(&pg, &server).await;
    a_change_wakes_a_long_poll_again(&http, &id).await;
    http.wait_cluster(&new_id, Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned"
    })
    .await;
    drop(server);
    drop(pg);
}

/// Committed before the outage: a provisioned cluster with a changed description. Its id.
async fn commit_a_provisioned_cluster_before_the_outage(http: &Http) -> String {
    let a = http.post(CLUSTERS, &cluster_body("acme", "before-1")).await;
    assert_eq!(a.status, 201, "{}", a.text());
    let id = a.json()["id"].as_str().unwrap().to_owned();
    http.wait_cluster(&id, Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned"
    })
    .await;
    let a = http
        .patch(&format!("{CLUSTERS}/{id}"), &json!({"description": "kept"}))
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    id
}

/// Three loaders, so some requests are inside a transaction when the database goes, and a
/// long-poll that will be in flight then.
fn start_load_that_runs_across_the_outage(http: &Http, id: &str) -> LoadAcrossTheOutage {
    let stop = Arc::new(AtomicBool::new(false));
    let loaders = (0..3)
        .map(|w| tokio::spawn(load(http.clone(), id.to_owned(), w, stop.clone())))
        .collect();
    let in_flight = {
        let http = http.clone();
        let path = format!("{CLUSTERS}/{id}/state?since=1000000&timeout_seconds=3");
        tokio::spawn(async move {
            http.try_send(Method::GET, &path, Some(TOKEN_ACME_MEMBER), &[], None)
                .await
        })
    };
    LoadAcrossTheOutage {
        stop,
        loaders,
        in_flight,
    }
}

/// Lets the load run a while, then stops PostgreSQL as in a crash.
async fn stop_the_database_under_load(pg: &PrivatePostgres) {
    tokio::time::sleep(Duration::from_millis(700)).await;
    tokio::task::block_in_place(|| pg.stop_immediate());
    fault_injected("PostgreSQL stopped (immediate) under load");
}

/// During the outage: each kind of request is a clear 503 with Retry-After.
async fn every_kind_of_request_is_503_with_retry_after_while_the_database_is_down(
    http: &Http,
    id: &str,
) {
    let during: Vec<(Method, String, Option<Value>)> = vec![
        (Method::GET, format!("{CLUSTERS}/{id}"), None),
        (Method::GET, format!("{CLUSTERS}?organization=acme"), None),
        (
            Method::PATCH,
            format!("{CLUSTERS}/{id}"),
            Some(json!({"description": "lost"})),
        ),
        (
            Method::POST,
            CLUSTERS.to_owned(),
            Some(cluster_body("acme", "during-1")),
        ),
        (
            Method::GET,
            format!("{CLUSTERS}/{id}/state?since=0&timeout_seconds=1"),
            None,
        ),
        (
            Method::GET,
            format!("{AUTH_SERVERS}?organization=acme&environment=production"),
            None,
        ),
        (
            Method::POST,
            AUTH_SERVERS.to_owned(),
            Some(token_server("during", "during-outage-token-0001")),
        ),
    ];
    let answers = futures::future::join_all(during.iter().map(|(m, p, b)| {
        http.try_send(m.clone(), p, Some(TOKEN_ACME_SUPER_ADMIN), &[], b.as_ref())
    }))
    .await;
    for ((m, p, _), a) in during.iter().zip(answers) {
        let a = a.unwrap_or_else(|e| panic!("{m} {p} during the outage: {e}"));
        assert_problem(&a, 503, "service_unavailable", &format!("{m} {p}"));
        let retry = a.header("retry-after");
        assert!(
            retry.as_deref().is_some_and(|r| r.parse::<u32>().is_ok()),
            "{m} {p}: Retry-After {retry:?}"
        );
    }
}

async fn readiness_fails_and_liveness_holds_while_the_database_is_down(http: &Http) {
    let ready = http.send(Method::GET, "/readyz", None, &[], None).await;
    assert_eq!(ready.status, 503, "{}", ready.text());
    assert_eq!(http.get("/healthz").await.status, 200);
}

/// PostgreSQL back (the same server process then recovers: `wait_ready`).
fn restart_the_database(pg: &PrivatePostgres) {
    tokio::task::block_in_place(|| pg.start());
}

/// A write by "another process" (SQL with the notification the store sends), made the moment
/// the database is back: most likely before this server's change feed is listening again
/// (its reconnect backoff grew during the outage), so this server never hears of it. The
/// server's cache held the cluster before the outage (the load reads it).
async fn another_process_writes_as_soon_as_the_database_is_back(pg: &PrivatePostgres, id: &str) {
    let url = pg.url();
    let id = id.to_owned();
    tokio::task::spawn_blocking(move || {
        use diesel::Connection;
        use diesel::connection::SimpleConnection;
        let mut conn = diesel::PgConnection::establish(&url).unwrap_or_else(|e| panic!("{e}"));
        conn.batch_execute(&format!(
            "WITH u AS (UPDATE clusters SET tags = array_append(tags, 'written-as-db-returned'), \
                 revision = revision + 1 WHERE id = '{id}' \
                 RETURNING id, revision, organization_id) \
             SELECT pg_notify('cluster_changes', \
                 u.id || ':' || u.revision || ':' || u.organization_id || ':changed') FROM u"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
    })
    .await
    .unwrap();
}

/// Whether the feed heard of that write or not, no read shows the cluster without it: the
/// cache was emptied when the feed's connection was lost, and stays unused until it is back.
async fn the_write_made_as_the_database_returned_is_never_hidden_by_the_cache(
    http: &Http,
    id: &str,
) {
    let a = http.get(&format!("{CLUSTERS}/{id}")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(
        a.json()["tags"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("written-as-db-returned"))),
        "{}",
        a.text()
    );
}

/// Stops the loaders: what they saw together, and how the long-poll in flight ended.
async fn stop_the_load(load: LoadAcrossTheOutage) -> (LoadLog, Result<Answer, reqwest::Error>) {
    load.stop.store(true, Ordering::SeqCst);
    let mut log = LoadLog::default();
    for l in load.loaders {
        log.extend(l.await.unwrap());
    }
    (log, load.in_flight.await.unwrap())
}

fn the_long_poll_in_flight_answered_200_or_503(flight: &Result<Answer, reqwest::Error>) {
    match flight {
        Ok(a) => assert!(
            a.status == 200 || (a.status == 503 && a.problem_code() == "service_unavailable"),
            "the long-poll in flight: {} {}",
            a.status,
            a.text()
        ),
        Err(e) => panic!("the long-poll in flight failed below HTTP: {e}"),
    }
}

/// Nothing failed below HTTP or hung; every answer was a success or a 503 with Retry-After, and
/// some were 503s.
fn the_load_saw_only_successes_and_clear_503s_and_nothing_hung(
    load: &LoadLog,
    server: &ServerProcess,
) {
    assert!(
        load.failures.is_empty(),
        "requests failed below HTTP or hung past the client's timeout: {:?}\n{}",
        load.failures,
        server.log_tail()
    );
    let mut seen_503 = 0;
    for (label, status, code, retry) in &load.answers {
        match status {
            200 | 201 => {}
            503 => {
                seen_503 += 1;
                assert_eq!(code, "service_unavailable", "{label}");
                assert!(retry.is_some(), "{label}: 503 without Retry-After");
            }
            other => panic!("{label}: {other} {code} under the outage"),
        }
    }
    assert!(seen_503 > 0, "the load never saw the outage");
    eprintln!(
        "load across the outage: {} answers, {} of them 503",
        load.answers.len(),
        seen_503
    );
}

/// Every change committed before (or during, when it was answered 201) is there; the create
/// answered 503 is not.
async fn every_change_committed_or_answered_201_survived_the_outage(
    http: &Http,
    id: &str,
    created: &[String],
) {
    let c = http.get(&format!("{CLUSTERS}/{id}")).await;
    assert_eq!(c.status, 200, "{}", c.text());
    assert_eq!(c.json()["phase"], "Provisioned");
    assert!(
        c.json()["description"] == "kept"
            || c.json()["description"]
                .as_str()
                .is_some_and(|d| d.starts_with("load ")),
        "{}",
        c.text()
    );
    let list = http
        .get(&format!("{CLUSTERS}?organization=acme"))
        .await
        .json();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(names.contains(&"before-1"));
    for name in created {
        assert!(
            names.contains(&name.as_str()),
            "{name} answered 201 but is gone"
        );
    }
    assert!(!names.contains(&"during-1"));
}

/// Full service: a write, a cluster create and an auth server create. The new cluster's id.
async fn writes_and_creates_succeed_again(http: &Http, id: &str) -> String {
    let a = http
        .patch(
            &format!("{CLUSTERS}/{id}"),
            &json!({"description": "after"}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let a = http.post(CLUSTERS, &cluster_body("acme", "after-1")).await;
    assert_eq!(a.status, 201, "{}", a.text());
    let new_id = a.json()["id"].as_str().unwrap().to_owned();
    let a = http
        .post(
            AUTH_SERVERS,
            &token_server("after", "after-outage-token-0001"),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.text());
    new_id
}

async fn the_change_feed_gets_its_listen_connection_back(
    pg: &PrivatePostgres,
    server: &ServerProcess,
) {
    let url = pg.url();
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(
        &url,
        &format!(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = '{}'",
            store_postgres::CHANGE_FEED_APPLICATION_NAME
        ),
    ) < 1
    {
        assert!(
            Instant::now() < deadline,
            "the change feed never reconnected: {}",
            server.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn a_change_wakes_a_long_poll_again(http: &Http, id: &str) {
    let state = http
        .get(&format!("{CLUSTERS}/{id}/state?since=0&timeout_seconds=1"))
        .await
        .json();
    let version = state["version"].as_i64().unwrap();
    let poll = {
        let http = http.clone();
        let path = format!("{CLUSTERS}/{id}/state?since={version}&timeout_seconds=20");
        tokio::spawn(async move { http.get(&path).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let a = http
        .patch(
            &format!("{CLUSTERS}/{id}"),
            &json!({"description": "wakes the poll"}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let woke = poll.await.unwrap();
    assert_eq!(woke.status, 200, "{}", woke.text());
    assert_eq!(woke.json()["changed"], true, "{}", woke.text());
    assert!(woke.json()["version"].as_i64().unwrap() > version);
}

// ---------------------------------------------------------------------------------------------
// 3. SIGKILL during a burst of idempotent creates.
// ---------------------------------------------------------------------------------------------

const KEYS: usize = 5;
const BURST: usize = 20;

fn burst_key(k: usize) -> String {
    format!("burst-key-{k}-0123456789")
}

fn burst_body(k: usize) -> Value {
    cluster_body("acme", &format!("burst-{k}"))
}

/// The state of each idempotency key, in key order.
fn key_states(conn: &mut diesel::PgConnection) -> Vec<String> {
    use diesel::{QueryableByName, RunQueryDsl, sql_types::Text};
    #[derive(QueryableByName)]
    struct Row {
        #[diesel(sql_type = Text)]
        v: String,
    }
    let rows: Vec<Row> =
        diesel::sql_query("SELECT key || '=' || state AS v FROM idempotency_keys ORDER BY key")
            .load(conn)
            .unwrap();
    rows.into_iter()
        .map(|r| r.v.rsplit('=').next().unwrap_or_default().to_owned())
        .collect()
}

/// The creates of the burst in flight, each answering its key and what it got.
type Burst = Vec<JoinHandle<(usize, Result<Answer, reqwest::Error>)>>;

/// The 201 bodies the burst got before the kill, by key.
type AnsweredBeforeTheCrash = HashMap<usize, Vec<Vec<u8>>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_idempotent_creates_loses_and_duplicates_nothing() {
    // The in-process app only provides the database and the platform; its workers are off.
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let scratch = Scratch::new("burst");
    let env = binary_env(
        &app.platform,
        &app.db.url,
        &[("PROVISIONER_STEP_MS", "100"), ("RECONCILER_POLL_MS", "20")],
    );
    let port = free_port();
    let (mut first, http) = start_ready(&env, port, scratch.path("first.log")).await;

    let burst = send_a_burst_of_idempotent_creates(&http);
    kill_the_server_once_the_burst_is_half_done(&app, &mut first).await;
    let before_crash = the_burst_saw_201_409_in_progress_or_a_cut_connection(burst).await;

    // Restarted on the same port, reached through the same client.
    let second = ServerProcess::start(&env, port, scratch.path("second.log"));
    http.wait_ready().await;
    every_key_answers_201_once_then_replays_that_answer(&app, &http, &second, &before_crash).await;
    exactly_one_cluster_per_key_and_no_key_left_in_progress(&app);
    the_interrupted_provisioning_finishes_each_cluster_once(&app, &http).await;
}

/// `BURST` creates over `KEYS` idempotency keys, sent at once.
fn send_a_burst_of_idempotent_creates(http: &Http) -> Burst {
    (0..BURST)
        .map(|i| {
            let http = http.clone();
            let k = i % KEYS;
            tokio::spawn(async move {
                // Keys staggered so the kill finds them in different states.
                tokio::time::sleep(Duration::from_millis(10 * k as u64)).await;
                let key = burst_key(k);
                let r = http
                    .try_send(
                        Method::POST,
                        CLUSTERS,
                        Some(TOKEN_ACME_SUPER_ADMIN),
                        &[("Idempotency-Key", &key)],
                        Some(&burst_body(k)),
                    )
                    .await;
                (k, r)
            })
        })
        .collect()
}

/// Kill once the database shows the burst half done: the first keys answered while the later
/// ones are claimed or not yet sent (one connection, polled tightly).
async fn kill_the_server_once_the_burst_is_half_done(app: &TestApp, server: &mut ServerProcess) {
    let url = app.db.url.clone();
    let at_kill = tokio::task::spawn_blocking(move || {
        use diesel::Connection;
        let mut conn = diesel::PgConnection::establish(&url).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let states = key_states(&mut conn);
            let done = states.iter().filter(|s| *s == "completed").count();
            if (done >= 1 && done < states.len()) || done == KEYS {
                return states;
            }
            assert!(
                Instant::now() < deadline,
                "the burst never reached the store"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    })
    .await
    .unwrap();
    server.kill9();
    fault_injected("SIGKILL of the server during a burst of idempotent creates");
    eprintln!(
        "killed with the keys {at_kill:?}, {} clusters and {} operations claimed",
        app.count_rows("clusters"),
        app.count_rows("operations WHERE lease_id IS NOT NULL AND state <> 'done'"),
    );
}

/// What the burst saw: 201, 409 in progress (a concurrent duplicate), or a cut connection.
async fn the_burst_saw_201_409_in_progress_or_a_cut_connection(
    burst: Burst,
) -> AnsweredBeforeTheCrash {
    let mut bodies = AnsweredBeforeTheCrash::new();
    for t in burst {
        let (k, r) = t.await.unwrap();
        if let Ok(a) = r {
            match a.status {
                201 => bodies.entry(k).or_default().push(a.body),
                409 => assert_eq!(a.problem_code(), "idempotency_key_in_progress"),
                other => panic!("burst key {k}: {other} {}", a.text()),
            }
        }
    }
    bodies
}

/// Each key re-sent until it is no longer in progress answers 201; every later request is the
/// same answer replayed, the same as any 201 before the crash, and names the one cluster made.
async fn every_key_answers_201_once_then_replays_that_answer(
    app: &TestApp,
    http: &Http,
    server: &ServerProcess,
    before_crash: &AnsweredBeforeTheCrash,
) {
    let deadline = Instant::now() + Duration::from_secs(80);
    for k in 0..KEYS {
        let key = burst_key(k);
        let first_after = first_answer_after_the_restart(http, server, k, deadline).await;
        // Once answered, every later request is the same answer, replayed.
        let again = send_burst_create(http, k).await;
        assert_eq!(again.status, 201, "{}", again.text());
        assert_eq!(again.header("idempotency-replay").as_deref(), Some("true"));
        assert_eq!(again.body, first_after.body, "key {key}: replay differs");
        for earlier in before_crash.get(&k).into_iter().flatten() {
            assert_eq!(
                earlier, &first_after.body,
                "key {key}: the answer before the crash differs from the one after"
            );
        }
        let id = first_after.json()["id"].as_str().unwrap().to_owned();
        assert_eq!(
            app.texts(&format!(
                "SELECT id::text AS v FROM clusters WHERE name = 'burst-{k}'"
            )),
            vec![id],
            "exactly one cluster for key {key}, the one its answer names"
        );
    }
}

/// Key `k`'s create, re-sent after the restart.
async fn send_burst_create(http: &Http, k: usize) -> Answer {
    let key = burst_key(k);
    http.send(
        Method::POST,
        CLUSTERS,
        Some(TOKEN_ACME_SUPER_ADMIN),
        &[("Idempotency-Key", key.as_str())],
        Some(&burst_body(k)),
    )
    .await
}

/// Re-sends key `k` until it is no longer in progress (a key whose first request died is taken
/// over once its 60 s lease runs out); that answer, a 201.
async fn first_answer_after_the_restart(
    http: &Http,
    server: &ServerProcess,
    k: usize,
    deadline: Instant,
) -> Answer {
    let key = burst_key(k);
    loop {
        let a = send_burst_create(http, k).await;
        if a.status == 409 && a.problem_code() == "idempotency_key_in_progress" {
            assert!(
                Instant::now() < deadline,
                "key {key} stayed in progress: {}",
                server.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        assert_eq!(a.status, 201, "key {key} after the restart: {}", a.text());
        return a;
    }
}

fn exactly_one_cluster_per_key_and_no_key_left_in_progress(app: &TestApp) {
    assert_eq!(app.count_rows("clusters"), KEYS as i64);
    assert_eq!(
        app.count_rows("idempotency_keys WHERE state = 'in_progress'"),
        0,
        "a key left in progress"
    );
}

/// The provisioning the crash interrupted finishes, each cluster once.
async fn the_interrupted_provisioning_finishes_each_cluster_once(app: &TestApp, http: &Http) {
    for id in app.texts("SELECT id::text AS v FROM clusters") {
        http.wait_cluster(&id, Duration::from_secs(80), |c| {
            c["phase"] == "Provisioned"
        })
        .await;
    }
    assert_eq!(app.count_rows("operations WHERE state <> 'done'"), 0);
    assert_eq!(app.count_rows("nodes"), (KEYS * 2) as i64);
}

// ---------------------------------------------------------------------------------------------
// 4. Secrets: never in a response, never in a log line.
// ---------------------------------------------------------------------------------------------

const PASSWORD: &str = "faults-basic-password-Pw71q";
const PASSWORD_2: &str = "faults-second-password-Pw82r";
const STATIC_TOKEN: &str = "faults-static-token-Tk63s";
const STATIC_TOKEN_2: &str = "faults-second-token-Tk94t";
const SHORT_TOKEN: &str = "shrt-Tk05u";
const CLIENT_SECRET: &str = "faults-oidc-client-secret-Cs36v";
const CLIENT_SECRET_2: &str = "faults-rotated-secret-Cs47w";
const MISPLACED: &str = "faults-misplaced-secret-Ms58x";
const WRONG_BEARER: &str = "faults-unknown-bearer-Br69y";

/// Every answer the server gave, with what it was for, to be searched for secrets at the end.
#[derive(Default)]
struct Answers(Vec<(String, Answer)>);

impl Answers {
    /// Keeps the answer; its status.
    fn record(&mut self, label: &str, a: Answer) -> u16 {
        let status = a.status;
        self.0.push((label.to_owned(), a));
        status
    }
}

/// A create body of each kind of auth server, each carrying its secret.
struct AuthServerBodies {
    oidc: Value,
    basic: Value,
    token: Value,
}

fn auth_server_bodies() -> AuthServerBodies {
    AuthServerBodies {
        oidc: json!({"organization": "acme", "name": "sso", "environment": "production",
            "type": "oidc", "config": {"issuer_url": "https://login.example.com/realms/acme",
            "redirect_path": "/oauth2/callback", "client_id": "gateway",
            "client_secret": CLIENT_SECRET, "authorized_domain": "app.example.com"}}),
        basic: json!({"organization": "acme", "name": "ops", "environment": "production",
            "type": "basic", "config": {"realm": "Ops",
            "credentials": [{"username": "ops", "password": PASSWORD}]}}),
        token: token_server("api", STATIC_TOKEN),
    }
}

/// The ids of the auth servers made from [`AuthServerBodies`].
struct AuthServerIds {
    oidc: String,
    basic: String,
    token: String,
}

/// The credentials collection of an auth server.
fn cred(id: &str) -> String {
    format!("{AUTH_SERVERS}/{id}/credentials")
}

/// `v` with `value` put at `path`.
fn with(v: &Value, path: &[&str], value: Value) -> Value {
    let mut v = v.clone();
    let mut at = &mut v;
    for p in &path[..path.len() - 1] {
        at = &mut at[*p];
    }
    at[path[path.len() - 1]] = value;
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_a_response_or_a_log_line() {
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let scratch = Scratch::new("secrets");
    let env = binary_env(
        &app.platform,
        &app.db.url,
        &[
            ("PROVISIONER_STEP_MS", "0"),
            ("RECONCILER_POLL_MS", "20"),
            ("TOKEN_CACHE_TTL_S", "0"),
            ("RUST_LOG", "debug"),
        ],
    );
    let (mut server, http) = start_ready(&env, free_port(), scratch.path("server.log")).await;
    let mut answers = Answers::default();
    let bodies = auth_server_bodies();

    let ids = create_each_kind_of_auth_server_then_replay_it(&http, &mut answers, &bodies).await;
    add_credentials_twice_rotate_a_secret_and_read_everything(&http, &mut answers, &ids).await;
    misplaced_secrets_in_auth_server_creates_are_client_errors(&http, &mut answers, &bodies).await;
    misplaced_secrets_in_credentials_and_patches_are_client_errors(&http, &mut answers, &ids).await;
    misplaced_secrets_in_cluster_creates_are_client_errors(&http, &mut answers).await;
    truncated_json_carrying_a_token_is_422(&http, &mut answers).await;
    unknown_bearers_and_the_wrong_scheme_are_401(&http, &mut answers).await;
    a_failing_platform_is_502_while_logging_at_debug(&app.platform, &http, &mut answers).await;
    other_roles_read_and_another_organization_is_403(&http, &mut answers).await;
    remove_a_credential_and_every_auth_server(&http, &mut answers, &ids).await;

    server.terminate();
    let log = server.log_text();
    dump_what_is_checked_when_asked(&answers, &log);
    the_server_logged_at_debug(&server, &log);
    let secrets = every_secret_in_play(app.platform.service_token());
    no_response_carries_a_secret(&answers, &secrets);
    no_log_line_carries_a_secret(&log, &secrets);
    eprintln!(
        "secrets: {} responses and {} log lines checked for {} secrets",
        answers.0.len(),
        log.lines().count(),
        secrets.len()
    );
}

/// Each kind created (201) under an Idempotency-Key, then the stored answer replayed.
async fn create_each_kind_of_auth_server_then_replay_it(
    http: &Http,
    answers: &mut Answers,
    bodies: &AuthServerBodies,
) -> AuthServerIds {
    let mut ids = HashMap::new();
    for (kind, body) in [
        ("oidc", &bodies.oidc),
        ("basic", &bodies.basic),
        ("token", &bodies.token),
    ] {
        let key = format!("secrets-{kind}-0001");
        let headers = [("Idempotency-Key", key.as_str())];
        let a = http
            .send(
                Method::POST,
                AUTH_SERVERS,
                Some(TOKEN_ACME_SUPER_ADMIN),
                &headers,
                Some(body),
            )
            .await;
        let id = a.json()["id"].as_str().unwrap_or_default().to_owned();
        assert_eq!(answers.record(kind, a), 201, "create {kind}");
        ids.insert(kind, id);
        // A replay of the stored answer.
        let a = http
            .send(
                Method::POST,
                AUTH_SERVERS,
                Some(TOKEN_ACME_SUPER_ADMIN),
                &headers,
                Some(body),
            )
            .await;
        assert_eq!(answers.record(&format!("replay {kind}"), a), 201);
    }
    AuthServerIds {
        oidc: ids["oidc"].clone(),
        basic: ids["basic"].clone(),
        token: ids["token"].clone(),
    }
}

/// Credentials added, one of them twice (409), a rotation, reads.
async fn add_credentials_twice_rotate_a_secret_and_read_everything(
    http: &Http,
    answers: &mut Answers,
    ids: &AuthServerIds,
) {
    for (label, path, body, want) in [
        (
            "add password",
            cred(&ids.basic),
            json!({"username": "dev", "password": PASSWORD_2}),
            201,
        ),
        (
            "add token",
            cred(&ids.token),
            json!({"token": STATIC_TOKEN_2}),
            201,
        ),
        (
            "same token again",
            cred(&ids.token),
            json!({"token": STATIC_TOKEN_2}),
            409,
        ),
        (
            "same user again",
            cred(&ids.basic),
            json!({"username": "dev", "password": PASSWORD}),
            409,
        ),
    ] {
        assert_eq!(
            answers.record(label, http.post(&path, &body).await),
            want,
            "{label}"
        );
    }
    let a = http
        .patch(
            &format!("{AUTH_SERVERS}/{}", ids.oidc),
            &json!({"config": {"client_secret": CLIENT_SECRET_2}}),
        )
        .await;
    assert_eq!(answers.record("rotate", a), 200);
    for id in [&ids.oidc, &ids.basic, &ids.token] {
        let a = http.get(&format!("{AUTH_SERVERS}/{id}")).await;
        assert_eq!(answers.record("read", a), 200);
    }
    let a = http
        .get(&format!(
            "{AUTH_SERVERS}?organization=acme&environment=production"
        ))
        .await;
    assert_eq!(answers.record("list", a), 200);
}

/// Sends each bad request as acme's super_admin; each is a client error.
async fn each_is_a_client_error(
    http: &Http,
    answers: &mut Answers,
    bad: &[(&str, Method, String, Value)],
) {
    for (label, method, path, body) in bad {
        let a = http
            .send(
                method.clone(),
                path,
                Some(TOKEN_ACME_SUPER_ADMIN),
                &[],
                Some(body),
            )
            .await;
        let status = answers.record(label, a);
        assert!(
            (400..500).contains(&status),
            "{label}: {status} (a client error expected)"
        );
    }
}

/// Auth server creates carrying the secrets in the wrong places: unknown fields, wrong JSON
/// types, a static token too short.
async fn misplaced_secrets_in_auth_server_creates_are_client_errors(
    http: &Http,
    answers: &mut Answers,
    b: &AuthServerBodies,
) {
    let bad = [
        (
            "unknown field",
            with(&b.oidc, &["config", "extra"], json!(MISPLACED)),
        ),
        (
            "unknown top field",
            with(&b.basic, &["secret"], json!(PASSWORD)),
        ),
        (
            "secret as an array client id",
            with(&b.oidc, &["config", "client_id"], json!([CLIENT_SECRET])),
        ),
        (
            "secret where an object goes",
            with(&b.oidc, &["config"], json!(CLIENT_SECRET)),
        ),
        (
            "client_secret wrong type",
            with(
                &b.oidc,
                &["config", "client_secret"],
                json!({"v": CLIENT_SECRET}),
            ),
        ),
        (
            "tokens as a string",
            with(&b.token, &["config", "tokens"], json!(STATIC_TOKEN)),
        ),
        (
            "token too short",
            with(&b.token, &["config", "tokens"], json!([SHORT_TOKEN])),
        ),
        (
            "token as an array name",
            with(&b.token, &["name"], json!([STATIC_TOKEN])),
        ),
        (
            "password wrong type",
            with(
                &b.basic,
                &["config", "credentials"],
                json!([{"username": "x", "password": [PASSWORD]}]),
            ),
        ),
        (
            "password as the realm",
            with(
                &b.basic,
                &["config", "realm"],
                json!(format!("\"{PASSWORD}")),
            ),
        ),
        (
            "secret in the environment",
            with(&b.token, &["environment"], json!(MISPLACED)),
        ),
    ]
    .map(|(label, body)| (label, Method::POST, AUTH_SERVERS.to_owned(), body));
    each_is_a_client_error(http, answers, &bad).await;
}

/// Credentials of the wrong type, too short or for another kind of server, and credentials or
/// a badly typed secret in a PATCH.
async fn misplaced_secrets_in_credentials_and_patches_are_client_errors(
    http: &Http,
    answers: &mut Answers,
    ids: &AuthServerIds,
) {
    let (post, patch) = (Method::POST, Method::PATCH);
    let server = |id: &str| format!("{AUTH_SERVERS}/{id}");
    let bad = [
        (
            "credential as a number",
            post.clone(),
            cred(&ids.token),
            json!({"token": 12345}),
        ),
        (
            "credential wrong type",
            post.clone(),
            cred(&ids.token),
            json!({"token": [STATIC_TOKEN]}),
        ),
        (
            "short credential",
            post.clone(),
            cred(&ids.token),
            json!({"token": SHORT_TOKEN}),
        ),
        (
            "password on a token server",
            post.clone(),
            cred(&ids.token),
            json!({"username": "x", "password": PASSWORD}),
        ),
        (
            "token on an oidc server",
            post.clone(),
            cred(&ids.oidc),
            json!({"token": STATIC_TOKEN}),
        ),
        (
            "credentials in a patch",
            patch.clone(),
            server(&ids.basic),
            json!({"config": {"credentials": [{"username": "x", "password": PASSWORD}]}}),
        ),
        (
            "tokens in a patch",
            patch.clone(),
            server(&ids.token),
            json!({"config": {"tokens": [STATIC_TOKEN]}}),
        ),
        (
            "client secret wrong type in a patch",
            patch,
            server(&ids.oidc),
            json!({"config": {"client_secret": [CLIENT_SECRET_2]}}),
        ),
    ];
    each_is_a_client_error(http, answers, &bad).await;
}

async fn misplaced_secrets_in_cluster_creates_are_client_errors(
    http: &Http,
    answers: &mut Answers,
) {
    let cluster = cluster_body("acme", "c1");
    let bad = [
        (
            "secret in a cluster body",
            with(&cluster, &["description"], json!([MISPLACED])),
        ),
        (
            "secret as the cluster tags",
            with(&cluster, &["tags"], json!(MISPLACED)),
        ),
    ]
    .map(|(label, body)| (label, Method::POST, CLUSTERS.to_owned(), body));
    each_is_a_client_error(http, answers, &bad).await;
}

/// Malformed JSON cut off inside a static token.
async fn truncated_json_carrying_a_token_is_422(http: &Http, answers: &mut Answers) {
    let truncated = format!(
        "{{\"organization\": \"acme\", \"type\": \"token\", \"config\": {{\"tokens\": [\"{STATIC_TOKEN}"
    );
    let a = http
        .client
        .post(format!("{}{AUTH_SERVERS}", http.base))
        .bearer_auth(TOKEN_ACME_SUPER_ADMIN)
        .header("Content-Type", "application/json")
        .body(truncated)
        .send()
        .await
        .unwrap();
    let a = Answer {
        status: a.status().as_u16(),
        headers: a.headers().clone(),
        body: a.bytes().await.unwrap().to_vec(),
    };
    assert_eq!(answers.record("truncated JSON", a), 422);
}

async fn unknown_bearers_and_the_wrong_scheme_are_401(http: &Http, answers: &mut Answers) {
    let path = format!("{CLUSTERS}?organization=acme");
    let wrong_scheme = format!("Token {TOKEN_ACME_MEMBER}");
    for (label, token, headers) in [
        ("unknown bearer", Some(WRONG_BEARER), vec![]),
        (
            "wrong scheme",
            None,
            vec![("Authorization", wrong_scheme.as_str())],
        ),
    ] {
        let a = http.send(Method::GET, &path, token, &headers, None).await;
        assert_eq!(answers.record(label, a), 401);
    }
}

/// A valid bearer while the platform fails, with the server logging at debug.
async fn a_failing_platform_is_502_while_logging_at_debug(
    platform: &platform_stub::StubHandle,
    http: &Http,
    answers: &mut Answers,
) {
    for fault in [Fault::Status500, Fault::Garbage] {
        platform.set_fault(fault);
        fault_injected(&format!(
            "account platform {fault:?} while logging at debug"
        ));
        let a = http.get(&format!("{CLUSTERS}?organization=acme")).await;
        assert_eq!(answers.record("platform down", a), 502);
    }
    platform.set_fault(Fault::Normal);
}

/// Every other role lists auth servers (whatever the answer); another organization is 403.
async fn other_roles_read_and_another_organization_is_403(http: &Http, answers: &mut Answers) {
    for (token, org) in [
        (TOKEN_ACME_MEMBER, "acme"),
        (TOKEN_ACME_PROJECT_ADMIN, "acme"),
        (TOKEN_ACME_ASSISTANT, "acme"),
        (TOKEN_INITECH_SUPER_ADMIN, "initech"),
        (TOKEN_TWO_ORGS, "acme"),
    ] {
        let a = http
            .send(
                Method::GET,
                &format!("{AUTH_SERVERS}?organization={org}&environment=production"),
                Some(token),
                &[],
                None,
            )
            .await;
        answers.record("other roles", a);
    }
    let a = http
        .send(
            Method::GET,
            &format!("{AUTH_SERVERS}?organization=globex&environment=production"),
            Some(TOKEN_ACME_MEMBER),
            &[],
            None,
        )
        .await;
    assert_eq!(answers.record("other organization", a), 403);
}

/// Removing the credentials and the servers.
async fn remove_a_credential_and_every_auth_server(
    http: &Http,
    answers: &mut Answers,
    ids: &AuthServerIds,
) {
    let delete = |path: String| async move {
        http.send(
            Method::DELETE,
            &path,
            Some(TOKEN_ACME_SUPER_ADMIN),
            &[],
            None,
        )
        .await
    };
    let list = http
        .get(&format!("{AUTH_SERVERS}/{}", ids.token))
        .await
        .json();
    if let Some(first) = list["config"]["tokens"][0]["id"].as_str() {
        let a = delete(format!("{}/{first}", cred(&ids.token))).await;
        assert_eq!(answers.record("remove credential", a), 204);
    }
    for id in [&ids.oidc, &ids.basic, &ids.token] {
        let a = delete(format!("{AUTH_SERVERS}/{id}")).await;
        assert_eq!(answers.record("delete", a), 204);
    }
}

/// FAULTS_DUMP=1 prints what was checked, to see the test still bites.
fn dump_what_is_checked_when_asked(answers: &Answers, log: &str) {
    if std::env::var("FAULTS_DUMP").is_ok() {
        for (l, a) in &answers.0 {
            eprintln!("{l}: {} {}", a.status, a.text());
        }
        eprintln!("{log}");
    }
}

fn the_server_logged_at_debug(server: &ServerProcess, log: &str) {
    assert!(
        log.contains("DEBUG") && log.contains("request"),
        "the server logged at debug: {}",
        server.log_tail()
    );
}

/// Every secret the test sent or the server holds: the auth servers' secrets, the bearers, the
/// platform's service token and the secrets key.
fn every_secret_in_play(service_token: &str) -> [&str; 17] {
    [
        PASSWORD,
        PASSWORD_2,
        STATIC_TOKEN,
        STATIC_TOKEN_2,
        SHORT_TOKEN,
        CLIENT_SECRET,
        CLIENT_SECRET_2,
        MISPLACED,
        WRONG_BEARER,
        TOKEN_ACME_SUPER_ADMIN,
        TOKEN_ACME_MEMBER,
        TOKEN_ACME_PROJECT_ADMIN,
        TOKEN_ACME_ASSISTANT,
        TOKEN_INITECH_SUPER_ADMIN,
        TOKEN_TWO_ORGS,
        service_token,
        TEST_SECRETS_KEY,
    ]
}

/// Neither the body nor a header of any answer.
fn no_response_carries_a_secret(answers: &Answers, secrets: &[&str]) {
    for (label, a) in &answers.0 {
        let mut seen = a.text();
        for (name, value) in &a.headers {
            seen.push_str(&format!(
                "\n{name}: {}",
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
        for s in secrets {
            assert!(
                !seen.contains(s),
                "{label}: the response carries a secret: {seen}"
            );
        }
    }
}

fn no_log_line_carries_a_secret(log: &str, secrets: &[&str]) {
    for (n, line) in log.lines().enumerate() {
        for s in secrets {
            assert!(!line.contains(s), "log line {n} carries a secret: {line}");
        }
    }
}
