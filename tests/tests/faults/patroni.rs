//! Automatic PostgreSQL failover by Patroni: a three-member etcd and two Patroni members (a
//! primary and its synchronous standby, `synchronous_mode: true`) on loopback, the service
//! given both in one URL (the standby first, `target_session_attrs=read-write`). Under keyed
//! creates, reads and long-polls the primary's PostgreSQL (the postmaster and all its children)
//! is killed with SIGKILL, nothing else: Patroni (left running) sees its PostgreSQL crashed and,
//! told by `primary_start_timeout: 0` to fail over rather than restart a crashed primary,
//! releases the leader key; the other member's Patroni promotes its standby. No person and no
//! step of the test promotes anything. Checked: every request answered while there is no
//! primary is a prompt 503 with Retry-After, `/readyz` is 503 then 200, the same server process
//! acknowledges creates again within 15 s of the kill, every create acknowledged before the
//! kill is on the new primary exactly once, and the old primary rejoins as a standby. The load
//! and its checks are failover_load.rs's.
//!
//! Needs Debian's `patroni` and `etcd-server` (scripts/test.sh installs them); PostgreSQL's
//! server binaries as the other database tests. `SOAK_SECONDS` runs the load longer.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::Child;

use super::failover_load::*;
use super::*;

/// The members' names, as Patroni names them in the DCS and as `application_name` of the
/// standby's replication connection. The first bootstraps the cluster and is the primary.
const MEMBERS: [&str; 2] = ["pg-a", "pg-b"];
/// How soon after the kill the same server process must acknowledge a create again.
const BACK_WITHIN: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patroni_promotes_the_synchronous_standby_when_the_primarys_postgresql_is_killed() {
    let started = Instant::now();
    let Some(tools) = Tools::find() else {
        return;
    };
    let cluster = Patroni::start(tools).await;
    let (primary, standby) = (&cluster.members[0], &cluster.members[1]);
    let (before, after) = load_phases();
    let platform = StubPlatform::start_demo();
    let scratch = Scratch::new("patroni-server");
    let env = failover_server_env(&platform, &cluster.url());
    let (server, http) = start_ready(&env, free_port(), scratch.path("server.log")).await;
    let id = commit_a_provisioned_cluster_before_the_failover(&http).await;
    let load = start_creates_reads_and_long_polls(&http, &id);

    let kill = kill_the_primary_just_after_a_create_was_acknowledged(
        &load,
        before,
        (&primary.url(), standby.name),
        "SIGKILL to the primary's PostgreSQL, its postmaster and all its children (Patroni left \
         running)",
        || primary.kill_postgresql(),
    )
    .await;
    // Patroni notices the crash at its next loop (every second) at the earliest: the service
    // has no primary while these run.
    the_watch_cache_lets_go(&http, &id).await;
    tokio::join!(
        every_kind_of_request_is_503_with_retry_after(&http, &id, "with no primary", Vec::new()),
        readiness_fails_and_liveness_holds(&http),
    );
    let promoted = standby.promoted_by_patroni(&cluster).await;
    let old_primary_back = primary.watch_for_its_return_as_a_standby(&cluster.client);
    let first_ack =
        the_same_process_acknowledges_creates_on_the_new_primary(&load, &kill, &server).await;
    http.wait_ready().await;
    let recovery = Recovery {
        promoted,
        first_ack,
        ready: Instant::now(),
    };
    assert!(
        first_ack - kill.at < BACK_WITHIN,
        "the first create acknowledged again came {:?} after the kill\n{}",
        first_ack - kill.at,
        server.log_tail()
    );

    the_long_poll_loop_is_answered_again_on_the_new_primary(&load, recovery.promoted, &server)
        .await;
    tokio::time::sleep(after).await;
    let log = stop_the_load(load).await;
    let answered_503 = the_load_saw_only_successes_and_clear_503s_and_nothing_hung(&log, &server);
    let new_primary = standby.url();
    every_acknowledged_create_is_on_the_new_primary_exactly_once(&new_primary, &log, &kill);
    every_acknowledged_key_replays_its_answer_byte_for_byte(&http, &log).await;
    the_change_feed_listens_on_the_new_primary(&new_primary, &server).await;
    a_notification_on_the_new_primary_wakes_a_long_poll(&http, &new_primary, &id).await;
    let Some(back) = old_primary_back.await.unwrap() else {
        panic!(
            "the old primary never ran again as a standby: {:?}\n{}",
            primary.cluster_view(&cluster.client).await,
            cluster.logs()
        );
    };

    report_the_figures("patroni", &log, &kill, &recovery, answered_503, started);
    eprintln!(
        "patroni: the old primary back as a standby of the new one {} ms after the kill",
        (back - kill.at).as_millis()
    );
    drop(server);
    drop(cluster);
}

