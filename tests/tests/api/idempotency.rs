//! Idempotency-Key: byte-identical replays, one resource
//! under concurrency, 4xx answers stored too, scoped to the organization.

use blackbox::*;
use serde_json::json;

const KEY: (&str, &str) = ("Idempotency-Key", "idem-key-0001");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_same_body_replays_byte_for_byte_even_after_a_change() {
    let app = TestApp::spawn_api_only(&[]).await;
    let body = cluster_body("acme", "c1");
    let first = app
        .post_with(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &[KEY], &body)
        .await;
    assert_eq!(first.status, 201, "{}", first.text());
    let location = first.header("location").unwrap();
    // The object changes.
    let p = app
        .patch(
            &location,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": "changed"}),
        )
        .await;
    assert_eq!(p.status, 200);
    let replay = app
        .post_with(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &[KEY], &body)
        .await;
    assert_eq!(replay.status, 201);
    assert_eq!(
        replay.header("location").as_deref(),
        Some(location.as_str())
    );
    assert_eq!(replay.header("content-type"), first.header("content-type"));
    assert_eq!(replay.body, first.body, "byte-identical");
    assert_eq!(replay.header("idempotency-replay").as_deref(), Some("true"));
    assert_eq!(first.header("idempotency-replay"), None);
    // Key order and whitespace do not make another body.
    let reordered = serde_json::to_vec_pretty(
        &json!({"node_pools": body["node_pools"], "name": "c1", "organization": "acme"}),
    )
    .unwrap();
    let a = app
        .raw(
            reqwest::Method::POST,
            CLUSTERS,
            Some(TOKEN_ACME_SUPER_ADMIN),
            &[
                (KEY.0, KEY.1.as_bytes()),
                ("Content-Type", b"application/json"),
            ],
            Some(reordered),
        )
        .await;
    assert_eq!(
        (a.status, a.body.clone()),
        (201, first.body.clone()),
        "{}",
        a.text()
    );
    assert_eq!(app.count_rows("clusters"), 1);
    // Replays of DELETE and of a pool PATCH too.
    let del_key = [("Idempotency-Key", "delete-key-01")];
    let mut r = app.request(
        reqwest::Method::DELETE,
        &location,
        Some(TOKEN_ACME_SUPER_ADMIN),
    );
    r = r.header(del_key[0].0, del_key[0].1);
    let d1 = app.send(r).await;
    assert_eq!(d1.status, 202, "{}", d1.text());
    let d2 = app
        .send(
            app.request(
                reqwest::Method::DELETE,
                &location,
                Some(TOKEN_ACME_SUPER_ADMIN),
            )
            .header(del_key[0].0, del_key[0].1),
        )
        .await;
    assert_eq!(
        (d2.status, d2.body.clone(), d2.header("idempotency-replay")),
        (202, d1.body.clone(), Some("true".into()))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_patch_honours_the_key() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let pool = format!(
        "{CLUSTERS}/{}/node-pools/default",
        c["id"].as_str().unwrap()
    );
    let send = || {
        app.request(reqwest::Method::PATCH, &pool, Some(TOKEN_ACME_SUPER_ADMIN))
            .header(KEY.0, KEY.1)
            .json(&json!({"count": 4}))
    };
    let a = app.send(send()).await;
    assert_eq!(a.status, 202, "{}", a.text());
    let b = app.send(send()).await;
    assert_eq!(
        (b.status, b.body.clone(), b.header("idempotency-replay")),
        (202, a.body.clone(), Some("true".into()))
    );
    let other = app
        .request(reqwest::Method::PATCH, &pool, Some(TOKEN_ACME_SUPER_ADMIN))
        .header(KEY.0, KEY.1)
        .json(&json!({"count": 5}));
    expect(&app.send(other).await, 409, "idempotency_key_reused");
    // The same key on another route is a reuse too.
    expect(
        &app.post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &[KEY],
            &cluster_body("acme", "c2"),
        )
        .await,
        409,
        "idempotency_key_reused",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_creates_with_one_key_make_one_cluster() {
    let app = TestApp::spawn_api_only(&[]).await;
    let body = cluster_body("acme", "race");
    let futures = (0..50).map(|_| app.post_with(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &[KEY], &body));
    let answers = futures::future::join_all(futures).await;
    assert_eq!(app.count_rows("clusters"), 1);
    let created: Vec<&Answer> = answers.iter().filter(|a| a.status == 201).collect();
    assert!(!created.is_empty());
    let fresh: Vec<&&Answer> = created
        .iter()
        .filter(|a| a.header("idempotency-replay").is_none())
        .collect();
    assert_eq!(fresh.len(), 1, "exactly one fresh 201");
    for a in &answers {
        match a.status {
            201 => assert_eq!(a.body, fresh[0].body),
            409 => assert_eq!(a.problem_code(), "idempotency_key_in_progress"),
            s => panic!("unexpected {s}: {}", a.text()),
        }
    }
    // Once settled, every retry is the replay.
    let a = app
        .post_with(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &[KEY], &body)
        .await;
    assert_eq!((a.status, &a.body), (201, &fresh[0].body));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4xx_answer_is_stored_and_replayed() {
    let app = TestApp::spawn_api_only(&[]).await;
    let body = cluster_body("initech", "c1");
    let first = app
        .post_with(CLUSTERS, TOKEN_INITECH_SUPER_ADMIN, &[KEY], &body)
        .await;
    expect(&first, 402, "insufficient_credit");
    let again = app
        .post_with(CLUSTERS, TOKEN_INITECH_SUPER_ADMIN, &[KEY], &body)
        .await;
    assert_eq!((again.status, &again.body), (402, &first.body));
    assert_eq!(again.header("idempotency-replay").as_deref(), Some("true"));
    assert_eq!(again.problem_code(), "insufficient_credit");
    // A 400 from the catalog is stored the same way.
    let mut zone = cluster_body("acme", "c1");
    zone["zone"] = json!("zone-9");
    let k2 = [("Idempotency-Key", "zone-key-0001")];
    let a = app
        .post_with(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &k2, &zone)
        .await;
    expect(&a, 400, "unknown_zone");
    let b = app
        .post_with(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &k2, &zone)
        .await;
    assert_eq!(
        (b.status, &b.body, b.header("idempotency-replay")),
        (400, &a.body, Some("true".into()))
    );
    assert_eq!(app.count_rows("clusters"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_every_call_is_new() {
    let app = TestApp::spawn_api_only(&[]).await;
    let pools =
        |c: &serde_json::Value| format!("{CLUSTERS}/{}/node-pools", c["id"].as_str().unwrap());
    let c = app.create_cluster("c1").await;
    // Two creates without a key: the second is a new request (a name conflict proves it ran).
    expect(
        &app.post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body("acme", "c1"),
        )
        .await,
        409,
        "name_conflict",
    );
    app.create_cluster("c2").await;
    assert_eq!(app.count_rows("clusters"), 2);
    assert_eq!(
        app.post(
            &pools(&c),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "p1", "size": "kube.c5.large", "count": 1})
        )
        .await
        .status,
        202
    );
    assert_eq!(
        app.post(
            &pools(&c),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "p2", "size": "kube.c5.large", "count": 1})
        )
        .await
        .status,
        202
    );
    assert_eq!(app.count_rows("idempotency_keys"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_scoped_to_the_organization() {
    let app = TestApp::spawn_api_only(&[]).await;
    let a = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &[KEY],
            &cluster_body("acme", "same"),
        )
        .await;
    assert_eq!(a.status, 201);
    // The same key and body shape in globex is a new request there, not a replay or a reuse.
    let b = app
        .post_with(
            CLUSTERS,
            TOKEN_TWO_ORGS,
            &[KEY],
            &cluster_body("globex", "same"),
        )
        .await;
    assert_eq!(b.status, 201, "{}", b.text());
    assert_eq!(b.header("idempotency-replay"), None);
    assert_ne!(a.json()["id"], b.json()["id"]);
    assert_eq!(app.count_rows("clusters"), 2);
    assert_eq!(app.count_rows("idempotency_keys"), 2);
    // Someone who may not write in acme cannot read acme's stored answer with the key.
    let c = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_MEMBER,
            &[KEY],
            &cluster_body("acme", "same"),
        )
        .await;
    expect(&c, 403, "forbidden");
    assert_eq!(c.header("idempotency-replay"), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_key_replays_or_conflicts() {
    let app = TestApp::spawn_api_only(&[]).await;
    let key = [("Idempotency-Key", "behaviour-4-key")];
    let first = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &key,
            &cluster_body("acme", "c1"),
        )
        .await;
    assert_eq!(first.status, 201);
    assert_eq!(first.header("idempotency-replay"), None);
    let again = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &key,
            &cluster_body("acme", "c1"),
        )
        .await;
    assert_eq!(
        (again.status, again.body.clone()),
        (201, first.body.clone())
    );
    assert_eq!(again.header("idempotency-replay").as_deref(), Some("true"));
    expect(
        &app.post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &key,
            &cluster_body("acme", "c2"),
        )
        .await,
        409,
        "idempotency_key_reused",
    );
    assert_eq!(app.count_rows("clusters"), 1);
}

/// Keys the previous release stored (method, path, body digest and the HTTP answer in columns of
/// their own) still replay after the upgrade, byte for byte; a key it left in progress past its
/// lease is taken over; and a key it stores while a rolling upgrade is under way replays on a
/// new replica too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_stored_by_the_previous_release_replay_after_the_upgrade() {
    let db = database_of_an_earlier_release("2026-11-27-000002");
    let body = cluster_body("acme", "from-before");
    let digest = domain::model::idempotency::Fingerprint::body_digest(Some(&body));
    let stored = |key: &str, answer: &str| {
        format!(
            "INSERT INTO idempotency_keys (organization_id, key, method, path, body_sha256, state, \
             response_status, response_headers, response_body, created_at) VALUES ('{ACME_ID}', \
             '{key}', 'POST', '/v1/public/clusters', '{digest}', 'completed', 201, \
             '[[\"content-type\", \"application/json\"], [\"location\", \"/v1/public/clusters/x\"]]', \
             convert_to('{answer}', 'UTF8'), now())"
        )
    };
    execute_sql(
        &db,
        &stored("before-upgrade-01", r#"{"answered":"before"}"#),
    );
    execute_sql(
        &db,
        &format!(
            "INSERT INTO idempotency_keys (organization_id, key, method, path, body_sha256, state, \
             lease_id, lease_expires_at, created_at) VALUES ('{ACME_ID}', 'cut-short-01', 'POST', \
             '/v1/public/clusters', '{digest}', 'in_progress', gen_random_uuid(), \
             now() - interval '1 minute', now())"
        ),
    );
    let app = TestApp::spawn_on(db, &[]).await;

    let replay = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &[("Idempotency-Key", "before-upgrade-01")],
            &body,
        )
        .await;
    assert_eq!(replay.status, 201, "{}", replay.text());
    assert_eq!(replay.text(), r#"{"answered":"before"}"#);
    assert_eq!(
        replay.header("location").as_deref(),
        Some("/v1/public/clusters/x")
    );
    assert_eq!(replay.header("idempotency-replay").as_deref(), Some("true"));
    let other = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &[("Idempotency-Key", "before-upgrade-01")],
            &cluster_body("acme", "another"),
        )
        .await;
    expect(&other, 409, "idempotency_key_reused");

    // The previous release died holding this key: the lease ran out, so the request runs anew.
    let taken_over = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &[("Idempotency-Key", "cut-short-01")],
            &body,
        )
        .await;
    assert_eq!(taken_over.status, 201, "{}", taken_over.text());
    assert_eq!(taken_over.header("idempotency-replay"), None);
    assert_eq!(app.count_rows("clusters"), 1);

    // A replica of the previous release, still serving during the rollout, stores a key.
    execute_sql(
        &app.db,
        &stored("during-upgrade-01", r#"{"answered":"during"}"#),
    );
    let replay = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &[("Idempotency-Key", "during-upgrade-01")],
            &body,
        )
        .await;
    assert_eq!(replay.text(), r#"{"answered":"during"}"#);
    assert_eq!(replay.header("idempotency-replay").as_deref(), Some("true"));
}
