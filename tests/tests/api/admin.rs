//! The operator's tool, `kubesvc-admin`, on a running service's database: it looks at clusters
//! and operations, retries and cancels through the domain's rules, and finds and repairs what
//! breaks the service's invariants. What it changes, customers see through the API.

use std::time::Duration;

use serde_json::{Value, json};

use blackbox::admin::Admin;
use blackbox::*;

/// Provisioning at full speed, polled often, with `extra` settings.
async fn provisioning(extra: &[(&str, &str)]) -> TestApp {
    let mut settings = vec![("RECONCILER_POLL_MS", "20")];
    settings.extend_from_slice(extra);
    TestApp::spawn_with(&settings).await
}

fn admin(app: &TestApp) -> Admin {
    Admin::new(&app.db.url, TEST_SECRETS_KEY)
}

/// Creates a cluster and waits until it is Provisioned; its id.
async fn provisioned(app: &TestApp, name: &str) -> String {
    let cluster = id(&app.create_cluster(name).await);
    app.wait_for(
        &format!("{CLUSTERS}/{cluster}"),
        Duration::from_secs(60),
        |c| c["phase"] == "Provisioned",
    )
    .await;
    cluster
}

/// Runs SQL on the test's database (what a bug or a hand-made change could leave).
fn break_with(app: &TestApp, sql: &str) {
    app.texts(&format!(
        "WITH broken AS ({sql} RETURNING 'x' AS v) SELECT v FROM broken"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_finds_each_broken_invariant_and_fix_repairs_it() {
    let app = provisioning(&[]).await;
    let whole = provisioned(&app, "whole").await;
    let gone = provisioned(&app, "gone").await;
    let eip = app
        .post(
            &format!("{CLUSTERS}/{gone}/elastic-ips"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"name": "web", "exposure": "private"}),
        )
        .await;
    assert_eq!(eip.status, 202, "{}", eip.text());
    let ready = app
        .wait_for(
            &format!("{CLUSTERS}/{gone}/elastic-ips/{}", id(&eip.json())),
            Duration::from_secs(60),
            |e| e["status"] == "Ready",
        )
        .await;
    let address = ready["address"].as_str().unwrap().to_owned();
    let tool = admin(&app);
    tool.run_async(&["check"]).await.expect(0);

    // Three invariants broken behind the service's back.
    break_with(
        &app,
        "UPDATE zone_usage SET nodes = nodes + 5 WHERE (zone, shard) = \
         (SELECT zone, shard FROM zone_usage WHERE nodes > 0 LIMIT 1)",
    );
    break_with(
        &app,
        &format!("DELETE FROM cluster_credentials WHERE cluster_id = '{whole}'"),
    );
    break_with(
        &app,
        &format!("UPDATE clusters SET deleted_at = now() WHERE id = '{gone}'"),
    );
    let kubeconfig = format!("{CLUSTERS}/{whole}/kubeconfig");
    let without = app.get(&kubeconfig, TOKEN_ACME_SUPER_ADMIN).await;
    assert_ne!(without.status, 200, "no credentials, no kubeconfig");

    let found = tool.run_async(&["check"]).await.expect(1);
    let lines: Vec<&str> = found.stdout.lines().collect();
    assert!(lines[0].starts_with("zone_usage: zone "), "{found:#?}");
    // Two clusters of two nodes; one of them now deleted.
    assert!(
        lines[0].ends_with("records 9 nodes in use but its pools ask for 2"),
        "{found:#?}"
    );
    assert_eq!(
        lines[1],
        format!("cluster_credentials: cluster {whole} is Provisioned but has no credentials")
    );
    assert!(
        lines[2].starts_with("orphaned_elastic_ip: ")
            && lines[2].contains(&format!(
                "({address}) still belongs to deleted cluster {gone}"
            )),
        "{found:#?}"
    );
    assert_eq!(lines[3], "3 problems found");

    let fixed = tool.run_async(&["check", "--fix"]).await.expect(0);
    assert!(
        fixed
            .stdout
            .ends_with("3 problems found, 3 repaired, 0 left\n"),
        "{fixed:#?}"
    );
    tool.run_async(&["check"]).await.expect(0);

    // The repairs are what customers use: a kubeconfig again, the address free for reuse.
    let download = app.get(&kubeconfig, TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(download.status, 200, "{}", download.text());
    assert!(download.text().contains("token: "));
    assert_eq!(
        app.texts(&format!(
            "SELECT address AS v FROM elastic_ips WHERE address = '{address}'"
        )),
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_operation_is_listed_retried_and_cancelled_with_a_reason_its_owners_read() {
    let app = provisioning(&[
        ("PROVISIONER_FLAKY_STEPS", "set_exposure"),
        ("PROVISIONER_FLAKY_RATE", "1.0"),
    ])
    .await;
    let cluster = provisioned(&app, "stuck").await;
    let changed = app
        .patch(
            &format!("{CLUSTERS}/{cluster}/exposure"),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"exposure": "private"}),
        )
        .await;
    assert_eq!(changed.status, 202, "{}", changed.text());
    let url = changed.header("operation-location").unwrap();
    let op = until_op(&app, &url, |o| o["attempts"].as_i64().unwrap_or(0) >= 1).await;
    let op_id = op["id"].as_str().unwrap().to_owned();
    let tool = admin(&app);

    let listed = tool
        .run_async(&[
            "operations",
            "list",
            "--older-than-minutes",
            "0",
            "--failing",
        ])
        .await
        .expect(0);
    assert!(
        listed.stdout.contains(&format!(
            "{op_id} running exposure_change of cluster {cluster}, started "
        )),
        "{listed:#?}"
    );
    assert!(listed.stdout.contains("failed attempts"), "{listed:#?}");
    let shown = tool
        .run_async(&["cluster", "show", &cluster])
        .await
        .expect(0);
    assert!(shown.stdout.contains("phase Provisioned"), "{shown:#?}");
    assert!(shown.stdout.contains(&op_id), "{shown:#?}");
    assert!(shown.stdout.contains("provisioning queue: "), "{shown:#?}");

    let retried = tool
        .run_async(&["operations", "retry", &op_id])
        .await
        .expect(0);
    assert!(
        retried.stdout.contains("scheduled for provisioning now"),
        "{retried:#?}"
    );

    let refused = tool
        .run_async(&["operations", "cancel", &op_id, "--reason", " "])
        .await
        .expect(1);
    assert!(refused.stderr.contains("needs a reason"), "{refused:#?}");
    tool.run_async(&[
        "operations",
        "cancel",
        &op_id,
        "--reason",
        "the public address pool is under maintenance",
    ])
    .await
    .expect(0);
    let op = app.get(&url, TOKEN_ACME_MEMBER).await.json();
    assert_eq!(op["status"], "cancelled", "{op}");
    assert_eq!(
        op["last_error"],
        "Cancelled by the service's operators: the public address pool is under maintenance"
    );
    // Settled once: a second cancel, or a retry, is refused by the same rule.
    for args in [
        vec!["operations", "cancel", &op_id, "--reason", "again"],
        vec!["operations", "retry", &op_id],
    ] {
        let again = tool.run_async(&args).await.expect(1);
        assert!(
            again.stderr.contains("is cancelled, not running"),
            "{again:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tool_names_what_it_cannot_do() {
    let app = TestApp::spawn_api_only(&[]).await;
    let tool = admin(&app);
    let unknown = uuid::Uuid::new_v4().to_string();
    let cases: [(Admin, Vec<&str>, i32, &str); 5] = [
        (
            tool.clone(),
            vec!["cluster", "show", &unknown],
            1,
            "no cluster",
        ),
        (
            tool.clone(),
            vec!["operations", "retry", &unknown],
            1,
            "no operation",
        ),
        (
            tool.clone(),
            vec!["cluster", "show", "not-a-uuid"],
            2,
            "invalid value",
        ),
        (
            tool.with("DATABASE_URL", ""),
            vec!["check"],
            2,
            "DATABASE_URL is not set",
        ),
        (
            tool.with("SECRETS_KEY", "too-short"),
            vec!["keys", "status"],
            2,
            "SECRETS_KEY is not valid base64",
        ),
    ];
    for (tool, args, code, said) in cases {
        let run = tool.run_async(&args).await.expect(code);
        assert!(run.stderr.contains(said), "{args:?}: {run:#?}");
        assert!(!run.stderr.contains("too-short"), "no secret echoed");
    }
}

/// Reads an operation until `done` holds (bounded, not a timing assertion).
async fn until_op(app: &TestApp, url: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let op = app.get(url, TOKEN_ACME_MEMBER).await.json();
        if done(&op) {
            return op;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{url} never got there: {op}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_brings_an_empty_database_to_this_release_which_the_other_commands_need() {
    let db = store_postgres::TestDatabase::create_empty();
    let tool = Admin::new(&db.url, TEST_SECRETS_KEY);
    let refused = tool.run_async(&["check"]).await.expect(1);
    assert!(
        refused.stderr.contains("lacks migrations of this release"),
        "the tool never migrates as a side effect: {refused:#?}"
    );
    for _ in 0..2 {
        let migrated = tool.run_async(&["migrate"]).await.expect(0);
        assert!(
            migrated.stdout.contains("this release's schema"),
            "{migrated:#?}"
        );
    }
    let checked = tool.run_async(&["check"]).await.expect(0);
    assert_eq!(checked.stdout, "0 problems found\n");
}
