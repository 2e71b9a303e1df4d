//! Creating a cluster: the organization comes from the body only, pools and the catalog
//! are checked.

use blackbox::*;
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_reads_the_organization_from_the_body_only() {
    let app = TestApp::spawn_api_only(&[]).await;
    // dave: super_admin of globex (preferred), member of acme. Header and query name acme.
    let r = app
        .request(
            Method::POST,
            &format!("{CLUSTERS}?organization=acme"),
            Some(TOKEN_TWO_ORGS),
        )
        .header("X-Platform-Organization", "acme")
        .json(&cluster_body("globex", "g1"));
    let a = app.send(r).await;
    assert_eq!(a.status, 201, "{}", a.text());
    assert_eq!(a.json()["organization_id"], GLOBEX_ID.to_string());
    // Body names acme, where dave is only a member: header/query naming globex do not help.
    let r = app
        .request(
            Method::POST,
            &format!("{CLUSTERS}?organization=globex"),
            Some(TOKEN_TWO_ORGS),
        )
        .header("X-Platform-Organization", "globex")
        .json(&cluster_body("acme", "a1"));
    expect(&app.send(r).await, 403, "forbidden");
    // No organization in the body: 422, whatever the header says.
    let r = app
        .request(Method::POST, CLUSTERS, Some(TOKEN_ACME_SUPER_ADMIN))
        .header("X-Platform-Organization", "acme")
        .json(&json!({"name": "a2", "node_pools": [{"size": "kube.c5.large", "count": 1}]}));
    let a = app.send(r).await;
    expect(&a, 422, "validation_failed");
    assert!(fields(&a).contains(&"organization".to_owned()));
    // By id works like by slug.
    let a = app
        .post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body(&ACME_ID.to_string(), "by-id"),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.text());
    assert_eq!(a.json()["organization_id"], ACME_ID.to_string());
    // An id in capitals names the same organization.
    let upper = ACME_ID.to_string().to_uppercase();
    let a = app
        .post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body(&upper, "by-upper-id"),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.text());
    let a = app
        .get(
            &format!("{CLUSTERS}?organization={upper}"),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(
        (a.status, a.json()["total"].as_u64()),
        (200, Some(2)),
        "{}",
        a.text()
    );
    assert_eq!(app.count_rows("clusters"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_checks_pools_and_the_catalog() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut b = cluster_body("acme", "c1");
    b["zone"] = json!("zone-1");
    b["version"] = json!("v1.32.4");
    let a = app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &b).await;
    assert_eq!(a.status, 201, "{}", a.text());
    let c = a.json();
    assert_eq!(
        (
            c["zone"].as_str(),
            c["version"].as_str(),
            c["phase"].as_str()
        ),
        (Some("zone-1"), Some("v1.32.4"), Some("Pending"))
    );
    assert_eq!(c["node_pools"][0]["root_volume_size_gib"], 50);
    assert_eq!(a.header("location"), Some(format!("{CLUSTERS}/{}", id(&c))));
    // Omitted zone and version: the default zone and its recommended version.
    let d = app.create_cluster("c2").await;
    assert_eq!(
        (d["zone"].as_str(), d["version"].as_str()),
        (Some("zone-1"), Some("v1.32.4"))
    );
    assert_eq!(
        (d["exposure"].as_str(), d["network_mode"].as_str()),
        (Some("public"), Some("intranet"))
    );
    let mut none = cluster_body("acme", "c3");
    none["node_pools"] = json!([]);
    expect(
        &app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &none).await,
        422,
        "validation_failed",
    );
    none.as_object_mut().unwrap().remove("node_pools");
    expect(
        &app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &none).await,
        422,
        "validation_failed",
    );
}
