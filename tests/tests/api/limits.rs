//! Spec §8's limits, each at its bound and one past it, through HTTP.

use blackbox::*;
use reqwest::Method;
use serde_json::{Value, json};

use crate::errors::{expect, fields};

fn id(c: &Value) -> String {
    c["id"].as_str().unwrap().to_owned()
}

/// Creates with `body`; asserts 201, or 422 naming `field`.
async fn create(app: &TestApp, body: &Value, ok: bool, field: &str) {
    let a = app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, body).await;
    if ok {
        assert_eq!(a.status, 201, "{}", a.text());
    } else {
        expect(&a, 422, "validation_failed");
        assert!(
            fields(&a).iter().any(|f| f == field),
            "want {field}: {}",
            a.text()
        );
    }
}

fn with(name: &str, key: &str, value: Value) -> Value {
    let mut b = cluster_body("acme", name);
    b[key] = value;
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_cluster_name_1_to_63() {
    let app = TestApp::spawn_api_only(&[]).await;
    create(&app, &cluster_body("acme", &"a".repeat(63)), true, "").await;
    create(&app, &cluster_body("acme", "b"), true, "").await;
    create(&app, &cluster_body("acme", &"a".repeat(64)), false, "name").await;
    create(&app, &cluster_body("acme", ""), false, "name").await;
    create(&app, &cluster_body("acme", "Upper"), false, "name").await;
    create(&app, &cluster_body("acme", "-lead"), false, "name").await;
    create(&app, &cluster_body("acme", "trail-"), false, "name").await;
    assert_eq!(app.count_rows("clusters"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_organization_slug_1_to_63() {
    let app = TestApp::spawn_api_only(&[]).await;
    // A well-formed slug of 63 is looked up (unknown: 404); 64 is not a slug at all (422).
    expect(
        &app.post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body(&"o".repeat(63), "c1"),
        )
        .await,
        404,
        "not_found",
    );
    let a = app
        .post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body(&"o".repeat(64), "c1"),
        )
        .await;
    expect(&a, 422, "validation_failed");
    assert!(fields(&a).contains(&"organization".to_owned()));
    expect(
        &app.get(
            &format!("{CLUSTERS}?organization={}", "o".repeat(64)),
            TOKEN_ACME_MEMBER,
        )
        .await,
        404,
        "not_found",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_tags_at_most_64_each_1_to_63() {
    let app = TestApp::spawn_api_only(&[]).await;
    let tags = |n: usize| json!((0..n).map(|i| format!("t{i}")).collect::<Vec<_>>());
    create(&app, &with("c1", "tags", tags(64)), true, "").await;
    create(&app, &with("c2", "tags", tags(65)), false, "tags").await;
    create(&app, &with("c3", "tags", json!(["t".repeat(63)])), true, "").await;
    create(
        &app,
        &with("c4", "tags", json!(["t".repeat(64)])),
        false,
        "tags[0]",
    )
    .await;
    create(
        &app,
        &with("c5", "tags", json!(["ok", ""])),
        false,
        "tags[1]",
    )
    .await;
    create(
        &app,
        &with("c6", "tags", json!(["env=prod"])),
        false,
        "tags[0]",
    )
    .await;
    // The same rules on PATCH.
    let c = app
        .get(&format!("{CLUSTERS}?organization=acme"), TOKEN_ACME_MEMBER)
        .await
        .json()["items"][0]
        .clone();
    let path = format!("{CLUSTERS}/{}", id(&c));
    assert_eq!(
        app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"tags": tags(64)}))
            .await
            .status,
        200
    );
    expect(
        &app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"tags": tags(65)}))
            .await,
        422,
        "validation_failed",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_description_at_most_16384() {
    let app = TestApp::spawn_api_only(&[]).await;
    create(
        &app,
        &with("c1", "description", json!("d".repeat(16384))),
        true,
        "",
    )
    .await;
    create(
        &app,
        &with("c2", "description", json!("d".repeat(16385))),
        false,
        "description",
    )
    .await;
    // Characters, not bytes: 16384 two-byte characters are fine.
    create(
        &app,
        &with("c3", "description", json!("é".repeat(16384))),
        true,
        "",
    )
    .await;
    let c = app
        .get(&format!("{CLUSTERS}?organization=acme"), TOKEN_ACME_MEMBER)
        .await
        .json()["items"][0]
        .clone();
    let path = format!("{CLUSTERS}/{}", id(&c));
    assert_eq!(
        app.patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": "x".repeat(16384)})
        )
        .await
        .status,
        200
    );
    expect(
        &app.patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": "x".repeat(16385)}),
        )
        .await,
        422,
        "validation_failed",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_pools_1_to_20() {
    let app = TestApp::spawn_api_only(&[]).await;
    let pools = |n: usize| {
        json!(
            (0..n)
                .map(|i| json!({"name": format!("p{i}"), "size": "kube.c5.large", "count": 1}))
                .collect::<Vec<_>>()
        )
    };
    create(
        &app,
        &with("c1", "node_pools", pools(21)),
        false,
        "node_pools",
    )
    .await;
    create(
        &app,
        &with("c2", "node_pools", pools(0)),
        false,
        "node_pools",
    )
    .await;
    create(&app, &with("c3", "node_pools", pools(20)), true, "").await;
    assert_eq!(app.count_rows("node_pools"), 20);
    let c = app
        .get(&format!("{CLUSTERS}?organization=acme"), TOKEN_ACME_MEMBER)
        .await
        .json()["items"][0]
        .clone();
    let a = app
        .post(
            &format!("{CLUSTERS}/{}/node-pools", id(&c)),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "p20", "size": "kube.c5.large", "count": 1}),
        )
        .await;
    expect(&a, 422, "validation_failed");
    assert_eq!(app.count_rows("node_pools"), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_pool_name_and_count_and_max_nodes() {
    let app = TestApp::spawn_api_only(&[]).await;
    let pool = |p: Value| json!({"organization": "acme", "name": format!("c{}", rand_suffix(&p)), "node_pools": [p]});
    create(
        &app,
        &pool(json!({"name": "p".repeat(63), "size": "kube.c5.large", "count": 1})),
        true,
        "",
    )
    .await;
    create(
        &app,
        &pool(json!({"name": "p".repeat(64), "size": "kube.c5.large", "count": 1})),
        false,
        "node_pools[0].name",
    )
    .await;
    create(
        &app,
        &pool(json!({"size": "kube.c5.large", "count": 200})),
        true,
        "",
    )
    .await;
    create(
        &app,
        &pool(json!({"size": "kube.c5.large", "count": 201})),
        false,
        "node_pools[0].count",
    )
    .await;
    create(
        &app,
        &pool(json!({"size": "kube.c5.large", "count": -1})),
        false,
        "node_pools[0].count",
    )
    .await;
    create(&app, &pool(json!({"size": "kube.c5.large", "count": 5, "auto_scale": true, "min_nodes": 1, "max_nodes": 200})), true, "").await;
    create(&app, &pool(json!({"size": "kube.c5.large", "count": 5, "auto_scale": true, "min_nodes": 1, "max_nodes": 201})), false, "node_pools[0].max_nodes").await;
    create(&app, &pool(json!({"size": "kube.c5.large", "count": 5, "auto_scale": true, "min_nodes": 6, "max_nodes": 9})), false, "node_pools[0].count").await;
    create(
        &app,
        &pool(json!({"size": "kube.c5.large", "count": 5, "auto_scale": true, "min_nodes": 1})),
        false,
        "node_pools[0].max_nodes",
    )
    .await;
    // Scaling an existing pool: 200 is the bound.
    let c = app.create_cluster("scale").await;
    let path = format!("{CLUSTERS}/{}/node-pools/default", id(&c));
    let a = app
        .patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"count": 200}))
        .await;
    assert_eq!(a.status, 202, "{}", a.text());
    assert_eq!(a.json()["count"], 200);
    expect(
        &app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"count": 201}))
            .await,
        422,
        "validation_failed",
    );
    expect(
        &app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"count": 0}))
            .await,
        422,
        "validation_failed",
    );
}

