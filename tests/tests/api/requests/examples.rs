//! The document's example request bodies are real: each one, sent as it is (what "Try it out"
//! on `/docs` sends), succeeds against a fresh development server's `acme`.

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use blackbox::*;

/// Every operation of the document that takes a body: its method, path and example.
fn examples(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        for (method, op) in item.as_object().into_iter().flatten() {
            let body = &op["requestBody"]["content"]["application/json"];
            if body.is_object() {
                out.push((method.to_uppercase(), path.clone(), body["example"].clone()));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_body_succeeds_as_it_is() {
    let app = TestApp::spawn().await;
    let doc = app
        .send(app.request(Method::GET, "/v1/openapi.json", None))
        .await
        .json();
    let all = examples(&doc);
    assert_eq!(all.len(), 11, "the writes that take a body");
    for (method, path, example) in &all {
        assert!(example.is_object(), "{method} {path} has no example");
    }
    let example = |m: &str, p: &str| {
        all.iter()
            .find(|(method, path, _)| method == m && path == p)
            .map(|(_, _, e)| e.clone())
            .unwrap_or_else(|| panic!("no example for {m} {p}"))
    };
    let send = async |m: &str, p: &str, concrete: &str| {
        let a = app
            .send(
                app.request(m.parse().unwrap(), concrete, Some(TOKEN_ACME_SUPER_ADMIN))
                    .json(&example(m, p)),
            )
            .await;
        assert!(
            (200..300).contains(&a.status),
            "{m} {p}: {} {}",
            a.status,
            a.text()
        );
        a.json()
    };

    // A cluster from its example, once it is up (firewall rules need it Provisioned).
    let cluster = send("POST", "/v1/public/clusters", CLUSTERS).await;
    let path = format!("{CLUSTERS}/{}", id(&cluster));
    app.wait_for(&path, Duration::from_secs(60), |c| {
        c["phase"] == "Provisioned"
    })
    .await;
    for (m, p, concrete) in [
        ("PATCH", "/v1/public/clusters/{id}", path.clone()),
        (
            "POST",
            "/v1/public/clusters/{id}/node-pools",
            format!("{path}/node-pools"),
        ),
        (
            "PATCH",
            "/v1/public/clusters/{id}/node-pools/{pool}",
            format!("{path}/node-pools/default"),
        ),
        (
            "POST",
            "/v1/public/clusters/{id}/elastic-ips",
            format!("{path}/elastic-ips"),
        ),
        (
            "POST",
            "/v1/public/clusters/{id}/firewall-rules",
            format!("{path}/firewall-rules"),
        ),
        (
            "PATCH",
            "/v1/public/clusters/{id}/exposure",
            format!("{path}/exposure"),
        ),
    ] {
        send(m, p, &concrete).await;
    }
    // An upgrade waits for every other change of the cluster to finish.
    app.wait_for(&path, Duration::from_secs(60), |c| {
        c["exposure_change"].is_null()
            && c["node_pools"]
                .as_array()
                .is_some_and(|ps| ps.iter().all(|p| p["status"] == "Ready"))
    })
    .await;
    send(
        "POST",
        "/v1/public/clusters/{id}/upgrade",
        &format!("{path}/upgrade"),
    )
    .await;

    // An auth server from its example, then its own changes.
    let server = send(
        "POST",
        "/v1/public/gateway/auth-servers",
        "/v1/public/gateway/auth-servers",
    )
    .await;
    let server_path = format!("/v1/public/gateway/auth-servers/{}", id(&server));
    send(
        "PATCH",
        "/v1/public/gateway/auth-servers/{id}",
        &server_path,
    )
    .await;
    send(
        "POST",
        "/v1/public/gateway/auth-servers/{id}/credentials",
        &format!("{server_path}/credentials"),
    )
    .await;
}
