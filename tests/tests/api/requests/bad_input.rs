//! Hostile input on every route of `api::routes::ROUTES`: no answer is a 5xx,
//! every 4xx is problem+json whose `status` is the HTTP status, and nothing is stored.
//! Also the router's own answers: 405 with `Allow`, 404 for unknown paths, `X-Request-Id`.

use api::routes::{ROUTES, RouteSpec};
use blackbox::*;
use reqwest::Method;
use serde_json::json;

struct Fx {
    cluster: String,
    eip: String,
    auth_server: String,
    credential: String,
}

async fn fixtures(app: &TestApp) -> Fx {
    let c = app.create_cluster("fx").await;
    let cluster = c["id"].as_str().unwrap().to_owned();
    let e = app
        .post(
            &format!("{CLUSTERS}/{cluster}/elastic-ips"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "private"}),
        )
        .await;
    let s = app
        .post(AUTH_SERVERS, TOKEN_ACME_SUPER_ADMIN, &json!({"organization": "acme", "name": "fx", "environment": "production",
            "type": "token", "config": {"tokens": ["a-static-token-of-enough-length", "second-static-token-long"]}}))
        .await;
    assert_eq!(
        (e.status, s.status),
        (202, 201),
        "{} {}",
        e.text(),
        s.text()
    );
    let s = s.json();
    Fx {
        cluster,
        eip: e.json()["id"].as_str().unwrap().to_owned(),
        auth_server: s["id"].as_str().unwrap().to_owned(),
        credential: s["config"]["tokens"][0]["id"].as_str().unwrap().to_owned(),
    }
}

fn path(route: &RouteSpec, fx: &Fx, all_ids: Option<&str>) -> String {
    let id = if route.path.starts_with(AUTH_SERVERS) {
        &fx.auth_server
    } else {
        &fx.cluster
    };
    let sub = |v: &str| all_ids.map(str::to_owned).unwrap_or_else(|| v.to_owned());
    route
        .path
        .replace("{id}", &sub(id))
        .replace("{pool}", &sub("default"))
        .replace("{node}", &sub("no-such-node"))
        .replace("{eip}", &sub(&fx.eip))
        .replace("{rule}", &sub("00000000-0000-0000-0000-000000000000"))
        .replace("{credential_id}", &sub(&fx.credential))
}

