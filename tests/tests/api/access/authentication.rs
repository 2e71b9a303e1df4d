//! Authentication and the account platform.

use blackbox::*;
use platform_stub::Fault;
use reqwest::Method;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_four_401_texts_with_www_authenticate() {
    let app = TestApp::spawn().await;
    let cases: [(Option<&str>, &str); 5] = [
        (None, "Authorization header missing"),
        (Some("Basic dXNlcjpwYXNz"), "scheme must be Bearer"),
        (Some("Bearer"), "Bearer token is empty"),
        (Some("Bearer    "), "Bearer token is empty"),
        (Some("Bearer not-a-known-token"), "invalid bearer token"),
    ];
    for (header, text) in cases {
        let mut r = app.request(Method::GET, "/v1/public/clusters?organization=acme", None);
        if let Some(h) = header {
            r = r.header("Authorization", h);
        }
        let a = app.send(r).await;
        assert_eq!(a.status, 401, "{header:?}");
        assert_eq!(a.problem_code(), "unauthorized");
        assert_eq!(a.json()["detail"], text, "{header:?}");
        assert_eq!(a.header("www-authenticate").as_deref(), Some("Bearer"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn platform_failures_are_502_and_change_nothing() {
    let app = TestApp::spawn_with(&[
        ("ACCOUNT_PLATFORM_TIMEOUT_MS", "300"),
        ("TOKEN_CACHE_TTL_S", "0"),
    ])
    .await;
    for fault in [Fault::Status500, Fault::Garbage, Fault::Hang] {
        app.platform.set_fault(fault);
        let body = serde_json::json!({"organization": "acme", "name": "x1", "node_pools": [{"size": "kube.c5.large", "count": 1}]});
        let a = app
            .post("/v1/public/clusters", TOKEN_ACME_SUPER_ADMIN, &body)
            .await;
        assert_eq!(a.status, 502, "{fault:?}: {}", a.text());
        assert_eq!(a.problem_code(), "auth_backend_unavailable");
        assert!(!a.text().contains(TOKEN_ACME_SUPER_ADMIN));
    }
    assert_eq!(app.count_rows("clusters"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn platform_refusing_connections_is_502() {
    let TestApp {
        url,
        platform,
        db,
        client,
        ..
    } = TestApp::spawn_with(&[("TOKEN_CACHE_TTL_S", "0")]).await;
    platform.stop();
    let app_url = url.clone();
    let a = client
        .get(format!("{app_url}/v1/catalog?organization=acme"))
        .bearer_auth(TOKEN_ACME_MEMBER)
        .send()
        .await
        .unwrap();
    assert_eq!(a.status().as_u16(), 502);
    drop(db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hundred_requests_with_one_token_make_one_platform_call() {
    let app = TestApp::spawn().await;
    app.platform.reset_counters();
    for _ in 0..100 {
        let a = app
            .get("/v1/catalog?organization=acme", TOKEN_ACME_MEMBER)
            .await;
        assert_eq!(a.status, 200);
    }
    assert_eq!(app.platform.me_calls(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_token_cache_off_every_request_asks_the_platform() {
    let app = TestApp::spawn_with(&[("TOKEN_CACHE_TTL_S", "0")]).await;
    app.platform.reset_counters();
    for _ in 0..100 {
        assert_eq!(
            app.get("/v1/catalog?organization=acme", TOKEN_ACME_MEMBER)
                .await
                .status,
            200
        );
    }
    assert_eq!(app.platform.me_calls(), 100);
}

/// A token the platform refused is refused again without asking for a few seconds
/// (`TOKEN_REFUSAL_CACHE_TTL_S`), so a client retrying a bad token in a loop costs the platform
/// one call, not one per request; with the token cache off, every request asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_is_remembered_briefly() {
    for (settings, calls) in [
        (vec![], 1),
        (vec![("TOKEN_REFUSAL_CACHE_TTL_S", "0")], 50),
        (vec![("TOKEN_CACHE_TTL_S", "0")], 50),
    ] {
        let app = TestApp::spawn_with(&settings).await;
        app.platform.reset_counters();
        for _ in 0..50 {
            let a = app
                .get("/v1/catalog?organization=acme", "no-such-token-0123456789")
                .await;
            assert_eq!(a.json()["detail"], "invalid bearer token");
        }
        assert_eq!(app.platform.me_calls(), calls, "{settings:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn organization_resolution_query_then_header_then_preferred() {
    let app = TestApp::spawn().await;
    // dave: super_admin of globex, member of acme, prefers globex.
    let list = |q: &'static str, h: Option<&'static str>| {
        let mut r = app.request(Method::GET, q, Some(TOKEN_TWO_ORGS));
        if let Some(h) = h {
            r = r.header("X-Platform-Organization", h);
        }
        r
    };
    // Create one cluster in each organization to tell the lists apart.
    let mk = |org: &str, name: &str| serde_json::json!({"organization": org, "name": name, "node_pools": [{"size": "kube.c5.large", "count": 1}]});
    assert_eq!(
        app.post(
            "/v1/public/clusters",
            TOKEN_ACME_SUPER_ADMIN,
            &mk("acme", "in-acme")
        )
        .await
        .status,
        201
    );
    assert_eq!(
        app.post(
            "/v1/public/clusters",
            TOKEN_TWO_ORGS,
            &mk("globex", "in-globex")
        )
        .await
        .status,
        201
    );
    let names = |a: &Answer| {
        a.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let a = app
        .send(list(
            "/v1/public/clusters?organization=acme",
            Some("globex"),
        ))
        .await;
    assert_eq!(names(&a), ["in-acme"], "query wins over header");
    let a = app.send(list("/v1/public/clusters", Some("acme"))).await;
    assert_eq!(names(&a), ["in-acme"], "header wins over preferred");
    let a = app.send(list("/v1/public/clusters", None)).await;
    assert_eq!(names(&a), ["in-globex"], "preferred when nothing else");
    let a = app
        .send(list(
            Box::leak(format!("/v1/public/clusters?organization={ACME_ID}").into_boxed_str()),
            None,
        ))
        .await;
    assert_eq!(names(&a), ["in-acme"], "by id (UUID rule)");
    // carol has no preferred organization.
    let a = app
        .get("/v1/public/clusters", TOKEN_ACME_PROJECT_ADMIN)
        .await;
    assert_eq!(
        (a.status, a.problem_code().as_str()),
        (400, "organization_required")
    );
    let a = app
        .get("/v1/public/clusters?organization=nosuch", TOKEN_ACME_MEMBER)
        .await;
    assert_eq!((a.status, a.problem_code().as_str()), (404, "not_found"));
    let a = app
        .get(
            "/v1/public/clusters?organization=initech",
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!((a.status, a.problem_code().as_str()), (403, "forbidden"));
}
