//! Three server binaries on one database behind nginx (Debian's), under steady load through it:
//! creates with Idempotency-Keys, reads, changes, state long-polls, provisioning running. One
//! replica is SIGKILLed, another SIGTERMed, and both come back. No acknowledged write is lost or
//! done twice, every key replays its first answer through any replica, long-polls held on the
//! dead replica end with an error that is retried, and the only errors the load sees are for
//! requests in flight on the killed replica. `SOAK_SECONDS` (scripts/soak.sh, `make soak`) is the
//! long form: the same round again and again for that long, the roles rotating over the replicas.
//!
//! The same again with every query of the replicas through one PgBouncer in transaction mode
//! (`pgbouncer.rs`), fewer server sessions than the replicas have pool connections, and only
//! their LISTEN connections and migrations direct (`LISTEN_DATABASE_URL`).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::Child;

use super::pgbouncer::PgBouncer;
use super::*;

const REPLICAS: usize = 3;
const CREATORS: usize = 2;
const READERS: usize = 2;
const POLLERS: usize = 3;
/// Each creator's pause between creates: a 300 s soak makes about 7,000 clusters.
const CREATE_PACE: Duration = Duration::from_millis(60);
/// The load's own long-polls wait this long; the watched cluster changes more often than that.
const POLL_SECONDS: u64 = 2;
/// Long-polls held through nginx across each kill. Round robin puts each on the victim with
/// chance 1/3, so all of them miss it once in 190,000 runs. They wait up to a minute: a change
/// of the held cluster answers them once the round is over.
const HELD_POLLS: usize = 30;
/// Short stops; the delay covers nginx's reload that takes the stopping replica out.
const SHUTDOWN_DELAY_SECONDS: u64 = 1;
const DRAIN_TIMEOUT_SECONDS: u64 = 5;
/// A 502 still counts as in flight at the kill when its request reached nginx this soon after:
/// nginx may hand it to a kept-alive connection to the dead replica before it has read that
/// connection's close.
const KILL_GRACE: Duration = Duration::from_millis(500);
/// How a client waits before resending after a 502 or a cut.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// How often a creator resends the keys still in progress (held by a request that died).
const PARKED_RETRY: Duration = Duration::from_secs(2);
/// Each replica's `DATABASE_POOL_SIZE`.
const POOL_SIZE: u32 = 4;
/// PgBouncer's server sessions for all three replicas: fewer than the replicas' pools open
/// even when idle (one each), so every session is shared.
const PGBOUNCER_SESSIONS: u32 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_behind_nginx_lose_and_duplicate_nothing_when_one_is_killed_and_one_stopped()
{
    let Some(nginx_bin) = Nginx::find() else {
        return;
    };
    // The in-process app only provides the database and the platform; its workers are off.
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let replicas = kill_and_stop_replicas_under_load(&app, &nginx_bin, Route::Direct).await;
    drop(replicas);
}

/// As above, every query of the replicas through one PgBouncer in transaction mode with fewer
/// server sessions than the replicas' pools hold, statements not cached
/// (`DATABASE_STATEMENT_CACHE=off`), the change feeds' LISTEN and the migrations direct
/// (`LISTEN_DATABASE_URL`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_through_one_pgbouncer_in_transaction_mode_lose_and_duplicate_nothing() {
    let Some(nginx_bin) = Nginx::find() else {
        return;
    };
    let Some(pgbouncer_bin) = PgBouncer::find() else {
        return;
    };
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let pgbouncer = PgBouncer::start(&pgbouncer_bin, &app.db.url, PGBOUNCER_SESSIONS);
    let pooled = pgbouncer.url(&app.db.url);
    let replicas =
        kill_and_stop_replicas_under_load(&app, &nginx_bin, Route::Pooler(&pooled)).await;

    // Every query went through PgBouncer, sharing its sessions: the replicas' pools hold more
    // connections than PostgreSQL has sessions for them, and those are PgBouncer's (it names
    // each after the client it serves, `kubesvc-replica-<i>`). Counted once the load is over:
    // under it, a session PgBouncer closed (its client was killed mid-transaction) may still
    // be ending beside the one that replaces it.
    let pooled_connections = replicas.pool_connections().await;
    let sessions_named = |name: &str| {
        count(
            &app.db.url,
            &format!(
                "SELECT count(*) AS n FROM pg_stat_activity \
                 WHERE datname = current_database() AND application_name LIKE '{name}'"
            ),
        )
    };
    let shared = sessions_named("kubesvc-replica-%");
    let feeds = sessions_named(store_postgres::CHANGE_FEED_APPLICATION_NAME);
    eprintln!(
        "through pgbouncer: the replicas' pools hold {pooled_connections} connections to it, \
         served by {shared} server sessions (default_pool_size {}); change feeds listening \
         directly: {feeds}",
        pgbouncer.default_pool_size
    );
    assert!(
        (1..=i64::from(pgbouncer.default_pool_size)).contains(&shared),
        "server sessions of the replicas' pools: {shared}\n{}",
        pgbouncer.log()
    );
    assert!(
        pooled_connections > i64::from(pgbouncer.default_pool_size),
        "the pools' {pooled_connections} connections share PgBouncer's {} sessions",
        pgbouncer.default_pool_size
    );
    // One LISTEN session per replica straight to PostgreSQL, and the in-process app's (one
    // through PgBouncer would be among its sessions, and fewer).
    assert_eq!(feeds, REPLICAS as i64 + 1, "direct change feed sessions");
    drop(replicas);
    drop(pgbouncer);
}

/// How the replicas reach PostgreSQL.
#[derive(Clone, Copy)]
enum Route<'a> {
    /// Every connection to the test database directly.
    Direct,
    /// Every query through a pooler in transaction mode at this URL, statements not cached;
    /// the LISTEN connections and the migrations directly.
    Pooler(&'a str),
}

