//! Upgrades and the maintenance policy, as a client drives them: the versions a cluster may
//! move to, an upgrade that replaces every node and ends on the new version, the refusals, and
//! the maintenance window set on create and by PATCH.

use std::time::Duration;

use blackbox::*;
use chrono::{DateTime, Datelike, Timelike, Utc, Weekday};
use serde_json::{Value, json};

fn upgrades(c: &Value) -> String {
    format!("{CLUSTERS}/{}/upgrades", id(c))
}

fn upgrade(c: &Value) -> String {
    format!("{CLUSTERS}/{}/upgrade", id(c))
}

fn versions(a: &Answer) -> Vec<String> {
    a.json()["available_versions"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .filter_map(|v| v["id"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

async fn nodes(app: &TestApp, c: &Value) -> Vec<Value> {
    let a = app
        .get(&format!("{CLUSTERS}/{}/nodes", id(c)), TOKEN_ACME_MEMBER)
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_replaces_every_node_and_ends_on_the_new_version() {
    let app = TestApp::spawn().await;
    let c = app.provisioned_cluster("up-1").await;
    let listed = app.get(&upgrades(&c), TOKEN_ACME_MEMBER).await;
    assert_eq!(listed.status, 200, "{}", listed.text());
    assert_eq!(listed.json()["current_version"], "v1.32.4");
    assert_eq!(versions(&listed), ["v1.32.6", "v1.33.2"]);
    let before: Vec<Value> = nodes(&app, &c).await;
    assert!(before.iter().all(|n| n["version"] == "v1.32.4"));

    let started = app
        .post(
            &upgrade(&c),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"version": "v1.33.2"}),
        )
        .await;
    assert_eq!(started.status, 202, "{}", started.text());
    let body = started.json();
    assert_eq!(
        body["upgrade"],
        json!({"from": "v1.32.4", "to": "v1.33.2", "automatic": false})
    );
    let operation = started
        .header("operation-location")
        .unwrap_or_else(|| panic!("no Operation-Location: {:?}", started.text()));

    let path = format!("{CLUSTERS}/{}", id(&c));
    let done = app
        .wait_for(&path, Duration::from_secs(120), |c| {
            c["upgrade"].is_null() && c["version"] == "v1.33.2"
        })
        .await;
    for p in done["node_pools"].as_array().into_iter().flatten() {
        assert_eq!(
            (&p["version"], &p["status"]),
            (&json!("v1.33.2"), &json!("Ready"))
        );
    }
    let after = nodes(&app, &c).await;
    assert_eq!(after.len(), before.len());
    assert!(
        after
            .iter()
            .all(|n| n["version"] == "v1.33.2" && n["status"] == "Ready")
    );
    let old: Vec<&Value> = before.iter().map(|n| &n["name"]).collect();
    assert!(
        after.iter().all(|n| !old.contains(&&n["name"])),
        "every node was replaced"
    );

    let op = app
        .wait_for(&operation, Duration::from_secs(30), |o| {
            o["status"] != "running"
        })
        .await;
    assert_eq!(
        (&op["kind"], &op["status"]),
        (&json!("upgrade"), &json!("succeeded"))
    );
    assert_eq!(
        op["progress"],
        "Every node pool runs v1.33.2: the upgrade is done."
    );
    let now = app.get(&upgrades(&c), TOKEN_ACME_MEMBER).await;
    assert_eq!(now.json()["current_version"], "v1.33.2");
    assert_eq!(versions(&now), Vec::<String>::new());
    let events = app
        .get(
            &format!(
                "/v1/public/audit-events?organization=acme&cluster_id={}",
                id(&c)
            ),
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await
        .text();
    assert!(events.contains("upgrade_started"), "{events}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_is_refused_in_the_words_of_what_is_wrong() {
    let app = TestApp::spawn().await;
    let c = app.provisioned_cluster("up-2").await;
    let table: [(&str, Value, u16, &str); 8] = [
        (
            "a downgrade",
            json!({"version": "v1.31.9"}),
            400,
            "upgrade_not_allowed",
        ),
        (
            "the current version",
            json!({"version": "v1.32.4"}),
            400,
            "upgrade_not_allowed",
        ),
        (
            "a version not offered",
            json!({"version": "v1.40.0"}),
            400,
            "unknown_version",
        ),
        ("no version", json!({}), 422, "validation_failed"),
        (
            "a surge of 0",
            json!({"version": "v1.32.6", "max_surge": 0}),
            422,
            "validation_failed",
        ),
        (
            "11 unavailable",
            json!({"version": "v1.32.6", "max_unavailable": 11}),
            422,
            "validation_failed",
        ),
        (
            "an unknown field",
            json!({"version": "v1.32.6", "force": true}),
            422,
            "validation_failed",
        ),
        (
            "a version that is not text",
            json!({"version": 1.33}),
            422,
            "validation_failed",
        ),
    ];
    for (what, body, status, code) in table {
        let a = app.post(&upgrade(&c), TOKEN_ACME_SUPER_ADMIN, &body).await;
        assert_eq!(
            (a.status, a.problem_code()),
            (status, code.to_owned()),
            "{what}: {}",
            a.text()
        );
    }
    let member = app
        .post(
            &upgrade(&c),
            TOKEN_ACME_MEMBER,
            &json!({"version": "v1.32.6"}),
        )
        .await;
    expect(&member, 403, "forbidden");
    let stranger = app
        .post(
            &upgrade(&c),
            TOKEN_INITECH_SUPER_ADMIN,
            &json!({"version": "v1.32.6"}),
        )
        .await;
    // Another organization's cluster: refused as every object route refuses it.
    expect(&stranger, 403, "forbidden");
    let unread = app.get(&upgrades(&c), TOKEN_INITECH_SUPER_ADMIN).await;
    expect(&unread, 403, "forbidden");

    // One upgrade at a time; nothing of the refusals above started one.
    let path = format!("{CLUSTERS}/{}", id(&c));
    assert!(app.get(&path, TOKEN_ACME_MEMBER).await.json()["upgrade"].is_null());
    let first = app
        .post(
            &upgrade(&c),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"version": "v1.32.6"}),
        )
        .await;
    assert_eq!(first.status, 202, "{}", first.text());
    let second = app
        .post(
            &upgrade(&c),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"version": "v1.33.2"}),
        )
        .await;
    // Unless the first finished meanwhile (steps take 0 ms here), the second waits its turn.
    if second.status != 202 {
        expect(&second, 409, "change_in_flight");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minor_version_is_never_skipped_and_a_new_cluster_is_not_upgraded() {
    let app = TestApp::spawn().await;
    let body = json!({"organization": "acme", "name": "old-1", "version": "v1.31.9",
        "node_pools": [{"size": "kube.c5.large", "count": 1}]});
    let made = app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &body).await;
    assert_eq!(made.status, 201, "{}", made.text());
    let c = made.json();
    let early = app
        .post(
            &upgrade(&c),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"version": "v1.32.4"}),
        )
        .await;
    // Right after the create it is not Provisioned yet (it may be by the time this lands).
    if early.status != 202 {
        expect(&early, 409, "cluster_not_provisioned");
    }
    let path = format!("{CLUSTERS}/{}", id(&c));
    app.wait_for(&path, Duration::from_secs(120), |c| {
        c["phase"] == "Provisioned" && c["upgrade"].is_null()
    })
    .await;
    let listed = app.get(&upgrades(&c), TOKEN_ACME_MEMBER).await;
    let current = listed.json()["current_version"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    if current == "v1.31.9" {
        assert_eq!(versions(&listed), ["v1.32.4", "v1.32.6"]);
        let skip = app
            .post(
                &upgrade(&c),
                TOKEN_ACME_SUPER_ADMIN,
                &json!({"version": "v1.33.2"}),
            )
            .await;
        expect(&skip, 400, "upgrade_not_allowed");
        assert!(skip.text().contains("v1.32.6 first"), "{}", skip.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maintenance_window_is_set_on_create_and_changed_by_patch() {
    let app = TestApp::spawn_api_only(&[]).await;
    let body = json!({"organization": "acme", "name": "mw-1",
        "maintenance_window": {"day": "friday", "start_time": "03:00"}, "auto_upgrade": true,
        "node_pools": [{"size": "kube.c5.large", "count": 1}]});
    let made = app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &body).await;
    assert_eq!(made.status, 201, "{}", made.text());
    let c = made.json();
    assert_eq!(
        c["maintenance_window"],
        json!({"day": "friday", "start_time": "03:00"})
    );
    assert_eq!(c["auto_upgrade"], true);
    let plain = app.create_cluster("mw-2").await;
    assert_eq!(
        plain["maintenance_window"],
        json!({"day": "any", "start_time": "00:00"})
    );
    assert_eq!(plain["auto_upgrade"], false);

    let path = format!("{CLUSTERS}/{}", id(&c));
    let changed = app
        .patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"maintenance_window": {"start_time": "22:30"}}),
        )
        .await;
    assert_eq!(changed.status, 200, "{}", changed.text());
    assert_eq!(
        changed.json()["maintenance_window"],
        json!({"day": "friday", "start_time": "22:30"})
    );
    let off = app
        .patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"auto_upgrade": false}),
        )
        .await;
    assert_eq!(off.json()["auto_upgrade"], false);

    let listed = app.get(&upgrades(&c), TOKEN_ACME_MEMBER).await;
    let next: DateTime<Utc> = listed.json()["next_maintenance_window_start"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{}", listed.text()));
    assert_eq!(
        (next.weekday(), next.hour(), next.minute()),
        (Weekday::Fri, 22, 30)
    );
    let now = Utc::now();
    assert!(next > now - chrono::Duration::hours(4) && next <= now + chrono::Duration::days(7));

    let refusals: [(Value, &str); 5] = [
        (
            json!({"maintenance_window": {"day": "Friday"}}),
            "maintenance_window.day",
        ),
        (
            json!({"maintenance_window": {"start_time": "24:00"}}),
            "maintenance_window.start_time",
        ),
        (json!({"maintenance_window": null}), "maintenance_window"),
        (json!({"auto_upgrade": null}), "auto_upgrade"),
        (json!({"version": "v1.32.6"}), "version"),
    ];
    for (body, field) in refusals {
        let a = app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &body).await;
        expect(&a, 422, "validation_failed");
        assert!(
            fields(&a).iter().any(|f| f == field),
            "{body}: {}",
            a.text()
        );
    }
    let unchanged = app.get(&path, TOKEN_ACME_MEMBER).await.json();
    assert_eq!(unchanged["maintenance_window"]["start_time"], "22:30");
}