// ---------------------------------------------------------------------------------------------
// The tools, etcd and the Patroni members.
// ---------------------------------------------------------------------------------------------

/// Where Patroni, etcd and PostgreSQL's server binaries are.
struct Tools {
    patroni: PathBuf,
    etcd: PathBuf,
    pg_bin: PathBuf,
}

impl Tools {
    /// `None`, with the reason printed, when a tool is missing and cannot be installed here;
    /// in CI, or where apt-get could install them, a missing tool fails the test instead: a
    /// skip there would hide that the test never ran (`make test` installs them).
    fn find() -> Option<Tools> {
        let find = |name: &str| {
            let on_path: Vec<PathBuf> = std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).map(|d| d.join(name)).collect())
                .unwrap_or_default();
            std::iter::once(Path::new("/usr/bin").join(name))
                .chain(on_path)
                .find(|b| b.is_file())
        };
        let found = (find("patroni"), find("etcd"), PrivatePostgres::find_bin());
        if let (Some(patroni), Some(etcd), Some(pg_bin)) = found {
            return Some(Tools {
                patroni,
                etcd,
                pg_bin,
            });
        }
        let in_ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
        let installable = Path::new("/usr/bin/apt-get").exists()
            && (running_as_root() || Path::new("/usr/bin/sudo").exists());
        assert!(
            !in_ci && !installable,
            "Patroni, etcd or PostgreSQL is not installed: apt-get install -y patroni \
             etcd-server postgresql (scripts/test.sh does it for make test)"
        );
        eprintln!(
            "SKIPPED: Patroni, etcd or PostgreSQL is not installed and apt-get cannot install \
             them here: the automatic failover test needs Debian's patroni, etcd-server and \
             postgresql"
        );
        None
    }
}

/// The account PostgreSQL and Patroni run as: `postgres` when the test runs as root (initdb
/// refuses root), else the test's own.
fn run_as(cmd: &mut Command) -> &mut Command {
    if running_as_root() {
        let id = |flag: &str| {
            let out = Command::new("id")
                .args([flag, "postgres"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<u32>()
                .expect("the postgres account (PostgreSQL's package makes it)")
        };
        cmd.uid(id("-u")).gid(id("-g"));
    }
    cmd
}

/// A directory the account of [`run_as`] owns, with no access for others (PostgreSQL
/// refuses a data directory others can read).
fn owned_dir(path: &Path) {
    std::fs::create_dir_all(path).unwrap();
    if running_as_root() {
        let st = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(path)
            .status()
            .unwrap();
        assert!(st.success(), "chown {}", path.display());
    }
    let st = Command::new("chmod").arg("700").arg(path).status().unwrap();
    assert!(st.success(), "chmod {}", path.display());
}

/// The pids of the processes whose parent is `pid` (from `/proc/<pid>/stat`).
fn children_of(pid: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // `pid (comm) state ppid …`: the fields after the command's closing parenthesis.
            let ppid = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .to_owned();
            (ppid == pid).then(|| entry.file_name().to_string_lossy().into_owned())
        })
        .collect()
}

/// A child process of the test, its output in a file; killed on drop.
struct Daemon(Child);

impl Daemon {
    fn spawn(cmd: &mut Command, log: &Path) -> Daemon {
        let out = std::fs::File::create(log).unwrap();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        Daemon(child)
    }