/// Three replicas behind nginx under steady load, through `route`: one killed and another
/// stopped each round, both back; then everything the load was answered is checked. Returns
/// the replicas, still running.
async fn kill_and_stop_replicas_under_load(
    app: &TestApp,
    nginx_bin: &Path,
    route: Route<'_>,
) -> Replicas {
    let plan = Plan::from_env();
    let mut replicas = Replicas::start(app, route).await;
    let mut nginx = Nginx::start(nginx_bin, &replicas.upstreams());
    let http = Http::new(&nginx.base, Duration::from_secs(30));
    let fixtures = Fixtures::create(&http).await;
    let started = Instant::now();

    let load = start_steady_load_through_nginx(&http, &fixtures);
    let mut rounds = Vec::new();
    loop {
        tokio::time::sleep(plan.steady).await;
        let round = rounds.len();
        rounds.push(
            kill_one_replica_and_stop_another_then_bring_both_back(
                round,
                &mut replicas,
                &mut nginx,
                &http,
                &fixtures,
            )
            .await,
        );
        if plan.until.is_none_or(|until| Instant::now() >= until) {
            break;
        }
    }
    tokio::time::sleep(plan.steady).await;
    let mut load = stop_the_load(load).await;
    let loaded_for = started.elapsed();

    let errors = the_load_saw_errors_only_for_requests_in_flight_on_a_killed_replica(
        &load.events,
        &rounds,
        &nginx,
    );
    nginx_sends_to_every_replica_again(&http, &replicas).await;
    keys_held_by_a_dead_request_are_taken_over_once_their_lease_runs_out(app, &http, &mut load)
        .await;
    every_acknowledged_create_exists_exactly_once(app, &load.acks);
    every_key_replays_its_first_answer_through_each_replica_and_nginx(&replicas, &http, &load.acks)
        .await;
    provisioning_finishes_each_cluster_once(app, &rounds, load.acks.len() + 3).await;
    print_the_figures(&load, &rounds, &errors, loaded_for, &nginx);
    drop(nginx);
    replicas
}

// ---------------------------------------------------------------------------------------------
// The plan, the replicas and nginx.
// ---------------------------------------------------------------------------------------------

/// The short form by default; with `SOAK_SECONDS`, rounds until that much time has passed.
struct Plan {
    until: Option<Instant>,
    /// Steady load before each round and after the last.
    steady: Duration,
}

impl Plan {
    fn from_env() -> Plan {
        match std::env::var("SOAK_SECONDS")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .filter(|s| *s > 0)
        {
            Some(secs) => {
                eprintln!("soak: rounds for {secs} s (SOAK_SECONDS)");
                Plan {
                    until: Some(Instant::now() + Duration::from_secs(secs)),
                    steady: Duration::from_secs(8),
                }
            }
            None => Plan {
                until: None,
                steady: Duration::from_millis(1500),
            },
        }
    }
}

/// The three server processes on one database, each on its own port for good.
struct Replicas {
    env: Vec<(&'static str, String)>,
    db: String,
    scratch: Scratch,
    ports: Vec<u16>,
    processes: Vec<ServerProcess>,
    starts: usize,
}

impl Replicas {
    async fn start(app: &TestApp, route: Route<'_>) -> Replicas {
        let (delay, drain, pool) = (
            SHUTDOWN_DELAY_SECONDS.to_string(),
            DRAIN_TIMEOUT_SECONDS.to_string(),
            POOL_SIZE.to_string(),
        );
        let mut extra = vec![
            // Provisioning runs during the load, each cluster in a fraction of a second.
            ("PROVISIONER_STEP_MS", "20"),
            ("RECONCILER_POLL_MS", "50"),
            ("ZONE_MAX_NODES", "1000000"),
            ("DATABASE_POOL_SIZE", pool.as_str()),
            // A short stop: the delay nginx cannot see anyway (it does not read /readyz).
            ("SHUTDOWN_DELAY_SECONDS", &delay),
            ("DRAIN_TIMEOUT_SECONDS", &drain),
        ];
        let db = match route {
            Route::Direct => app.db.url.clone(),
            Route::Pooler(url) => {
                // Unnamed: the change feed's sessions are then named by the feed itself.
                extra.push(("LISTEN_DATABASE_URL", app.db.url.as_str()));
                extra.push(("DATABASE_STATEMENT_CACHE", "off"));
                url.to_owned()
            }
        };
        let env = binary_env(&app.platform, &app.db.url, &extra);
        let mut replicas = Replicas {
            env,
            db,
            scratch: Scratch::new("replicas"),
            ports: (0..REPLICAS).map(|_| free_port()).collect(),
            processes: Vec::new(),
            starts: 0,
        };
        for i in 0..REPLICAS {
            let process = replicas.start_one(i).await;
            replicas.processes.push(process);
        }
        replicas
    }

    async fn start_one(&mut self, i: usize) -> ServerProcess {
        self.starts += 1;
        let log = self
            .scratch
            .path(&format!("replica-{i}-{}.log", self.starts));
        let mut env = self.env.clone();
        // Its database sessions named after it, to see what it is doing in pg_stat_activity
        // (a name given in the URL names all of them, the change feed's and notifier's too).
        let sep = if self.db.contains('?') { '&' } else { '?' };
        let db = format!("{}{sep}application_name={}", self.db, session_name(i));
        env.retain(|(k, _)| *k != "DATABASE_URL");
        env.push(("DATABASE_URL", db));
        start_ready(&env, self.ports[i], log).await.0
    }

    /// The connections the replicas' pools hold now, from each one's `/metrics`.
    async fn pool_connections(&self) -> i64 {
        let mut open = 0;
        for i in 0..REPLICAS {
            let a = self
                .direct(i, Duration::from_secs(10))
                .get("/metrics")
                .await;
            assert_eq!(a.status, 200, "{}", a.text());
            open += a
                .text()
                .lines()
                .find_map(|l| l.strip_prefix("db_pool_connections{state=\"open\"} "))
                .and_then(|n| n.trim().parse::<i64>().ok())
                .unwrap_or_else(|| panic!("no open pool connections in /metrics:\n{}", a.text()));
        }
        open
    }

    /// The replica again on its port, once `/readyz` answers 200; when that was.
    async fn restart(&mut self, i: usize) -> Instant {
        self.processes[i] = self.start_one(i).await;
        Instant::now()
    }

    /// How nginx names a replica in `$upstream_addr`.
    fn upstream(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.ports[i])
    }

    fn upstreams(&self) -> Vec<String> {
        (0..REPLICAS).map(|i| self.upstream(i)).collect()
    }

    fn direct(&self, i: usize, timeout: Duration) -> Http {
        Http::new(&self.processes[i].base, timeout)
    }
}

/// Debian's nginx as a child process in front of the replicas: its config, pid file, logs and
/// temporary files in a scratch directory. Stopped on drop.
struct Nginx {
    child: Child,
    dir: Scratch,
    base: String,
    port: u16,
    upstreams: Vec<String>,
}

