//! The load both failover tests run (tests/tests/faults/failover.rs, with `pg_ctl promote` by
//! hand, and patroni.rs, with Patroni promoting by itself) and the checks of what it saw: two
//! loops of keyed creates, a reader that also writes, a state long-poll loop; the kill of the
//! primary the moment a create was acknowledged; then that every acknowledged create is on the
//! new primary exactly once, its key replays the same bytes, every 503 was prompt and carried
//! Retry-After, and the change feed and long-polls are back.
//!
//! `SOAK_SECONDS` sets how long the load runs, half before the kill and half after the
//! recovery (unset: about two seconds in all, so the tests stay short).

use std::sync::Mutex;

use super::*;

/// Workers sending creates, each with its own Idempotency-Key, one after the other.
const CREATE_LOADERS: usize = 2;
/// Creates acknowledged before the kill at least: the check of what survived needs some.
const ACKS_BEFORE_THE_KILL: usize = 10;
/// Longer than any 503 may take while there is no primary: it marks a request that waited for
/// a connection that was not coming (the pool's connect timeout is 5 s), not a speed goal.
const PROMPT_503: Duration = Duration::from_secs(2);

/// The server's settings in both failover tests: provisioning at full speed (a cluster is
/// provisioned before the kill in a moment), the reconciler polling often, and a small pool,
/// so the outage meets every connection.
pub(super) fn failover_server_env(
    platform: &platform_stub::StubHandle,
    database_url: &str,
) -> Vec<(&'static str, String)> {
    binary_env(
        platform,
        database_url,
        &[
            ("PROVISIONER_STEP_MS", "0"),
            ("RECONCILER_POLL_MS", "50"),
            ("DATABASE_POOL_SIZE", "4"),
        ],
    )
}

