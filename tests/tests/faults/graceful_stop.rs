//! SIGTERM of the real server binary, as an orchestrator stops a replica: `/readyz` fails
//! first while it still serves (closing each connection after its answer), a waiting long-poll is answered (not cut), requests in flight
//! finish, the provisioning lease it held is given back at once, and it exits 0.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_fails_readiness_first_answers_long_polls_and_gives_its_work_back() {
    // The in-process app only provides the database and the platform; its workers are off.
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let scratch = Scratch::new("drain");
    let env = binary_env(
        &app.platform,
        &app.db.url,
        &[
            ("SHUTDOWN_DELAY_SECONDS", "2"),
            ("DRAIN_TIMEOUT_SECONDS", "3"),
            // Each provisioning step takes 3 s, so a worker holds a lease when the signal comes.
            ("PROVISIONER_STEP_MS", "3000"),
            ("RECONCILER_POLL_MS", "20"),
        ],
    );
    let (mut server, http) = start_ready(&env, free_port(), scratch.path("server.log")).await;
    let created = http.post(CLUSTERS, &cluster_body("acme", "draining")).await;
    assert_eq!(created.status, 201, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let leased = "SELECT count(*) AS n FROM operations WHERE lease_id IS NOT NULL";
    let deadline = Instant::now() + Duration::from_secs(30);
    while count(&app.db.url, leased) != 1 {
        assert!(
            Instant::now() < deadline,
            "no worker took the cluster's work"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // A long-poll that would wait a minute, longer than the drain allows.
    let state = http.get(&format!("{CLUSTERS}/{id}/state")).await.json();
    let since = state["version"].as_i64().unwrap();
    let patient = Http::new(&server.base, Duration::from_secs(90));
    let poll = tokio::spawn(async move {
        patient
            .try_send(
                Method::GET,
                &format!("{CLUSTERS}/{id}/state?since={since}&timeout_seconds=60"),
                Some(TOKEN_ACME_MEMBER),
                &[],
                None,
            )
            .await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;

    server.signal_term();
    http.wait_status("/readyz", 503, Duration::from_secs(10))
        .await;
    let still_serving = http.get("/v1/catalog?organization=acme").await;
    assert_eq!(
        still_serving.status, 200,
        "it serves while load balancers take it out"
    );
    assert_eq!(
        still_serving
            .headers
            .get("connection")
            .map(|v| v.as_bytes()),
        Some(&b"close"[..]),
        "a kept-alive client is sent elsewhere for its next request"
    );

    let answered = poll
        .await
        .unwrap()
        .expect("the long-poll is answered, not cut");
    assert_eq!(answered.status, 200, "{}", answered.text());
    assert!(answered.json()["version"].as_i64().unwrap() >= since);
    let status = server.exited(Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}:\n{}", server.log_tail());
    assert!(
        server.log_text().contains("SIGTERM: stopping"),
        "{}",
        server.log_tail()
    );
    assert_eq!(
        count(&app.db.url, leased),
        0,
        "the lease is given back at once, not left to expire"
    );
}
