//! PostgreSQL failover under load: a primary and a synchronous streaming standby made on
//! loopback, the service given both in one URL (libpq's multi-host form with
//! `target_session_attrs=read-write`, the standby listed first so that the parameter, not the
//! order, is what picks the primary). Under creates, reads and long-polls the primary is killed
//! and the standby promoted: 503 with Retry-After meanwhile, the same process serving again from
//! the new primary, no acknowledged create lost or doubled, replays answering the same bytes,
//! and the LISTEN feed and long-polls back on the new primary.
//!
//! `SOAK_SECONDS` sets how long the load runs, half before the kill and half after the
//! recovery (unset: about two seconds in all, so the test stays short).

use std::sync::Mutex;

use super::*;

/// Workers sending creates, each with its own Idempotency-Key, one after the other.
const CREATE_LOADERS: usize = 2;
/// Creates acknowledged before the kill at least: the check of what survived needs some.
const ACKS_BEFORE_THE_KILL: usize = 10;
/// The standby's name, as the primary's `synchronous_standby_names` knows it.
const STANDBY_NAME: &str = "standby1";

/// How long the load runs before the kill, and after the recovery.
fn load_phases() -> (Duration, Duration) {
    match std::env::var("SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        Some(total) if total > 0 => {
            let half = Duration::from_secs(total) / 2;
            (half.max(Duration::from_secs(1)), half)
        }
        _ => (Duration::from_millis(1500), Duration::from_millis(700)),
    }
}

/// Runs a query answering one text column `v`, a row each.
fn texts(url: &str, sql: &str) -> Vec<String> {
    use diesel::{Connection, QueryableByName, RunQueryDsl, sql_types::Text};
    #[derive(QueryableByName)]
    struct V {
        #[diesel(sql_type = Text)]
        v: String,
    }
    let mut conn = diesel::PgConnection::establish(url).unwrap_or_else(|e| panic!("{e}"));
    let rows: Vec<V> = diesel::sql_query(sql)
        .load(&mut conn)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.into_iter().map(|r| r.v).collect()
}

fn execute(url: &str, sql: &str) {
    use diesel::Connection;
    use diesel::connection::SimpleConnection;
    let mut conn = diesel::PgConnection::establish(url).unwrap_or_else(|e| panic!("{e}"));
    conn.batch_execute(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// A primary and its synchronous standby, each a private cluster on its own port.
struct Pair {
    primary: PrivatePostgres,
    standby: PrivatePostgres,
}

impl Pair {
    /// Both hosts in one URL, the standby first: libpq passes over it only because of
    /// `target_session_attrs=read-write`, and after the failover it is the one to pick.
    fn url(&self) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
            self.standby.port, self.primary.port
        )
    }
}

/// A streaming standby of `primary`: a base backup of it, started on its own port, streaming
/// under the name the primary waits for.
fn standby_of(primary: &PrivatePostgres) -> PrivatePostgres {
    let dir = Scratch::new("pg-standby");
    if primary.as_postgres {
        let st = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&dir.0)
            .status()
            .unwrap();
        assert!(st.success(), "chown the standby's directory");
    }
    let standby = PrivatePostgres {
        bin: primary.bin.clone(),
        dir,
        port: free_port(),
        as_postgres: primary.as_postgres,
    };
    // -R writes standby.signal and a primary_conninfo; -c fast does not wait for a spread
    // checkpoint; -X stream copies the WAL written during the backup too.
    let st = standby
        .command("pg_basebackup")
        .arg("-D")
        .arg(standby.data())
        .args(["-h", "127.0.0.1", "-p", &primary.port.to_string()])
        .args([
            "-U",
            "postgres",
            "-X",
            "stream",
            "-R",
            "-c",
            "fast",
            "--no-sync",
        ])
        .status()
        .unwrap();
    assert!(st.success(), "pg_basebackup failed: {}", primary.log());
    // The last setting of the file wins: the same primary, under the name it waits for.
    let conf = standby.data().join("postgresql.auto.conf");
    let mut text = std::fs::read_to_string(&conf).unwrap();
    text.push_str(&format!(
        "primary_conninfo = 'host=127.0.0.1 port={} user=postgres application_name={STANDBY_NAME}'\n",
        primary.port
    ));
    std::fs::write(&conf, text).unwrap();
    standby.start();
    standby
}

