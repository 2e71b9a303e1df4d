//! The control-plane firewall: who may call a cluster's API server. Set on create and by a
//! PATCH (202, an operation), enforced by the cluster's API server (the simulated one here)
//! once applied, whatever credential an outsider holds; one change in flight at a time.

use std::net::IpAddr;

use serde_json::{Value, json};

use blackbox::*;

/// The standing kubeconfig token of `cluster`, as a member downloads it.
async fn standing_token(app: &TestApp, cluster: &str) -> String {
    let a = app
        .get(
            &format!("{CLUSTERS}/{cluster}/kubeconfig?format=json"),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()["kubeconfig"]
        .as_str()
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap()
        .trim_matches('"')
        .to_owned()
}

/// What the cluster's API server answers `GET /version` from `from` with `token`.
async fn status_from(app: &TestApp, cluster: &str, from: &str, token: &str) -> u16 {
    let id = uuid::Uuid::parse_str(cluster).unwrap();
    let from: IpAddr = from.parse().unwrap();
    let a = app
        .cluster_api
        .version(id, from, Some(&format!("Bearer {token}")))
        .await;
    if a.status == 403 {
        let status: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(
            (&status["kind"], &status["reason"], &status["code"]),
            (&json!("Status"), &json!("Forbidden"), &json!(403)),
            "{}",
            a.body
        );
    }
    a.status
}

/// `(address, status)` for each caller, as the cluster answers them.
async fn answers(app: &TestApp, cluster: &str, token: &str, from: &[&str]) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    for f in from {
        out.push(((*f).to_owned(), status_from(app, cluster, f, token).await));
    }
    out
}

fn expected(list: &[(&str, u16)]) -> Vec<(String, u16)> {
    list.iter().map(|(a, s)| ((*a).to_owned(), *s)).collect()
}

