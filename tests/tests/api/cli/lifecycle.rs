//! A cluster's whole life through the binary: login, create --wait, kubeconfig save (checked
//! by kubectl), a pool added and scaled, an Elastic IP and a firewall rule, delete --wait.

use std::os::unix::fs::PermissionsExt;

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_keeps_the_token_private_and_never_prints_it() {
    let app = TestApp::spawn_api_only(&[]).await;
    let user = logged_in(&app).await;
    let mode = std::fs::metadata(user.config_file()).map(|m| m.permissions().mode() & 0o777);
    assert_eq!(mode.ok(), Some(0o600));
    let status = user.run(&["auth", "status"]).await.expect(0);
    assert!(status.stdout.contains("accepted"), "{status:?}");
    no_token_in(&status);
    let contexts = json(&user, &["context", "list"]).await;
    assert_eq!(contexts["current_context"], "default");
    assert_eq!(contexts["contexts"][0]["token_set"], true);
    assert!(!contexts.to_string().contains(TOKEN_ACME_SUPER_ADMIN));

    // A refused token is not saved; logout forgets the saved one.
    let refused = user
        .run_with(
            &[
                "auth",
                "login",
                "--url",
                &app.url,
                "--token-stdin",
                "--name",
                "bad",
            ],
            "not-a-token\n",
            &[],
        )
        .await
        .expect(3);
    assert!(refused.stderr.contains("refused"), "{refused:?}");
    user.run(&["auth", "logout"]).await.expect(0);
    let after = user.run(&["cluster", "list"]).await.expect(3);
    assert!(after.stderr.contains("kubesvc auth login"), "{after:?}");
}