/// The primary, its standby, and synchronous replication in effect: from then on a commit is
/// acknowledged only once the standby has flushed it. `None` without PostgreSQL's binaries.
fn make_a_primary_and_a_synchronous_standby() -> Option<Pair> {
    let primary = PrivatePostgres::create()?;
    // The defaults of PostgreSQL 10 and later, which streaming replication needs.
    let settings = texts(
        &primary.url(),
        "SELECT current_setting('wal_level') || ' ' || current_setting('synchronous_commit') \
         || ' ' || (current_setting('max_wal_senders')::int > 0)::text AS v",
    );
    assert_eq!(settings, vec!["replica on true"], "the primary's settings");
    let standby = standby_of(&primary);
    // Set once the standby is made, on the primary only: the base backup (so the promoted
    // standby) does not carry it, and a lone new primary does not wait for a standby forever.
    execute(
        &primary.url(),
        &format!("ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 ({STANDBY_NAME})'"),
    );
    execute(&primary.url(), "SELECT pg_reload_conf()");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let states = texts(
            &primary.url(),
            "SELECT application_name || '=' || sync_state AS v FROM pg_stat_replication",
        );
        if states == vec![format!("{STANDBY_NAME}=sync")] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the standby never became synchronous: {states:?}\n{}",
            standby.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(Pair { primary, standby })
}

/// One acknowledged create: its name, its key, the 201 it got, and when.
#[derive(Clone)]
struct Ack {
    name: String,
    key: String,
    id: String,
    body: Vec<u8>,
    /// When the attempt that got the 201 was sent, and when its answer came.
    sent: Instant,
    at: Instant,
    /// The 201 was a replay: an earlier attempt committed, but its answer was lost.
    replayed: bool,
    /// Attempts it took (more than one: it was in flight across the failover).
    attempts: u32,
}

/// One answer the load got.
struct Seen {
    label: String,
    status: u16,
    code: String,
    retry_after: Option<String>,
    /// When it was sent, and when it came.
    sent: Instant,
    at: Instant,
}

/// What the load saw, shared with the test while it runs.
#[derive(Default)]
struct LoadLog {
    acks: Vec<Ack>,
    /// Creates the kill left in progress (409 `idempotency_key_in_progress` on a retry of
    /// their key): their claim reached the standby, their create did not. Their names.
    in_doubt: Vec<String>,
    answers: Vec<Seen>,
    failures: Vec<String>,
}

type Shared = Arc<Mutex<LoadLog>>;

fn log_of(shared: &Shared) -> std::sync::MutexGuard<'_, LoadLog> {
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records an answer; a problem's code is read for any status of 400 and above.
fn record(shared: &Shared, label: &str, sent: Instant, a: &Answer) {
    let code = if a.status >= 400 {
        a.json()["code"].as_str().unwrap_or("").to_owned()
    } else {
        String::new()
    };
    log_of(shared).answers.push(Seen {
        label: label.to_owned(),
        status: a.status,
        code,
        retry_after: a.header("retry-after"),
        sent,
        at: Instant::now(),
    });
}

