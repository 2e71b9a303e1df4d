//! Node pools: a pool's size is fixed, a cluster keeps its last pool, and a pool's labels
//! and taints reach its nodes in place.

use blackbox::*;
use serde_json::{Value, json};

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

/// A taint as the API writes it.
fn taint(key: &str, value: &str, effect: &str) -> serde_json::Value {
    json!({"key": key, "value": value, "effect": effect})
}

/// Taints and labels given at create reach every node; a PATCH of them reaches the same nodes
/// in place (the same names), through an operation, and new nodes get them too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_and_labels_reach_the_nodes_and_a_change_reaches_the_same_nodes() {
    let app = TestApp::spawn_with(&[("RECONCILER_POLL_MS", "20")]).await;
    let gpu = taint("nvidia.com/gpu", "", "NoSchedule");
    let created = app
        .post(
            CLUSTERS,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"organization": "acme", "name": "tainted", "node_pools": [{
                "name": "gpu", "size": "kube.c5.large", "count": 2,
                "labels": {"example.com/role": "gpu"},
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
            }]}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(created.json()["node_pools"][0]["taints"], json!([gpu]));
    let cluster = id(&created.json());
    app.finished_operation(&created).await;
    let nodes = app.nodes_of(&cluster).await;
    assert_eq!(nodes.len(), 2);
    for n in &nodes {
        assert_eq!(n["taints"], json!([gpu]), "{n}");
        assert_eq!(n["labels"], json!({"example.com/role": "gpu"}), "{n}");
    }
    let names: Vec<Value> = nodes.iter().map(|n| n["name"].clone()).collect();

    let pool = format!("{CLUSTERS}/{cluster}/node-pools/gpu");
    let dedicated = taint("dedicated", "ml", "NoExecute");
    let changed = app
        .patch(
            &pool,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"taints": [dedicated], "labels": {"tier": "batch"}}),
        )
        .await;
    assert_eq!(changed.status, 202, "{}", changed.text());
    assert_eq!(changed.json()["taints"], json!([dedicated]));
    let op = app.finished_operation(&changed).await;
    assert_eq!(op["status"], "succeeded", "{op}");
    let nodes = app.nodes_of(&cluster).await;
    assert_eq!(
        nodes.iter().map(|n| n["name"].clone()).collect::<Vec<_>>(),
        names,
        "the same nodes, none replaced"
    );
    for n in &nodes {
        assert_eq!(
            (&n["taints"], &n["labels"], &n["status"]),
            (
                &json!([dedicated]),
                &json!({"tier": "batch"}),
                &json!("Ready")
            ),
            "{n}"
        );
    }

    // A node added later comes up with them.
    let scaled = app
        .patch(&pool, TOKEN_ACME_SUPER_ADMIN, &json!({"count": 3}))
        .await;
    assert_eq!(scaled.status, 202, "{}", scaled.text());
    app.finished_operation(&scaled).await;
    let nodes = app.nodes_of(&cluster).await;
    assert_eq!(nodes.len(), 3);
    assert!(
        nodes.iter().all(|n| n["taints"] == json!([dedicated])),
        "{nodes:?}"
    );
    // Removing them all reaches every node as well.
    let cleared = app
        .patch(&pool, TOKEN_ACME_SUPER_ADMIN, &json!({"taints": []}))
        .await;
    assert_eq!(cleared.status, 202, "{}", cleared.text());
    app.finished_operation(&cleared).await;
    assert!(
        app.nodes_of(&cluster)
            .await
            .iter()
            .all(|n| n["taints"] == json!([])),
    );
}

