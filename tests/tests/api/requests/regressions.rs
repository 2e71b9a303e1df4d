//! Regression tests for what schema fuzzing (schemathesis, `make test`) found; one test each.

use blackbox::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_answer_matches_its_documented_schema() {
    // Found: the catalog's schema was a flattened struct with additionalProperties false, so
    // every real answer (which has `constraints`) violated it.
    let app = TestApp::spawn_api_only(&[]).await;
    let doc = app
        .send(app.request(reqwest::Method::GET, "/v1/openapi.json", None))
        .await
        .json();
    let schema = &doc["components"]["schemas"]["CatalogView"];
    assert!(schema["properties"]["constraints"].is_object(), "{schema}");
    let answer = app
        .get("/v1/catalog?organization=acme", TOKEN_ACME_MEMBER)
        .await
        .json();
    for key in answer.as_object().unwrap().keys() {
        assert!(
            schema["properties"][key].is_object(),
            "undocumented member {key}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_beyond_int32_is_400() {
    // Found: page=2147483648 was accepted though the document says int32.
    let app = TestApp::spawn_api_only(&[]).await;
    let ok = app
        .get(
            "/v1/public/clusters?organization=acme&page=2147483647",
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(ok.status, 200);
    let past = app
        .get(
            "/v1/public/clusters?organization=acme&page=2147483648",
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(
        (past.status, past.problem_code().as_str()),
        (400, "invalid_query")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_format_means_plain_and_empty_environment_is_400() {
    // Found: `format=` was refused though the parameter is optional; `environment=` was
    // accepted though the document's pattern refuses an empty name.
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("fmt-1").await;
    let k = app
        .get(
            &format!(
                "/v1/public/clusters/{}/kubeconfig?format=",
                c["id"].as_str().unwrap()
            ),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(k.status, 202, "{}", k.text());
    let e = app
        .get(
            "/v1/public/gateway/auth-servers?organization=acme&environment=",
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(
        (e.status, e.problem_code().as_str()),
        (400, "invalid_query")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integral_floats_are_integers_and_fractions_are_422() {
    // Found: `"count": 3.0` (an integer to JSON Schema) was refused as a float.
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("float-1").await;
    let path = format!(
        "/v1/public/clusters/{}/node-pools/default",
        c["id"].as_str().unwrap()
    );
    let a = app
        .patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"count": 3.0}))
        .await;
    assert_eq!(
        (a.status, a.json()["count"].clone()),
        (202, json!(3)),
        "{}",
        a.text()
    );
    let b = app
        .patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"count": 3.5}))
        .await;
    assert_eq!(
        (b.status, b.problem_code().as_str()),
        (422, "validation_failed")
    );
    assert_eq!(b.json()["errors"][0]["field"], "count");
}
