//! The audit trail: every change that took effect, by the API or the console, recorded in
//! the change's own transaction with who made it, what it changed (never a secret), and the
//! request; read back per organization, filtered, a page at a time.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use blackbox::console::Browser;
use blackbox::*;

const AUDIT: &str = "/v1/public/audit-events";

/// One page of the trail as `token` reads it with this query string.
async fn trail(app: &TestApp, token: &str, query: &str) -> Value {
    let a = app.get(&format!("{AUDIT}?{query}"), token).await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()
}

/// `(resource, action)` of each event of a page, newest first.
fn actions(page: &Value) -> Vec<(String, String)> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["resource"].as_str().unwrap().to_owned(),
                e["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(r, a)| ((*r).to_owned(), (*a).to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_change_is_recorded_with_who_made_it_what_changed_and_the_request() {
    let app = TestApp::spawn_api_only(&[]).await;
    let created = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &[("X-Request-Id", "create-web-1")],
            &cluster_body("acme", "web-1"),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let cluster = id(&created.json());
    let path = format!("{CLUSTERS}/{cluster}");
    let patched = app
        .patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": "shop"}),
        )
        .await;
    assert_eq!(patched.status, 200);
    let pool = app
        .post(
            &format!("{path}/node-pools"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "extra", "size": "kube.c5.large", "count": 1}),
        )
        .await;
    assert_eq!(pool.status, 202, "{}", pool.text());
    let scaled = app
        .patch(
            &format!("{path}/node-pools/extra"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"count": 3}),
        )
        .await;
    assert_eq!(scaled.status, 202, "{}", scaled.text());
    let secret = "audit-token-0123456789abcdef";
    let server = app
        .post(
            AUTH_SERVERS,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"organization": "acme", "name": "ci", "environment": "prod",
                    "type": "token", "config": {"tokens": [secret]}}),
        )
        .await;
    assert_eq!(server.status, 201, "{}", server.text());

    // A member reads it all, newest first.
    let page = trail(&app, TOKEN_ACME_MEMBER, "").await;
    assert_eq!(
        actions(&page),
        pairs(&[
            ("auth_server", "created"),
            ("node_pool", "updated"),
            ("node_pool", "created"),
            ("cluster", "updated"),
            ("cluster", "created"),
        ])
    );
    assert!(!page.to_string().contains(secret), "{page}");
    let items = page["items"].as_array().unwrap();
    let create = &items[4];
    assert_eq!(
        create["actor"],
        json!({"user_id": "alice", "email": "alice@example.com", "client": "api"})
    );
    assert_eq!(
        (&create["via"], &create["outcome"], &create["request_id"]),
        (&json!("api"), &json!("accepted"), &json!("create-web-1"))
    );
    assert_eq!(
        (&create["resource_id"], &create["cluster_id"]),
        (&json!(cluster), &json!(cluster))
    );
    assert_eq!(create["changes"]["name"], "web-1");
    assert_eq!(create["organization_id"], json!(ACME_ID));
    let patch = &items[3];
    assert_eq!(
        patch["outcome"], "applied",
        "a description needs no provisioning"
    );
    assert_eq!(patch["changes"], json!({"description": "shop"}));
    assert_eq!(
        patch["request_id"],
        json!(patched.header("x-request-id").unwrap())
    );
    assert_eq!(
        items[1]["changes"],
        json!({"count": {"from": 1, "to": 3}}),
        "{}",
        items[1]
    );
    assert_eq!(items[1]["resource_id"], json!(format!("{cluster}/extra")));
    assert_eq!(items[0]["auth_server_id"], json!(id(&server.json())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_or_lost_change_records_nothing() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cluster = app.create_cluster("web-1").await;
    let path = format!("{CLUSTERS}/{}", id(&cluster));
    let before = app.count_rows("audit_events");
    let tag = app
        .get(&path, TOKEN_ACME_MEMBER)
        .await
        .header("etag")
        .unwrap();
    app.patch(
        &path,
        TOKEN_ACME_SUPER_ADMIN,
        &json!({"description": "first"}),
    )
    .await;
    let after_one = app.count_rows("audit_events");
    assert_eq!(after_one, before + 1);
    let refused = [
        app.delete(&path, TOKEN_ACME_MEMBER).await,
        app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"description": 7}))
            .await,
        app.send(
            app.request(Method::PATCH, &path, Some(TOKEN_ACME_SUPER_ADMIN))
                .header("If-Match", tag)
                .json(&json!({"description": "stale"})),
        )
        .await,
        app.post(
            &format!("{path}/node-pools"),
            TOKEN_INITECH_SUPER_ADMIN,
            &json!({"name": "x", "size": "kube.c5.large", "count": 1}),
        )
        .await,
    ];
    let statuses: Vec<u16> = refused.iter().map(|a| a.status).collect();
    assert_eq!(statuses, [403, 422, 412, 403]);
    assert_eq!(app.count_rows("audit_events"), after_one);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filters_narrow_the_trail_and_a_cursor_walks_it_without_gaps_or_repeats() {
    let app = TestApp::spawn_api_only(&[]).await;
    let a = id(&app.create_cluster("a").await);
    let b = id(&app.create_cluster("b").await);
    for n in 0..4 {
        app.patch(
            &format!("{CLUSTERS}/{a}"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": format!("v{n}")}),
        )
        .await;
    }
    app.post(
        &format!("{CLUSTERS}/{b}/node-pools"),
        TOKEN_ACME_SUPER_ADMIN,
        &json!({"name": "extra", "size": "kube.c5.large", "count": 1}),
    )
    .await;

    let count = |page: &Value| page["items"].as_array().unwrap().len();
    let cases: [(String, usize); 6] = [
        (format!("cluster_id={a}"), 5),
        (format!("cluster_id={b}"), 2),
        ("resource=node_pool".into(), 1),
        (format!("resource=cluster&resource_id={b}"), 1),
        ("actor=alice".into(), 7),
        ("actor=bob".into(), 0),
    ];
    for (query, expected) in cases {
        assert_eq!(
            count(&trail(&app, TOKEN_ACME_MEMBER, &query).await),
            expected,
            "{query}"
        );
    }
    let all = trail(&app, TOKEN_ACME_MEMBER, "").await;
    let newest = all["items"][0]["at"].as_str().unwrap().to_owned();
    let until = trail(
        &app,
        TOKEN_ACME_MEMBER,
        &format!("until={}", newest.replace('+', "%2B")),
    )
    .await;
    assert_eq!(count(&until), 6, "until is exclusive");
    let since = trail(
        &app,
        TOKEN_ACME_MEMBER,
        &format!("since={}", newest.replace('+', "%2B")),
    )
    .await;
    assert_eq!(count(&since), 1, "since is inclusive");

    // Pages of two: every event once, in the order of the whole trail.
    let (mut seen, mut cursor, mut pages) = (Vec::new(), None::<String>, 0);
    loop {
        let query = match &cursor {
            Some(c) => format!("limit=2&cursor={}", c.replace('+', "%2B")),
            None => "limit=2".into(),
        };
        let page = trail(&app, TOKEN_ACME_MEMBER, &query).await;
        pages += 1;
        seen.extend(page["items"].as_array().unwrap().iter().map(id));
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    let whole: Vec<String> = all["items"].as_array().unwrap().iter().map(id).collect();
    assert_eq!((seen, pages), (whole, 4));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_filter_is_400_naming_it() {
    let app = TestApp::spawn_api_only(&[]).await;
    let long = "a".repeat(300);
    let cases = [
        ("resource=clusters", "resource"),
        ("cluster_id=42", "cluster_id"),
        ("since=yesterday", "since"),
        ("until=2026-13-01T00:00:00Z", "until"),
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("cursor=not-ours", "cursor"),
        ("cursor=2026-11-26T00:00:00Z~x", "cursor"),
        (&*format!("actor={long}"), "actor"),
        ("resource_id=", "resource_id"),
    ];
    for (query, parameter) in cases {
        let a = app
            .get(&format!("{AUDIT}?{query}"), TOKEN_ACME_MEMBER)
            .await;
        expect(&a, 400, "invalid_query");
        assert!(a.text().contains(parameter), "{query}: {}", a.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_organization_reads_its_own_trail_only() {
    let app = TestApp::spawn_api_only(&[]).await;
    app.create_cluster("acme-1").await;
    app.create_cluster_as(TOKEN_TWO_ORGS, "globex", "globex-1")
        .await;
    // dave is super_admin of globex and member of acme: each trail holds its own.
    let acme = trail(&app, TOKEN_TWO_ORGS, "organization=acme").await;
    let globex = trail(&app, TOKEN_TWO_ORGS, "").await;
    assert_eq!(acme["items"][0]["changes"]["name"], "acme-1");
    assert_eq!(globex["items"][0]["changes"]["name"], "globex-1");
    assert_eq!(
        (
            acme["items"].as_array().unwrap().len(),
            globex["items"].as_array().unwrap().len()
        ),
        (1, 1)
    );
    let outsider = app
        .get(
            &format!("{AUDIT}?organization=acme"),
            TOKEN_INITECH_SUPER_ADMIN,
        )
        .await;
    expect(&outsider, 403, "forbidden");
    let anonymous = app.send(app.request(Method::GET, AUDIT, None)).await;
    assert_eq!(anonymous.status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_and_the_gateways_management_are_recorded_as_what_they_are() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cluster = app.create_cluster("web-1").await;
    let mut admin = Browser::signed_in(&app, TOKEN_ACME_SUPER_ADMIN).await;
    let csrf = admin.csrf().await;
    let done = admin
        .post(
            &format!("/console/clusters/{}/delete", id(&cluster)),
            &[("csrf", &csrf), ("confirm", "web-1")],
            &[],
        )
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    let server = app
        .post(
            AUTH_SERVERS,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"organization": "acme", "name": "sso", "environment": "prod",
                    "type": "basic", "config": {"credentials": [{"username": "u", "password": "correct-horse-battery"}]}}),
        )
        .await;
    assert_eq!(server.status, 201, "{}", server.text());
    let server = id(&server.json());
    let credentials = format!("{AUTH_SERVERS}/{server}/credentials");
    let added = app
        .post(
            &credentials,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"username": "v", "password": "another-long-password"}),
        )
        .await;
    assert_eq!(added.status, 201, "{}", added.text());
    let page = trail(&app, TOKEN_ACME_MEMBER, "").await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(
        actions(&page)[..3],
        pairs(&[
            ("credential", "created"),
            ("auth_server", "created"),
            ("cluster", "deletion_started"),
        ])
    );
    assert_eq!(
        (&items[2]["via"], &items[2]["outcome"]),
        (&json!("console"), &json!("accepted"))
    );
    assert!(
        items[2]["request_id"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "a console change names its request too: {}",
        items[2]
    );
    assert_eq!(items[0]["resource_id"], json!(id(&added.json())));
    assert_eq!(items[0]["auth_server_id"], json!(server));
    assert_eq!(items[0]["changes"], json!({"username": "v"}));
    let text = page.to_string();
    for secret in ["correct-horse-battery", "another-long-password"] {
        assert!(!text.contains(secret));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_older_than_the_retention_are_purged() {
    let app = TestApp::spawn_api_only(&[]).await;
    app.create_cluster("old").await;
    app.create_cluster("new").await;
    let aged = app.texts(
        "UPDATE audit_events SET at = now() - interval '3 days' \
         WHERE details->>'name' = 'old' RETURNING id::text AS v",
    );
    assert_eq!(aged.len(), 1);
    // A process keeping two days purges at start, then hourly.
    let _second = app.second_server(&[("AUDIT_RETENTION_DAYS", "2")]).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while app.count_rows("audit_events") != 1 {
        assert!(Instant::now() < deadline, "the old event was never purged");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left = trail(&app, TOKEN_ACME_MEMBER, "").await;
    assert_eq!(left["items"][0]["changes"]["name"], "new");
    let ids: HashSet<String> = left["items"].as_array().unwrap().iter().map(id).collect();
    assert!(!ids.contains(&aged[0]));
}
