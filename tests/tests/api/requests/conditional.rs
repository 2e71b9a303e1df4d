//! Conditional requests: every object answer's `ETag`, `If-None-Match` on reads (304) and
//! `If-Match` on writes (412 `precondition_failed`, nothing changed), so two tools editing one
//! object cannot silently overwrite each other.

use reqwest::Method;
use serde_json::{Value, json};

use blackbox::*;

/// `method path` with `If-Match: tag` (and a JSON body when given).
async fn if_match(
    app: &TestApp,
    method: Method,
    path: &str,
    tag: &str,
    body: Option<&Value>,
) -> Answer {
    let mut r = app
        .request(method, path, Some(TOKEN_ACME_SUPER_ADMIN))
        .header("If-Match", tag);
    if let Some(b) = body {
        r = r.json(b);
    }
    app.send(r).await
}

fn etag(a: &Answer) -> String {
    a.header("etag").unwrap_or_else(|| panic!("no ETag: {a:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_answers_304_while_the_object_is_unchanged() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("tagged").await;
    let path = format!("{CLUSTERS}/{}", id(&c));
    let first = app.get(&path, TOKEN_ACME_MEMBER).await;
    let tag = etag(&first);
    assert!(tag.starts_with('"') && tag.ends_with('"'), "{tag}");
    assert_eq!(
        etag(&app.get(&path, TOKEN_ACME_MEMBER).await),
        tag,
        "same object, same tag"
    );

    let cached = app
        .send(
            app.request(Method::GET, &path, Some(TOKEN_ACME_MEMBER))
                .header("If-None-Match", format!("\"other\", W/{tag}")),
        )
        .await;
    assert_eq!((cached.status, cached.body.len()), (304, 0), "{cached:?}");
    assert_eq!(etag(&cached), tag);

    let changed = app
        .patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": "new"}),
        )
        .await;
    assert_ne!(etag(&changed), tag);
    let fresh = app
        .send(
            app.request(Method::GET, &path, Some(TOKEN_ACME_MEMBER))
                .header("If-None-Match", tag.as_str()),
        )
        .await;
    assert_eq!(fresh.status, 200);
    assert_eq!(
        etag(&fresh),
        etag(&changed),
        "the write's answer has the tag a read has"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_on_what_someone_else_changed_is_412_and_changes_nothing() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("shared").await;
    let path = format!("{CLUSTERS}/{}", id(&c));
    let seen = etag(&app.get(&path, TOKEN_ACME_MEMBER).await);

    // Tool A changes the cluster as it saw it; tool B, which saw the same version, is refused.
    let a = if_match(
        &app,
        Method::PATCH,
        &path,
        &seen,
        Some(&json!({"description": "by A"})),
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let b = if_match(
        &app,
        Method::PATCH,
        &path,
        &seen,
        Some(&json!({"description": "by B"})),
    )
    .await;
    expect(&b, 412, "precondition_failed");
    let now = app.get(&path, TOKEN_ACME_MEMBER).await;
    assert_eq!(now.json()["description"], "by A");
    for refused in [
        format!("W/{}", etag(&now)),
        "garbage".to_owned(),
        "\"\"".to_owned(),
    ] {
        let r = if_match(
            &app,
            Method::PATCH,
            &path,
            &refused,
            Some(&json!({"description": "x"})),
        )
        .await;
        expect(&r, 412, "precondition_failed");
    }
    let exposure = if_match(
        &app,
        Method::PATCH,
        &format!("{path}/exposure"),
        &seen,
        Some(&json!({"exposure": "private"})),
    )
    .await;
    expect(&exposure, 412, "precondition_failed");
    expect(
        &if_match(&app, Method::DELETE, &path, &seen, None).await,
        412,
        "precondition_failed",
    );
    assert_eq!(
        app.get(&path, TOKEN_ACME_MEMBER).await.json()["phase"],
        "Pending"
    );

    // B reads again and decides again; `*` means "whatever it is now".
    let b = if_match(
        &app,
        Method::PATCH,
        &path,
        &etag(&now),
        Some(&json!({"description": "by B"})),
    )
    .await;
    assert_eq!(
        (b.status, b.json()["description"].as_str()),
        (200, Some("by B"))
    );
    let any = if_match(&app, Method::DELETE, &path, "*", None).await;
    assert_eq!(any.status, 202, "{}", any.text());
}

/// Eight writers that all read the same version race: exactly one wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_racing_conditional_writes_exactly_one_wins() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("raced").await;
    let path = format!("{CLUSTERS}/{}", id(&c));
    let seen = etag(&app.get(&path, TOKEN_ACME_MEMBER).await);
    let writers = (0..8).map(|i| {
        let (app, path, seen) = (&app, &path, &seen);
        async move {
            if_match(
                app,
                Method::PATCH,
                path,
                seen,
                Some(&json!({"description": format!("writer {i}")})),
            )
            .await
        }
    });
    let answers = futures::future::join_all(writers).await;
    let winners: Vec<&Answer> = answers.iter().filter(|a| a.status == 200).collect();
    assert_eq!(
        winners.len(),
        1,
        "{:?}",
        answers.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    assert!(answers.iter().all(|a| a.status == 200 || a.status == 412));
    let stored = app.get(&path, TOKEN_ACME_MEMBER).await.json();
    assert_eq!(stored["description"], winners[0].json()["description"]);
}

/// Pools, Elastic IPs, firewall rules and auth servers: a tag from one version does not
/// change the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_object_under_a_cluster_and_every_auth_server_takes_if_match() {
    let app = TestApp::spawn().await;
    let c = app.create_cluster("objects").await;
    let path = format!("{CLUSTERS}/{}", id(&c));
    app.wait_for(&path, std::time::Duration::from_secs(30), |c| {
        c["phase"] == "Provisioned"
    })
    .await;

    let pool = app
        .post(
            &format!("{path}/node-pools"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "batch", "size": "kube.c5.large", "count": 1}),
        )
        .await;
    let pool_path = format!("{path}/node-pools/batch");
    let first = etag(&pool);
    let scaled = if_match(
        &app,
        Method::PATCH,
        &pool_path,
        &first,
        Some(&json!({"count": 2})),
    )
    .await;
    assert_eq!(scaled.status, 202, "{}", scaled.text());
    expect(
        &if_match(
            &app,
            Method::PATCH,
            &pool_path,
            &first,
            Some(&json!({"count": 3})),
        )
        .await,
        412,
        "precondition_failed",
    );
    expect(
        &if_match(&app, Method::DELETE, &pool_path, &first, None).await,
        412,
        "precondition_failed",
    );

    let eip = app
        .post(
            &format!("{path}/elastic-ips"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "web"}),
        )
        .await;
    let eip_path = format!("{path}/elastic-ips/{}", id(&eip.json()));
    let ready = app
        .wait_for(&eip_path, std::time::Duration::from_secs(30), |e| {
            e["status"] == "Ready"
        })
        .await;
    expect(
        &if_match(&app, Method::DELETE, &eip_path, &etag(&eip), None).await,
        412,
        "precondition_failed",
    );
    let current = etag(&app.get(&eip_path, TOKEN_ACME_MEMBER).await);
    assert_eq!(
        if_match(&app, Method::DELETE, &eip_path, &current, None)
            .await
            .status,
        202,
        "{ready}"
    );

    let rule_body = json!({"protocol": "tcp", "source_cidrs": ["10.0.0.0/8"], "port_range": {"from": 443, "to": 443}});
    let rule = app
        .post(
            &format!("{path}/firewall-rules"),
            TOKEN_ACME_SUPER_ADMIN,
            &rule_body,
        )
        .await;
    let rule_path = format!("{path}/firewall-rules/{}", id(&rule.json()));
    app.wait_for(&rule_path, std::time::Duration::from_secs(30), |r| {
        r["status"] == "Active"
    })
    .await;
    expect(
        &if_match(&app, Method::DELETE, &rule_path, &etag(&rule), None).await,
        412,
        "precondition_failed",
    );
    assert_eq!(
        app.get(&rule_path, TOKEN_ACME_MEMBER).await.json()["status"],
        "Active"
    );

    let server = app.post(AUTH_SERVERS, TOKEN_ACME_SUPER_ADMIN, &json!({"organization": "acme", "name": "keys", "environment": "production", "type": "token", "config": {"tokens": ["conditional-token-0123456789"]}})).await;
    let server_path = format!("{AUTH_SERVERS}/{}", id(&server.json()));
    let renamed = if_match(
        &app,
        Method::PATCH,
        &server_path,
        &etag(&server),
        Some(&json!({"name": "keys-2"})),
    )
    .await;
    assert_eq!(renamed.status, 200, "{}", renamed.text());
    expect(
        &if_match(
            &app,
            Method::PATCH,
            &server_path,
            &etag(&server),
            Some(&json!({"name": "keys-3"})),
        )
        .await,
        412,
        "precondition_failed",
    );
    expect(
        &if_match(&app, Method::DELETE, &server_path, &etag(&server), None).await,
        412,
        "precondition_failed",
    );
    assert_eq!(
        app.get(&server_path, TOKEN_ACME_MEMBER).await.json()["name"],
        "keys-2"
    );
    assert_eq!(
        if_match(&app, Method::DELETE, &server_path, &etag(&renamed), None)
            .await
            .status,
        204
    );
}