/// Two contexts (two organizations here; two endpoints work the same), one current; a flag
/// or a variable picks another for one command without changing the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contexts_pick_the_endpoint_and_organization() {
    let app = TestApp::spawn_api_only(&[]).await;
    let user = logged_in(&app).await;
    create_small(&user, "in-acme").await;
    login(
        &user,
        &app,
        "initech",
        Some("initech"),
        TOKEN_INITECH_SUPER_ADMIN,
    )
    .await;
    // The new context is current: initech has no clusters.
    assert_eq!(
        user.run(&["cluster", "list", "-o", "name"])
            .await
            .expect(0)
            .stdout,
        ""
    );
    let acme = user
        .run(&["cluster", "list", "-o", "name", "--context", "default"])
        .await
        .expect(0);
    assert_eq!(acme.stdout, "in-acme\n");
    let by_env = user
        .run_with(
            &["cluster", "list", "-o", "name"],
            "",
            &[("KUBESVC_CONTEXT", "default")],
        )
        .await
        .expect(0);
    assert_eq!(by_env.stdout, "in-acme\n");
    user.run(&["context", "use", "default"]).await.expect(0);
    let listed = json(&user, &["context", "list"]).await;
    assert_eq!(listed["current_context"], "default");
    assert_eq!(listed["contexts"].as_array().map(Vec::len), Some(2));
    user.run(&["context", "delete", "initech", "--yes"])
        .await
        .expect(0);
    user.run(&["cluster", "list", "--context", "initech"])
        .await
        .expect(2);
    user.run(&["context", "use", "nowhere"]).await.expect(2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_lives_its_whole_life_through_the_cli() {
    let app = TestApp::spawn().await;
    let user = logged_in(&app).await;

    let created = user
        .run(&[
            "cluster",
            "create",
            "life-1",
            "--size",
            "kube.c5.large",
            "--count",
            "1",
            "--wait",
            "-o",
            "json",
        ])
        .await
        .expect(0);
    assert_eq!(created.json()["phase"], "Provisioned");
    // Off a terminal each phase is a plain line on stderr, with no escape codes.
    assert!(
        created.stderr.contains("cluster life-1: Provisioned"),
        "{created:?}"
    );
    assert!(!created.stderr.contains('\x1b'), "{created:?}");
    let names = user.run(&["cluster", "list", "-o", "name"]).await.expect(0);
    assert_eq!(names.stdout, "life-1\n");
    let updated = json(
        &user,
        &[
            "cluster",
            "update",
            "life-1",
            "--description",
            "payments",
            "--tag",
            "team-a",
        ],
    )
    .await;
    assert_eq!(
        (updated["description"].as_str(), updated["tags"][0].as_str()),
        (Some("payments"), Some("team-a"))
    );
    let cleared = json(
        &user,
        &[
            "cluster",
            "update",
            "life-1",
            "--clear-description",
            "--clear-tags",
        ],
    )
    .await;
    assert_eq!(
        (
            cleared["description"].is_null(),
            cleared["tags"].as_array().map(Vec::len)
        ),
        (true, Some(0))
    );
    let bare = user
        .run(&["cluster", "list", "--no-header"])
        .await
        .expect(0);
    assert!(bare.stdout.starts_with("life-1  Provisioned"), "{bare:?}");
    let yaml = user
        .run(&["cluster", "get", "life-1", "-o", "yaml"])
        .await
        .expect(0);
    assert!(
        yaml.stdout.contains("\nphase: \"Provisioned\"\n"),
        "{yaml:?}"
    );

    kubeconfig_is_merged_beside_an_unrelated_context(&user).await;
    let shown = user
        .run(&["cluster", "kubeconfig", "show", "life-1"])
        .await
        .expect(0);
    assert!(
        shown.stdout.starts_with("apiVersion: v1\nkind: Config\n"),
        "{shown:?}"
    );

    user.run(&[
        "node-pool",
        "add",
        "life-1",
        "batch",
        "--size",
        "kube.c5.large",
        "--count",
        "1",
        "--wait",
    ])
    .await
    .expect(0);
    let scaled = json(
        &user,
        &[
            "node-pool",
            "scale",
            "life-1",
            "batch",
            "--count",
            "2",
            "--wait",
        ],
    )
    .await;
    assert_eq!(
        (scaled["count"].as_u64(), scaled["status"].as_str()),
        (Some(2), Some("Ready"))
    );
    let advice = user
        .run(&[
            "node-pool",
            "scale",
            "life-1",
            "batch",
            "--size",
            "kube.c5.xlarge",
        ])
        .await
        .expect(2);
    assert!(
        advice.stderr.contains("add a pool of the new size"),
        "{advice:?}"
    );
    let nodes = json(&user, &["node", "list", "life-1", "--pool", "batch"]).await;
    assert_eq!(nodes["items"].as_array().map(Vec::len), Some(2));
    let node = nodes["items"][0]["name"].as_str().unwrap_or_default();
    let replaced = json(&user, &["node", "delete", "life-1", node, "--yes"]).await;
    assert_eq!(replaced["status"], "Deleting");
    user.run(&["node-pool", "delete", "life-1", "batch", "--wait", "--yes"])
        .await
        .expect(0);
    assert_eq!(
        user.run(&["node-pool", "list", "life-1", "-o", "name"])
            .await
            .expect(0)
            .stdout,
        "default\n"
    );

    let private = json(
        &user,
        &["cluster", "exposure", "set", "life-1", "private", "--wait"],
    )
    .await;
    assert_eq!(
        (
            private["exposure"].as_str(),
            private["exposure_change"].is_null()
        ),
        (Some("private"), true)
    );

    let eip = json(
        &user,
        &["eip", "allocate", "life-1", "--name", "web", "--wait"],
    )
    .await;
    assert_eq!(eip["status"], "Ready");
    assert!(eip["address"].is_string(), "{eip}");
    user.run(&["eip", "release", "life-1", "web", "--wait", "--yes"])
        .await
        .expect(0);
    assert_eq!(
        json(&user, &["eip", "list", "life-1"]).await["items"],
        serde_json::json!([])
    );

    let rule = json(
        &user,
        &[
            "firewall-rule",
            "create",
            "life-1",
            "--name",
            "https",
            "--protocol",
            "tcp",
            "--port",
            "443",
            "--source",
            "203.0.113.0/24",
            "--wait",
        ],
    )
    .await;
    assert_eq!(
        (rule["status"].as_str(), rule["port_range"]["to"].as_u64()),
        (Some("Active"), Some(443))
    );
    user.run(&[
        "firewall-rule",
        "delete",
        "life-1",
        "https",
        "--wait",
        "--yes",
    ])
    .await
    .expect(0);

    let deleted = user
        .run(&["cluster", "delete", "life-1", "--wait", "--yes"])
        .await
        .expect(0);
    assert!(
        deleted.stderr.contains("cluster life-1: deleted"),
        "{deleted:?}"
    );
    user.run(&["cluster", "get", "life-1"]).await.expect(4);
}

/// `kubeconfig save` into a KUBECONFIG that already has a context kubectl made (with a user
/// named `y`, which YAML 1.1 would read as a boolean if written bare): both contexts are there
/// for kubectl afterwards, and ours is current only with --set-current.
async fn kubeconfig_is_merged_beside_an_unrelated_context(user: &CliUser) {
    user.other(
        "kubectl",
        &["config", "set-context", "other", "--cluster=x", "--user=y"],
    )
    .await
    .expect(0);
    user.other("kubectl", &["config", "use-context", "other"])
        .await
        .expect(0);
    let saved = user
        .run(&["cluster", "kubeconfig", "save", "life-1"])
        .await
        .expect(0);
    assert!(
        saved.stderr.contains("Added context \"life-1\""),
        "{saved:?}"
    );
    let contexts = user
        .other("kubectl", &["config", "get-contexts", "-o", "name"])
        .await
        .expect(0);
    assert_eq!(contexts.stdout, "life-1\nother\n");
    let current = user
        .other("kubectl", &["config", "current-context"])
        .await
        .expect(0);
    assert_eq!(current.stdout, "other\n");

    user.run(&["cluster", "kubeconfig", "save", "life-1", "--set-current"])
        .await
        .expect(0);
    let minified = user
        .other("kubectl", &["config", "view", "--minify", "-o", "jsonpath={.contexts[0].name} {.clusters[0].cluster.server} {.contexts[0].context.user}"])
        .await
        .expect(0);
    let fields: Vec<&str> = minified.stdout.split(' ').collect();
    assert_eq!(fields.first(), Some(&"life-1"), "{minified:?}");
    assert!(
        fields
            .get(1)
            .is_some_and(|s| s.starts_with("https://life-1")),
        "{minified:?}"
    );
    assert_eq!(fields.get(2), Some(&"life-1-admin"));
    let other = user
        .other(
            "kubectl",
            &[
                "config",
                "view",
                "-o",
                "jsonpath={.contexts[?(@.name==\"other\")].context.user}",
            ],
        )
        .await
        .expect(0);
    assert_eq!(other.stdout, "y", "the unrelated context is intact");
    let mode = std::fs::metadata(user.kubeconfig()).map(|m| m.permissions().mode() & 0o777);
    assert_eq!(mode.ok(), Some(0o600));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_save_waits_for_the_control_plane_and_ctrl_c_leaves_a_wait_alone() {
    // Slow steps: the kubeconfig is not ready when asked for.
    let app = TestApp::spawn_with(&[("PROVISIONER_STEP_MS", "1500")]).await;
    let user = logged_in(&app).await;
    create_small(&user, "slow-1").await;
    let saved = user
        .run(&["cluster", "kubeconfig", "save", "slow-1"])
        .await
        .expect(0);
    assert!(
        saved.stderr.contains("waiting for its control plane"),
        "{saved:?}"
    );
    user.other(
        "kubectl",
        &["config", "view", "--minify", "--context", "slow-1"],
    )
    .await
    .expect(0);

    // A cluster that never settles (no provisioning at all): Ctrl-C ends the wait, not the cluster.
    let idle = TestApp::spawn_api_only(&[]).await;
    let waiter = logged_in(&idle).await;
    create_small(&waiter, "idle-1").await;
    let run = waiter
        .interrupted(&["cluster", "wait", "idle-1"], "cluster idle-1: Pending")
        .await;
    assert_eq!(run.code, 130, "{run:?}");
    assert!(
        run.stderr
            .contains("Follow it again with: kubesvc cluster wait idle-1"),
        "{run:?}"
    );
    let still = json(&waiter, &["cluster", "get", "idle-1"]).await;
    assert_eq!(still["phase"], "Pending");
}

/// The catalog as a person reads it, and a create that takes its recommended choices; a
/// create run twice with one `--idempotency-key` makes one cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_guides_a_create_and_a_given_key_makes_one_cluster() {
    let app = TestApp::spawn_api_only(&[]).await;
    let user = logged_in(&app).await;
    let catalog = user.run(&["catalog"]).await.expect(0);
    let recommended = catalog
        .stdout
        .lines()
        .find(|l| l.starts_with("kube.") && l.trim_end().ends_with('*'))
        .and_then(|l| l.split_whitespace().next())
        .map(str::to_owned);
    assert!(recommended.is_some(), "{catalog:?}");
    let versions = json(&user, &["catalog"]).await;
    assert!(
        versions["kubernetes_versions"]
            .as_array()
            .is_some_and(|v| !v.is_empty())
    );

    let args = [
        "cluster",
        "create",
        "keyed",
        "--count",
        "1",
        "--idempotency-key",
        "cli-test-key-0001",
        "-o",
        "json",
    ];
    let first = user.run(&args).await.expect(0);
    // Data output (-o json) is quiet: no note about the tier on stderr.
    assert!(first.stderr.is_empty(), "{first:?}");
    let again = user.run(&args).await.expect(0);
    assert_eq!(
        first.json()["id"],
        again.json()["id"],
        "the same key answers the same cluster"
    );
    assert_eq!(
        first.json()["node_pools"][0]["size"].as_str(),
        recommended.as_deref()
    );
    assert_eq!(
        user.run(&["cluster", "list", "-o", "name"])
            .await
            .expect(0)
            .stdout,
        "keyed\n"
    );
}
