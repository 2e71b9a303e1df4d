//! SIGKILL of the real server binary during a burst of idempotent creates: one cluster per
//! key, byte-identical replays, provisioning finished once.

use super::*;

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
    app.wait_until_the_queue_is_settled().await;
    assert_eq!(app.count_rows("nodes"), (KEYS * 2) as i64);
}
