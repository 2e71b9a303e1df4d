//! Upgrades through the binary: the versions listed, an upgrade followed with --wait to the
//! new version, a refusal's words and exit code, and the maintenance policy set.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_upgraded_and_its_maintenance_window_set_from_the_cli() {
    let app = TestApp::spawn().await;
    let user = logged_in(&app).await;
    user.run(&[
        "cluster",
        "create",
        "up-cli",
        "--size",
        "kube.c5.large",
        "--count",
        "2",
        "--wait",
    ])
    .await
    .expect(0);

    let listed = user.run(&["cluster", "upgrades", "up-cli"]).await.expect(0);
    assert!(
        listed.stdout.contains("v1.32.6") && listed.stdout.contains("v1.33.2"),
        "{listed:?}"
    );
    assert!(listed.stderr.contains("runs v1.32.4"), "{listed:?}");
    let names = user
        .run(&["cluster", "upgrades", "up-cli", "-o", "name"])
        .await
        .expect(0);
    assert_eq!(names.stdout, "v1.32.6\nv1.33.2\n");

    // Refused before anything starts: an older version, exit 1 with the API's words.
    let down = user
        .run(&["cluster", "upgrade", "up-cli", "--version", "v1.31.9"])
        .await;
    assert_ne!(down.code, 0, "{down:?}");
    assert!(down.stderr.contains("never downgraded"), "{down:?}");
    let bad = user
        .run(&[
            "cluster",
            "upgrade",
            "up-cli",
            "--version",
            "v1.32.6",
            "--max-surge",
            "0",
        ])
        .await;
    assert!(bad.stderr.contains("max_surge"), "{bad:?}");

    let upgraded = user
        .run(&[
            "cluster",
            "upgrade",
            "up-cli",
            "--version",
            "v1.32.6",
            "--wait",
            "-o",
            "json",
        ])
        .await
        .expect(0);
    let c = upgraded.json();
    assert_eq!(c["version"], "v1.32.6");
    assert!(c["upgrade"].is_null());
    let nodes = json(&user, &["node", "list", "up-cli"]).await;
    let items = nodes["items"].as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|n| n["version"] == "v1.32.6"), "{nodes}");

    let set = json(
        &user,
        &[
            "cluster",
            "maintenance",
            "set",
            "up-cli",
            "--day",
            "sunday",
            "--start",
            "04:30",
            "--auto-upgrade",
            "on",
        ],
    )
    .await;
    assert_eq!(set["maintenance_window"]["day"], "sunday");
    assert_eq!(set["maintenance_window"]["start_time"], "04:30");
    assert_eq!(set["auto_upgrade"], true);
    let wrong = user
        .run(&[
            "cluster",
            "maintenance",
            "set",
            "up-cli",
            "--auto-upgrade",
            "maybe",
        ])
        .await
        .expect(2);
    assert!(wrong.stderr.contains("on or off"), "{wrong:?}");
    let nothing = user
        .run(&["cluster", "maintenance", "set", "up-cli"])
        .await
        .expect(2);
    assert!(nothing.stderr.contains("nothing to change"), "{nothing:?}");
}
