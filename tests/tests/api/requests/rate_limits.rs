//! Fair use: requests and writes per token per minute, 429 `rate_limited` with `Retry-After`
//! over a limit, the IETF `RateLimit-Policy`/`RateLimit` fields on every answer, the limits
//! shared by the processes behind one load balancer, and the requests that authenticate as no
//! one, counted per client address.

use reqwest::Method;
use serde_json::json;

use blackbox::*;

fn limits(per_token: &'static str, writes: &'static str) -> [(&'static str, &'static str); 2] {
    [
        ("RATE_LIMIT_PER_TOKEN", per_token),
        ("RATE_LIMIT_WRITES_PER_TOKEN", writes),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_over_its_quota_waits_and_is_told_how_long() {
    let app = TestApp::spawn_api_only(&limits("5", "0")).await;
    let mut left = Vec::new();
    for _ in 0..5 {
        let a = app.get(CLUSTERS, TOKEN_ACME_MEMBER).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(
            a.header("ratelimit-policy").as_deref(),
            Some("\"token\";q=5;w=60")
        );
        left.push(a.header("ratelimit").unwrap_or_default());
    }
    assert_eq!(left[0], "\"token\";r=4;t=12");
    assert!(left[4].starts_with("\"token\";r=0;"), "{left:?}");

    let refused = app.get(CLUSTERS, TOKEN_ACME_MEMBER).await;
    expect(&refused, 429, "rate_limited");
    assert_eq!(refused.header("retry-after").as_deref(), Some("12"));
    assert!(
        refused
            .header("ratelimit")
            .is_some_and(|v| v.starts_with("\"token\";r=0;"))
    );
    assert!(
        refused.header("x-request-id").is_some(),
        "refusals are traced like any answer"
    );

    // Another token has its own budget; health and the document are not limited.
    assert_eq!(app.get(CLUSTERS, TOKEN_ACME_SUPER_ADMIN).await.status, 200);
    let health = app.send(app.request(Method::GET, "/healthz", None)).await;
    assert_eq!((health.status, health.header("ratelimit")), (200, None));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_have_a_quota_of_their_own_and_a_long_poll_counts_once() {
    let app = TestApp::spawn_api_only(&limits("20", "2")).await;
    let c = app.create_cluster("budget").await;
    let path = format!("{CLUSTERS}/{}", id(&c));
    let second = app
        .patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"description": "a"}))
        .await;
    assert_eq!(second.status, 200);
    assert_eq!(
        second.header("ratelimit").as_deref(),
        Some("\"token\";r=18;t=6, \"token-writes\";r=0;t=60")
    );
    let third = app
        .patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"description": "b"}))
        .await;
    expect(&third, 429, "rate_limited");
    assert_eq!(third.header("retry-after").as_deref(), Some("30"));
    assert!(
        third
            .header("ratelimit")
            .is_some_and(|h| h.starts_with("\"token\";r=18;")),
        "the refusal took nothing from the other policy: {third:?}"
    );
    assert_eq!(
        app.get(&path, TOKEN_ACME_SUPER_ADMIN).await.json()["description"],
        "a",
        "the refused write did nothing"
    );

    // A long-poll held for a second counts as one request, like any read.
    let before = app
        .get(&path, TOKEN_ACME_SUPER_ADMIN)
        .await
        .header("ratelimit");
    let poll = app
        .get(
            &format!("{path}/state?since=999&timeout_seconds=1"),
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await;
    assert_eq!(poll.status, 200);
    assert!(before.is_some_and(|b| b.starts_with("\"token\";r=16;")));
    assert!(
        poll.header("ratelimit")
            .is_some_and(|h| h.starts_with("\"token\";r=15;")),
        "{poll:?}"
    );
}

/// Two processes behind one load balancer, each told there are two: together they allow the
/// quota, not twice it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_sharing_a_quota_allow_it_once_between_them() {
    let settings = [
        ("RATE_LIMIT_PER_TOKEN", "10"),
        ("RATE_LIMIT_WRITES_PER_TOKEN", "0"),
        ("RATE_LIMIT_REPLICAS", "2"),
    ];
    let app = TestApp::spawn_api_only(&settings).await;
    let other = app.second_server(&settings).await;
    let mut allowed = 0;
    for i in 0..20 {
        let base = if i % 2 == 0 { &app.url } else { &other.url };
        let a = app
            .send(
                app.client
                    .get(format!("{base}{CLUSTERS}"))
                    .bearer_auth(TOKEN_ACME_MEMBER),
            )
            .await;
        match a.status {
            200 => {
                allowed += 1;
                assert_eq!(
                    a.header("ratelimit-policy").as_deref(),
                    Some("\"token\";q=5;w=60")
                );
            }
            429 => assert_eq!(a.problem_code(), "rate_limited"),
            s => panic!("{s}: {}", a.text()),
        }
    }
    assert_eq!(allowed, 10);
}

/// An organization's writes, whoever makes them; only its own writers spend them (a member's
/// refused write or another organization's do not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_organizations_writes_are_shared_by_its_writers_and_spent_by_no_one_else() {
    let app = TestApp::spawn_api_only(&[("RATE_LIMIT_WRITES_PER_ORGANIZATION", "2")]).await;
    for _ in 0..3 {
        let refused = app
            .post(CLUSTERS, TOKEN_ACME_MEMBER, &cluster_body("acme", "nope"))
            .await;
        expect(&refused, 403, "forbidden");
    }
    app.create_cluster_as(TOKEN_ACME_SUPER_ADMIN, "acme", "one")
        .await;
    app.create_cluster_as(TOKEN_ACME_ASSISTANT, "acme", "two")
        .await;
    let third = app
        .post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body("acme", "three"),
        )
        .await;
    expect(&third, 429, "rate_limited");
    assert_eq!(third.header("retry-after").as_deref(), Some("30"));
    assert!(
        third.json()["detail"]
            .as_str()
            .is_some_and(|d| d.contains("organization"))
    );
    // Another organization's writer is not held back by acme's budget.
    app.create_cluster_as(TOKEN_TWO_ORGS, "globex", "elsewhere")
        .await;
    assert_eq!(app.count_rows("clusters"), 3);
}

