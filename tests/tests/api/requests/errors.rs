//! The error table, row by row, as far as the API decides it without provisioning:
//! each row's status, its code, a problem+json body, and nothing written.

use blackbox::*;
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_400_organization_required_on_collection_reads() {
    let app = TestApp::spawn_api_only(&[]).await;
    // carol has no preferred organization.
    for path in [CLUSTERS, "/v1/catalog", AUTH_SERVERS] {
        expect(
            &app.get(path, TOKEN_ACME_PROJECT_ADMIN).await,
            400,
            "organization_required",
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_400_invalid_idempotency_key_writes_nothing() {
    let app = TestApp::spawn_api_only(&[]).await;
    for key in [
        "short",
        "has space in it",
        "bad/slash/here",
        &"k".repeat(256),
    ] {
        let a = app
            .post_with(
                CLUSTERS,
                TOKEN_ACME_SUPER_ADMIN,
                &[("Idempotency-Key", key)],
                &cluster_body("acme", "c1"),
            )
            .await;
        expect(&a, 400, "invalid_idempotency_key");
    }
    assert_eq!(app.counts(), [0, 0, 0, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_400_unknown_zone_version_and_machine_tier() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut zone = cluster_body("acme", "c1");
    zone["zone"] = json!("zone-9");
    expect(
        &app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &zone).await,
        400,
        "unknown_zone",
    );
    let mut version = cluster_body("acme", "c1");
    version["version"] = json!("v0.0.1");
    expect(
        &app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &version).await,
        400,
        "unknown_version",
    );
    let mut tier = cluster_body("acme", "c1");
    tier["node_pools"][0]["size"] = json!("kube.huge");
    expect(
        &app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &tier).await,
        400,
        "unknown_machine_tier",
    );
    expect(
        &app.get(
            "/v1/catalog?organization=acme&zone=zone-9",
            TOKEN_ACME_MEMBER,
        )
        .await,
        400,
        "unknown_zone",
    );
    expect(
        &app.get(
            "/v1/public/clusters?organization=acme&zone=zone-9",
            TOKEN_ACME_MEMBER,
        )
        .await,
        400,
        "unknown_zone",
    );
    assert_eq!(app.counts(), [0, 0, 0, 0]);
    // A pool added to an existing cluster is checked against the catalog too.
    let c = app.create_cluster("c2").await;
    let before = app.counts();
    let path = format!("{CLUSTERS}/{}/node-pools", c["id"].as_str().unwrap());
    let a = app
        .post(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "more", "size": "kube.huge", "count": 1}),
        )
        .await;
    expect(&a, 400, "unknown_machine_tier");
    assert_eq!(app.counts(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_400_phase_not_provisioned_on_exposure_patch() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    assert_eq!(c["phase"], "Pending");
    let other = if c["exposure"] == "public" {
        "private"
    } else {
        "public"
    };
    let path = format!("{CLUSTERS}/{}/exposure", c["id"].as_str().unwrap());
    let a = app
        .patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"exposure": other}))
        .await;
    expect(&a, 400, "phase_not_provisioned");
    let after = app
        .get(
            &format!("{CLUSTERS}/{}", c["id"].as_str().unwrap()),
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await
        .json();
    assert_eq!(after["exposure"], c["exposure"]);
    assert_eq!(after["exposure_change"], serde_json::Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_401_missing_malformed_or_rejected_token() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cases: [Option<&str>; 4] = [
        None,
        Some("Token abc"),
        Some("Bearer "),
        Some("Bearer nope-nope"),
    ];
    for h in cases {
        let mut r = app
            .request(Method::POST, CLUSTERS, None)
            .json(&cluster_body("acme", "c1"));
        if let Some(h) = h {
            r = r.header("Authorization", h);
        }
        let a = app.send(r).await;
        expect(&a, 401, "unauthorized");
        assert_eq!(a.header("www-authenticate").as_deref(), Some("Bearer"));
    }
    assert_eq!(app.counts(), [0, 0, 0, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_402_prepaid_without_credit_on_create_and_scale() {
    let app = TestApp::spawn_api_only(&[]).await;
    // erin: super_admin of initech, prepaid without credit.
    let a = app
        .post(
            CLUSTERS,
            TOKEN_INITECH_SUPER_ADMIN,
            &cluster_body("initech", "c1"),
        )
        .await;
    expect(&a, 402, "insufficient_credit");
    assert_eq!(app.counts(), [0, 0, 0, 0]);
    // globex is prepaid with credit: dave may create and add a pool.
    let c = app.create_cluster_as(TOKEN_TWO_ORGS, "globex", "g1").await;
    let path = format!("{CLUSTERS}/{}/node-pools", c["id"].as_str().unwrap());
    let a = app
        .post(
            &path,
            TOKEN_TWO_ORGS,
            &json!({"name": "more", "size": "kube.c5.large", "count": 1}),
        )
        .await;
    assert_eq!(a.status, 202, "{}", a.text());
}

/// Credit that runs out at the platform refuses the next node at once, though the server
/// holds globex in its organization cache: changes that add nodes read billing fresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credit_run_out_at_the_platform_refuses_the_next_node_at_once() {
    let app = TestApp::spawn_api_only(&[("ORG_CACHE_TTL_S", "600")]).await;
    let c = app.create_cluster_as(TOKEN_TWO_ORGS, "globex", "g1").await;
    let cluster = format!("{CLUSTERS}/{}", c["id"].as_str().unwrap());
    let globex = |credit_cents| domain::model::identity::Organization {
        id: GLOBEX_ID,
        slug: "globex".into(),
        billing: domain::model::identity::Billing {
            plan: domain::model::identity::Plan::Prepaid,
            credit_cents,
        },
    };
    app.platform.add_organization(globex(0));

    let pool = json!({"name": "more", "size": "kube.c5.large", "count": 1});
    let adds_nodes = [
        (
            Method::POST,
            CLUSTERS.to_owned(),
            cluster_body("globex", "g2"),
        ),
        (Method::POST, format!("{cluster}/node-pools"), pool.clone()),
        (
            Method::PATCH,
            format!("{cluster}/node-pools/default"),
            json!({"count": 5}),
        ),
    ];
    for (method, path, body) in &adds_nodes {
        let r = app
            .send(
                app.request(method.clone(), path, Some(TOKEN_TWO_ORGS))
                    .json(body),
            )
            .await;
        expect(&r, 402, "insufficient_credit");
    }
    // Removing nodes needs no credit, and reads still answer.
    let r = app
        .patch(
            &format!("{cluster}/node-pools/default"),
            TOKEN_TWO_ORGS,
            &json!({"count": 1}),
        )
        .await;
    assert_eq!(r.status, 202, "{}", r.text());
    assert_eq!(app.get(&cluster, TOKEN_TWO_ORGS).await.status, 200);

    // Topped up: the next node is allowed at once too.
    app.platform.add_organization(globex(10_000));
    let r = app
        .post(&format!("{cluster}/node-pools"), TOKEN_TWO_ORGS, &pool)
        .await;
    assert_eq!(r.status, 202, "{}", r.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_403_role_other_organization_and_writer_nowhere() {
    let app = TestApp::spawn_api_only(&[]).await;
    // Role: bob is a member of acme, carol a project_admin.
    for t in [TOKEN_ACME_MEMBER, TOKEN_ACME_PROJECT_ADMIN] {
        expect(
            &app.post(CLUSTERS, t, &cluster_body("acme", "c1")).await,
            403,
            "forbidden",
        );
    }
    // Another organization: alice into globex.
    expect(
        &app.post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body("globex", "c1"),
        )
        .await,
        403,
        "forbidden",
    );
    assert_eq!(app.counts(), [0, 0, 0, 0]);
    let g = app.create_cluster_as(TOKEN_TWO_ORGS, "globex", "g1").await;
    let gpath = format!("{CLUSTERS}/{}", g["id"].as_str().unwrap());
    expect(
        &app.get(&gpath, TOKEN_ACME_SUPER_ADMIN).await,
        403,
        "forbidden",
    );
    expect(
        &app.delete(&gpath, TOKEN_ACME_SUPER_ADMIN).await,
        403,
        "forbidden",
    );
    expect(
        &app.get(
            "/v1/public/clusters?organization=globex",
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await,
        403,
        "forbidden",
    );
    // Super_admin nowhere: 403 even for an id that does not exist (existence not revealed).
    let unknown = format!("{CLUSTERS}/{}", uuid::Uuid::new_v4());
    expect(
        &app.delete(&unknown, TOKEN_ACME_MEMBER).await,
        403,
        "forbidden",
    );
    expect(
        &app.patch(&unknown, TOKEN_ACME_MEMBER, &json!({"description": "x"}))
            .await,
        403,
        "forbidden",
    );
    expect(
        &app.delete(&format!("{CLUSTERS}/not-a-uuid"), TOKEN_ACME_MEMBER)
            .await,
        403,
        "forbidden",
    );
    // The same writer with a super_admin role somewhere sees 404 for it.
    expect(
        &app.delete(&unknown, TOKEN_ACME_SUPER_ADMIN).await,
        404,
        "not_found",
    );
    assert_eq!(
        app.get(&gpath, TOKEN_TWO_ORGS).await.json()["phase"],
        "Pending"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_404_unknown_organization_and_cluster() {
    let app = TestApp::spawn_api_only(&[]).await;
    expect(
        &app.post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body("no-such-org", "c1"),
        )
        .await,
        404,
        "not_found",
    );
    let unknown_id = uuid::Uuid::new_v4().to_string();
    expect(
        &app.post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body(&unknown_id, "c1"),
        )
        .await,
        404,
        "not_found",
    );
    expect(
        &app.get(
            "/v1/public/clusters?organization=no-such-org",
            TOKEN_ACME_MEMBER,
        )
        .await,
        404,
        "not_found",
    );
    expect(
        &app.get(
            &format!("/v1/catalog?organization={unknown_id}"),
            TOKEN_ACME_MEMBER,
        )
        .await,
        404,
        "not_found",
    );
    expect(
        &app.get(&format!("{CLUSTERS}/{unknown_id}"), TOKEN_ACME_MEMBER)
            .await,
        404,
        "not_found",
    );
    expect(
        &app.get(&format!("{CLUSTERS}/not-a-uuid"), TOKEN_ACME_MEMBER)
            .await,
        404,
        "not_found",
    );
    expect(
        &app.get(&format!("{CLUSTERS}/{unknown_id}/state"), TOKEN_ACME_MEMBER)
            .await,
        404,
        "not_found",
    );
    assert_eq!(app.counts(), [0, 0, 0, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_409_key_reused_and_name_conflict() {
    let app = TestApp::spawn_api_only(&[]).await;
    let key = [("Idempotency-Key", "key-12345678")];
    assert_eq!(
        app.post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &key,
            &cluster_body("acme", "c1")
        )
        .await
        .status,
        201
    );
    let before = app.counts();
    let a = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &key,
            &cluster_body("acme", "c2"),
        )
        .await;
    expect(&a, 409, "idempotency_key_reused");
    expect(
        &app.post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &cluster_body("acme", "c1"),
        )
        .await,
        409,
        "name_conflict",
    );
    assert_eq!(app.counts(), before);
    // The same name in another organization is fine.
    app.create_cluster_as(TOKEN_TWO_ORGS, "globex", "c1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_413_body_over_one_mib() {
    let app = TestApp::spawn_api_only(&[]).await;
    let mut body = cluster_body("acme", "c1");
    body["description"] = json!("d".repeat(1 << 20));
    expect(
        &app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &body).await,
        413,
        "payload_too_large",
    );
    assert_eq!(app.counts(), [0, 0, 0, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_415_body_not_json() {
    let app = TestApp::spawn_api_only(&[]).await;
    let body = cluster_body("acme", "c1").to_string().into_bytes();
    for ct in [
        b"text/plain".as_slice(),
        b"application/x-www-form-urlencoded",
        b"application/xml",
    ] {
        let a = app
            .raw(
                Method::POST,
                CLUSTERS,
                Some(TOKEN_ACME_SUPER_ADMIN),
                &[("Content-Type", ct)],
                Some(body.clone()),
            )
            .await;
        expect(&a, 415, "unsupported_media_type");
    }
    // No Content-Type at all is read as JSON.
    let a = app
        .raw(
            Method::POST,
            CLUSTERS,
            Some(TOKEN_ACME_SUPER_ADMIN),
            &[],
            Some(body),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_422_schema_problems_name_their_field() {
    let app = TestApp::spawn_api_only(&[]).await;
    let cases: Vec<(serde_json::Value, &str)> = vec![
        (
            json!({"organization": "acme", "name": "c1", "node_pools": [{"size": "kube.c5.large", "count": "3"}]}),
            "node_pools[0].count",
        ),
        (
            json!({"organization": "acme", "name": 5, "node_pools": [{"size": "kube.c5.large", "count": 1}]}),
            "name",
        ),
        (
            json!({"organization": "acme", "name": "c1", "tags": "a", "node_pools": [{"size": "kube.c5.large", "count": 1}]}),
            "tags",
        ),
        (
            json!({"organization": "acme", "name": "c1", "node_pools": [{"size": "kube.c5.large", "count": 1, "colour": "red"}]}),
            "node_pools[0].colour",
        ),
        (
            json!({"organization": "acme", "name": "c1", "extra": 1, "node_pools": [{"size": "kube.c5.large", "count": 1}]}),
            "extra",
        ),
        (
            json!({"organization": "acme", "name": "c1", "control_plane_option_id": "cp-ha", "node_pools": [{"size": "kube.c5.large", "count": 1}]}),
            "control_plane_option_id",
        ),
        (
            json!({"name": "c1", "node_pools": [{"size": "kube.c5.large", "count": 1}]}),
            "organization",
        ),
        (
            json!({"organization": "acme", "name": "c1", "node_pools": [{"size": "kube.c5.large", "count": 0}]}),
            "node_pools[0].count",
        ),
        (
            json!({"organization": "acme", "name": "c1", "node_pools": []}),
            "node_pools",
        ),
        (
            json!({"organization": "acme", "name": "c1", "exposure": "internal", "node_pools": [{"size": "kube.c5.large", "count": 1}]}),
            "exposure",
        ),
    ];
    for (body, field) in &cases {
        let a = app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, body).await;
        expect(&a, 422, "validation_failed");
        let f = fields(&a);
        assert!(!f.is_empty(), "{body}: {}", a.text());
        if !field.is_empty() {
            assert!(
                f.iter().any(|x| x == field),
                "{body}: want {field}, got {f:?}"
            );
        }
    }
    // The unknown-field answers name the field they refused.
    let a = app
        .post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &cases[5].0)
        .await;
    assert!(a.text().contains("control_plane_option_id"), "{}", a.text());
    // count 0 is fine with auto_scale.
    let ok = json!({"organization": "acme", "name": "auto", "node_pools": [{"size": "kube.c5.large", "count": 0, "auto_scale": true, "min_nodes": 0, "max_nodes": 3}]});
    assert_eq!(
        app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &ok).await.status,
        201
    );
    let before = app.counts();
    let c = app
        .get(&format!("{CLUSTERS}?organization=acme"), TOKEN_ACME_MEMBER)
        .await
        .json();
    let path = format!("{CLUSTERS}/{}", c["items"][0]["id"].as_str().unwrap());
    for body in [
        json!({}),
        json!({"name": "other"}),
        json!({"network_mode": "internet"}),
        json!({"tags": null}),
        json!({"description": 5}),
    ] {
        expect(
            &app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &body).await,
            422,
            "validation_failed",
        );
    }
    let pool = format!("{path}/node-pools/default");
    for body in [
        json!({}),
        json!({"size": "kube.c5.xlarge"}),
        json!({"count": null}),
        json!({"labels": null}),
    ] {
        expect(
            &app.patch(&pool, TOKEN_ACME_SUPER_ADMIN, &body).await,
            422,
            "validation_failed",
        );
    }
    assert_eq!(app.counts(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_503_zone_capacity_exhausted() {
    let app = TestApp::spawn_api_only(&[("ZONE_MAX_NODES", "5")]).await;
    let mut big = cluster_body("acme", "c1");
    big["node_pools"][0]["count"] = json!(6);
    let a = app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &big).await;
    expect(&a, 503, "capacity_exhausted");
    assert!(a.header("retry-after").is_some());
    assert_eq!(app.counts(), [0, 0, 0, 0]);
    // Within capacity: fine; then growing past it is refused.
    let c = app.create_cluster("c2").await;
    let pool = format!(
        "{CLUSTERS}/{}/node-pools/default",
        c["id"].as_str().unwrap()
    );
    let before = app.counts();
    expect(
        &app.patch(&pool, TOKEN_ACME_SUPER_ADMIN, &json!({"count": 6}))
            .await,
        503,
        "capacity_exhausted",
    );
    let add = format!("{CLUSTERS}/{}/node-pools", c["id"].as_str().unwrap());
    expect(
        &app.post(
            &add,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "more", "size": "kube.c5.large", "count": 4}),
        )
        .await,
        503,
        "capacity_exhausted",
    );
    assert_eq!(app.counts(), before);
    // A 503 is not stored on the key: a retry runs anew.
    let key = [("Idempotency-Key", "cap-key-0001")];
    let a = app
        .post_with(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &key, &big)
        .await;
    expect(&a, 503, "capacity_exhausted");
    assert_eq!(app.count_rows("idempotency_keys"), 0);
}

/// Sends a POST of `chunks` × 64 KiB of spaces by hand (chunked, or with its Content-Length)
/// and reads the answer even when the server stops reading early; returns (head, body).
async fn big_post(app: &TestApp, chunks: usize, chunked: bool) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const CHUNK: usize = 64 * 1024;
    let addr = app.url.trim_start_matches("http://").to_owned();
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let framing = if chunked {
        "Transfer-Encoding: chunked".to_owned()
    } else {
        format!("Content-Length: {}", chunks * CHUNK)
    };
    let head = format!(
        "POST {CLUSTERS} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN_ACME_SUPER_ADMIN}\r\n\
         Content-Type: application/json\r\n{framing}\r\nConnection: close\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; CHUNK];
    for _ in 0..chunks {
        let size_line = if chunked {
            format!("{CHUNK:x}\r\n")
        } else {
            String::new()
        };
        let tail: &[u8] = if chunked { b"\r\n" } else { b"" };
        // The server may answer and stop reading once the limit is passed.
        if s.write_all(size_line.as_bytes()).await.is_err()
            || s.write_all(&chunk).await.is_err()
            || s.write_all(tail).await.is_err()
        {
            break;
        }
    }
    if chunked {
        let _ = s.write_all(b"0\r\n\r\n").await;
    }
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    (head.to_ascii_lowercase(), body.to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_413_for_ten_mib_and_for_a_chunked_body_without_length() {
    let app = TestApp::spawn_api_only(&[]).await;
    for chunked in [false, true] {
        let (head, body) = big_post(&app, 160, chunked).await;
        assert!(
            head.starts_with("http/1.1 413"),
            "chunked {chunked}: {head}"
        );
        assert!(
            head.contains("content-type: application/problem+json"),
            "{head}"
        );
        assert!(head.contains("x-request-id:"), "{head}");
        assert!(
            body.contains("\"payload_too_large\"") && body.contains("\"status\":413"),
            "{body}"
        );
    }
    assert_eq!(app.counts(), [0, 0, 0, 0]);
}
