//! `kubesvc approvals`: the person lists what their assistant asked for, reads one, approves
//! (a deletion only with --yes off a terminal) and declines; another person learns nothing.

use domain::model::approval::ApprovedAction;

use super::*;
use crate::console_approvals::{asks, create};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_listed_read_approved_once_and_declined() {
    let app = TestApp::spawn_api_only(&[]).await;
    let user = logged_in(&app).await;
    let first = asks(&app, TOKEN_ACME_SUPER_ADMIN, create("cli-web"))
        .await
        .unwrap();
    let second = asks(&app, TOKEN_ACME_SUPER_ADMIN, create("cli-never"))
        .await
        .unwrap();
    let (first_id, second_id) = (first.id.to_string(), second.id.to_string());

    let listed = json(&user, &["approvals", "list"]).await;
    let ids: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["id"].as_str())
        .collect();
    assert_eq!(ids, [second_id.as_str(), first_id.as_str()], "newest first");
    let table = user.run(&["approvals", "list"]).await.expect(0);
    assert!(
        table.stdout.contains("Create the cluster cli-web in acme"),
        "{table:?}"
    );
    let names = user
        .run(&["approvals", "list", "--status", "pending", "-o", "name"])
        .await
        .expect(0);
    assert_eq!(names.stdout, format!("{second_id}\n{first_id}\n"));
    user.run(&["approvals", "list", "--status", "maybe"])
        .await
        .expect(2);

    let shown = user.run(&["approvals", "show", &first_id]).await.expect(0);
    for words in [
        "Create the cluster cli-web in acme",
        "Arguments, exactly as asked:",
        "node_pools[0].size",
        "kube.c5.large",
        "Status:",
        "pending",
        &format!("/console/approvals/{first_id}"),
    ] {
        assert!(shown.stdout.contains(words), "{words}: {shown:?}");
    }

    let approved = user
        .run(&["approvals", "approve", &first_id])
        .await
        .expect(0);
    assert!(
        approved
            .stdout
            .starts_with("Approved: the cluster is being created"),
        "{approved:?}"
    );
    let again = json(&user, &["approvals", "approve", &first_id]).await;
    assert_eq!(again["status"], "approved");
    assert_eq!(again["outcome"]["result"], "done");
    let clusters = user.run(&["cluster", "list", "-o", "name"]).await.expect(0);
    assert_eq!(clusters.stdout, "cli-web\n", "created once");

    let declined = user
        .run(&["approvals", "decline", &second_id])
        .await
        .expect(0);
    assert!(declined.stdout.starts_with("Declined"), "{declined:?}");
    // Declined is final: approving it is a conflict (exit 5), and nothing runs.
    user.run(&["approvals", "approve", &second_id])
        .await
        .expect(5);
    let clusters = user.run(&["cluster", "list", "-o", "name"]).await.expect(0);
    assert_eq!(clusters.stdout, "cli-web\n");
    no_token_in(&approved);

    // Not an id: a usage error before anything is sent; another person's: not found.
    user.run(&["approvals", "show", "cli-web"]).await.expect(2);
    let bob = CliUser::with_env(&app.url, TOKEN_ACME_MEMBER, "acme");
    bob.run(&["approvals", "show", &first_id]).await.expect(4);
    bob.run(&["approvals", "decline", &second_id])
        .await
        .expect(4);
    let theirs = json(&bob, &["approvals", "list"]).await;
    assert_eq!(theirs["items"], serde_json::json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_a_deletion_off_a_terminal_needs_yes() {
    let app = TestApp::spawn_api_only(&[]).await;
    let user = logged_in(&app).await;
    create_small(&user, "doomed").await;
    let cluster = json(&user, &["cluster", "get", "doomed"]).await;
    let delete = asks(
        &app,
        TOKEN_ACME_SUPER_ADMIN,
        ApprovedAction::DeleteCluster {
            cluster: cluster["id"].as_str().unwrap().parse().unwrap(),
        },
    )
    .await
    .unwrap();
    let id = delete.id.to_string();
    let refused = user.run(&["approvals", "approve", &id]).await.expect(2);
    assert!(refused.stderr.contains("--yes"), "{refused:?}");
    let still = json(&user, &["approvals", "show", &id]).await;
    assert_eq!(still["status"], "pending");
    assert_ne!(
        json(&user, &["cluster", "get", "doomed"]).await["phase"],
        "Deleting"
    );

    let approved = user
        .run(&["approvals", "approve", &id, "--yes"])
        .await
        .expect(0);
    assert!(
        approved
            .stdout
            .starts_with("Approved: the cluster is being deleted"),
        "{approved:?}"
    );
    assert_eq!(
        json(&user, &["cluster", "get", "doomed"]).await["phase"],
        "Deleting"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_a_deletion_is_approved_only_on_yes_and_a_refused_run_exits_1() {
    let app = TestApp::spawn_api_only(&[]).await;
    let user = logged_in(&app).await;
    create_small(&user, "asked-twice").await;
    let cluster: uuid::Uuid = json(&user, &["cluster", "get", "asked-twice"]).await["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let delete = asks(
        &app,
        TOKEN_ACME_SUPER_ADMIN,
        ApprovedAction::DeleteCluster { cluster },
    )
    .await
    .unwrap();
    let id = delete.id.to_string();
    let no = user
        .on_terminal(&["approvals", "approve", &id], "n\n")
        .await
        .expect(1);
    assert!(
        no.stdout
            .contains(&format!("Approve {id} (Delete the cluster asked-twice")),
        "{no:?}"
    );
    assert_eq!(
        json(&user, &["approvals", "show", &id]).await["status"],
        "pending"
    );

    // A pool the assistant wanted added, to a cluster deleted meanwhile: approved, the run is
    // refused, the words say why, and the exit code is 1.
    let add = asks(
        &app,
        TOKEN_ACME_SUPER_ADMIN,
        ApprovedAction::AddNodePool {
            cluster,
            body: domain::input::node_pool::NodePoolRequest {
                name: Some("extra".into()),
                size: Some("kube.c5.large".into()),
                count: Some(1),
                ..Default::default()
            },
        },
    )
    .await
    .unwrap();
    let yes = user
        .on_terminal(&["approvals", "approve", &id], "y\n")
        .await
        .expect(0);
    assert!(
        yes.stdout
            .contains("Approved: the cluster is being deleted"),
        "{yes:?}"
    );
    let refused = user
        .run(&["approvals", "approve", &add.id.to_string()])
        .await
        .expect(1);
    assert!(
        refused
            .stderr
            .contains("approved, but the change was refused when it ran"),
        "{refused:?}"
    );
    let shown = json(&user, &["approvals", "show", &add.id.to_string()]).await;
    assert_eq!(shown["status"], "approved");
    assert_eq!(shown["outcome"]["result"], "refused");
}