/// Each bad taint is a 422 naming its field, on the create of a cluster, of a pool and on a
/// pool's PATCH; nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_taints_are_422_naming_the_field_and_write_nothing() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let pools = format!("{CLUSTERS}/{}/node-pools", id(&c));
    let ok = taint("a", "", "NoSchedule");
    let many: Vec<Value> = (0..51)
        .map(|i| taint(&format!("k{i}"), "", "NoSchedule"))
        .collect();
    let cases = [
        (json!([taint("a", "", "NoSchedul")]), "taints[0].effect"),
        (
            json!([ok, {"key": "a", "effect": "NoSchedule"}]),
            "taints[1].key",
        ),
        (json!([taint("bad key", "", "NoSchedule")]), "taints[0].key"),
        (
            json!([taint("Example.com/a", "", "NoSchedule")]),
            "taints[0].key",
        ),
        (
            json!([taint(&"k".repeat(64), "", "NoSchedule")]),
            "taints[0].key",
        ),
        (json!([taint("a", "-v", "NoSchedule")]), "taints[0].value"),
        (json!([{"effect": "NoExecute"}]), "taints[0].key"),
        (json!(many), "taints"),
    ];
    let before = app.counts();
    for (taints, field) in cases {
        let create = app
            .post(
                CLUSTERS,
                TOKEN_ACME_SUPER_ADMIN,
                &json!({"organization": "acme", "name": "c2", "node_pools": [
                    {"size": "kube.c5.large", "count": 1, "taints": taints}]}),
            )
            .await;
        expect(&create, 422, "validation_failed");
        assert!(
            fields(&create).contains(&format!("node_pools[0].{field}")),
            "{taints}: {}",
            create.text()
        );
        let add = app
            .post(
                &pools,
                TOKEN_ACME_SUPER_ADMIN,
                &json!({"name": "p2", "size": "kube.c5.large", "count": 1, "taints": taints}),
            )
            .await;
        expect(&add, 422, "validation_failed");
        assert!(fields(&add).contains(&field.to_owned()), "{}", add.text());
        let patch = app
            .patch(
                &format!("{pools}/default"),
                TOKEN_ACME_SUPER_ADMIN,
                &json!({"taints": taints}),
            )
            .await;
        expect(&patch, 422, "validation_failed");
        assert!(
            fields(&patch).contains(&field.to_owned()),
            "{}",
            patch.text()
        );
    }
    // The same key with two effects is two taints, as Kubernetes has it.
    let two = app
        .patch(
            &format!("{pools}/default"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"taints": [taint("a", "", "NoSchedule"), taint("a", "", "NoExecute")]}),
        )
        .await;
    assert_eq!(two.status, 202, "{}", two.text());
    let null = app
        .patch(
            &format!("{pools}/default"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"taints": null}),
        )
        .await;
    expect(&null, 422, "validation_failed");
    assert_eq!(app.counts(), before);
    let listed = app.get(&pools, TOKEN_ACME_MEMBER).await.json();
    let pool = &listed["items"][0];
    assert_eq!(pool["taints"].as_array().map(Vec::len), Some(2), "{pool}");
}

/// A member may not change a pool's taints, nor may a super_admin of another organization
/// (refused as every object of another organization is, 403, so ids cannot be probed); an id
/// no cluster has is not found. Nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_are_a_super_admins_change_of_their_own_clusters() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let pool = format!("{CLUSTERS}/{}/node-pools/default", id(&c));
    let body = json!({"taints": [taint("a", "", "NoSchedule")]});
    expect(
        &app.patch(&pool, TOKEN_ACME_MEMBER, &body).await,
        403,
        "forbidden",
    );
    expect(
        &app.patch(&pool, TOKEN_INITECH_SUPER_ADMIN, &body).await,
        403,
        "forbidden",
    );
    let nowhere = format!("{CLUSTERS}/{}/node-pools/default", uuid::Uuid::new_v4());
    expect(
        &app.patch(&nowhere, TOKEN_ACME_SUPER_ADMIN, &body).await,
        404,
        "not_found",
    );
    let listed = app
        .get(
            &format!("{CLUSTERS}/{}/node-pools", id(&c)),
            TOKEN_ACME_MEMBER,
        )
        .await
        .json();
    assert_eq!(listed["items"][0]["taints"], json!([]));
}

/// Nodes an earlier release made never got their pool's labels: the upgrade has each live
/// cluster with a labelled pool reconciled, and its nodes get them in place, none replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_upgrade_running_nodes_get_their_pools_labels_in_place() {
    let db = database_of_an_earlier_release("2026-11-28-000011");
    let cluster = uuid::Uuid::new_v4();
    execute_sql(
        &db,
        &format!(
            "INSERT INTO clusters (id, organization_id, organization_slug, name, zone, version, \
             control_plane_option_id, exposure, network_mode, phase, api_endpoint, \
             hub_registration_status, default_environment_status, revision, created_at, updated_at) \
             VALUES ('{cluster}', '{ACME_ID}', 'acme', 'before', 'zone-1', 'v1.32.4', 'cp-standard', \
             'private', 'intranet', 'Provisioned', 'https://before.internal:6443', 'ready', 'ready', \
             3, now(), now())"
        ),
    );
    execute_sql(
        &db,
        &format!(
            "INSERT INTO node_pools (cluster_id, name, size, count, auto_scale, min_nodes, labels, \
             root_volume_size_gib, status, created_at, updated_at) VALUES ('{cluster}', 'default', \
             'kube.c5.large', 2, false, 1, '{{\"tier\": \"web\"}}', 50, 'Ready', now(), now())"
        ),
    );
    for node in ["before-default-aaaaa", "before-default-bbbbb"] {
        execute_sql(
            &db,
            &format!(
                "INSERT INTO nodes (cluster_id, name, pool, status, created_at) \
                 VALUES ('{cluster}', '{node}', 'default', 'Ready', now())"
            ),
        );
    }
    let app = TestApp::spawn_on(
        db,
        &[("RECONCILER_WORKERS", "1"), ("RECONCILER_POLL_MS", "20")],
    )
    .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let nodes = loop {
        let nodes = app.nodes_of(&cluster.to_string()).await;
        if nodes.iter().all(|n| n["labels"] == json!({"tier": "web"})) {
            break nodes;
        }
        assert!(std::time::Instant::now() < deadline, "{nodes:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        nodes.iter().map(|n| n["name"].clone()).collect::<Vec<_>>(),
        [json!("before-default-aaaaa"), json!("before-default-bbbbb")]
    );
}
