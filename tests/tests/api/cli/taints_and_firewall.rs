//! `--taint` on `node-pool add` and `node-pool update` (written as `kubectl taint` writes one),
//! and `cluster control-plane-firewall set`: through the binary, to the nodes and to what the
//! cluster's API server admits; the API's refusals with their exit codes.

use serde_json::json;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn taints_reach_the_nodes_and_the_firewall_is_set_and_enforced() {
    let app = TestApp::spawn_with(&[("RECONCILER_POLL_MS", "20")]).await;
    let user = logged_in(&app).await;
    user.run(&[
        "cluster",
        "create",
        "cli-t",
        "--size",
        "kube.c5.large",
        "--count",
        "1",
        "--wait",
    ])
    .await
    .expect(0);
    let added = json(
        &user,
        &[
            "node-pool",
            "add",
            "cli-t",
            "gpu",
            "--size",
            "kube.c5.large",
            "--count",
            "2",
            "--taint",
            "nvidia.com/gpu:NoSchedule",
            "--taint",
            "dedicated=ml:NoExecute",
            "--label",
            "role=gpu",
            "--wait",
        ],
    )
    .await;
    let both = json!([
        {"key": "nvidia.com/gpu", "value": "", "effect": "NoSchedule"},
        {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
    ]);
    assert_eq!(added["taints"], both);
    let table = user.run(&["node-pool", "list", "cli-t"]).await.expect(0);
    assert!(
        table.stdout.contains("TAINTS")
            && table
                .stdout
                .contains("nvidia.com/gpu:NoSchedule,dedicated=ml:NoExecute"),
        "{table:?}"
    );
    let nodes = json(&user, &["node", "list", "cli-t", "--pool", "gpu"]).await;
    let names: Vec<_> = nodes["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].clone())
        .collect();
    assert_eq!(names.len(), 2);
    assert!(
        nodes["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| n["taints"] == both)
    );

    json(
        &user,
        &[
            "node-pool",
            "update",
            "cli-t",
            "gpu",
            "--taint",
            "spot:PreferNoSchedule",
            "--wait",
        ],
    )
    .await;
    let nodes = json(&user, &["node", "list", "cli-t", "--pool", "gpu"]).await;
    let items = nodes["items"].as_array().unwrap();
    assert_eq!(
        items.iter().map(|n| n["name"].clone()).collect::<Vec<_>>(),
        names
    );
    assert!(items.iter().all(|n| n["taints"]
        == json!([{"key": "spot", "value": "", "effect": "PreferNoSchedule"}])
        && n["labels"] == json!({"role": "gpu"})));

    // A taint without its effect, or with one Kubernetes does not know: the API's 422, exit 2.
    for bad in ["spot=yes", "spot:Sometimes"] {
        let refused = user
            .run(&["node-pool", "update", "cli-t", "gpu", "--taint", bad])
            .await
            .expect(2);
        assert!(refused.stderr.contains("taints[0].effect"), "{refused:?}");
    }
    user.run(&["node-pool", "update", "cli-t", "gpu"])
        .await
        .expect(2);

    let set = json(
        &user,
        &[
            "cluster",
            "control-plane-firewall",
            "set",
            "cli-t",
            "--allow",
            "203.0.113.0/24",
            "--allow",
            "2001:db8::/32",
            "--wait",
        ],
    )
    .await;
    assert_eq!(
        set["control_plane_firewall"],
        json!({"enabled": true, "allowed_addresses": ["203.0.113.0/24", "2001:db8::/32"]})
    );
    let shown = user.run(&["cluster", "get", "cli-t"]).await.expect(0);
    assert!(
        shown.stdout.contains("only 203.0.113.0/24, 2001:db8::/32"),
        "{shown:?}"
    );
    let host_bits = user
        .run(&[
            "cluster",
            "control-plane-firewall",
            "set",
            "cli-t",
            "--allow",
            "10.1.0.0/8",
        ])
        .await
        .expect(2);
    assert!(host_bits.stderr.contains("10.0.0.0/8"), "{host_bits:?}");
    user.run(&["cluster", "control-plane-firewall", "set", "cli-t"])
        .await
        .expect(2);
    let opened = json(
        &user,
        &[
            "cluster",
            "control-plane-firewall",
            "set",
            "cli-t",
            "--disable",
            "--wait",
        ],
    )
    .await;
    assert_eq!(opened["control_plane_firewall"]["enabled"], false);
    assert_eq!(
        opened["control_plane_firewall"]["allowed_addresses"],
        json!(["203.0.113.0/24", "2001:db8::/32"]),
        "kept for later"
    );
}
