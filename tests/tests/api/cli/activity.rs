//! What happened and is happening, through the binary: a cluster's operations, its kubeconfig
//! credentials (a download's own, revoked; a rotation), and the audit trail.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_credentials_and_the_audit_trail_through_the_cli() {
    let app = TestApp::spawn_with(&[("RECONCILER_POLL_MS", "20")]).await;
    let user = logged_in(&app).await;
    user.run(&[
        "cluster",
        "create",
        "watched",
        "--size",
        "kube.c5.large",
        "--count",
        "1",
        "--wait",
    ])
    .await
    .expect(0);

    // The operation is closed just after the phase it brought about is written: a moment
    // later than the wait's end, so its settled state is waited for.
    let mut ops = json(&user, &["cluster", "operations", "watched"]).await;
    for _ in 0..100 {
        if ops["items"][0]["status"] != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        ops = json(&user, &["cluster", "operations", "watched"]).await;
    }
    assert_eq!(
        (&ops["items"][0]["kind"], &ops["items"][0]["status"]),
        (
            &serde_json::json!("create"),
            &serde_json::json!("succeeded")
        ),
        "{ops}"
    );
    let table = user
        .run(&["cluster", "operations", "watched"])
        .await
        .expect(0);
    assert!(
        table.stdout.contains("create") && table.stdout.contains("succeeded"),
        "{table:?}"
    );

    // A kubeconfig with a credential of its own, merged like any other; then revoked.
    let shown = user
        .run(&[
            "cluster",
            "kubeconfig",
            "show",
            "watched",
            "--expiry-seconds",
            "3600",
        ])
        .await
        .expect(0);
    assert!(shown.stdout.contains("expires-at"), "{shown:?}");
    let listed = json(&user, &["cluster", "credential", "list", "watched"]).await;
    let credential = listed["items"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(listed["items"][0]["status"], "active");
    let revoked = json(
        &user,
        &[
            "cluster",
            "credential",
            "revoke",
            "watched",
            &credential,
            "--yes",
        ],
    )
    .await;
    assert_eq!(revoked["status"], "revoked");
    let rotated = user
        .run(&["cluster", "credential", "rotate", "watched", "--yes"])
        .await
        .expect(0);
    assert!(
        rotated.stdout.contains("Download the kubeconfig again"),
        "{rotated:?}"
    );
    user.run(&[
        "cluster",
        "credential",
        "revoke",
        "watched",
        "not-an-id",
        "-y",
    ])
    .await
    .expect(2);

    // The trail, one page at a time or all of it.
    let trail = json(&user, &["audit", "list", "--cluster", "watched", "--all"]).await;
    let actions: Vec<(&str, &str)> = trail
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["resource"].as_str().unwrap(),
                e["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        actions,
        [
            ("kubeconfig_credential", "rotated"),
            ("kubeconfig_credential", "revoked"),
            ("kubeconfig_credential", "created"),
            ("cluster", "created"),
        ]
    );
    let one = json(&user, &["audit", "list", "--limit", "1"]).await;
    assert_eq!(one.as_array().unwrap().len(), 1);
    // The table says when as a person reads it; the JSON keeps the exact moment.
    let table = user.run(&["audit", "list"]).await.expect(0);
    no_token_in(&table);
    assert!(
        table.stdout.contains(" ago") || table.stdout.contains("just now"),
        "{table:?}"
    );
    assert!(
        one[0]["at"]
            .as_str()
            .is_some_and(|t| t.contains('T') && t.ends_with('Z')),
        "{one}"
    );
}
