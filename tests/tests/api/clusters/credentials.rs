//! Kubeconfig credentials with a lifetime: each download that asks gets its own, recorded and
//! revocable; the cluster's API server (as the simulator models it) accepts a credential only
//! while it is active; a rotation ends every credential and replaces the standing one.

use std::time::Duration;

use serde_json::{Value, json};

use blackbox::*;

/// A provisioned cluster in acme, with provisioning at full speed.
async fn provisioned(extra: &[(&str, &str)]) -> (TestApp, String) {
    let mut settings = vec![("RECONCILER_POLL_MS", "20")];
    settings.extend_from_slice(extra);
    let app = TestApp::spawn_with(&settings).await;
    let cluster = id(&app.create_cluster("creds").await);
    app.wait_for(
        &format!("{CLUSTERS}/{cluster}"),
        Duration::from_secs(60),
        |c| c["phase"] == "Provisioned",
    )
    .await;
    (app, cluster)
}

/// The kubeconfig `token` downloads as JSON with this query, and the whole answer.
async fn download(app: &TestApp, token: &str, cluster: &str, query: &str) -> (String, Value) {
    let a = app
        .get(
            &format!("{CLUSTERS}/{cluster}/kubeconfig?format=json{query}"),
            token,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let j = a.json();
    let yaml = j["kubeconfig"].as_str().unwrap();
    let bearer = yaml
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap()
        .trim_matches('"')
        .to_owned();
    (bearer, j)
}

/// The kubeconfig as `kubectl config view` reads it (it refuses a file it cannot decode).
fn kubectl_view(yaml: &str) -> Value {
    let file = std::env::temp_dir().join(format!("kubeconfig-{}", uuid::Uuid::new_v4()));
    std::fs::write(&file, yaml).unwrap();
    let out = std::process::Command::new("kubectl")
        .args([
            "--kubeconfig",
            file.to_str().unwrap(),
            "config",
            "view",
            "-o",
            "json",
        ])
        .output()
        .unwrap_or_else(|e| panic!("kubectl is on the PATH: {e}"));
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "kubectl refused the kubeconfig: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What the cluster's API server answers `GET /version` with this bearer token.
async fn cluster_says(app: &TestApp, cluster: &str, bearer: &str) -> u16 {
    let id = uuid::Uuid::parse_str(cluster).unwrap();
    app.cluster_api
        .version(id, SOME_CALLER, Some(&format!("Bearer {bearer}")))
        .await
        .status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_with_a_lifetime_gets_its_own_credential_the_cluster_accepts_until_revoked() {
    let (app, cluster) = provisioned(&[]).await;
    let (standing, plain) = download(&app, TOKEN_ACME_MEMBER, &cluster, "").await;
    assert!(plain.get("credential").is_none(), "{plain}");
    let (again, _) = download(&app, TOKEN_ACME_MEMBER, &cluster, "").await;
    assert_eq!(
        standing, again,
        "the standing credential: the same on every download"
    );

    let (own, answer) = download(&app, TOKEN_ACME_MEMBER, &cluster, "&expiry_seconds=3600").await;
    assert_ne!(own, standing);
    let credential = &answer["credential"];
    assert_eq!(
        (&credential["status"], &credential["issued_to"]["user_id"]),
        (&json!("active"), &json!("bob"))
    );
    let yaml = answer["kubeconfig"].as_str().unwrap();
    let expires = credential["expires_at"]
        .as_str()
        .unwrap()
        .trim_end_matches('Z');
    assert!(
        yaml.contains(&expires[..19]),
        "the expiry shows in the file: {yaml}"
    );
    let seen = kubectl_view(yaml);
    let extension = &seen["users"][0]["user"]["extensions"][0];
    assert_eq!(extension["extension"]["id"], credential["id"], "{seen}");
    assert!(
        extension["extension"]["expires-at"]
            .as_str()
            .is_some_and(|e| e.starts_with(&expires[..19])),
        "kubectl shows when it expires: {seen}"
    );
    for bearer in [&standing, &own] {
        assert_eq!(cluster_says(&app, &cluster, bearer).await, 200);
    }
    assert_eq!(cluster_says(&app, &cluster, "kc-not-issued").await, 401);

    let path = format!("{CLUSTERS}/{cluster}/credentials");
    let list = app.get(&path, TOKEN_ACME_PROJECT_ADMIN).await.json();
    assert_eq!(list["items"][0]["id"], credential["id"]);
    assert!(!list.to_string().contains(&own), "never the token: {list}");
    // Revoked through another server process: the review reads the database, so the
    // cluster refuses it at once whichever process it asks.
    let other = app.second_server(&[]).await;
    let revoked = app
        .send(
            app.client
                .delete(format!("{}{path}/{}", other.url, id(credential)))
                .bearer_auth(TOKEN_ACME_MEMBER),
        )
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.text());
    assert_eq!(
        (&revoked.json()["status"], &revoked.json()["revoked_by"]),
        (&json!("revoked"), &json!("bob"))
    );
    assert_eq!(
        cluster_says(&app, &cluster, &own).await,
        401,
        "refused from now on"
    );
    assert_eq!(cluster_says(&app, &cluster, &standing).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_credential_is_refused_and_listed_as_expired() {
    let (app, cluster) = provisioned(&[]).await;
    let (own, answer) =
        download(&app, TOKEN_ACME_SUPER_ADMIN, &cluster, "&expiry_seconds=60").await;
    let aged = app.texts(&format!(
        "UPDATE kubeconfig_credentials SET created_at = now() - interval '2 minutes', \
         expires_at = now() - interval '1 minute' WHERE id = '{}' RETURNING id::text AS v",
        id(&answer["credential"])
    ));
    assert_eq!(aged.len(), 1);
    assert_eq!(cluster_says(&app, &cluster, &own).await, 401);
    let list = app
        .get(
            &format!("{CLUSTERS}/{cluster}/credentials"),
            TOKEN_ACME_MEMBER,
        )
        .await
        .json();
    assert_eq!(list["items"][0]["status"], "expired");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_ends_every_credential_and_replaces_the_standing_one() {
    let (app, cluster) = provisioned(&[]).await;
    let (standing, _) = download(&app, TOKEN_ACME_MEMBER, &cluster, "").await;
    let (own, _) = download(&app, TOKEN_ACME_MEMBER, &cluster, "&expiry_seconds=3600").await;
    let path = format!("{CLUSTERS}/{cluster}/credentials");
    expect(
        &app.delete(&path, TOKEN_ACME_MEMBER).await,
        403,
        "forbidden",
    );
    assert_eq!(cluster_says(&app, &cluster, &standing).await, 200);
    let rotated = app.delete(&path, TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(rotated.status, 200, "{}", rotated.text());
    assert_eq!(rotated.json(), json!({"revoked": 1}));
    for bearer in [&standing, &own] {
        assert_eq!(cluster_says(&app, &cluster, bearer).await, 401);
    }
    let (fresh, _) = download(&app, TOKEN_ACME_MEMBER, &cluster, "").await;
    assert_ne!(fresh, standing);
    assert_eq!(cluster_says(&app, &cluster, &fresh).await, 200);
    // Both ends are in the audit trail, without a token.
    let trail = app
        .get(
            "/v1/public/audit-events?resource=kubeconfig_credential",
            TOKEN_ACME_MEMBER,
        )
        .await
        .json();
    let actions: Vec<&str> = trail["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["rotated", "created"]);
    for token in [&standing, &own, &fresh] {
        assert!(!trail.to_string().contains(token.as_str()));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_holder_or_a_super_admin_revokes_and_lifetimes_are_bounded() {
    let (app, cluster) = provisioned(&[("KUBECONFIG_EXPIRY_MAX_SECONDS", "7200")]).await;
    let (_, answer) = download(&app, TOKEN_ACME_MEMBER, &cluster, "&expiry_seconds=3600").await;
    let one = format!(
        "{CLUSTERS}/{cluster}/credentials/{}",
        id(&answer["credential"])
    );
    expect(
        &app.delete(&one, TOKEN_ACME_PROJECT_ADMIN).await,
        403,
        "forbidden",
    );
    expect(
        &app.delete(&one, TOKEN_INITECH_SUPER_ADMIN).await,
        403,
        "forbidden",
    );
    assert_eq!(app.delete(&one, TOKEN_ACME_SUPER_ADMIN).await.status, 200);
    let again = app.delete(&one, TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!(
        (again.status, again.json()["revoked_by"].clone()),
        (200, json!("alice")),
        "a second revocation changes nothing"
    );
    let unknown = format!("{CLUSTERS}/{cluster}/credentials/{}", uuid::Uuid::new_v4());
    assert_eq!(
        app.delete(&unknown, TOKEN_ACME_SUPER_ADMIN).await.status,
        404
    );
    for bad in ["59", "7201", "soon", "-1"] {
        let a = app
            .get(
                &format!("{CLUSTERS}/{cluster}/kubeconfig?expiry_seconds={bad}"),
                TOKEN_ACME_MEMBER,
            )
            .await;
        expect(&a, 400, "invalid_query");
    }
    assert_eq!(
        app.count_rows("kubeconfig_credentials"),
        1,
        "a refused download issues nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_default_lifetime_gives_every_download_its_own_credential() {
    let (app, cluster) = provisioned(&[("KUBECONFIG_EXPIRY_DEFAULT_SECONDS", "600")]).await;
    let (first, a) = download(&app, TOKEN_ACME_MEMBER, &cluster, "").await;
    let (second, b) = download(&app, TOKEN_ACME_MEMBER, &cluster, "").await;
    assert_ne!(first, second);
    assert_ne!(a["credential"]["id"], b["credential"]["id"]);
    assert_eq!(app.count_rows("kubeconfig_credentials"), 2);
}