/// How long the load runs before the kill, and after the recovery.
pub(super) fn load_phases() -> (Duration, Duration) {
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
pub(super) fn texts(url: &str, sql: &str) -> Vec<String> {
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

pub(super) fn execute(url: &str, sql: &str) {
    use diesel::Connection;
    use diesel::connection::SimpleConnection;
    let mut conn = diesel::PgConnection::establish(url).unwrap_or_else(|e| panic!("{e}"));
    conn.batch_execute(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// One acknowledged create: its name, its key, the 201 it got, and when.
#[derive(Clone)]
pub(super) struct Ack {
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
pub(super) struct Seen {
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
pub(super) struct LoadLog {
    acks: Vec<Ack>,
    /// Creates the kill left in progress (409 `idempotency_key_in_progress` on a retry of
    /// their key): their claim reached the standby, their create did not. Their names.
    in_doubt: Vec<String>,
    answers: Vec<Seen>,
    failures: Vec<String>,
}

pub(super) type Shared = Arc<Mutex<LoadLog>>;

pub(super) fn log_of(shared: &Shared) -> std::sync::MutexGuard<'_, LoadLog> {
    shared
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records an answer; a problem's code is read for any status of 400 and above.
pub(super) fn record(shared: &Shared, label: &str, sent: Instant, a: &Answer) {
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
pub(super) async fn create_loader(
    http: Http,
    worker: usize,
    stop: Arc<AtomicBool>,
    shared: Shared,
) {
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let name = format!("fo-{worker}-{n}");
        let key = format!("failover-{worker}-{n}-0123456789");
        create_until_answered(&http, &name, &key, &shared).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(super) async fn create_until_answered(http: &Http, name: &str, key: &str, shared: &Shared) {
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

/// A request the load sends: method, path and body.
pub(super) type Request = (Method, String, Option<Value>);

/// The `n`th round of reads and a write of the cluster `id`: it, the list, a PATCH.
pub(super) fn reads_and_a_write(id: &str, n: u32) -> Vec<Request> {
    vec![
        (Method::GET, format!("{CLUSTERS}/{id}"), None),
        (Method::GET, format!("{CLUSTERS}?organization=acme"), None),
        (
            Method::PATCH,
            format!("{CLUSTERS}/{id}"),
            Some(json!({"description": format!("load {n}")})),
        ),
    ]
}

/// Reads and a write of the cluster `id`, and a list, in a loop.
pub(super) async fn reader(http: Http, id: String, stop: Arc<AtomicBool>, shared: Shared) {
    let mut n = 0;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        for (method, path, body) in reads_and_a_write(&id, n) {
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

/// How long the load's state long-polls ask to wait (`timeout_seconds`).
const LONG_POLL_WAIT: Duration = Duration::from_secs(1);

/// State long-polls of the cluster `id`, one after the other, each from the version the last
/// one answered (the reader's writes wake them).
pub(super) async fn long_poller(http: Http, id: String, stop: Arc<AtomicBool>, shared: Shared) {
    let mut since = 0;
    while !stop.load(Ordering::SeqCst) {
        let path = format!(
            "{CLUSTERS}/{id}/state?since={since}&timeout_seconds={}",
            LONG_POLL_WAIT.as_secs()
        );
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
pub(super) struct Load {
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    shared: Shared,
}

/// The kill: when it was sent, when PostgreSQL was gone, and the creates acknowledged before.
pub(super) struct Kill {
    pub(super) at: Instant,
    pub(super) done: Instant,
    acked_before: Vec<Ack>,
}

/// When the service was back: the first create acknowledged by the new primary, and `/readyz`.
pub(super) struct Recovery {
    pub(super) promoted: Instant,
    pub(super) first_ack: Instant,
    pub(super) ready: Instant,
}

/// Committed before the failover: a provisioned cluster. Its id.
pub(super) async fn commit_a_provisioned_cluster_before_the_failover(http: &Http) -> String {
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
pub(super) fn start_creates_reads_and_long_polls(http: &Http, id: &str) -> Load {
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

/// Lets the load run, checks that the primary at `primary_url` still replicates synchronously
/// to `standby` (its `application_name`), then runs `kill` (`what` it does) the moment a create
/// is acknowledged, so the newest acknowledged creates are milliseconds old when it dies.
pub(super) async fn kill_the_primary_just_after_a_create_was_acknowledged(
    load: &Load,
    run: Duration,
    (primary_url, standby): (&str, &str),
    what: &str,
    kill: impl FnOnce(),
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
    let url = primary_url.to_owned();
    let states = tokio::task::spawn_blocking(move || {
        texts(
            &url,
            "SELECT application_name || '=' || sync_state AS v FROM pg_stat_replication",
        )
    })
    .await
    .unwrap();
    assert_eq!(states, vec![format!("{standby}=sync")], "before the kill");
    let seen = log_of(&load.shared).acks.len();
    while log_of(&load.shared).acks.len() == seen {
        assert!(Instant::now() < deadline, "the load stopped acknowledging");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let at = Instant::now();
    tokio::task::block_in_place(kill);
    let done = Instant::now();
    fault_injected(what);
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

/// Until a read of the cluster `id` is answered 503: reads are answered from the watch cache
/// until the change feed sees its connection gone (it looks every 50 ms, so within a moment
/// of the kill); from then on no request is answered without a primary.
pub(super) async fn the_watch_cache_lets_go(http: &Http, id: &str) {
    let since = Instant::now();
    loop {
        let sent = Instant::now();
        let a = http.get(&format!("{CLUSTERS}/{id}")).await;
        if a.status == 503 {
            return;
        }
        assert_eq!(a.status, 200, "{}", a.text());
        assert!(
            since.elapsed() < PROMPT_503,
            "reads were still answered 200 {:?} after the kill (the last one took {:?})",
            since.elapsed(),
            sent.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Without a restart, the load's creates are acknowledged again: the first one sent after the
/// kill (so committed on the new primary). When it was.
pub(super) async fn the_same_process_acknowledges_creates_on_the_new_primary(
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

pub(super) async fn stop_the_load(load: Load) -> LoadLog {
    load.stop.store(true, Ordering::SeqCst);
    for w in load.workers {
        w.await.unwrap();
    }
    std::mem::take(&mut *log_of(&load.shared))
}

/// Nothing failed below HTTP or hung; every answer was a success, a prompt 503 with
/// Retry-After, or (a create only) its key left in progress by the kill; some were 503s. Their
/// number.
pub(super) fn the_load_saw_only_successes_and_clear_503s_and_nothing_hung(
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
                // A state long-poll may wait its `timeout_seconds` first, on purpose.
                let allowed = if s.label.ends_with("/state") {
                    PROMPT_503 + LONG_POLL_WAIT
                } else {
                    PROMPT_503
                };
                assert!(
                    s.at - s.sent < allowed,
                    "{}: its 503 took {:?}; with no primary a request is answered at once\n{}",
                    s.label,
                    s.at - s.sent,
                    server.log_tail()
                );
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
pub(super) async fn the_long_poll_loop_is_answered_again_on_the_new_primary(
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
pub(super) fn every_acknowledged_create_is_on_the_new_primary_exactly_once(
    new_primary_url: &str,
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
        new_primary_url,
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
pub(super) async fn every_acknowledged_key_replays_its_answer_byte_for_byte(
    http: &Http,
    log: &LoadLog,
) {
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
pub(super) async fn the_change_feed_listens_on_the_new_primary(
    new_primary_url: &str,
    server: &ServerProcess,
) {
    let sql = format!(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = '{}' \
         AND state = 'idle' AND query <> ''",
        store_postgres::CHANGE_FEED_APPLICATION_NAME
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(new_primary_url, &sql) != 1 {
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
pub(super) async fn a_notification_on_the_new_primary_wakes_a_long_poll(
    http: &Http,
    new_primary_url: &str,
    id: &str,
) {
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
    let url = new_primary_url.to_owned();
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

/// The figures docs/deploy.md quotes ("PostgreSQL failover (measured)"), each line starting
/// with `test`'s name.
pub(super) fn report_the_figures(
    test: &str,
    log: &LoadLog,
    kill: &Kill,
    recovery: &Recovery,
    answered_503: usize,
    started: Instant,
) {
    let ms = |from: Instant, to: Instant| to.saturating_duration_since(from).as_millis();
    let newest = kill.acked_before.last().map(|a| ms(a.at, kill.at));
    eprintln!(
        "{test}: kill took {} ms; kill to promoted {} ms; promoted to first 201 {} ms; \
         kill to first 201 on the new primary {} ms; kill to /readyz 200 {} ms",
        ms(kill.at, kill.done),
        ms(kill.at, recovery.promoted),
        ms(recovery.promoted, recovery.first_ack),
        ms(kill.at, recovery.first_ack),
        ms(kill.at, recovery.ready),
    );
    let spread = |mut waits: Vec<Duration>| {
        waits.sort();
        let at = |q: f64| {
            waits
                .get(((waits.len() as f64 * q) as usize).min(waits.len().saturating_sub(1)))
                .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        };
        format!(
            "{} answers, median {:.1} ms, p90 {:.1} ms, max {:.1} ms",
            waits.len(),
            at(0.5),
            at(0.9),
            at(1.0)
        )
    };
    let waits_503 = log
        .answers
        .iter()
        .filter(|s| s.status == 503)
        .map(|s| s.at - s.sent)
        .collect();
    eprintln!("{test}: every 503: {}", spread(waits_503));
    // The outage: from the kill until the first create acknowledged again. Long-polls are
    // left out (a 200 among them waited for a change on purpose).
    let outage = |want_503: bool| {
        log.answers
            .iter()
            .filter(|s| s.sent >= kill.at && s.sent < recovery.first_ack)
            .filter(|s| !s.label.ends_with("/state") && (s.status == 503) == want_503)
            .map(|s| s.at - s.sent)
            .collect::<Vec<_>>()
    };
    eprintln!(
        "{test}: sent between the kill and the first 201 again: 503s {}; other answers {}",
        spread(outage(true)),
        spread(outage(false))
    );
    eprintln!(
        "{test}: {} answers, {answered_503} of them 503; {} creates acknowledged ({} before \
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