    /// SIGTERM, and SIGKILL if it has not exited after `grace`.
    fn stop(&mut self, grace: Duration) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One Patroni member: its PostgreSQL's port and data directory, its REST API's port.
struct Member {
    name: &'static str,
    pg_port: u16,
    api_port: u16,
    dir: PathBuf,
    pg_bin: PathBuf,
    patroni: Option<Daemon>,
}

impl Member {
    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.pg_port)
    }

    fn api(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.api_port)
    }

    fn config(&self, etcd_hosts: &str) -> String {
        format!(
            r#"scope: kubesvc-test
name: {name}
restapi:
  listen: 127.0.0.1:{api}
  connect_address: 127.0.0.1:{api}
etcd3:
  hosts: {etcd_hosts}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    # A crashed primary is failed over at once instead of restarted in place (the default
    # gives it 300 s to come back).
    primary_start_timeout: 0
    synchronous_mode: true
    postgresql:
      use_pg_rewind: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        # Safe here: only processes are killed, never the machine, so what PostgreSQL wrote
        # is in the OS cache. (full_page_writes stays on: pg_rewind needs it.)
        fsync: "off"
  initdb:
  - encoding: UTF8
  - no-locale
  pg_hba:
  - local all all trust
  - host replication replicator 127.0.0.1/32 trust
  - host all all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:{pg}
  connect_address: 127.0.0.1:{pg}
  data_dir: {data}
  bin_dir: {bin}
  pgpass: {dir}/pgpass
  authentication:
    replication:
      username: replicator
      password: replicator
    superuser:
      username: postgres
      password: postgres
  parameters:
    unix_socket_directories: {dir}
"#,
            name = self.name,
            api = self.api_port,
            pg = self.pg_port,
            data = self.data().display(),
            bin = self.pg_bin.display(),
            dir = self.dir.display(),
        )
    }

    /// SIGKILL to every process of this member's PostgreSQL, as when the instance crashes:
    /// the postmaster (its pid is the first line of `postmaster.pid`) and each of its
    /// children (the backends, the WAL sender, the checkpointer…). The postmaster is stopped
    /// (SIGSTOP) first so that it forks no backend while its children are listed; each child
    /// is a process group of its own, so the group cannot be signalled instead. Killing the
    /// postmaster alone would leave its backends to answer, and even commit, until each
    /// notices it is gone. Patroni stays up.
    fn kill_postgresql(&self) {
        let pid_file = std::fs::read_to_string(self.data().join("postmaster.pid")).unwrap();
        let postmaster = pid_file.lines().next().unwrap().trim().to_owned();
        let st = Command::new("kill")
            .args(["-STOP", &postmaster])
            .status()
            .unwrap();
        assert!(st.success(), "kill -STOP {postmaster}");
        let mut victims = children_of(&postmaster);
        assert!(
            !victims.is_empty(),
            "the postmaster {postmaster} has no children"
        );
        victims.push(postmaster);
        let st = Command::new("kill")
            .arg("-KILL")
            .args(&victims)
            .status()
            .unwrap();
        assert!(st.success(), "kill -KILL {victims:?}");
    }

    /// What this member's Patroni says of the cluster.
    async fn cluster_view(&self, client: &Client) -> Vec<(String, String, String)> {
        cluster_view(client, &self.api("/cluster")).await
    }

    /// Until Patroni's `/primary` on this member answers 200 (it holds the leader key and has
    /// promoted) and its PostgreSQL is out of recovery (the promotion Patroni asked for is
    /// done: the API says "primary" a moment before). When that was.
    async fn promoted_by_patroni(&self, cluster: &Patroni) -> Instant {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = cluster
                .client
                .get(self.api("/primary"))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0);
            if status == 200 {
                let url = self.url();
                let out_of_recovery = tokio::task::spawn_blocking(move || {
                    count(&url, "SELECT (NOT pg_is_in_recovery())::int::bigint AS n") == 1
                })
                .await
                .unwrap();
                if out_of_recovery {
                    fault_injected(&format!("Patroni promoted {}", self.name));
                    return Instant::now();
                }
            }
            assert!(
                Instant::now() < deadline,
                "Patroni never promoted {}: {}",
                self.name,
                cluster.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Watches, from now on, for this member (the former primary) to run again as a standby
    /// of the new leader, rewound by Patroni: the task answers when that was (`None`: not
    /// within 90 s).
    fn watch_for_its_return_as_a_standby(&self, client: &Client) -> JoinHandle<Option<Instant>> {
        let (url, name, client) = (self.api("/cluster"), self.name, client.clone());
        tokio::spawn(async move {
            let deadline = Instant::now() + Duration::from_secs(90);
            while Instant::now() < deadline {
                let back = cluster_view(&client, &url)
                    .await
                    .iter()
                    .any(|(n, role, state)| {
                        n == name
                            && (role == "sync_standby" || role == "replica")
                            && state == "running"
                    });
                if back {
                    return Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            None
        })
    }
}

/// What a Patroni REST API's `/cluster` at `url` says: each member's name, role and state.
async fn cluster_view(client: &Client, url: &str) -> Vec<(String, String, String)> {
    let Ok(answer) = client.get(url).send().await else {
        return Vec::new();
    };
    let view: Value = answer.json().await.unwrap_or_default();
    view["members"]
        .as_array()
        .map(|members| {
            members
                .iter()
                .map(|m| {
                    let s = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
                    (s("name"), s("role"), s("state"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Three etcd members and two Patroni members, everything in a scratch directory; on drop
/// each Patroni is stopped (it stops its PostgreSQL), a PostgreSQL left running is stopped
/// immediately, and etcd is killed.
struct Patroni {
    members: Vec<Member>,
    etcd: Vec<Daemon>,
    client: Client,
    dir: Scratch,
}

impl Patroni {
    /// etcd, then the first member (which bootstraps: initdb, the primary), then the second
    /// (a base backup of it, streaming); returns once the second is the synchronous standby.
    async fn start(tools: Tools) -> Patroni {
        let dir = Scratch::new("patroni");
        owned_dir(&dir.0);
        let client = Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let mut cluster = Patroni {
            members: Vec::new(),
            etcd: Vec::new(),
            client,
            dir,
        };
        let (clients, peers): (Vec<u16>, Vec<u16>) =
            (0..3).map(|_| (free_port(), free_port())).unzip();
        let initial_cluster = (0..3)
            .map(|i| format!("etcd{i}=http://127.0.0.1:{}", peers[i]))
            .collect::<Vec<_>>()
            .join(",");
        for i in 0..3 {
            let client_url = format!("http://127.0.0.1:{}", clients[i]);
            let peer_url = format!("http://127.0.0.1:{}", peers[i]);
            let mut cmd = Command::new(&tools.etcd);
            cmd.arg(format!("--name=etcd{i}"))
                .arg(format!(
                    "--data-dir={}",
                    cluster.dir.path(&format!("etcd{i}")).display()
                ))
                .arg(format!("--listen-client-urls={client_url}"))
                .arg(format!("--advertise-client-urls={client_url}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster={initial_cluster}"))
                .arg("--initial-cluster-state=new")
                .arg("--initial-cluster-token=kubesvc-test");
            let log = cluster.dir.path(&format!("etcd{i}.log"));
            cluster.etcd.push(Daemon::spawn(&mut cmd, &log));
        }
        let etcd_hosts = clients
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",");

        for name in MEMBERS {
            let member_dir = cluster.dir.path(name);
            owned_dir(&member_dir);
            let mut member = Member {
                name,
                pg_port: free_port(),
                api_port: free_port(),
                dir: member_dir,
                pg_bin: tools.pg_bin.clone(),
                patroni: None,
            };
            let config = member.dir.join("patroni.yml");
            std::fs::write(&config, member.config(&etcd_hosts)).unwrap();
            let mut cmd = Command::new(&tools.patroni);
            cmd.arg(&config).current_dir(&member.dir);
            run_as(&mut cmd);
            member.patroni = Some(Daemon::spawn(&mut cmd, &member.dir.join("patroni.log")));
            cluster.members.push(member);
            let want = match cluster.members.len() {
                1 => vec![(MEMBERS[0], "leader", "running")],
                _ => vec![
                    (MEMBERS[0], "leader", "running"),
                    (MEMBERS[1], "sync_standby", "running"),
                ],
            };
            cluster.wait_for(&want).await;
        }
        fault_injected("none yet: Patroni runs a primary and its synchronous standby");
        cluster
    }

    /// Until the first member's Patroni shows exactly these members, roles and states (in
    /// the order of their names).
    async fn wait_for(&self, want: &[(&str, &str, &str)]) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let view = self.members[0].cluster_view(&self.client).await;
            let mut got: Vec<(&str, &str, &str)> = view
                .iter()
                .map(|(n, r, s)| (n.as_str(), r.as_str(), s.as_str()))
                .collect();
            got.sort();
            if got == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "Patroni never reached {want:?} (last {got:?}): {}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Both hosts in one URL, the standby first: libpq passes over it only because of
    /// `target_session_attrs=read-write`, and after the failover it is the one to pick.
    fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.members[1].pg_port, self.members[0].pg_port
        )
    }

    /// The last lines of each Patroni's log (and its PostgreSQL's, which Patroni writes there),
    /// for failure messages; the once-a-second "no action" lines are left out.
    fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let text = std::fs::read_to_string(m.dir.join("patroni.log")).unwrap_or_default();
                let lines: Vec<&str> = text
                    .lines()
                    .filter(|l| !l.contains("INFO: no action."))
                    .collect();
                format!(
                    "--- {} ---\n{}",
                    m.name,
                    lines[lines.len().saturating_sub(40)..].join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Patroni {
    fn drop(&mut self) {
        for member in &mut self.members {
            if let Some(mut patroni) = member.patroni.take() {
                // Patroni stops its PostgreSQL on SIGTERM (fast shutdown).
                patroni.stop(Duration::from_secs(15));
            }
            if member.data().join("postmaster.pid").exists() {
                let mut cmd = Command::new(member.pg_bin.join("pg_ctl"));
                cmd.arg("-D")
                    .arg(member.data())
                    .args(["-m", "immediate", "-w", "stop"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null());
                let _ = run_as(&mut cmd).status();
            }
        }
        // etcd last: Patroni needs it to stop cleanly. Its Drop kills it.
        self.etcd.clear();
    }
}