const CALLERS: [&str; 5] = [
    "203.0.113.9",
    "::ffff:203.0.113.9",
    "2001:db8::1",
    "198.51.100.7",
    "2001:db9::1",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_admits_only_the_allowed_networks_and_a_patch_changes_them() {
    let app = TestApp::spawn_with(&[("RECONCILER_POLL_MS", "20")]).await;
    let mut body = cluster_body("acme", "fenced");
    body["control_plane_firewall"] =
        json!({"enabled": true, "allowed_addresses": ["203.0.113.0/24", "2001:DB8::/32"]});
    let created = app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &body).await;
    assert_eq!(created.status, 201, "{}", created.text());
    assert_eq!(
        created.json()["control_plane_firewall"],
        json!({"enabled": true, "allowed_addresses": ["203.0.113.0/24", "2001:db8::/32"]})
    );
    let cluster = id(&created.json());
    assert_eq!(
        app.finished_operation(&created).await["status"],
        "succeeded"
    );
    let token = standing_token(&app, &cluster).await;
    assert_eq!(
        answers(&app, &cluster, &token, &CALLERS).await,
        expected(&[
            ("203.0.113.9", 200),
            ("::ffff:203.0.113.9", 200),
            ("2001:db8::1", 200),
            ("198.51.100.7", 403),
            ("2001:db9::1", 403),
        ])
    );
    // Inside, a bad token is still a bad token; outside, the token is not even looked at.
    assert_eq!(
        status_from(&app, &cluster, "203.0.113.9", "nope").await,
        401
    );
    assert_eq!(
        status_from(&app, &cluster, "198.51.100.7", "nope").await,
        403
    );

    let path = format!("{CLUSTERS}/{cluster}");
    let to = json!({"enabled": true, "allowed_addresses": ["198.51.100.0/24"]});
    let changed = app
        .patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"control_plane_firewall": {"allowed_addresses": ["198.51.100.0/24"]}}),
        )
        .await;
    assert_eq!(changed.status, 202, "{}", changed.text());
    let answer = changed.json();
    assert_eq!(answer["control_plane_firewall_change"], to);
    assert_eq!(
        answer["control_plane_firewall"]["allowed_addresses"],
        json!(["203.0.113.0/24", "2001:db8::/32"]),
        "the firewall in force until the change is applied"
    );
    let op = app.finished_operation(&changed).await;
    assert_eq!(
        (&op["status"], &op["kind"]),
        (&json!("succeeded"), &json!("control_plane_firewall_change")),
        "{op}"
    );
    let now = app.get(&path, TOKEN_ACME_MEMBER).await.json();
    assert_eq!(
        (
            &now["control_plane_firewall"],
            &now["control_plane_firewall_change"]
        ),
        (&to, &Value::Null)
    );
    assert_eq!(
        answers(&app, &cluster, &token, &CALLERS).await,
        expected(&[
            ("203.0.113.9", 403),
            ("::ffff:203.0.113.9", 403),
            ("2001:db8::1", 403),
            ("198.51.100.7", 200),
            ("2001:db9::1", 403),
        ])
    );

    // Disabled: open to every holder of a credential; the list is kept for later.
    let opened = app
        .patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"control_plane_firewall": {"enabled": false}}),
        )
        .await;
    assert_eq!(opened.status, 202, "{}", opened.text());
    app.finished_operation(&opened).await;
    assert!(
        answers(&app, &cluster, &token, &CALLERS)
            .await
            .iter()
            .all(|(_, s)| *s == 200)
    );
    // Asking for what it already is starts nothing.
    let again = app
        .patch(
            &path,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"control_plane_firewall": {"enabled": false, "allowed_addresses": ["198.51.100.0/24"]}}),
        )
        .await;
    assert_eq!(again.status, 200, "{}", again.text());
    assert_eq!(again.header("operation-location"), None);

    // The audit trail has each change, from and to.
    let trail = app
        .get(
            "/v1/public/audit-events?organization=acme",
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await
        .json();
    let changes: Vec<&Value> = trail["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "control_plane_firewall_change_started")
        .map(|e| &e["changes"]["control_plane_firewall"])
        .collect();
    assert_eq!(changes.len(), 2, "{trail}");
    assert_eq!(
        changes[1],
        &json!({
            "from": {"enabled": true, "allowed_addresses": ["203.0.113.0/24", "2001:db8::/32"]},
            "to": to,
        })
    );
}

/// While a change is in flight (here it never lands: the provider refuses the step) a second
/// one is 409, a description change still goes through, and the firewall in force stays; the
/// first request retried with its Idempotency-Key answers as it did, not 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_change_while_one_is_in_flight_is_409() {
    let app = TestApp::spawn_with(&[
        ("RECONCILER_POLL_MS", "20"),
        ("PROVISIONER_FAIL_STEPS", "set_control_plane_firewall"),
    ])
    .await;
    let cluster = id(&app.provisioned_cluster("busy").await);
    let path = format!("{CLUSTERS}/{cluster}");
    let change =
        json!({"control_plane_firewall": {"enabled": true, "allowed_addresses": ["10.0.0.0/8"]}});
    let keyed = || {
        app.request(reqwest::Method::PATCH, &path, Some(TOKEN_ACME_SUPER_ADMIN))
            .header("Idempotency-Key", "firewall-change-1")
            .json(&change)
    };
    let first = app.send(keyed()).await;
    assert_eq!(first.status, 202, "{}", first.text());
    let retried = app.send(keyed()).await;
    assert_eq!(
        (retried.status, retried.header("idempotency-replay")),
        (202, Some("true".to_owned())),
        "{}",
        retried.text()
    );
    assert_eq!(
        retried.header("operation-location"),
        first.header("operation-location")
    );
    for body in [
        json!({"control_plane_firewall": {"enabled": false}}),
        json!({"control_plane_firewall": {"enabled": true, "allowed_addresses": ["10.0.0.0/8"]}}),
        json!({"description": "x", "control_plane_firewall": {"allowed_addresses": ["::/0"]}}),
    ] {
        expect(
            &app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &body).await,
            409,
            "change_in_flight",
        );
    }
    let described = app
        .patch(&path, TOKEN_ACME_SUPER_ADMIN, &json!({"description": "x"}))
        .await;
    assert_eq!(described.status, 200, "{}", described.text());
    let token = standing_token(&app, &cluster).await;
    assert_eq!(
        status_from(&app, &cluster, "198.51.100.7", &token).await,
        200
    );
    assert_eq!(
        described.json()["control_plane_firewall_change"]["allowed_addresses"],
        json!(["10.0.0.0/8"])
    );
}