/// Every spelling of one token that authentication reads as that token draws from one bucket:
/// a client cannot get a fresh quota by writing `bearer` or adding spaces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_spelling_of_a_token_shares_its_bucket() {
    let app = TestApp::spawn_api_only(&limits("4", "0")).await;
    let spellings = [
        format!("Bearer {TOKEN_ACME_MEMBER}"),
        format!("bearer {TOKEN_ACME_MEMBER}"),
        format!("BEARER    {TOKEN_ACME_MEMBER}"),
        format!("Bearer\t{TOKEN_ACME_MEMBER}  "),
        format!("  bEaReR {TOKEN_ACME_MEMBER}"),
    ];
    let mut statuses = Vec::new();
    for header in &spellings {
        let r = app
            .request(Method::GET, CLUSTERS, None)
            .header("Authorization", header);
        statuses.push(app.send(r).await.status);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 429]);
}

/// A flood of made-up tokens from one address: each costs an account-platform call until the
/// address has spent its quota of requests that authenticate as no one; then unknown tokens
/// are refused before the platform is asked. A token this process saw accepted still passes,
/// and another address is not held back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_tokens_are_counted_per_address_and_stop_reaching_the_platform() {
    let app = TestApp::spawn_api_only(&[
        ("RATE_LIMIT_UNAUTHENTICATED_PER_ADDRESS", "10"),
        ("TRUSTED_PROXIES", "127.0.0.1"),
    ])
    .await;
    let from = |address: &str, token: &str| {
        app.request(Method::GET, CLUSTERS, Some(token))
            .header("X-Forwarded-For", address)
    };
    // A working client behind the same address, seen before the flood.
    assert_eq!(
        app.send(from("198.51.100.7", TOKEN_ACME_MEMBER))
            .await
            .status,
        200
    );
    app.platform.reset_counters();

    let mut statuses = Vec::new();
    for i in 0..30 {
        let guess = format!("made-up-token-{i:04}-0123456789abcdef");
        statuses.push(app.send(from("198.51.100.7", &guess)).await.status);
    }
    assert_eq!(statuses[..10], [401; 10]);
    assert_eq!(statuses[10..], [429; 20]);
    assert_eq!(
        app.platform.me_calls(),
        10,
        "one call per refused token, none after"
    );

    let refused = app
        .send(from("198.51.100.7", "made-up-token-last-0123456789abcdef"))
        .await;
    expect(&refused, 429, "rate_limited");
    assert!(refused.header("retry-after").is_some());
    assert!(
        refused.json()["detail"]
            .as_str()
            .is_some_and(|d| d.contains("address"))
    );
    assert_eq!(
        refused.header("ratelimit-policy").as_deref(),
        Some("\"address\";q=10;w=60")
    );

    // Requests without any token from that address are refused the same way.
    let bare = app.send(
        app.request(Method::GET, CLUSTERS, None)
            .header("X-Forwarded-For", "198.51.100.7"),
    );
    expect(&bare.await, 429, "rate_limited");
    // The working client's token passes; a client at another address is not held back.
    assert_eq!(
        app.send(from("198.51.100.7", TOKEN_ACME_MEMBER))
            .await
            .status,
        200
    );
    assert_eq!(
        app.send(from("203.0.113.9", TOKEN_ACME_SUPER_ADMIN))
            .await
            .status,
        200
    );
    let elsewhere = app.send(from("203.0.113.9", "made-up-token-other-0123456789abcdef"));
    assert_eq!(elsewhere.await.status, 401);
}

/// The client address is the TCP peer unless the peer is a trusted proxy: without
/// `TRUSTED_PROXIES`, a client cannot spread its guesses over addresses it makes up; an IPv6
/// client is counted by its /64 behind a trusted proxy too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn made_up_forwarding_headers_buy_no_fresh_quota() {
    let untrusted =
        TestApp::spawn_api_only(&[("RATE_LIMIT_UNAUTHENTICATED_PER_ADDRESS", "3")]).await;
    let mut statuses = Vec::new();
    for i in 0..5 {
        let r = untrusted
            .request(Method::GET, CLUSTERS, None)
            .header("X-Forwarded-For", format!("192.0.2.{i}"));
        statuses.push(untrusted.send(r).await.status);
    }
    assert_eq!(statuses, [401, 401, 401, 429, 429]);

    let trusted = TestApp::spawn_api_only(&[
        ("RATE_LIMIT_UNAUTHENTICATED_PER_ADDRESS", "3"),
        ("TRUSTED_PROXIES", "127.0.0.1/32, ::1"),
    ])
    .await;
    let mut statuses = Vec::new();
    for i in 0..5 {
        let r = trusted
            .request(Method::GET, CLUSTERS, None)
            .header("X-Forwarded-For", format!("2001:db8:7:7:{i}::1"));
        statuses.push(trusted.send(r).await.status);
    }
    assert_eq!(statuses, [401, 401, 401, 429, 429], "one /64, one client");
    let other = trusted
        .request(Method::GET, CLUSTERS, None)
        .header("X-Forwarded-For", "2001:db8:7:8::1");
    assert_eq!(trusted.send(other).await.status, 401);
}