/// The route's integer field (or any field) holding `raw`, as JSON text.
fn with_number(route: &RouteSpec, raw: &str) -> String {
    match (route.method, route.path) {
        ("POST", CLUSTERS) => {
            format!(
                r#"{{"organization":"acme","name":"n1","node_pools":[{{"size":"kube.c5.large","count":{raw}}}]}}"#
            )
        }
        ("POST", "/v1/public/clusters/{id}/node-pools") => {
            format!(r#"{{"name":"n1","size":"kube.c5.large","count":{raw}}}"#)
        }
        ("PATCH", "/v1/public/clusters/{id}/node-pools/{pool}") => {
            format!(r#"{{"count":{raw},"max_nodes":{raw}}}"#)
        }
        ("POST", "/v1/public/clusters/{id}/firewall-rules") => {
            format!(
                r#"{{"protocol":"tcp","source_cidrs":["10.0.0.0/8"],"port_range":{{"from":{raw},"to":{raw}}}}}"#
            )
        }
        _ => format!(r#"{{"name":{raw}}}"#),
    }
}

/// The route's name field holding `name` (a look-alike), as JSON.
fn with_name(route: &RouteSpec, name: &str) -> serde_json::Value {
    match (route.method, route.path) {
        ("POST", CLUSTERS) => cluster_body("acme", name),
        ("POST", AUTH_SERVERS) => {
            json!({"organization": "acme", "name": name, "environment": "production", "type": "token",
            "config": {"tokens": ["a-static-token-of-enough-length"]}})
        }
        ("POST", "/v1/public/clusters/{id}/node-pools") => {
            json!({"name": name, "size": "kube.c5.large", "count": 1})
        }
        ("POST", "/v1/public/clusters/{id}/firewall-rules") => {
            json!({"name": name, "protocol": "tcp", "source_cidrs": ["10.0.0.0/8"], "port_range": {"from": 1, "to": 2}})
        }
        ("PATCH", "/v1/public/clusters/{id}") => json!({"tags": [name]}),
        ("PATCH", "/v1/public/clusters/{id}/exposure") => json!({"exposure": name}),
        ("PATCH", "/v1/public/clusters/{id}/node-pools/{pool}") => {
            json!({"count": 1, "auto_scale": name})
        }
        ("POST", "/v1/public/gateway/auth-servers/{id}/credentials") => json!({"username": name}),
        _ => json!({"name": name}),
    }
}

struct Case {
    label: String,
    headers: Vec<(&'static str, Vec<u8>)>,
    body: Option<Vec<u8>>,
}

fn json_case(label: &str, body: Vec<u8>) -> Case {
    Case {
        label: label.to_owned(),
        headers: vec![("Content-Type", b"application/json".to_vec())],
        body: Some(body),
    }
}

/// Bodies that no route may accept.
fn body_cases(route: &RouteSpec) -> Vec<Case> {
    let deep_arrays = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes();
    let deep_objects = format!("{}1{}", r#"{"a":"#.repeat(10_000), "}".repeat(10_000)).into_bytes();
    let mut cases = vec![
        json_case("truncated", br#"{"organization": "acme", "name": "#.to_vec()),
        json_case("malformed", b"{not json}".to_vec()),
        json_case("trailing garbage", br#"{"name": "a"} {"#.to_vec()),
        json_case("deep arrays", deep_arrays),
        json_case("deep objects", deep_objects),
        json_case("invalid utf-8", b"{\"name\": \"\xff\xfe\xfd\"}".to_vec()),
        json_case("invalid utf-8 key", b"{\"\xc3\x28\": 1}".to_vec()),
        json_case("1e400", with_number(route, "1e400").into_bytes()),
        json_case("20 nines", with_number(route, "99999999999999999999").into_bytes()),
        json_case("negative", with_number(route, "-5").into_bytes()),
        json_case("fraction", with_number(route, "1.5").into_bytes()),
        json_case("cyrillic o", with_name(route, "pr\u{043e}d").to_string().into_bytes()),
        json_case("fullwidth", with_name(route, "\u{ff50}\u{ff52}\u{ff4f}\u{ff44}").to_string().into_bytes()),
        json_case("zero width", with_name(route, "pro\u{200b}d").to_string().into_bytes()),
        json_case("null", b"null".to_vec()),
        json_case("array", b"[]".to_vec()),
        json_case("string", b"\"x\"".to_vec()),
        json_case("number", b"42".to_vec()),
        json_case("wrong types", br#"{"organization": 5, "name": ["x"], "node_pools": {"a": 1}, "description": false, "tags": [1], "count": "x", "config": 3, "exposure": 1, "token": 5, "username": 1}"#.to_vec()),
        json_case("nul byte", b"{\"name\": \"a\\u0000b\"}".to_vec()),
        json_case("lone surrogate", br#"{"name": "\ud800"}"#.to_vec()),
        Case {
            label: "form".into(),
            headers: vec![("Content-Type", b"application/x-www-form-urlencoded".to_vec())],
            body: Some(b"organization=acme&name=x".to_vec()),
        },
        Case { label: "text".into(), headers: vec![("Content-Type", b"text/plain".to_vec())], body: Some(b"{}".to_vec()) },
        Case { label: "bad content type".into(), headers: vec![("Content-Type", b"\xff/\xfe".to_vec())], body: Some(b"{}".to_vec()) },
    ];
    // An empty body is `{}`: an Elastic IP needs nothing else, so it is not bad input there.
    if route.path != "/v1/public/clusters/{id}/elastic-ips" {
        cases.push(json_case("empty", vec![]));
        cases.push(Case {
            label: "empty, no content type".into(),
            headers: vec![],
            body: Some(vec![]),
        });
    }
    cases
}

/// Header attacks; DELETE routes also carry a bad Idempotency-Key so that they fail.
fn header_cases() -> Vec<Case> {
    let bad = |k: &'static str, v: &[u8]| Case {
        label: format!("{k}: {}", String::from_utf8_lossy(v)),
        headers: vec![(k, v.to_vec())],
        body: None,
    };
    vec![
        bad("Idempotency-Key", b"abcdefgh\xff\xfe"),
        bad("Idempotency-Key", b"abcdefgh\tX-Evil: 1"),
        bad("Idempotency-Key", b"../../etc/passwd"),
        bad("Idempotency-Key", "abcdefgh\u{0430}".as_bytes()),
        bad("X-Platform-Organization", b"acme\xff\xfe"),
        bad("X-Platform-Organization", b"acme\tX-Evil: 1"),
        bad("X-Platform-Organization", b"../globex"),
        bad("X-Platform-Organization", "\u{0430}cme".as_bytes()),
        bad("X-Request-Id", b"id\xff\tX-Evil: 1"),
    ]
}

const TRAVERSALS: [&str; 6] = [
    "..%2F..%2Fetc%2Fpasswd",
    "%2e%2e",
    "%00",
    "%FF%FE",
    "a%20b",
    "%252e%252e%252f",
];

/// The answer's contract: never a 5xx; a 4xx is problem+json with `status` the HTTP status.
fn check(a: &Answer, what: &str, problems: &mut Vec<String>) {
    if a.status >= 500 {
        problems.push(format!("{what}: {} {}", a.status, a.text()));
    } else if a.status >= 400 {
        let ct = a.header("content-type").unwrap_or_default();
        if ct != "application/problem+json"
            || a.json()["status"] != a.status
            || !a.json()["code"].is_string()
        {
            problems.push(format!(
                "{what}: {} not a problem: {ct} {}",
                a.status,
                a.text()
            ));
        }
    }
    if a.header("x-request-id").is_none_or(|v| v.is_empty()) {
        problems.push(format!("{what}: no X-Request-Id"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_survives_bad_input_and_stores_nothing() {
    let app = TestApp::spawn_api_only(&[]).await;
    let fx = fixtures(&app).await;
    let before = app.counts();
    let (elastic_ips, credentials) = (
        app.count_rows("elastic_ips"),
        app.count_rows("auth_server_credentials"),
    );
    let mut problems = Vec::new();
    let mut sent = 0;
    for route in ROUTES.iter() {
        let method = Method::from_bytes(route.method.as_bytes()).unwrap();
        let good_path = path(route, &fx, None);
        // Bodies.
        if route.body {
            for case in body_cases(route) {
                let hs: Vec<(&str, &[u8])> = case
                    .headers
                    .iter()
                    .map(|(k, v)| (*k, v.as_slice()))
                    .collect();
                let a = app
                    .raw(
                        method.clone(),
                        &good_path,
                        Some(TOKEN_ACME_SUPER_ADMIN),
                        &hs,
                        case.body.clone(),
                    )
                    .await;
                sent += 1;
                check(
                    &a,
                    &format!("{} {} [{}]", route.method, route.path, case.label),
                    &mut problems,
                );
                if a.status < 400 {
                    problems.push(format!(
                        "{} {} [{}] accepted: {} {}",
                        route.method,
                        route.path,
                        case.label,
                        a.status,
                        a.text()
                    ));
                }
            }
        }
        // Headers.
        for case in header_cases() {
            let mut hs: Vec<(&str, &[u8])> = case
                .headers
                .iter()
                .map(|(k, v)| (*k, v.as_slice()))
                .collect();
            let failing_body = route.body.then(|| b"{\"unknown_field\": 1}".to_vec());
            if failing_body.is_some() {
                hs.push(("Content-Type", b"application/json"));
            }
            if route.method == "DELETE" && case.headers[0].0 != "Idempotency-Key" {
                hs.push(("Idempotency-Key", b"no"));
            }
            let a = app
                .raw(
                    method.clone(),
                    &good_path,
                    Some(TOKEN_ACME_SUPER_ADMIN),
                    &hs,
                    failing_body,
                )
                .await;
            sent += 1;
            check(
                &a,
                &format!("{} {} [{}]", route.method, route.path, case.label),
                &mut problems,
            );
            let key_bad = case.headers[0].0 == "Idempotency-Key";
            if key_bad
                && route.idempotent
                && (a.status, a.json()["code"].as_str()) != (400, Some("invalid_idempotency_key"))
            {
                problems.push(format!(
                    "{} {} [{}]: want 400 invalid_idempotency_key, got {}",
                    route.method, route.path, case.label, a.status
                ));
            }
            // The header is ignored where it is not honoured.
            if key_bad && !route.idempotent && a.json()["code"] == "invalid_idempotency_key" {
                problems.push(format!(
                    "{} {} [{}]: the key is not read here",
                    route.method, route.path, case.label
                ));
            }
        }
        // Path traversal in every id of the path.
        if route.path.contains('{') {
            for t in TRAVERSALS {
                let p = path(route, &fx, Some(t));
                let body = route
                    .body
                    .then(|| with_name(route, "x").to_string().into_bytes());
                let a = app
                    .raw(
                        method.clone(),
                        &p,
                        Some(TOKEN_ACME_SUPER_ADMIN),
                        &[("Content-Type", b"application/json")],
                        body,
                    )
                    .await;
                sent += 1;
                check(&a, &format!("{} {p}", route.method), &mut problems);
                if a.status < 400 {
                    problems.push(format!("{} {p} accepted: {}", route.method, a.status));
                }
            }
        }
        // A query string that does not decode.
        let a = app
            .raw(
                method.clone(),
                &format!("{good_path}?organization=%FF%FE&page=%00&since=%ZZ"),
                Some(TOKEN_ACME_SUPER_ADMIN),
                &[("Idempotency-Key", b"no")],
                None,
            )
            .await;
        sent += 1;
        check(
            &a,
            &format!("{} {} [bad query]", route.method, route.path),
            &mut problems,
        );
    }
    assert!(
        problems.is_empty(),
        "{} problems in {sent} requests:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert_eq!(app.counts(), before, "rows moved");
    assert_eq!(
        (
            app.count_rows("elastic_ips"),
            app.count_rows("auth_server_credentials")
        ),
        (elastic_ips, credentials)
    );
    // The service still works.
    assert_eq!(
        app.get(&format!("{CLUSTERS}/{}", fx.cluster), TOKEN_ACME_MEMBER)
            .await
            .status,
        200
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undeclared_method_is_405_with_allow() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cases = [
        (Method::PUT, CLUSTERS.to_owned()),
        (Method::DELETE, CLUSTERS.to_owned()),
        (Method::POST, "/v1/catalog".to_owned()),
        (Method::PUT, format!("{CLUSTERS}/{}", uuid::Uuid::new_v4())),
        (
            Method::GET,
            format!("{CLUSTERS}/{}/exposure", uuid::Uuid::new_v4()),
        ),
        (Method::PATCH, AUTH_SERVERS.to_owned()),
    ];
    for (m, p) in cases {
        let a = app
            .send(app.request(m.clone(), &p, Some(TOKEN_ACME_SUPER_ADMIN)))
            .await;
        assert_eq!(a.status, 405, "{m} {p}: {}", a.text());
        assert_eq!(a.problem_code(), "method_not_allowed");
        let allow = a.header("allow").unwrap_or_default();
        assert!(
            !allow.is_empty() && !allow.contains(m.as_str()),
            "{m} {p}: Allow {allow:?}"
        );
    }
    let a = app
        .send(app.request(Method::PUT, CLUSTERS, Some(TOKEN_ACME_SUPER_ADMIN)))
        .await;
    let mut allow: Vec<String> = a
        .header("allow")
        .unwrap()
        .split(',')
        .map(|s| s.trim().to_owned())
        .collect();
    allow.sort();
    assert_eq!(allow, ["GET", "POST"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_path_is_404_problem_json() {
    let app = TestApp::spawn_api_only(&[]).await;
    for p in [
        "/nope",
        "/v1/public/clusterz",
        "/v2/public/clusters",
        "/v1/public/clusters/a/b/c/d",
        "/%FF",
    ] {
        let a = app.get(p, TOKEN_ACME_MEMBER).await;
        assert_eq!(a.status, 404, "{p}");
        assert_eq!(a.problem_code(), "not_found");
        assert!(a.header("x-request-id").is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_response_carries_x_request_id_and_echoes_a_sane_one() {
    let app = TestApp::spawn_api_only(&[]).await;
    for (p, token) in [
        ("/healthz", None),
        ("/v1/catalog?organization=acme", Some(TOKEN_ACME_MEMBER)),
        (CLUSTERS, None),
        ("/nope", None),
    ] {
        let a = app.send(app.request(Method::GET, p, token)).await;
        let id = a.header("x-request-id").unwrap_or_default();
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{p}: {id:?}");
        let b = app
            .send(
                app.request(Method::GET, p, token)
                    .header("X-Request-Id", "trace-abc_123.4:5"),
            )
            .await;
        assert_eq!(
            b.header("x-request-id").as_deref(),
            Some("trace-abc_123.4:5"),
            "{p}"
        );
        if b.status >= 400 {
            assert_eq!(b.json()["request_id"], "trace-abc_123.4:5");
        }
    }
    // Not sane: replaced by a fresh id.
    for bad in [b"a b".as_slice(), b"\xff\xfe", &[b'x'; 300]] {
        let a = app
            .raw(
                Method::GET,
                "/healthz",
                None,
                &[("X-Request-Id", bad)],
                None,
            )
            .await;
        let id = a.header("x-request-id").unwrap_or_default();
        assert!(uuid::Uuid::parse_str(&id).is_ok(), "{id:?}");
    }
}