/// Bad networks are 422 naming the entry, on create and PATCH; a member and another
/// organization's super_admin are refused; a cluster not yet `Provisioned` is 400; nothing
/// is written by any of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_firewalls_and_callers_who_may_not_change_it_are_refused() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("pending").await;
    let path = format!("{CLUSTERS}/{}", id(&c));
    let many: Vec<String> = (0..101).map(|i| format!("10.{i}.0.0/16")).collect();
    let field = "control_plane_firewall.allowed_addresses";
    let cases = [
        (json!({"allowed_addresses": many}), field.to_owned()),
        (json!({"enabled": true}), field.to_owned()),
        (
            json!({"enabled": true, "allowed_addresses": []}),
            field.to_owned(),
        ),
        (
            json!({"allowed_addresses": ["10.0.0.1/8"]}),
            format!("{field}[0]"),
        ),
        (
            json!({"allowed_addresses": ["::ffff:10.0.0.0/104"]}),
            format!("{field}[0]"),
        ),
        (
            json!({"allowed_addresses": ["010.0.0.0/8"]}),
            format!("{field}[0]"),
        ),
        (
            json!({"allowed_addresses": ["10.0.0.0"]}),
            format!("{field}[0]"),
        ),
        (
            json!({"allowed_addresses": ["fe80::/10", "fe80::/10"]}),
            format!("{field}[1]"),
        ),
        (
            json!({"allowed_addresses": ["1".repeat(100_000)]}),
            format!("{field}[0]"),
        ),
    ];
    let before = app.counts();
    for (firewall, at) in cases {
        let patched = app
            .patch(
                &path,
                TOKEN_ACME_SUPER_ADMIN,
                &json!({"control_plane_firewall": firewall}),
            )
            .await;
        expect(&patched, 422, "validation_failed");
        assert!(fields(&patched).contains(&at), "{}", patched.text());
        assert!(
            patched.text().len() < 2000,
            "a hostile value is not repeated back"
        );
        let mut body = cluster_body("acme", "other");
        body["control_plane_firewall"] = firewall.clone();
        let created = app.post(CLUSTERS, TOKEN_ACME_SUPER_ADMIN, &body).await;
        expect(&created, 422, "validation_failed");
        assert!(fields(&created).contains(&at), "{}", created.text());
    }
    for body in [
        json!({"control_plane_firewall": null}),
        json!({"control_plane_firewall": {"enabled": "yes"}}),
        json!({"control_plane_firewall": {"allowed": ["10.0.0.0/8"]}}),
    ] {
        expect(
            &app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &body).await,
            422,
            "validation_failed",
        );
    }
    let good =
        json!({"control_plane_firewall": {"enabled": true, "allowed_addresses": ["10.0.0.0/8"]}});
    expect(
        &app.patch(&path, TOKEN_ACME_MEMBER, &good).await,
        403,
        "forbidden",
    );
    expect(
        &app.patch(&path, TOKEN_INITECH_SUPER_ADMIN, &good).await,
        403,
        "forbidden",
    );
    expect(
        &app.patch(&path, TOKEN_ACME_SUPER_ADMIN, &good).await,
        400,
        "phase_not_provisioned",
    );
    assert_eq!(app.counts(), before);
    let now = app.get(&path, TOKEN_ACME_MEMBER).await.json();
    assert_eq!(
        (
            &now["control_plane_firewall"],
            &now["control_plane_firewall_change"]
        ),
        (
            &json!({"enabled": false, "allowed_addresses": []}),
            &Value::Null
        )
    );
}
