//! Two server binaries on one database, each with its own watch cache: a read on one shows the
//! other's write once its change feed delivered it (at once with `Cache-Control: no-cache`),
//! and keeps showing it, in steady state, after both LISTEN connections were killed, and after
//! a database restart.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_server_reads_the_others_writes_across_a_lost_feed_and_a_database_restart() {
    let Some(pg) = tokio::task::spawn_blocking(PrivatePostgres::create)
        .await
        .unwrap()
    else {
        return;
    };
    let platform = StubPlatform::start_demo();
    let scratch = Scratch::new("two-servers");
    let env = binary_env(&platform, &pg.url(), &[("RECONCILER_WORKERS", "0")]);
    let (server_a, a) = start_ready(&env, free_port(), scratch.path("a.log")).await;
    let (server_b, b) = start_ready(&env, free_port(), scratch.path("b.log")).await;
    let created = a.post(CLUSTERS, &cluster_body("acme", "shared-1")).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_owned();

    b_writes_and_a_shows_it(&a, &b, &id, "steady").await;

    let killed = count(
        &pg.url(),
        &format!(
            "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity \
             WHERE application_name = '{}'",
            store_postgres::CHANGE_FEED_APPLICATION_NAME
        ),
    );
    assert_eq!(killed, 2, "one LISTEN connection per server");
    fault_injected("both servers' LISTEN connections killed");
    b_writes_and_a_shows_it(&a, &b, &id, "after-the-feed-was-lost").await;

    tokio::task::block_in_place(|| pg.stop_immediate());
    fault_injected("PostgreSQL stopped (immediate) under two servers");
    tokio::task::block_in_place(|| pg.start());
    a.wait_ready().await;
    b.wait_ready().await;
    b_writes_and_a_shows_it(&a, &b, &id, "after-the-restart").await;

    cache_hits_grow(&a, &id, &server_a).await;
    drop(server_b);
    drop(server_a);
    drop(pg);
}

/// B changes the description; A shows it at once when asked for the database's answer, shows
/// it from its cache once the feed delivered it, and then never shows an older one.
async fn b_writes_and_a_shows_it(a: &Http, b: &Http, id: &str, description: &str) {
    let path = format!("{CLUSTERS}/{id}");
    let written = b.patch(&path, &json!({ "description": description })).await;
    assert_eq!(written.status, 200, "{description}: {}", written.text());

    let latest = a
        .send(
            Method::GET,
            &path,
            Some(TOKEN_ACME_SUPER_ADMIN),
            &[("Cache-Control", "no-cache")],
            None,
        )
        .await;
    assert_eq!(
        latest.json()["description"],
        description,
        "{}",
        latest.text()
    );

    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let seen = a.get(&path).await;
        assert_eq!(seen.status, 200, "{}", seen.text());
        if seen.json()["description"] == description {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{description}: server A still shows {} after 15 s",
            seen.json()["description"]
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for _ in 0..20 {
        let again = a.get(&path).await;
        assert_eq!(again.json()["description"], description, "{}", again.text());
    }
}

/// Once the feed listens again, A answers from its cache again (the hit counter grows).
async fn cache_hits_grow(a: &Http, id: &str, server: &ServerProcess) {
    let hits = async || {
        let metrics = a.get("/metrics").await.text();
        metrics
            .lines()
            .find(|l| l.starts_with("cluster_cache_reads_total{result=\"hit\"}"))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let before = hits().await;
        for _ in 0..5 {
            a.get(&format!("{CLUSTERS}/{id}")).await;
        }
        if hits().await >= before + 5.0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "server A never read from its cache again: {}",
            server.log_tail()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
