//! Spec §4's behaviours that the API decides by itself (1-4, 6 before Provisioned, 7, 8), the
//! kubeconfig 202, the state long-poll and DELETE (CONTRACT §3-§5).

use blackbox::*;
use reqwest::Method;
use serde_json::json;

use crate::errors::expect;

fn id(c: &serde_json::Value) -> String {
    c["id"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behaviour_1_create_reads_the_organization_from_the_body_only() {
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
    assert!(crate::errors::fields(&a).contains(&"organization".to_owned()));
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
async fn behaviour_2_create_checks_pools_and_the_catalog() {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behaviour_3_by_id_routes_take_the_organization_from_the_cluster() {
    let app = TestApp::spawn_api_only(&[]).await;
    let g = app.create_cluster_as(TOKEN_TWO_ORGS, "globex", "g1").await;
    let path = format!("{CLUSTERS}/{}", id(&g));
    // dave reads his globex cluster while naming acme in header and query.
    let r = app
        .request(
            Method::GET,
            &format!("{path}?organization=acme"),
            Some(TOKEN_TWO_ORGS),
        )
        .header("X-Platform-Organization", "acme");
    assert_eq!(app.send(r).await.status, 200);
    // alice cannot reach it by naming globex.
    let r = app
        .request(
            Method::GET,
            &format!("{path}?organization=globex"),
            Some(TOKEN_ACME_SUPER_ADMIN),
        )
        .header("X-Platform-Organization", "globex");
    expect(&app.send(r).await, 403, "forbidden");
    // A by-id route needs no organization at all (carol has no preferred organization).
    let a = app.create_cluster("a1").await;
    assert_eq!(
        app.get(&format!("{CLUSTERS}/{}", id(&a)), TOKEN_ACME_PROJECT_ADMIN)
            .await
            .status,
        200
    );
    // dave is a member of acme: reading works, writing does not, whatever the header says.
    let r = app
        .request(
            Method::PATCH,
            &format!("{CLUSTERS}/{}", id(&a)),
            Some(TOKEN_TWO_ORGS),
        )
        .header("X-Platform-Organization", "globex")
        .json(&json!({"description": "x"}));
    expect(&app.send(r).await, 403, "forbidden");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behaviour_4_idempotency_key_replays_or_conflicts() {
    let app = TestApp::spawn_api_only(&[]).await;
    let key = [("Idempotency-Key", "behaviour-4-key")];
    let first = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &key,
            &cluster_body("acme", "c1"),
        )
        .await;
    assert_eq!(first.status, 201);
    assert_eq!(first.header("idempotency-replay"), None);
    let again = app
        .post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &key,
            &cluster_body("acme", "c1"),
        )
        .await;
    assert_eq!(
        (again.status, again.body.clone()),
        (201, first.body.clone())
    );
    assert_eq!(again.header("idempotency-replay").as_deref(), Some("true"));
    expect(
        &app.post_with(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &key,
            &cluster_body("acme", "c2"),
        )
        .await,
        409,
        "idempotency_key_reused",
    );
    assert_eq!(app.count_rows("clusters"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behaviour_6_exposure_patch_before_provisioned_is_400() {
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
async fn behaviour_7_pool_size_is_immutable_and_the_last_pool_stays() {
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behaviour_8_empty_patch_is_422() {
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
async fn kubeconfig_of_a_pending_cluster_is_202_with_retry_after_5() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    for q in ["", "?format=plain", "?format=json"] {
        let a = app
            .get(
                &format!("{CLUSTERS}/{}/kubeconfig{q}", id(&c)),
                TOKEN_ACME_MEMBER,
            )
            .await;
        assert_eq!(a.status, 202, "{}", a.text());
        assert_eq!(a.header("retry-after").as_deref(), Some("5"));
        assert_eq!(
            a.json(),
            json!({"phase": "Pending", "retry_after_seconds": 5})
        );
    }
    expect(
        &app.get(
            &format!("{CLUSTERS}/{}/kubeconfig?format=yaml", id(&c)),
            TOKEN_ACME_MEMBER,
        )
        .await,
        400,
        "invalid_query",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_long_poll_on_a_pending_cluster() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let state = format!("{CLUSTERS}/{}/state", id(&c));
    let a = app
        .get(&format!("{state}?since=0"), TOKEN_ACME_MEMBER)
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let s = a.json();
    assert_eq!(
        (
            s["cluster_id"].as_str(),
            s["phase"].as_str(),
            s["changed"].as_bool()
        ),
        (Some(id(&c).as_str()), Some("Pending"), Some(true))
    );
    let version = s["version"].as_i64().unwrap();
    assert!(version >= 1);
    let a = app
        .get(
            &format!("{state}?since={version}&timeout_seconds=1"),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        (a.json()["changed"].as_bool(), a.json()["version"].as_i64()),
        (Some(false), Some(version))
    );
    // A change raises the version; a waiting poll sees it.
    let waiting = {
        let (client, url) = (
            app.client.clone(),
            format!("{}{state}?since={version}&timeout_seconds=30", app.url),
        );
        tokio::spawn(async move {
            client
                .get(url)
                .bearer_auth(TOKEN_ACME_MEMBER)
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let p = app
        .patch(
            &format!("{CLUSTERS}/{}", id(&c)),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": "x"}),
        )
        .await;
    assert_eq!(p.status, 200);
    let s = waiting.await.unwrap();
    assert_eq!(s["changed"], true);
    assert!(s["version"].as_i64().unwrap() > version);
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
