//! Changing a cluster: PATCH needs something to change, exposure needs `Provisioned`, and
//! DELETE ends every other change.

use blackbox::*;
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exposure_patch_before_provisioned_is_400() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let path = format!("{CLUSTERS}/{}/exposure", id(&c));
    expect(
        &app.patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "private"}),
        )
        .await,
        400,
        "phase_not_provisioned",
    );
    expect(
        &app.patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "global"}),
        )
        .await,
        422,
        "validation_failed",
    );
    expect(
        &app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({})).await,
        422,
        "validation_failed",
    );
    expect(
        &app.patch(&path, TOKEN_ACME_MEMBER, &json!({"exposure": "private"}))
            .await,
        403,
        "forbidden",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_patch_is_422() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let before = app
        .get(&format!("{CLUSTERS}/{}", id(&c)), TOKEN_ACME_MEMBER)
        .await
        .body;
    for path in [
        format!("{CLUSTERS}/{}", id(&c)),
        format!("{CLUSTERS}/{}/node-pools/default", id(&c)),
    ] {
        expect(
            &app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({})).await,
            422,
            "validation_failed",
        );
        // An empty body (no bytes) is the same empty object.
        let a = app
            .raw(
                Method::PATCH,
                &path,
                Some(TOKEN_ACME_SUPER_ADMIN),
                &[("Content-Type", b"application/json")],
                Some(vec![]),
            )
            .await;
        expect(&a, 422, "validation_failed");
    }
    assert_eq!(
        app.get(&format!("{CLUSTERS}/{}", id(&c)), TOKEN_ACME_MEMBER)
            .await
            .body,
        before
    );
    // A real PATCH works and says so.
    let a = app
        .patch(
            &format!("{CLUSTERS}/{}", id(&c)),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": "hello", "tags": ["a", "b"]}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        (a.json()["description"].clone(), a.json()["tags"].clone()),
        (json!("hello"), json!(["a", "b"]))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_is_202_deleting_twice_and_then_changes_are_409() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let path = format!("{CLUSTERS}/{}", id(&c));
    expect(
        &app.delete(&path, TOKEN_ACME_MEMBER).await,
        403,
        "forbidden",
    );
    let a = app.delete(&path, TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(a.status, 202, "{}", a.text());
    assert_eq!(a.json()["phase"], "Deleting");
    let b = app.delete(&path, TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(b.status, 202, "{}", b.text());
    assert_eq!(b.json()["phase"], "Deleting");
    assert_eq!(b.json()["id"], c["id"]);
    let before = app.counts();
    expect(
        &app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"description": "x"}))
            .await,
        409,
        "cluster_deleting",
    );
    expect(
        &app.patch(
            &format!("{path}/exposure"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "private"}),
        )
        .await,
        409,
        "cluster_deleting",
    );
    let pools = format!("{path}/node-pools");
    expect(
        &app.post(
            &pools,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "p2", "size": "kube.c5.large", "count": 1}),
        )
        .await,
        409,
        "cluster_deleting",
    );
    expect(
        &app.patch(
            &format!("{pools}/default"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"count": 3}),
        )
        .await,
        409,
        "cluster_deleting",
    );
    expect(
        &app.get(&format!("{path}/kubeconfig"), TOKEN_ACME_MEMBER)
            .await,
        409,
        "cluster_deleting",
    );
    expect(
        &app.post(
            &format!("{path}/elastic-ips"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({}),
        )
        .await,
        409,
        "cluster_deleting",
    );
    let rule = json!({"protocol": "icmp", "source_cidrs": ["0.0.0.0/0"]});
    expect(
        &app.post(
            &format!("{path}/firewall-rules"),
            TOKEN_ACME_SUPER_ADMIN,
            &rule,
        )
        .await,
        409,
        "cluster_deleting",
    );
    assert_eq!(app.counts(), before);
    assert_eq!(app.count_rows("elastic_ips"), 0);
    // Still readable while Deleting.
    assert_eq!(
        app.get(&path, TOKEN_ACME_MEMBER).await.json()["phase"],
        "Deleting"
    );
}
