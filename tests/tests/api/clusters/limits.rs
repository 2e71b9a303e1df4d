//! The limits of a create body, each at its bound and one past it: names, tags,
//! description, pools and their sizing.

use blackbox::*;
use serde_json::{Value, json};

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

fn rand_suffix(v: &Value) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.to_string().hash(&mut h);
    format!("{:x}", h.finish())
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
