//! The limits of query parameters and of the Idempotency-Key, each at its bound and one
//! past it.

use blackbox::*;
use reqwest::Method;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_page_and_size() {
    let app = TestApp::spawn_api_only(&[]).await;
    let list = |q: &str| format!("{CLUSTERS}?organization=acme&{q}");
    for q in [
        "page=1",
        "size=1",
        "size=100",
        "page=2147483647",
        "page=1&size=20",
    ] {
        let a = app.get(&list(q), TOKEN_ACME_MEMBER).await;
        assert_eq!(a.status, 200, "{q}: {}", a.text());
    }
    for q in [
        "page=0",
        "page=-1",
        "page=x",
        "page=1.5",
        "size=0",
        "size=101",
        "size=",
        "page=99999999999999999999",
        "page=2147483648",
    ] {
        expect(
            &app.get(&list(q), TOKEN_ACME_MEMBER).await,
            400,
            "invalid_query",
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_since_and_timeout_seconds() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let state = |q: &str| format!("{CLUSTERS}/{}/state?{q}", id(&c));
    for q in [
        "since=0",
        "since=0&timeout_seconds=0",
        "since=0&timeout_seconds=60",
    ] {
        let a = app.get(&state(q), TOKEN_ACME_MEMBER).await;
        assert_eq!(
            (a.status, a.json()["changed"].as_bool()),
            (200, Some(true)),
            "{q}"
        );
    }
    let a = app
        .get(
            &state("since=9223372036854775807&timeout_seconds=0"),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(
        (a.status, a.json()["changed"].as_bool()),
        (200, Some(false))
    );
    for q in [
        "since=-1",
        "since=x",
        "since=9223372036854775808",
        "timeout_seconds=61",
        "timeout_seconds=-1",
        "timeout_seconds=1.5",
    ] {
        expect(
            &app.get(&state(q), TOKEN_ACME_MEMBER).await,
            400,
            "invalid_query",
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_idempotency_key_8_to_255_of_the_allowed_characters() {
    let app = TestApp::spawn_api_only(&[]).await;
    let ok = ["k".repeat(8), "k".repeat(255), "Ab0_-:.z".to_owned()];
    for (i, key) in ok.iter().enumerate() {
        let a = app
            .post_with(
                CLUSTERS,
                TOKEN_ACME_SUPER_ADMIN,
                &[("Idempotency-Key", key)],
                &cluster_body("acme", &format!("c{i}")),
            )
            .await;
        assert_eq!(a.status, 201, "{key}: {}", a.text());
    }
    let bad = [
        "k".repeat(7),
        "k".repeat(256),
        "abcdefg!".to_owned(),
        "abcd efgh".to_owned(),
        "abcdefgé".to_owned(),
        String::new(),
    ];
    for key in &bad {
        let a = app
            .raw(
                Method::POST,
                CLUSTERS,
                Some(TOKEN_ACME_SUPER_ADMIN),
                &[
                    ("Idempotency-Key", key.as_bytes()),
                    ("Content-Type", b"application/json"),
                ],
                Some(cluster_body("acme", "bad").to_string().into_bytes()),
            )
            .await;
        expect(&a, 400, "invalid_idempotency_key");
    }
    assert_eq!(app.count_rows("clusters"), 3);
    assert_eq!(app.count_rows("idempotency_keys"), 3);
}
