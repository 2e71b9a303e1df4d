//! Elastic IPs and firewall rules: what the network mode allows, and their limits.

use blackbox::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_409_elastic_ip_exposure_must_match_the_network_mode() {
    let app = TestApp::spawn_api_only(&[]).await;
    let intranet = app.create_cluster("intra").await;
    let mut b = cluster_body("acme", "inter");
    b["network_mode"] = json!("internet");
    let internet = app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &b).await.json();
    let eips =
        |c: &serde_json::Value| format!("{CLUSTERS}/{}/elastic-ips", c["id"].as_str().unwrap());
    expect(
        &app.post(
            &eips(&intranet),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "public"}),
        )
        .await,
        409,
        "exposure_mismatch",
    );
    expect(
        &app.post(
            &eips(&internet),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "private"}),
        )
        .await,
        409,
        "exposure_mismatch",
    );
    assert_eq!(app.count_rows("elastic_ips"), 0);
    let a = app
        .post(
            &eips(&internet),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "web", "exposure": "public"}),
        )
        .await;
    assert_eq!(a.status, 202, "{}", a.text());
    let e = a.json();
    assert_eq!(
        (e["status"].as_str(), e["exposure"].as_str()),
        (Some("Pending"), Some("public"))
    );
    assert_eq!(e["annotation"]["value"], e["id"]);
    // A duplicate alive name, and a release before Ready or Failed.
    expect(
        &app.post(
            &eips(&internet),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "web"}),
        )
        .await,
        409,
        "name_conflict",
    );
    let release = format!("{}/{}", eips(&internet), e["id"].as_str().unwrap());
    expect(
        &app.delete(&release, TOKEN_ACME_SUPER_ADMIN).await,
        409,
        "invalid_state",
    );
    assert_eq!(
        app.get(&release, TOKEN_ACME_MEMBER).await.json()["status"],
        "Pending"
    );
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
