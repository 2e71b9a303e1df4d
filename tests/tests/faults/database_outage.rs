//! PostgreSQL stopped and started again under a running server: 503 with Retry-After while it
//! is down, nothing committed lost, and reads, writes, the change feed and long-polls back after.

use super::*;

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
        let mut reqs = failover_load::reads_and_a_write(&id, n);
        reqs.extend([
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
        ]);
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
    // The auth servers too: their reads and writes go to the same database.
    let auth_servers = vec![
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
    every_kind_of_request_is_503_with_retry_after(&http, &id, "during the outage", auth_servers)
        .await;
    readiness_fails_and_liveness_holds(&http).await;
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

/// PostgreSQL back (the same server process then recovers: `wait_ready`).
fn restart_the_database(pg: &PrivatePostgres) {
    tokio::task::block_in_place(|| pg.start());
}

/// A write by "another process" (SQL with the change-log row and the notification its store
/// writes and sends), made the moment
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
                 RETURNING id, revision, organization_id), \
             logged AS (INSERT INTO cluster_change_log \
                 (cluster_id, revision, organization_id, membership) \
                 SELECT id, revision, organization_id, 'changed' FROM u) \
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