impl Nginx {
    /// The nginx binary; `None`, with the reason printed, when it is missing and cannot be
    /// installed here. Where it could be installed, its absence fails the test: a skip there
    /// would hide that this test never ran (`make test` installs it).
    fn find() -> Option<PathBuf> {
        let on_path: Vec<PathBuf> = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).map(|d| d.join("nginx")).collect())
            .unwrap_or_default();
        if let Some(bin) = std::iter::once(PathBuf::from("/usr/sbin/nginx"))
            .chain(on_path)
            .find(|b| b.is_file())
        {
            return Some(bin);
        }
        let installable = Path::new("/usr/bin/apt-get").exists()
            && (running_as_root() || Path::new("/usr/bin/sudo").exists());
        assert!(
            !installable,
            "nginx is not installed: apt-get install -y nginx (scripts/test.sh does it for \
             make test); this test runs three server replicas behind it"
        );
        eprintln!(
            "SKIPPED: nginx is not installed and apt-get cannot install it here: the replicas \
             test needs Debian's nginx in front of three server processes"
        );
        None
    }

    fn start(bin: &Path, upstreams: &[String]) -> Nginx {
        let dir = Scratch::new("nginx");
        let port = free_port();
        let conf = dir.path("nginx.conf");
        std::fs::write(&conf, nginx_config(&dir.0, port, upstreams, None)).unwrap();
        let out = std::fs::File::create(dir.path("nginx.out")).unwrap();
        let child = Command::new(bin)
            .arg("-p")
            .arg(&dir.0)
            .arg("-c")
            .arg(&conf)
            // The error log before the config is read (else /var/log/nginx/error.log).
            .arg("-e")
            .arg(dir.path("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone().unwrap()))
            .stderr(Stdio::from(out))
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
        let mut nginx = Nginx {
            child,
            dir,
            base: format!("http://127.0.0.1:{port}"),
            port,
            upstreams: upstreams.to_vec(),
        };
        nginx.wait_listening();
        nginx
    }

    /// What an orchestrator does when it stops a replica (Kubernetes takes the pod out of its
    /// endpoints as it sends SIGTERM; nginx cannot see `/readyz` fail): that replica marked
    /// `down` and nginx reloaded, or every replica back with `None`. Returns once the new
    /// worker runs; the old one finishes what it holds (long-polls included) and exits.
    fn take_out(&mut self, down: Option<&str>) {
        let started = || {
            self.file("error.log")
                .matches("start worker process")
                .count()
        };
        let before = started();
        let conf = nginx_config(&self.dir.0, self.port, &self.upstreams, down);
        std::fs::write(self.dir.path("nginx.conf"), conf).unwrap();
        let _ = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while started() <= before {
            assert!(
                Instant::now() < deadline,
                "nginx did not reload:\n{}",
                self.file("error.log")
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn wait_listening(&mut self) {
        let addr = self.base.trim_start_matches("http://").to_owned();
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&addr).is_err() {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "nginx exited ({status}):\n{}\n{}",
                    self.file("nginx.out"),
                    self.file("error.log")
                );
            }
            assert!(
                Instant::now() < deadline,
                "nginx never listened on {addr}:\n{}",
                self.file("error.log")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path(name)).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM to the master stops its worker too; SIGKILL would leave the worker behind.
        let pid = self.child.id().to_string();
        super::stop_child(&mut self.child, &pid);
    }
}

/// nginx as in front of replicas in production, everything it writes inside `dir`, `down`
/// (an upstream) taken out:
///
/// - `proxy_next_upstream error timeout`: a request that could not reach a replica, or whose
///   replica died before answering, goes to the next one, but only when it is idempotent. nginx
///   never resends a POST or PATCH it had already sent (its default, kept): the replica may have
///   acted on it, and only the client knows whether resending is safe (an Idempotency-Key makes
///   it so). A refused connection was never sent, so it goes to the next replica whatever the
///   method.
/// - `max_fails=1 fail_timeout=2s`: a replica that refused or cut a connection gets no new
///   requests for 2 s. That is all nginx learns of a crash: its free edition has no active
///   health checks and cannot read `/readyz`, so a stop is announced to it by a reload with the
///   replica `down` (`Nginx::take_out`).
/// - Kept-alive connections to the replicas (`keepalive`, HTTP/1.1, no `Connection: close`),
///   closed by nginx once idle for 2 s, before the server's own 5 s keep-alive closes one under
///   a request.
/// - No kept-alive connections from clients (`keepalive_timeout 0`): a reload's old worker
///   closes its idle client connections, and a client could send on one as it closes.
/// - `proxy_read_timeout` above the longest long-poll (60 s), so nginx never cuts one.
/// - Which replicas each answer came from, in `X-Upstream-Addr` and `X-Upstream-Status`, so
///   the test can tell what was in flight where.
fn nginx_config(dir: &Path, port: u16, upstreams: &[String], down: Option<&str>) -> String {
    let d = dir.display();
    let user = if running_as_root() {
        "user root;\n"
    } else {
        ""
    };
    let servers: String = upstreams
        .iter()
        .map(|u| {
            let state = if Some(u.as_str()) == down {
                " down"
            } else {
                ""
            };
            format!("        server {u} max_fails=1 fail_timeout=2s{state};\n")
        })
        .collect();
    format!(
        "{user}daemon off;
master_process on;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{
    worker_connections 1024;
}}
http {{
    log_format upstreams '$msec $request_method $uri $status $upstream_addr $upstream_status $request_time';
    access_log {d}/access.log upstreams;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_timeout 0;
    upstream replicas {{
{servers}        keepalive 16;
        keepalive_timeout 2s;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://replicas;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host $host;
            proxy_next_upstream error timeout;
            proxy_next_upstream_tries {tries};
            proxy_connect_timeout 2s;
            proxy_send_timeout 75s;
            proxy_read_timeout 75s;
            add_header X-Upstream-Addr $upstream_addr always;
            add_header X-Upstream-Status $upstream_status always;
        }}
    }}
}}
",
        tries = upstreams.len(),
    )
}

/// The replica's process id, found by its `BIND_ADDR`: its provisioning workers are named
/// `<host>-<pid>-<n>` in the queue's leases.
fn pid_listening_on(port: u16) -> u32 {
    let want = format!("BIND_ADDR=127.0.0.1:{port}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == want.as_bytes()))
        })
        .unwrap_or_else(|| panic!("no process with {want}"))
}

/// The `application_name` of replica `i`'s database sessions.
fn session_name(i: usize) -> String {
    format!("kubesvc-replica-{i}")
}

/// The name the server gives its workers' host (server/src/lib.rs `hostname`).
fn worker_host() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "server".into())
}

