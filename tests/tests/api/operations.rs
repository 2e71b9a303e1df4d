//! Operations: each change that hands work to provisioning is followed as one operation, from
//! the answer that points at it to the state its object settles in.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use blackbox::*;

/// Provisioning at full speed, polled often.
async fn provisioning(extra: &[(&str, &str)]) -> TestApp {
    let mut settings = vec![("RECONCILER_POLL_MS", "20")];
    settings.extend_from_slice(extra);
    TestApp::spawn_with(&settings).await
}

/// The operation an answer points at (its `Operation-Location`), read as a member.
async fn followed(app: &TestApp, answer: &Answer) -> (String, Value) {
    let url = answer
        .header("operation-location")
        .unwrap_or_else(|| panic!("no Operation-Location: {answer:?}"));
    let op = app.get(&url, TOKEN_ACME_MEMBER).await;
    assert_eq!(op.status, 200, "{}", op.text());
    (url, op.json())
}

/// Reads the operation until `done` holds (bounded, not a timing assertion).
async fn until(app: &TestApp, url: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let op = app.get(url, TOKEN_ACME_MEMBER).await.json();
        if done(&op) {
            return op;
        }
        assert!(Instant::now() < deadline, "{url} never got there: {op}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn finished(op: &Value) -> bool {
    op["status"] != "running"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_points_at_its_operation_which_ends_when_provisioning_is_done() {
    let app = provisioning(&[]).await;
    let created = app
        .post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body("acme", "ops-1"),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let cluster = id(&created.json());
    assert_eq!(
        created.header("location"),
        Some(format!("{CLUSTERS}/{cluster}")),
        "a 201's Location stays the cluster"
    );
    let (create_url, create) = followed(&app, &created).await;
    assert_eq!(
        (&create["kind"], &create["resource"], &create["cluster_id"]),
        (&json!("create"), &json!("cluster"), &json!(cluster))
    );
    let create = until(&app, &create_url, finished).await;
    assert_eq!(create["status"], "succeeded", "{create}");
    assert!(create["finished_at"].is_string());
    assert_eq!(create["requested_by"]["user_id"], "alice");

    let pools = format!("{CLUSTERS}/{cluster}/node-pools");
    let body = json!({"name": "extra", "size": "kube.c5.large", "count": 1});
    let headers = [
        ("Idempotency-Key", "add-extra-0001"),
        ("X-Request-Id", "add-extra"),
    ];
    let added = app
        .post_with(&pools, TOKEN_ACME_SUPER_ADMIN, &headers, &body)
        .await;
    assert_eq!(added.status, 202, "{}", added.text());
    let (pool_url, pool_op) = followed(&app, &added).await;
    assert_eq!(
        added.header("location"),
        Some(pool_url.clone()),
        "a 202's Location is its operation"
    );
    assert_eq!(
        (
            &pool_op["kind"],
            &pool_op["resource_id"],
            &pool_op["request_id"]
        ),
        (
            &json!("node_pool_create"),
            &json!(format!("{cluster}/extra")),
            &json!("add-extra")
        )
    );
    let replay = app
        .post_with(&pools, TOKEN_ACME_SUPER_ADMIN, &headers, &body)
        .await;
    assert_eq!(
        replay.header("operation-location"),
        Some(pool_url.clone()),
        "a replay points at the same operation"
    );
    let pool_op = until(&app, &pool_url, finished).await;
    assert_eq!(pool_op["status"], "succeeded", "{pool_op}");

    let list = app
        .get(
            &format!("{CLUSTERS}/{cluster}/operations"),
            TOKEN_ACME_MEMBER,
        )
        .await
        .json();
    let kinds: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["node_pool_create", "create"],
        "newest first: {list}"
    );
    assert_eq!(list["total"], 2);
    let running = app
        .get(
            &format!("{CLUSTERS}/{cluster}/operations?status=running"),
            TOKEN_ACME_MEMBER,
        )
        .await
        .json();
    assert_eq!(running["total"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_the_provider_refuses_fails_its_operation_with_the_reason() {
    let app = provisioning(&[("PROVISIONER_FAIL_STEPS", "attach_address")]).await;
    let cluster = id(&app.create_cluster("eip-fail").await);
    let path = format!("{CLUSTERS}/{cluster}");
    app.wait_for(&path, Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned"
    })
    .await;
    let allocated = app
        .post(
            &format!("{path}/elastic-ips"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({}),
        )
        .await;
    assert_eq!(allocated.status, 202, "{}", allocated.text());
    let (url, op) = followed(&app, &allocated).await;
    assert_eq!(op["kind"], "elastic_ip_allocate");
    let op = until(&app, &url, finished).await;
    assert_eq!(op["status"], "failed", "{op}");
    let eip = app
        .get(
            &format!("{path}/elastic-ips/{}", id(&allocated.json())),
            TOKEN_ACME_MEMBER,
        )
        .await
        .json();
    assert_eq!(
        op["last_error"], eip["failure_reason"],
        "the object's own reason"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_that_keeps_failing_shows_its_attempts_and_what_to_do() {
    let app = provisioning(&[
        ("PROVISIONER_FLAKY_STEPS", "set_exposure"),
        ("PROVISIONER_FLAKY_RATE", "1.0"),
    ])
    .await;
    let cluster = id(&app.create_cluster("flaky").await);
    let path = format!("{CLUSTERS}/{cluster}");
    app.wait_for(&path, Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned"
    })
    .await;
    let changed = app
        .patch(
            &format!("{path}/exposure"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "private"}),
        )
        .await;
    assert_eq!(changed.status, 202, "{}", changed.text());
    let (url, _) = followed(&app, &changed).await;
    let op = until(&app, &url, |o| o["attempts"].as_i64().unwrap_or(0) >= 1).await;
    assert_eq!(
        (&op["kind"], &op["status"]),
        (&json!("exposure_change"), &json!("running"))
    );
    let error = op["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("where the API endpoint is reachable from")
            && error.contains("retried automatically"),
        "{error}"
    );
    assert!(
        !error.contains("set_exposure"),
        "no internal names: {error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_clusters_operations_stay_readable() {
    let app = provisioning(&[]).await;
    let cluster = id(&app.create_cluster("short-lived").await);
    let path = format!("{CLUSTERS}/{cluster}");
    let deleted = app.delete(&path, TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(deleted.status, 202, "{}", deleted.text());
    let (url, op) = followed(&app, &deleted).await;
    assert_eq!(op["kind"], "delete");
    let op = until(&app, &url, finished).await;
    assert_eq!(op["status"], "succeeded", "{op}");
    assert_eq!(app.get(&path, TOKEN_ACME_MEMBER).await.status, 404);
    let again = app.delete(&path, TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(again.status, 404);
    let list = app
        .get(&format!("{path}/operations"), TOKEN_ACME_MEMBER)
        .await
        .json();
    assert_eq!(list["total"], 2, "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_belong_to_their_cluster_and_its_organization() {
    let app = TestApp::spawn_api_only(&[]).await;
    let a = app.create_cluster("a").await;
    let b = id(&app.create_cluster("b").await);
    let a = id(&a);
    let list = app
        .get(&format!("{CLUSTERS}/{a}/operations"), TOKEN_ACME_MEMBER)
        .await
        .json();
    let op = list["items"][0]["id"].as_str().unwrap().to_owned();
    let cases: [(String, &str, u16); 6] = [
        (
            format!("{CLUSTERS}/{a}/operations/{op}"),
            TOKEN_ACME_PROJECT_ADMIN,
            200,
        ),
        (
            format!("{CLUSTERS}/{b}/operations/{op}"),
            TOKEN_ACME_MEMBER,
            404,
        ),
        (
            format!("{CLUSTERS}/{a}/operations/not-an-id"),
            TOKEN_ACME_MEMBER,
            404,
        ),
        (
            format!("{CLUSTERS}/{a}/operations/{op}"),
            TOKEN_INITECH_SUPER_ADMIN,
            403,
        ),
        (
            format!("{CLUSTERS}/{a}/operations"),
            TOKEN_INITECH_SUPER_ADMIN,
            403,
        ),
        (
            format!("{CLUSTERS}/{a}/operations?status=done"),
            TOKEN_ACME_MEMBER,
            400,
        ),
    ];
    for (path, token, status) in cases {
        let answer = app.get(&path, token).await;
        assert_eq!(answer.status, status, "{path}: {}", answer.text());
    }
    let anonymous = app
        .send(app.request(Method::GET, &format!("{CLUSTERS}/{a}/operations"), None))
        .await;
    assert_eq!(anonymous.status, 401);
}