fn rand_suffix(v: &Value) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:x}", h.finish())
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_firewall_description_255_and_16_cidrs() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let path = format!("{CLUSTERS}/{}/firewall-rules", id(&c));
    let rule = |description: usize, cidrs: usize| {
        json!({"name": "https", "description": "d".repeat(description), "protocol": "tcp",
               "source_cidrs": (0..cidrs).map(|i| format!("10.0.{i}.0/24")).collect::<Vec<_>>(),
               "port_range": {"from": 443, "to": 443}})
    };
    // A valid body reaches the phase check; a bad body is refused first.
    expect(
        &app.post(&path, TOKEN_ACME_SUPER_ADMIN, &rule(255, 16))
            .await,
        409,
        "cluster_not_provisioned",
    );
    let a = app
        .post(&path, TOKEN_ACME_SUPER_ADMIN, &rule(256, 16))
        .await;
    expect(&a, 422, "validation_failed");
    assert!(fields(&a).contains(&"description".to_owned()));
    let a = app.post(&path, TOKEN_ACME_SUPER_ADMIN, &rule(10, 17)).await;
    expect(&a, 422, "validation_failed");
    assert!(fields(&a).contains(&"source_cidrs".to_owned()));
    let mut named = rule(1, 1);
    named["name"] = json!("n".repeat(63));
    expect(
        &app.post(&path, TOKEN_ACME_SUPER_ADMIN, &named).await,
        409,
        "cluster_not_provisioned",
    );
    named["name"] = json!("n".repeat(64));
    expect(
        &app.post(&path, TOKEN_ACME_SUPER_ADMIN, &named).await,
        422,
        "validation_failed",
    );
    for (k, v) in [
        ("protocol", json!("sctp")),
        ("direction", json!("egress")),
        ("port_range", json!({"from": 0, "to": 10})),
        ("source_cidrs", json!(["10.0.0.1/24"])),
        ("source_cidrs", json!(["::/0"])),
    ] {
        let mut b = rule(1, 1);
        b[k] = v;
        expect(
            &app.post(&path, TOKEN_ACME_SUPER_ADMIN, &b).await,
            422,
            "validation_failed",
        );
    }
    assert_eq!(app.count_rows("firewall_rules"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_elastic_ip_name_1_to_63() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let path = format!("{CLUSTERS}/{}/elastic-ips", id(&c));
    let a = app
        .post(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "e".repeat(63), "exposure": "private"}),
        )
        .await;
    assert_eq!(a.status, 202, "{}", a.text());
    let a = app
        .post(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "e".repeat(64), "exposure": "private"}),
        )
        .await;
    expect(&a, 422, "validation_failed");
    assert!(fields(&a).contains(&"name".to_owned()));
    assert_eq!(app.count_rows("elastic_ips"), 1);
}