fn execute(url: &str, sql: &str) -> usize {
    use diesel::{Connection, RunQueryDsl};
    let mut conn = diesel::PgConnection::establish(url).unwrap_or_else(|e| panic!("{e}"));
    diesel::sql_query(sql)
        .execute(&mut conn)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

// ---------------------------------------------------------------------------------------------
// The load.
// ---------------------------------------------------------------------------------------------

/// Clusters made before the load: one read and changed, one long-polled and changed now and
/// then, and one that changes once a round only, for long-polls held across the round.
#[derive(Clone)]
struct Fixtures {
    read: String,
    watched: String,
    quiet: String,
}

impl Fixtures {
    async fn create(http: &Http) -> Fixtures {
        let mut ids = Vec::new();
        for name in ["lb-read", "lb-watched", "lb-quiet"] {
            let a = http.post(CLUSTERS, &cluster_body("acme", name)).await;
            assert_eq!(a.status, 201, "{}", a.text());
            ids.push(a.json()["id"].as_str().unwrap().to_owned());
        }
        for id in &ids {
            http.wait_cluster(id, Duration::from_secs(60), |c| c["phase"] == "Provisioned")
                .await;
        }
        Fixtures {
            quiet: ids.pop().unwrap(),
            watched: ids.pop().unwrap(),
            read: ids.pop().unwrap(),
        }
    }

    /// A long-poll of the quiet cluster from `since`.
    fn quiet_poll(&self, since: i64, timeout: u64) -> String {
        format!(
            "{CLUSTERS}/{}/state?since={since}&timeout_seconds={timeout}",
            self.quiet
        )
    }

    async fn quiet_version(&self, http: &Http) -> i64 {
        let a = http.get(&self.quiet_poll(0, 0)).await;
        assert_eq!(a.status, 200, "{}", a.text());
        a.json()["version"].as_i64().unwrap()
    }

    /// A change of the quiet cluster: every long-poll still held on it answers.
    async fn wake_the_held_long_polls(&self, http: &Http, round: usize) {
        let body = json!({ "description": format!("round {round} over") });
        let a = http
            .patch(&format!("{CLUSTERS}/{}", self.quiet), &body)
            .await;
        assert_eq!(a.status, 200, "{}", a.text());
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Create,
    Read,
    List,
    Patch,
    Poll,
}

impl Kind {
    fn of(method: &Method, path: &str) -> Kind {
        if method == Method::POST {
            Kind::Create
        } else if method == Method::PATCH {
            Kind::Patch
        } else if path.contains("/state?") {
            Kind::Poll
        } else if path.contains('?') {
            Kind::List
        } else {
            Kind::Read
        }
    }
}

/// What came back: an answer, or none (refused, cut or timed out).
#[derive(Debug)]
enum Outcome {
    Answer {
        status: u16,
        code: String,
        /// The replicas nginx tried, in order (`$upstream_addr`); empty when sent directly.
        upstreams: Vec<String>,
        upstream_statuses: String,
        /// A long-poll's `changed`.
        changed: Option<bool>,
    },
    Cut(String),
}

impl Outcome {
    fn of(r: &Result<Answer, reqwest::Error>) -> Outcome {
        match r {
            Ok(a) => Outcome::Answer {
                status: a.status,
                code: if a.status >= 400 {
                    a.json()["code"].as_str().unwrap_or("").to_owned()
                } else {
                    String::new()
                },
                upstreams: a
                    .header("x-upstream-addr")
                    .map(|u| u.split(", ").map(str::to_owned).collect())
                    .unwrap_or_default(),
                upstream_statuses: a.header("x-upstream-status").unwrap_or_default(),
                changed: a.json()["changed"].as_bool(),
            },
            Err(e) => Outcome::Cut(format!("{e:?}")),
        }
    }

    /// The replica that gave the answer (nginx's last try).
    fn answered_by(&self) -> Option<&str> {
        match self {
            Outcome::Answer { upstreams, .. } => upstreams.last().map(String::as_str),
            Outcome::Cut(_) => None,
        }
    }
}

/// One request of the load, as the client saw it.
struct Event {
    kind: Kind,
    label: String,
    sent: Instant,
    ended: Instant,
    outcome: Outcome,
    /// A resend after a 502 or a cut (or of a key found in progress).
    resend: bool,
}

impl Event {
    /// What it was and got, and when against the nearest round's signals.
    fn describe(&self, rounds: &[Round]) -> String {
        let took = self.ended - self.sent;
        let ms = |a: Instant, b: Instant| {
            if a >= b {
                (a - b).as_millis() as i64
            } else {
                -((b - a).as_millis() as i64)
            }
        };
        let when = rounds
            .iter()
            .enumerate()
            .min_by_key(|(_, r)| ms(self.sent, r.kill.before).abs())
            .map(|(i, r)| {
                format!(
                    "sent {} ms from round {}'s SIGKILL of {}, {} ms from its SIGTERM of {}",
                    ms(self.sent, r.kill.before),
                    i + 1,
                    r.kill.upstream,
                    ms(self.sent, r.term_sent),
                    r.stopped
                )
            })
            .unwrap_or_default();
        match &self.outcome {
            Outcome::Cut(e) => format!("{} (took {took:?}, {when}): no answer: {e}", self.label),
            answer => format!("{} (took {took:?}, {when}): {answer:?}", self.label),
        }
    }
}

/// A create the load asked for: its key, its cluster's name and its body.
#[derive(Clone)]
struct Create {
    key: String,
    name: String,
    body: Value,
}

impl Create {
    fn new(worker: usize, n: usize) -> Create {
        let name = format!("lb-{worker}-{n}");
        Create {
            key: format!("replicas-key-{worker}-{n}"),
            body: cluster_body("acme", &name),
            name,
        }
    }
}

/// A create answered 201: the acknowledged write, and the bytes every replay must repeat.
struct Ack {
    create: Create,
    body: Vec<u8>,
    /// Its 201 was a replay: an earlier attempt had committed before its replica died.
    replayed: bool,
    /// Its key was held by a request that died, and this one took it over.
    taken_over: bool,
}

#[derive(Default)]
struct LoadLog {
    events: Vec<Event>,
    acks: Vec<Ack>,
    /// Creates whose key is still held by a request that died with its replica.
    parked: Vec<Create>,
}

impl LoadLog {
    fn extend(&mut self, other: LoadLog) {
        self.events.extend(other.events);
        self.acks.extend(other.acks);
        self.parked.extend(other.parked);
    }

    /// Sends one request as the acme super_admin (with an Idempotency-Key when given) and notes
    /// what came back.
    async fn send(
        &mut self,
        http: &Http,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<&Value>,
        resend: bool,
    ) -> Result<Answer, reqwest::Error> {
        let sent = Instant::now();
        let kind = Kind::of(&method, path);
        let label = format!("{method} {path}");
        let headers: Vec<(&str, &str)> = key.map(|k| ("Idempotency-Key", k)).into_iter().collect();
        let r = http
            .try_send(method, path, Some(TOKEN_ACME_SUPER_ADMIN), &headers, body)
            .await;
        self.events.push(Event {
            kind,
            label,
            sent,
            ended: Instant::now(),
            outcome: Outcome::of(&r),
            resend,
        });
        r
    }

    /// Sends a create until it is answered, as a client would: the same key again after a 502
    /// or a cut; parked when the key is held by the attempt that died. Any other answer ends
    /// it (the classification of the events fails the test for it).
    async fn create(&mut self, http: &Http, create: &Create, mut resend: bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self
                .send(
                    http,
                    Method::POST,
                    CLUSTERS,
                    Some(&create.key),
                    Some(&create.body),
                    resend,
                )
                .await;
            match r {
                Ok(a) if a.status == 201 => {
                    self.acks.push(Ack {
                        create: create.clone(),
                        replayed: a.header("idempotency-replay").as_deref() == Some("true"),
                        body: a.body,
                        taken_over: false,
                    });
                    return;
                }
                Ok(a) if a.status == 409 && a.json()["code"] == "idempotency_key_in_progress" => {
                    self.parked.push(create.clone());
                    return;
                }
                Ok(a) if a.status != 502 => return,
                _ if Instant::now() > deadline => return,
                _ => {}
            }
            resend = true;
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    /// Resends the parked creates once each (a key is taken over once its lease ran out).
    async fn retry_parked(&mut self, http: &Http) {
        for create in std::mem::take(&mut self.parked) {
            let acked = self.acks.len();
            self.create(http, &create, true).await;
            if let Some(ack) = self.acks.get_mut(acked) {
                ack.taken_over = true;
            }
        }
    }

    /// A change sent until it is answered: setting a field to a value is safe to repeat.
    async fn patch(&mut self, http: &Http, path: &str, body: &Value) {
        let mut resend = false;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = self
                .send(http, Method::PATCH, path, None, Some(body), resend)
                .await;
            if r.is_ok_and(|a| a.status != 502) || Instant::now() > deadline {
                return;
            }
            resend = true;
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
}

/// The loaders and the flag that stops them.
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<JoinHandle<LoadLog>>,
}

fn start_steady_load_through_nginx(http: &Http, fixtures: &Fixtures) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..CREATORS {
        tasks.push(tokio::spawn(creator(http.clone(), w, stop.clone())));
    }
    for _ in 0..READERS {
        tasks.push(tokio::spawn(reader(
            http.clone(),
            fixtures.read.clone(),
            stop.clone(),
        )));
    }
    tasks.push(tokio::spawn(patcher(
        http.clone(),
        fixtures.clone(),
        stop.clone(),
    )));
    for _ in 0..POLLERS {
        tasks.push(tokio::spawn(poller(
            http.clone(),
            fixtures.watched.clone(),
            stop.clone(),
        )));
    }
    Load { stop, tasks }
}

async fn stop_the_load(load: Load) -> LoadLog {
    load.stop.store(true, Ordering::SeqCst);
    let mut log = LoadLog::default();
    for t in load.tasks {
        log.extend(t.await.unwrap());
    }
    log
}

/// Creates, each with its own key, paced.
async fn creator(http: Http, worker: usize, stop: Arc<AtomicBool>) -> LoadLog {
    let mut log = LoadLog::default();
    let mut parked_tried = Instant::now();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        log.create(&http, &Create::new(worker, n), false).await;
        if parked_tried.elapsed() > PARKED_RETRY {
            log.retry_parked(&http).await;
            parked_tried = Instant::now();
        }
        tokio::time::sleep(CREATE_PACE).await;
    }
    log
}

/// Reads one cluster and the list, over and over.
async fn reader(http: Http, id: String, stop: Arc<AtomicBool>) -> LoadLog {
    let mut log = LoadLog::default();
    while !stop.load(Ordering::SeqCst) {
        let one = format!("{CLUSTERS}/{id}");
        log.send(&http, Method::GET, &one, None, None, false)
            .await
            .ok();
        let list = format!("{CLUSTERS}?organization=acme");
        log.send(&http, Method::GET, &list, None, None, false)
            .await
            .ok();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    log
}

/// Changes the read cluster's description, and every tenth time the watched one's (which
/// wakes the long-polls).
async fn patcher(http: Http, fixtures: Fixtures, stop: Arc<AtomicBool>) -> LoadLog {
    let mut log = LoadLog::default();
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let body = json!({ "description": format!("load {n}") });
        log.patch(&http, &format!("{CLUSTERS}/{}", fixtures.read), &body)
            .await;
        if n % 10 == 0 {
            log.patch(&http, &format!("{CLUSTERS}/{}", fixtures.watched), &body)
                .await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    log
}

/// Follows the watched cluster's state with long-polls, as a client would: from the version it
/// last saw, again at once after an answer, after a pause after a 502 or a cut.
async fn poller(http: Http, id: String, stop: Arc<AtomicBool>) -> LoadLog {
    let mut log = LoadLog::default();
    let mut since = 0;
    let mut resend = false;
    while !stop.load(Ordering::SeqCst) {
        let path = format!("{CLUSTERS}/{id}/state?since={since}&timeout_seconds={POLL_SECONDS}");
        match log
            .send(&http, Method::GET, &path, None, None, resend)
            .await
        {
            Ok(a) if a.status == 200 => {
                since = since.max(a.json()["version"].as_i64().unwrap_or(since));
                resend = false;
            }
            _ => {
                resend = true;
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
    log
}

// ---------------------------------------------------------------------------------------------
// A round: one replica killed, another stopped, both brought back.
// ---------------------------------------------------------------------------------------------

/// When a replica was SIGKILLed: from just before the signal to once it was reaped.
struct Kill {
    upstream: String,
    before: Instant,
    after: Instant,
}

impl Kill {
    /// Whether a request was in flight at the kill: sent before it (give or take nginx noticing
    /// the dead connections) and answered after.
    fn in_flight(&self, e: &Event) -> bool {
        e.sent < self.after + KILL_GRACE && e.ended > self.before
    }
}

struct Round {
    kill: Kill,
    /// The process id of the killed replica, whose provisioning leases nobody gives back.
    killed_pid: u32,
    victim_back: Instant,
    stopped: String,
    term_sent: Instant,
    /// When nginx had the stopped replica `down` (after its reload).
    taken_out: Instant,
    stopped_exited: Instant,
    stopped_back: Instant,
    /// Long-polls held through nginx across the kill, and how many were on the victim.
    held: usize,
    held_on_victim: usize,
}

async fn kill_one_replica_and_stop_another_then_bring_both_back(
    round: usize,
    replicas: &mut Replicas,
    nginx: &mut Nginx,
    http: &Http,
    fixtures: &Fixtures,
) -> Round {
    let victim = round % REPLICAS;
    let stopping = (round + 1) % REPLICAS;
    let poll = fixtures.quiet_poll(fixtures.quiet_version(http).await, 60);
    let held = hold_long_polls_through_nginx(http, &poll);
    let on_victim = hold_a_long_poll_on(replicas, victim, &poll);
    let on_stopping = hold_a_long_poll_on(replicas, stopping, &poll);
    // So that every long-poll is waiting on its replica when the signals come.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let killed_pid = pid_listening_on(replicas.ports[victim]);
    let kill = kill_while_a_create_is_in_flight_on(replicas, victim);
    tokio::time::sleep(Duration::from_millis(300)).await;
    replicas.processes[stopping].signal_term();
    let term_sent = Instant::now();
    fault_injected(&format!("SIGTERM of replica {stopping} under load"));
    // As its endpoint is removed: within the shutdown delay, before its listener closes.
    let stopping_upstream = replicas.upstream(stopping);
    tokio::task::block_in_place(|| nginx.take_out(Some(&stopping_upstream)));
    let taken_out = Instant::now();

    let victim_back = replicas.restart(victim).await;
    let stopped_exited = the_stopped_replica_exits_0_within_its_drain(replicas, stopping).await;
    every_worker_of_the_stopped_replica_stopped_in_order(&replicas.processes[stopping]);
    the_long_poll_held_on_the_stopped_replica_is_answered_not_cut(
        on_stopping,
        &replicas.processes[stopping],
    )
    .await;
    let stopped_back = replicas.restart(stopping).await;
    tokio::task::block_in_place(|| nginx.take_out(None));

    the_long_poll_held_on_the_killed_replica_is_cut_and_its_retry_answers(
        on_victim, http, fixtures,
    )
    .await;
    fixtures.wake_the_held_long_polls(http, round).await;
    let held_on_victim =
        long_polls_held_through_nginx_on_the_killed_replica_are_retried_and_answered(
            held, &kill, http, fixtures,
        )
        .await;
    Round {
        kill,
        killed_pid,
        victim_back,
        stopped: replicas.upstream(stopping),
        term_sent,
        taken_out,
        stopped_exited,
        stopped_back,
        held: HELD_POLLS,
        held_on_victim,
    }
}

/// SIGKILL of replica `i` once a create is inside its database work there (claiming its key or
/// creating the cluster), so the kill surely cuts a write in flight: its client resends the
/// key, and finds the answer committed, or the key held by the dead request.
fn kill_while_a_create_is_in_flight_on(replicas: &mut Replicas, i: usize) -> Kill {
    use diesel::Connection;
    let sql = format!(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = '{}' \
         AND state <> 'idle' AND (query LIKE '%idempotency_keys%' \
         OR query LIKE '%kubesvc_create_cluster%')",
        session_name(i)
    );
    let url = replicas.db.clone();
    let kill = tokio::task::block_in_place(|| {
        let mut conn = diesel::PgConnection::establish(&url).unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while count_on(&mut conn, &sql) == 0 {
            assert!(
                Instant::now() < deadline,
                "no create reached replica {i}'s database sessions in 30 s"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let before = Instant::now();
        replicas.processes[i].kill9();
        Kill {
            upstream: replicas.upstream(i),
            before,
            after: Instant::now(),
        }
    });
    fault_injected(&format!(
        "SIGKILL of replica {i} under load, a create in flight on it"
    ));
    kill
}

fn count_on(conn: &mut diesel::PgConnection, sql: &str) -> i64 {
    use diesel::{QueryableByName, RunQueryDsl, sql_types::BigInt};
    #[derive(QueryableByName)]
    struct N {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let rows: Vec<N> = diesel::sql_query(sql)
        .load(conn)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.first().map(|r| r.n).unwrap_or(0)
}

type HeldPoll = JoinHandle<(Instant, Result<Answer, reqwest::Error>)>;

/// Long-polls on the quiet cluster through nginx, which spreads them over the replicas.
fn hold_long_polls_through_nginx(http: &Http, poll: &str) -> Vec<HeldPoll> {
    // Patient: held across the whole round.
    let patient = Http::new(&http.base, Duration::from_secs(90));
    (0..HELD_POLLS)
        .map(|_| {
            let http = patient.clone();
            let path = poll.to_owned();
            tokio::spawn(async move {
                let sent = Instant::now();
                let r = http
                    .try_send(Method::GET, &path, Some(TOKEN_ACME_MEMBER), &[], None)
                    .await;
                (sent, r)
            })
        })
        .collect()
}

/// A long-poll sent to one replica directly (a client without a balancer).
fn hold_a_long_poll_on(replicas: &Replicas, i: usize, poll: &str) -> HeldPoll {
    let direct = replicas.direct(i, Duration::from_secs(90));
    let path = poll.to_owned();
    tokio::spawn(async move {
        let sent = Instant::now();
        let r = direct
            .try_send(Method::GET, &path, Some(TOKEN_ACME_MEMBER), &[], None)
            .await;
        (sent, r)
    })
}

/// It stops within its shutdown delay and drain (plus a margin for a provisioning step), with
/// status 0; when it had exited.
async fn the_stopped_replica_exits_0_within_its_drain(
    replicas: &mut Replicas,
    i: usize,
) -> Instant {
    let limit = Duration::from_secs(SHUTDOWN_DELAY_SECONDS + DRAIN_TIMEOUT_SECONDS + 10);
    let status = replicas.processes[i].exited(limit).await;
    assert!(
        status.success(),
        "replica {i} stopped with {status:?}:\n{}",
        replicas.processes[i].log_tail()
    );
    Instant::now()
}

/// Each worker of the stopped replica said how it stopped. actix-server before 2.9.1 ended a
/// worker the moment its connection channel closed, which a stop closed before sending the
/// worker its stop: such a worker vanished without a word and dropped every connection it
/// served, long-polls and requests in flight included (about one stop in 20 here, before the
/// upgrade; actix/actix-net#945). Its signature is in the log: fewer workers said how they
/// stopped than were started.
fn every_worker_of_the_stopped_replica_stopped_in_order(stopped: &ServerProcess) {
    let log = stopped.log_text();
    let started: usize = log
        .lines()
        .find_map(|l| l.split("actix_server::builder: starting ").nth(1))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let said = log
        .lines()
        .filter(|l| {
            l.contains("actix_server::worker: graceful worker shutdown")
                || l.contains("actix_server::worker: shutting down idle worker")
                || l.contains("actix_server::worker: force shutdown worker")
        })
        .count();
    assert!(
        started > 0 && said >= started,
        "{said} of the stopped replica's {started} workers said how they stopped:\n{}",
        stopped.log_tail()
    );
}

/// The killed replica's connections die with it: the client sees no answer, and asks again.
async fn the_long_poll_held_on_the_killed_replica_is_cut_and_its_retry_answers(
    poll: HeldPoll,
    http: &Http,
    fixtures: &Fixtures,
) {
    let (_, r) = poll.await.unwrap();
    assert!(
        r.is_err(),
        "a long-poll held on the killed replica was answered: {:?}",
        r.map(|a| (a.status, a.text()))
    );
    let retry = http.get(&fixtures.quiet_poll(0, 0)).await;
    assert_eq!(retry.status, 200, "the retry: {}", retry.text());
}

/// SIGTERM answers waiting long-polls with the version there is.
async fn the_long_poll_held_on_the_stopped_replica_is_answered_not_cut(
    poll: HeldPoll,
    stopped: &ServerProcess,
) {
    let (_, r) = poll.await.unwrap();
    let a = match r {
        Ok(a) => a,
        Err(e) => panic!(
            "a long-poll held on the stopped replica was cut, not answered: {e:?}\n{}",
            stopped.log_tail()
        ),
    };
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.json()["changed"], false, "{}", a.text());
}

/// Through nginx every long-poll is answered 200: the ones held on the killed replica were
/// cut there, and nginx, a long-poll being a GET, sent each to another replica (the victim
/// first in `$upstream_addr`, its try failed); a client that got a 502 instead asks again.
/// How many were held on the victim (some are: one run in 190,000 has none).
async fn long_polls_held_through_nginx_on_the_killed_replica_are_retried_and_answered(
    held: Vec<HeldPoll>,
    kill: &Kill,
    http: &Http,
    fixtures: &Fixtures,
) -> usize {
    let mut on_victim = 0;
    for poll in held {
        let (sent, r) = poll.await.unwrap();
        let outcome = Outcome::of(&r);
        let Outcome::Answer {
            status,
            upstreams,
            upstream_statuses,
            ..
        } = &outcome
        else {
            panic!("a long-poll through nginx was cut: {outcome:?}");
        };
        assert!(sent < kill.before, "held polls are sent before the kill");
        if upstreams.first() == Some(&kill.upstream) {
            on_victim += 1;
            assert!(
                upstreams.len() > 1 || *status == 502,
                "a long-poll held on the killed replica neither retried nor failed: {outcome:?}"
            );
            assert!(
                upstream_statuses.starts_with("502"),
                "the killed replica's try: {outcome:?}"
            );
        }
        match status {
            200 => {}
            502 => {
                let retry = http.get(&fixtures.quiet_poll(0, 0)).await;
                assert_eq!(retry.status, 200, "the retry after a 502: {}", retry.text());
            }
            _ => panic!("a long-poll through nginx: {outcome:?}"),
        }
    }
    assert!(
        on_victim > 0,
        "none of the {HELD_POLLS} long-polls was held on the killed replica"
    );
    on_victim
}

// ---------------------------------------------------------------------------------------------
// What must hold afterwards.
// ---------------------------------------------------------------------------------------------

/// What the load saw go wrong, by kind (for the figures).
#[derive(Default)]
struct Errors {
    bad_gateway_by_kind: BTreeMap<Kind, usize>,
    in_progress: usize,
    /// The latest end of a 502, after its kill, per round.
    last_bad_gateway: Vec<Duration>,
}

/// Every answer the load got is a success; or a 502 for a request in flight on a replica when
/// it was killed (nginx resends no POST or PATCH it already sent); or 409 in progress for a
/// create resent after that (the dead request still holds its key). No other 5xx, no other
/// 4xx, no cut between the client and nginx, and nothing the SIGTERMs caused.
fn the_load_saw_errors_only_for_requests_in_flight_on_a_killed_replica(
    events: &[Event],
    rounds: &[Round],
    nginx: &Nginx,
) -> Errors {
    let mut errors = Errors {
        last_bad_gateway: vec![Duration::ZERO; rounds.len()],
        ..Errors::default()
    };
    let mut wrong = Vec::new();
    for e in events {
        match &e.outcome {
            Outcome::Answer { status, .. } if (200..300).contains(status) => {}
            Outcome::Answer {
                status: 409, code, ..
            } if code == "idempotency_key_in_progress" && e.kind == Kind::Create && e.resend => {
                errors.in_progress += 1;
            }
            Outcome::Answer { status: 502, .. } => {
                let killed = rounds.iter().position(|r| {
                    e.outcome.answered_by() == Some(r.kill.upstream.as_str()) && r.kill.in_flight(e)
                });
                match killed {
                    Some(i) => {
                        *errors.bad_gateway_by_kind.entry(e.kind).or_default() += 1;
                        let after = e.ended.saturating_duration_since(rounds[i].kill.after);
                        errors.last_bad_gateway[i] = errors.last_bad_gateway[i].max(after);
                    }
                    None => wrong.push(e.describe(rounds)),
                }
            }
            _ => wrong.push(e.describe(rounds)),
        }
    }
    let upstream_errors: Vec<String> = nginx
        .file("error.log")
        .lines()
        .filter(|l| l.contains("upstream") && !l.contains("client closed"))
        .map(str::to_owned)
        .collect();
    assert!(
        wrong.is_empty(),
        "{} answers are not explained by a kill:\n{}\nnginx on its upstreams (last 40):\n{}",
        wrong.len(),
        wrong.join("\n"),
        upstream_errors[upstream_errors.len().saturating_sub(40)..].join("\n")
    );
    errors
}

/// nginx takes each replica back once it answers again (its `fail_timeout` is 2 s).
async fn nginx_sends_to_every_replica_again(http: &Http, replicas: &Replicas) {
    let mut unseen: HashSet<String> = replicas.upstreams().into_iter().collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !unseen.is_empty() {
        let a = http.get("/readyz").await;
        assert_eq!(a.status, 200, "{}", a.text());
        if let Some(u) = a.header("x-upstream-addr") {
            unseen.remove(u.rsplit(", ").next().unwrap_or_default());
        }
        assert!(
            Instant::now() < deadline,
            "nginx never sent to {unseen:?} again"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A key whose request died with its replica stays in progress for its lease (60 s): here the
/// lease is run out in the database rather than waited for (the soak waits for it). Once the
/// load has stopped no live request holds a key, so the keys in progress are exactly the
/// parked ones. Each, resent, is taken over and answered 201.
async fn keys_held_by_a_dead_request_are_taken_over_once_their_lease_runs_out(
    app: &TestApp,
    http: &Http,
    load: &mut LoadLog,
) {
    let in_progress = app.count_rows("idempotency_keys WHERE state = 'in_progress'");
    assert_eq!(
        in_progress,
        load.parked.len() as i64,
        "the keys in progress are the ones parked by the load"
    );
    execute(
        &app.db.url,
        "UPDATE idempotency_keys SET lease_expires_at = now() - interval '1 second' \
         WHERE state = 'in_progress'",
    );
    let (parked, acked) = (load.parked.len(), load.acks.len());
    load.retry_parked(http).await;
    assert!(
        load.parked.is_empty(),
        "keys still in progress after their lease ran out"
    );
    assert_eq!(
        load.acks.len(),
        acked + parked,
        "every key taken over is answered 201"
    );
    assert!(
        load.acks[acked..].iter().all(|a| !a.replayed),
        "a key held by a dead request runs anew: the dead one never committed"
    );
}

/// Each acknowledged create's cluster exists once, the one its answer names; and no cluster
/// of the load exists that was not acknowledged.
fn every_acknowledged_create_exists_exactly_once(app: &TestApp, acks: &[Ack]) {
    let rows = app.texts(
        "SELECT name || ' ' || string_agg(id::text, ',') AS v FROM clusters \
         WHERE name LIKE 'lb-%-%' GROUP BY name",
    );
    let in_db: HashMap<String, String> = rows
        .iter()
        .filter_map(|r| r.split_once(' '))
        .map(|(n, ids)| (n.to_owned(), ids.to_owned()))
        .collect();
    let mut acked = HashSet::new();
    for ack in acks {
        let name = &ack.create.name;
        assert!(acked.insert(name.clone()), "{name} acknowledged twice");
        let answered = serde_json::from_slice::<Value>(&ack.body).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(
            in_db.get(name),
            Some(&answered),
            "{name}: the clusters of that name, and the one its 201 named"
        );
    }
    let extra: Vec<&String> = in_db
        .keys()
        .filter(|n| {
            !acked.contains(*n) && !["lb-read", "lb-watched", "lb-quiet"].contains(&n.as_str())
        })
        .collect();
    assert!(
        extra.is_empty(),
        "created but never acknowledged: {extra:?}"
    );
}

/// Every key, resent to each replica directly and through nginx, answers its first 201 again,
/// byte for byte, as a replay.
async fn every_key_replays_its_first_answer_through_each_replica_and_nginx(
    replicas: &Replicas,
    http: &Http,
    acks: &[Ack],
) {
    let mut targets: Vec<(String, Http)> = (0..REPLICAS)
        .map(|i| {
            (
                replicas.upstream(i),
                replicas.direct(i, Duration::from_secs(30)),
            )
        })
        .collect();
    targets.push(("nginx".to_owned(), http.clone()));
    for chunk in acks.chunks(8) {
        let replays = chunk.iter().flat_map(|ack| {
            targets.iter().map(move |(via, target)| async move {
                let a = target
                    .send(
                        Method::POST,
                        CLUSTERS,
                        Some(TOKEN_ACME_SUPER_ADMIN),
                        &[("Idempotency-Key", ack.create.key.as_str())],
                        Some(&ack.create.body),
                    )
                    .await;
                (ack, via, a)
            })
        });
        for (ack, via, a) in futures::future::join_all(replays).await {
            let key = &ack.create.key;
            assert_eq!(a.status, 201, "{key} via {via}: {}", a.text());
            assert_eq!(
                a.header("idempotency-replay").as_deref(),
                Some("true"),
                "{key} via {via}"
            );
            assert!(a.body == ack.body, "{key} via {via}: the replay differs");
        }
    }
}

/// The killed replicas' provisioning leases run out (in the database: the 30 s lease is not
/// waited for), another replica finishes that work, and every cluster is provisioned once:
/// its create operation succeeded once, it has its two nodes, and one audit event of its
/// creation.
async fn provisioning_finishes_each_cluster_once(app: &TestApp, rounds: &[Round], clusters: usize) {
    let host = worker_host();
    for r in rounds {
        execute(
            &app.db.url,
            &format!(
                "UPDATE operations SET lease_expires_at = now() - interval '1 second' \
                 WHERE state = 'running' AND leased_by LIKE '{host}-{}-%'",
                r.killed_pid
            ),
        );
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while app.count_rows("clusters WHERE phase <> 'Provisioned'") > 0 {
        assert!(
            Instant::now() < deadline,
            "provisioning never finished: {:?}",
            app.texts(
                "SELECT name || ' ' || phase AS v FROM clusters WHERE phase <> 'Provisioned' \
                 LIMIT 10"
            )
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(app.count_rows("clusters"), clusters as i64);
    app.wait_until_the_queue_is_settled().await;
    assert_eq!(
        app.count_rows(
            "clusters c WHERE (SELECT count(*) FROM nodes n WHERE n.cluster_id = c.id) <> 2"
        ),
        0,
        "a cluster without exactly its two nodes"
    );
    assert_eq!(
        app.count_rows(
            "clusters c WHERE (SELECT count(*) FROM cluster_operations o WHERE o.cluster_id = c.id \
             AND o.kind = 'create' AND o.status = 'succeeded') <> 1"
        ),
        0,
        "a cluster whose create did not succeed exactly once"
    );
    assert_eq!(
        app.count_rows(
            "clusters c WHERE (SELECT count(*) FROM audit_events a WHERE a.cluster_id = c.id \
             AND a.resource = 'cluster' AND a.action = 'created') <> 1"
        ),
        0,
        "a cluster whose creation is not audited exactly once"
    );
}

fn print_the_figures(
    load: &LoadLog,
    rounds: &[Round],
    errors: &Errors,
    loaded_for: Duration,
    nginx: &Nginx,
) {
    let mut by_kind: BTreeMap<Kind, usize> = BTreeMap::new();
    for e in &load.events {
        *by_kind.entry(e.kind).or_default() += 1;
    }
    let error_log = nginx.file("error.log");
    eprintln!(
        "replicas behind nginx: {} rounds, load for {:.1} s: {} requests through nginx {by_kind:?}",
        rounds.len(),
        loaded_for.as_secs_f64(),
        load.events.len()
    );
    eprintln!(
        "  errors: 502 {:?}, cut 0, 500 0; 409 in progress (a key held by a killed request) {}",
        errors.bad_gateway_by_kind, errors.in_progress
    );
    eprintln!(
        "  creates acknowledged {}: replayed after a 502 {}, taken over after the lease {}",
        load.acks.len(),
        load.acks.iter().filter(|a| a.replayed).count(),
        load.acks.iter().filter(|a| a.taken_over).count()
    );
    eprintln!(
        "  nginx error log: {} upstream connections cut, {} refused",
        error_log
            .matches("prematurely closed")
            .count()
            .saturating_add(error_log.matches("reset by peer").count()),
        error_log.matches("Connection refused").count()
    );
    for (i, r) in rounds.iter().enumerate() {
        let held_early = load
            .events
            .iter()
            .filter(|e| {
                e.kind == Kind::Poll
                    && e.outcome.answered_by() == Some(r.stopped.as_str())
                    && e.ended > r.term_sent
                    && e.ended <= r.stopped_exited
                    && e.ended - e.sent < Duration::from_secs(POLL_SECONDS)
                    && matches!(
                        e.outcome,
                        Outcome::Answer {
                            changed: Some(false),
                            ..
                        }
                    )
            })
            .count();
        eprintln!(
            "  round {}: killed {} (ready again {:.2} s later; last 502 {:.2} s after the kill; \
             {}/{} held long-polls were on it); SIGTERM {} (out of nginx {:.3} s after the signal, \
             exited 0 after {:.2} s, ready again {:.2} s after the signal; {} long-polls \
             answered early)",
            i + 1,
            r.kill.upstream,
            (r.victim_back - r.kill.after).as_secs_f64(),
            errors.last_bad_gateway[i].as_secs_f64(),
            r.held_on_victim,
            r.held,
            r.stopped,
            (r.taken_out - r.term_sent).as_secs_f64(),
            (r.stopped_exited - r.term_sent).as_secs_f64(),
            (r.stopped_back - r.term_sent).as_secs_f64(),
            held_early
        );
    }
}