/// Creates, one after the other, each with a key of its own and re-sent with that key after a
/// 503 or a failure below HTTP until it is answered.
async fn create_loader(http: Http, worker: usize, stop: Arc<AtomicBool>, shared: Shared) {
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let name = format!("fo-{worker}-{n}");
        let key = format!("failover-{worker}-{n}-0123456789");
        create_until_answered(&http, &name, &key, &shared).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create_until_answered(http: &Http, name: &str, key: &str, shared: &Shared) {
    let label = format!("POST {CLUSTERS} ({name})");
    let body = cluster_body("acme", name);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut attempts = 0;
    loop {
        attempts += 1;
        let sent = Instant::now();
        match http
            .try_send(
                Method::POST,
                CLUSTERS,
                Some(TOKEN_ACME_SUPER_ADMIN),
                &[("Idempotency-Key", key)],
                Some(&body),
            )
            .await
        {
            Ok(a) => {
                record(shared, &label, sent, &a);
                match a.status {
                    201 => {
                        log_of(shared).acks.push(Ack {
                            name: name.to_owned(),
                            key: key.to_owned(),
                            id: a.json()["id"].as_str().unwrap_or_default().to_owned(),
                            replayed: a.header("idempotency-replay").as_deref() == Some("true"),
                            body: a.body,
                            sent,
                            at: Instant::now(),
                            attempts,
                        });
                        return;
                    }
                    409 if a.problem_code() == "idempotency_key_in_progress" => {
                        // Its lease outlasts the test (60 s): the key is left in doubt.
                        log_of(shared).in_doubt.push(name.to_owned());
                        return;
                    }
                    503 => {}
                    // Anything else is the test's failure, found in the answers.
                    _ => return,
                }
            }
            Err(e) => log_of(shared).failures.push(format!("{label}: {e}")),
        }
        if Instant::now() > deadline {
            log_of(shared)
                .failures
                .push(format!("{label}: never answered but 503"));
            return;
        }
        // Sooner than Retry-After asks, so the figures show when the service is back.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Reads and a write of the cluster `id`, and a list, in a loop.
async fn reader(http: Http, id: String, stop: Arc<AtomicBool>, shared: Shared) {
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let reqs: Vec<(Method, String, Option<Value>)> = vec![
            (Method::GET, format!("{CLUSTERS}/{id}"), None),
            (Method::GET, format!("{CLUSTERS}?organization=acme"), None),
            (
                Method::PATCH,
                format!("{CLUSTERS}/{id}"),
                Some(json!({"description": format!("load {n}")})),
            ),
        ];
        for (method, path, body) in reqs {
            let label = format!("{method} {path}");
            let sent = Instant::now();
            match http
                .try_send(
                    method,
                    &path,
                    Some(TOKEN_ACME_SUPER_ADMIN),
                    &[],
                    body.as_ref(),
                )
                .await
            {
                Ok(a) => record(&shared, &label, sent, &a),
                Err(e) => log_of(&shared).failures.push(format!("{label}: {e}")),
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// State long-polls of the cluster `id`, one after the other, each from the version the last
/// one answered (the reader's writes wake them).
async fn long_poller(http: Http, id: String, stop: Arc<AtomicBool>, shared: Shared) {
    let mut since = 0;
    while !stop.load(Ordering::SeqCst) {
        let path = format!("{CLUSTERS}/{id}/state?since={since}&timeout_seconds=1");
        let label = format!("GET {CLUSTERS}/{id}/state");
        let sent = Instant::now();
        match http
            .try_send(Method::GET, &path, Some(TOKEN_ACME_MEMBER), &[], None)
            .await
        {
            Ok(a) => {
                record(&shared, &label, sent, &a);
                if a.status == 200 {
                    since = a.json()["version"].as_i64().unwrap_or(since);
                } else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            Err(e) => log_of(&shared).failures.push(format!("{label}: {e}")),
        }
    }
}

/// The load: its workers, the flag that stops them, and what they saw so far.
struct Load {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    shared: Shared,
}

/// The kill: when it was sent, when PostgreSQL was gone, and the creates acknowledged before.
struct Kill {
    at: Instant,
    done: Instant,
    acked_before: Vec<Ack>,
}

/// When the service was back: the first create acknowledged by the new primary, and `/readyz`.
struct Recovery {
    promoted: Instant,
    first_ack: Instant,
    ready: Instant,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_to_the_synchronous_standby_loses_no_acknowledged_write() {
    let started = Instant::now();
    let Some(pair) = tokio::task::spawn_blocking(make_a_primary_and_a_synchronous_standby)
        .await
        .unwrap()
    else {
        return;
    };
    let (before, after) = load_phases();
    let platform = StubPlatform::start_demo();
    let scratch = Scratch::new("failover");
    let env = binary_env(
        &platform,
        &pair.url(),
        &[
            ("PROVISIONER_STEP_MS", "0"),
            ("RECONCILER_POLL_MS", "50"),
            ("DATABASE_POOL_SIZE", "4"),
        ],
    );
    let (server, http) = start_ready(&env, free_port(), scratch.path("server.log")).await;

    the_service_runs_on_the_primary_though_the_standby_is_listed_first(&pair, &server).await;
    let id = commit_a_provisioned_cluster_before_the_failover(&http).await;
    let load = start_creates_reads_and_long_polls(&http, &id);
    let kill = kill_the_primary_just_after_a_create_was_acknowledged(&pair, &load, before).await;
    // Together: each waits out the pool's connect timeout before its 503.
    tokio::join!(
        every_kind_of_request_is_503_with_retry_after(&http, &id, "with no primary", Vec::new()),
        readiness_fails_and_liveness_holds(&http),
    );
    let promoted = promote_the_standby(&pair);
    let first_ack =
        the_same_process_acknowledges_creates_on_the_new_primary(&load, &kill, &server).await;
    http.wait_ready().await;
    let recovery = Recovery {
        promoted,
        first_ack,
        ready: Instant::now(),
    };

    the_long_poll_loop_is_answered_again_on_the_new_primary(&load, recovery.promoted, &server)
        .await;
    tokio::time::sleep(after).await;
    let log = stop_the_load(load).await;
    let answered_503 = the_load_saw_only_successes_and_clear_503s_and_nothing_hung(&log, &server);
    every_acknowledged_create_is_on_the_new_primary_exactly_once(&pair, &log, &kill);
    every_acknowledged_key_replays_its_answer_byte_for_byte(&http, &log).await;
    the_change_feed_listens_on_the_new_primary(&pair, &server).await;
    a_notification_on_the_new_primary_wakes_a_long_poll(&http, &pair, &id).await;
    http.wait_cluster(&id, Duration::from_secs(30), |c| {
        c["phase"] == "Provisioned"
    })
    .await;

    report_the_figures(&log, &kill, &recovery, answered_503, started);
    drop(server);
    drop(pair);
}

/// The change feed's session is on the primary, none on the standby: the URL's first host was
/// passed over because it is read-only.
async fn the_service_runs_on_the_primary_though_the_standby_is_listed_first(
    pair: &Pair,
    server: &ServerProcess,
) {
    let feed = format!(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = '{}'",
        store_postgres::CHANGE_FEED_APPLICATION_NAME
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&pair.primary.url(), &feed) != 1 {
        assert!(
            Instant::now() < deadline,
            "the change feed never listened on the primary: {}",
            server.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        count(&pair.standby.url(), &feed),
        0,
        "a feed on the standby"
    );
}

/// Committed before the failover: a provisioned cluster. Its id.
async fn commit_a_provisioned_cluster_before_the_failover(http: &Http) -> String {
    let a = http.post(CLUSTERS, &cluster_body("acme", "before-1")).await;
    assert_eq!(a.status, 201, "{}", a.text());
    let id = a.json()["id"].as_str().unwrap().to_owned();
    http.wait_cluster(&id, Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned"
    })
    .await;
    id
}

/// Two create loaders (so a commit is in flight when the primary goes), a reader that also
/// writes the cluster, and a long-poll loop on it.
fn start_creates_reads_and_long_polls(http: &Http, id: &str) -> Load {
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Shared::default();
    let mut workers: Vec<JoinHandle<()>> = (0..CREATE_LOADERS)
        .map(|w| tokio::spawn(create_loader(http.clone(), w, stop.clone(), shared.clone())))
        .collect();
    workers.push(tokio::spawn(reader(
        http.clone(),
        id.to_owned(),
        stop.clone(),
        shared.clone(),
    )));
    workers.push(tokio::spawn(long_poller(
        http.clone(),
        id.to_owned(),
        stop.clone(),
        shared.clone(),
    )));
    Load {
        stop,
        workers,
        shared,
    }
}

/// Lets the load run, checks the standby is still synchronous, then kills the primary (as a
/// crash: no checkpoint, every connection cut) the moment a create is acknowledged, so the
/// newest acknowledged creates are milliseconds old when it dies.
async fn kill_the_primary_just_after_a_create_was_acknowledged(
    pair: &Pair,
    load: &Load,
    run: Duration,
) -> Kill {
    tokio::time::sleep(run).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while log_of(&load.shared).acks.len() < ACKS_BEFORE_THE_KILL {
        assert!(
            Instant::now() < deadline,
            "the load acknowledged fewer than {ACKS_BEFORE_THE_KILL} creates"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let url = pair.primary.url();
    let states = tokio::task::spawn_blocking(move || {
        texts(
            &url,
            "SELECT application_name || '=' || sync_state AS v FROM pg_stat_replication",
        )
    })
    .await
    .unwrap();
    assert_eq!(
        states,
        vec![format!("{STANDBY_NAME}=sync")],
        "before the kill"
    );
    let seen = log_of(&load.shared).acks.len();
    while log_of(&load.shared).acks.len() == seen {
        assert!(Instant::now() < deadline, "the load stopped acknowledging");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let at = Instant::now();
    tokio::task::block_in_place(|| pair.primary.stop_immediate());
    let done = Instant::now();
    fault_injected("the primary killed (immediate stop) under load");
    let acked_before = log_of(&load.shared)
        .acks
        .iter()
        .filter(|a| a.at <= at)
        .cloned()
        .collect();
    Kill {
        at,
        done,
        acked_before,
    }
}

/// `pg_ctl promote`, waiting until the standby is out of recovery. When that was.
fn promote_the_standby(pair: &Pair) -> Instant {
    tokio::task::block_in_place(|| {
        let st = pair
            .standby
            .command("pg_ctl")
            .arg("-D")
            .arg(pair.standby.data())
            .args(["-w", "-t", "30", "promote"])
            .status()
            .unwrap();
        assert!(
            st.success(),
            "pg_ctl promote failed: {}",
            pair.standby.log()
        );
        fault_injected("the standby promoted");
        assert_eq!(
            count(
                &pair.standby.url(),
                "SELECT (NOT pg_is_in_recovery())::int::bigint AS n"
            ),
            1,
            "the standby is still in recovery"
        );
    });
    Instant::now()
}

/// Without a restart, the load's creates are acknowledged again: the first one sent after the
/// kill (so committed on the new primary). When it was.
async fn the_same_process_acknowledges_creates_on_the_new_primary(
    load: &Load,
    kill: &Kill,
    server: &ServerProcess,
) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let first = log_of(&load.shared)
            .acks
            .iter()
            .filter(|a| a.sent >= kill.done)
            .map(|a| a.at)
            .min();
        if let Some(at) = first {
            return at;
        }
        assert!(
            Instant::now() < deadline,
            "no create acknowledged after the promotion: {}",
            server.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn stop_the_load(load: Load) -> LoadLog {
    load.stop.store(true, Ordering::SeqCst);
    for w in load.workers {
        w.await.unwrap();
    }
    std::mem::take(&mut *log_of(&load.shared))
}

/// Nothing failed below HTTP or hung; every answer was a success, a 503 with Retry-After, or
/// (a create only) its key left in progress by the kill; some were 503s. Their number.
fn the_load_saw_only_successes_and_clear_503s_and_nothing_hung(
    log: &LoadLog,
    server: &ServerProcess,
) -> usize {
    assert!(
        log.failures.is_empty(),
        "requests failed below HTTP or hung past the client's timeout: {:?}\n{}",
        log.failures,
        server.log_tail()
    );
    let mut answered_503 = 0;
    for s in &log.answers {
        match (s.status, s.code.as_str()) {
            (200 | 201, _) => {}
            (409, "idempotency_key_in_progress") if s.label.starts_with("POST ") => {}
            (503, code) => {
                answered_503 += 1;
                assert_eq!(code, "service_unavailable", "{}", s.label);
                assert!(
                    s.retry_after
                        .as_deref()
                        .is_some_and(|r| r.parse::<u32>().is_ok()),
                    "{}: 503 with Retry-After {:?}",
                    s.label,
                    s.retry_after
                );
            }
            (other, code) => panic!(
                "{}: {other} {code} across the failover\n{}",
                s.label,
                server.log_tail()
            ),
        }
    }
    assert!(answered_503 > 0, "the load never saw the failover");
    answered_503
}

/// The long-poll loop of the load gets a 200 from a long-poll sent after the promotion.
async fn the_long_poll_loop_is_answered_again_on_the_new_primary(
    load: &Load,
    promoted: Instant,
    server: &ServerProcess,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answered = log_of(&load.shared)
            .answers
            .iter()
            .any(|s| s.label.ends_with("/state") && s.status == 200 && s.sent > promoted);
        if answered {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no state long-poll sent after the promotion answered 200: {}",
            server.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The new primary holds one cluster for each acknowledged create (the one its 201 named),
/// among them the ones acknowledged just before the kill, and no other: a create whose answer
/// was lost was acknowledged by its retry's replay, a key the kill left in progress made
/// nothing, and the create refused while there was no primary is not there.
fn every_acknowledged_create_is_on_the_new_primary_exactly_once(
    pair: &Pair,
    log: &LoadLog,
    kill: &Kill,
) {
    assert!(
        kill.acked_before.len() >= ACKS_BEFORE_THE_KILL,
        "too few creates acknowledged before the kill: {}",
        kill.acked_before.len()
    );
    let mut stored: HashMap<String, Vec<String>> = HashMap::new();
    for row in texts(
        &pair.standby.url(),
        "SELECT name || ' ' || id::text AS v FROM clusters",
    ) {
        let (name, id) = row.split_once(' ').unwrap();
        stored
            .entry(name.to_owned())
            .or_default()
            .push(id.to_owned());
    }
    for ack in &log.acks {
        assert_eq!(
            stored.get(&ack.name),
            Some(&vec![ack.id.clone()]),
            "{} (key {}) was acknowledged {:?} before the kill",
            ack.name,
            ack.key,
            kill.at.saturating_duration_since(ack.at)
        );
    }
    let acked: std::collections::HashSet<&str> = log.acks.iter().map(|a| a.name.as_str()).collect();
    let unacknowledged: Vec<&String> = stored
        .keys()
        .filter(|n| n.starts_with("fo-") && !acked.contains(n.as_str()))
        .collect();
    assert!(
        unacknowledged.is_empty(),
        "clusters nobody was told about: {unacknowledged:?} (in doubt: {:?})",
        log.in_doubt
    );
    assert!(stored.contains_key("before-1"));
    assert!(!stored.contains_key("during-1"));
}

/// Each acknowledged key sent again answers the same 201, byte for byte, as a replay.
async fn every_acknowledged_key_replays_its_answer_byte_for_byte(http: &Http, log: &LoadLog) {
    for chunk in log.acks.chunks(8) {
        let again = futures::future::join_all(chunk.iter().map(|ack| {
            let body = cluster_body("acme", &ack.name);
            let http = http.clone();
            let key = ack.key.clone();
            async move {
                http.send(
                    Method::POST,
                    CLUSTERS,
                    Some(TOKEN_ACME_SUPER_ADMIN),
                    &[("Idempotency-Key", key.as_str())],
                    Some(&body),
                )
                .await
            }
        }))
        .await;
        for (ack, a) in chunk.iter().zip(again) {
            assert_eq!(a.status, 201, "{}: {}", ack.name, a.text());
            assert_eq!(
                a.header("idempotency-replay").as_deref(),
                Some("true"),
                "{}",
                ack.name
            );
            assert_eq!(a.body, ack.body, "{}: the replay differs", ack.name);
        }
    }
}

/// The change feed's session is on the new primary, past its first statement (the LISTEN).
async fn the_change_feed_listens_on_the_new_primary(pair: &Pair, server: &ServerProcess) {
    let sql = format!(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = '{}' \
         AND state = 'idle' AND query <> ''",
        store_postgres::CHANGE_FEED_APPLICATION_NAME
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&pair.standby.url(), &sql) != 1 {
        assert!(
            Instant::now() < deadline,
            "the change feed never listened on the new primary: {}",
            server.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Another process changes the cluster on the new primary and sends only the notification (no
/// change-log row, so the feed's once-a-second read of the log cannot be what tells it): a
/// long-poll waiting on this server wakes with the change, so the LISTEN feed is back.
async fn a_notification_on_the_new_primary_wakes_a_long_poll(http: &Http, pair: &Pair, id: &str) {
    let state = http
        .get(&format!("{CLUSTERS}/{id}/state?since=0&timeout_seconds=1"))
        .await;
    assert_eq!(state.status, 200, "{}", state.text());
    let version = state.json()["version"].as_i64().unwrap();
    let poll = {
        let http = http.clone();
        let path = format!("{CLUSTERS}/{id}/state?since={version}&timeout_seconds=20");
        tokio::spawn(async move { http.get(&path).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let url = pair.standby.url();
    let id_owned = id.to_owned();
    tokio::task::spawn_blocking(move || {
        execute(
            &url,
            &format!(
                "WITH u AS (UPDATE clusters SET tags = array_append(tags, 'after-failover'), \
                     revision = revision + 1 WHERE id = '{id_owned}' \
                     RETURNING id, revision, organization_id) \
                 SELECT pg_notify('cluster_changes', \
                     u.id || ':' || u.revision || ':' || u.organization_id || ':changed') FROM u"
            ),
        );
    })
    .await
    .unwrap();
    let woke = poll.await.unwrap();
    assert_eq!(woke.status, 200, "{}", woke.text());
    assert_eq!(woke.json()["changed"], true, "{}", woke.text());
    assert!(woke.json()["version"].as_i64().unwrap() > version);
    let c = http
        .send(
            Method::GET,
            &format!("{CLUSTERS}/{id}"),
            Some(TOKEN_ACME_SUPER_ADMIN),
            &[],
            None,
        )
        .await;
    assert!(
        c.json()["tags"]
            .as_array()
            .is_some_and(|t| t.contains(&json!("after-failover"))),
        "{}",
        c.text()
    );
}

/// The figures docs/deploy.md quotes ("PostgreSQL failover (measured)").
fn report_the_figures(
    log: &LoadLog,
    kill: &Kill,
    recovery: &Recovery,
    answered_503: usize,
    started: Instant,
) {
    let ms = |from: Instant, to: Instant| to.saturating_duration_since(from).as_millis();
    let newest = kill.acked_before.last().map(|a| ms(a.at, kill.at));
    eprintln!(
        "failover: kill took {} ms; kill to promoted {} ms; promoted to first 201 {} ms; \
         kill to first 201 on the new primary {} ms; kill to /readyz 200 {} ms",
        ms(kill.at, kill.done),
        ms(kill.at, recovery.promoted),
        ms(recovery.promoted, recovery.first_ack),
        ms(kill.at, recovery.first_ack),
        ms(kill.at, recovery.ready),
    );
    let mut waits: Vec<Duration> = log
        .answers
        .iter()
        .filter(|s| s.status == 503)
        .map(|s| s.at - s.sent)
        .collect();
    waits.sort();
    eprintln!(
        "failover: a 503 came after {:?} to {:?} (median {:?})",
        waits.first(),
        waits.last(),
        waits.get(waits.len() / 2)
    );
    eprintln!(
        "failover: {} answers, {answered_503} of them 503; {} creates acknowledged ({} before \
         the kill, the newest {newest:?} ms before it; {} acknowledged by a replay after a lost \
         answer, {} after more than one attempt); {} left in doubt; test took {} ms",
        log.answers.len(),
        log.acks.len(),
        kill.acked_before.len(),
        log.acks.iter().filter(|a| a.replayed).count(),
        log.acks.iter().filter(|a| a.attempts > 1).count(),
        log.in_doubt.len(),
        started.elapsed().as_millis(),
    );
}
