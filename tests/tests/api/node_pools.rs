//! Node pools: a pool's size is fixed, and a cluster keeps its last pool.

use blackbox::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_size_is_immutable_and_the_last_pool_stays() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let pools = format!("{CLUSTERS}/{}/node-pools", id(&c));
    let a = app
        .patch(
            &format!("{pools}/default"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"size": "kube.c5.xlarge"}),
        )
        .await;
    expect(&a, 422, "validation_failed");
    expect(
        &app.delete(&format!("{pools}/default"), TOKEN_ACME_SUPER_ADMIN)
            .await,
        409,
        "last_pool",
    );
    // The way to change tier: add a pool of the new tier, delete the old one.
    let a = app
        .post(
            &pools,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "bigger", "size": "kube.c5.xlarge", "count": 2}),
        )
        .await;
    assert_eq!(a.status, 202, "{}", a.text());
    assert_eq!(a.json()["status"], "Provisioning");
    let a = app
        .delete(&format!("{pools}/default"), TOKEN_ACME_SUPER_ADMIN)
        .await;
    assert_eq!(a.status, 202, "{}", a.text());
    assert_eq!(a.json()["status"], "Deleting");
    // A pool in Deleting does not count: the other is now the last.
    expect(
        &app.delete(&format!("{pools}/bigger"), TOKEN_ACME_SUPER_ADMIN)
            .await,
        409,
        "last_pool",
    );
    expect(
        &app.delete(&format!("{pools}/nosuch"), TOKEN_ACME_SUPER_ADMIN)
            .await,
        404,
        "not_found",
    );
    // A duplicate pool name on the cluster.
    let a = app
        .post(
            &pools,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "bigger", "size": "kube.c5.large", "count": 1}),
        )
        .await;
    expect(&a, 409, "name_conflict");
}
