//! Faults: the account platform failing in every way, a private PostgreSQL cluster
//! stopped and restarted under load, SIGKILL of the real server binary during a burst of
//! idempotent creates, two server binaries reading each other's writes through their caches,
//! and secrets that must never reach a response or a log line. One module per scenario; the
//! helpers they share are here.
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

fn token_server(name: &str, token: &str) -> Value {
    json!({"organization": "acme", "name": name, "environment": "production", "type": "token",
           "config": {"tokens": [token]}})
}

/// Stops a helper process the test started: SIGTERM to `pid` (the process itself, or the one
/// a wrapper like runuser started), up to 5 s for `child` to exit, then SIGKILL.
fn stop_child(child: &mut std::process::Child, pid: &str) {
    if !pid.trim().is_empty() {
        let _ = Command::new("kill").args(["-TERM", pid.trim()]).status();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

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

/// While no database takes writes: each kind of request (a read, a list, a change, a create, a
/// state long-poll, and `extra`) answers a clear 503 with a numeric Retry-After. `when` names
/// the moment in failure messages.
async fn every_kind_of_request_is_503_with_retry_after(
    http: &Http,
    id: &str,
    when: &str,
    extra: Vec<(Method, String, Option<Value>)>,
) {
    let mut during: Vec<(Method, String, Option<Value>)> = vec![
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
    ];
    during.extend(extra);
    let answers = futures::future::join_all(during.iter().map(|(m, p, b)| {
        http.try_send(m.clone(), p, Some(TOKEN_ACME_SUPER_ADMIN), &[], b.as_ref())
    }))
    .await;
    for ((m, p, _), a) in during.iter().zip(answers) {
        let a = a.unwrap_or_else(|e| panic!("{m} {p} {when}: {e}"));
        assert_problem(&a, 503, "service_unavailable", &format!("{m} {p}"));
        let retry = a.header("retry-after");
        assert!(
            retry.as_deref().is_some_and(|r| r.parse::<u32>().is_ok()),
            "{m} {p}: Retry-After {retry:?}"
        );
    }
}

/// `/readyz` fails (503) while `/healthz` holds (200): taken out of the load balancer, not
/// restarted.
async fn readiness_fails_and_liveness_holds(http: &Http) {
    let ready = http.send(Method::GET, "/readyz", None, &[], None).await;
    assert_eq!(ready.status, 503, "{}", ready.text());
    assert_eq!(http.get("/healthz").await.status, 200);
}

mod database_outage;
mod failover;
mod failover_load;
mod graceful_stop;
mod key_rotation;
mod migrate;
mod patroni;
mod pgbouncer;
mod platform_outage;
mod replicas;
mod secrets;
mod sigkill;
mod two_servers;
mod upgrade_kill;
