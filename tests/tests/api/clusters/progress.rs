//! Following provisioning: the kubeconfig's 202 and the state long-poll.

use blackbox::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_of_a_pending_cluster_is_202_with_retry_after_5() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    for q in ["", "?format=plain", "?format=json"] {
        let a = app
            .get(
                &format!("{CLUSTERS}/{}/kubeconfig{q}", id(&c)),
                TOKEN_ACME_MEMBER,
            )
            .await;
        assert_eq!(a.status, 202, "{}", a.text());
        assert_eq!(a.header("retry-after").as_deref(), Some("5"));
        assert_eq!(
            a.json(),
            json!({"phase": "Pending", "retry_after_seconds": 5})
        );
    }
    expect(
        &app.get(
            &format!("{CLUSTERS}/{}/kubeconfig?format=yaml", id(&c)),
            TOKEN_ACME_MEMBER,
        )
        .await,
        400,
        "invalid_query",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_long_poll_on_a_pending_cluster() {
    let app = TestApp::spawn_api_only(&[]).await;
    let c = app.create_cluster("c1").await;
    let state = format!("{CLUSTERS}/{}/state", id(&c));
    let a = app
        .get(&format!("{state}?since=0"), TOKEN_ACME_MEMBER)
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let s = a.json();
    assert_eq!(
        (
            s["cluster_id"].as_str(),
            s["phase"].as_str(),
            s["changed"].as_bool()
        ),
        (Some(id(&c).as_str()), Some("Pending"), Some(true))
    );
    let version = s["version"].as_i64().unwrap();
    assert!(version >= 1);
    let a = app
        .get(
            &format!("{state}?since={version}&timeout_seconds=1"),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        (a.json()["changed"].as_bool(), a.json()["version"].as_i64()),
        (Some(false), Some(version))
    );
    // A change raises the version; a waiting poll sees it.
    let waiting = {
        let (client, url) = (
            app.client.clone(),
            format!("{}{state}?since={version}&timeout_seconds=30", app.url),
        );
        tokio::spawn(async move {
            client
                .get(url)
                .bearer_auth(TOKEN_ACME_MEMBER)
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let p = app
        .patch(
            &format!("{CLUSTERS}/{}", id(&c)),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"description": "x"}),
        )
        .await;
    assert_eq!(p.status, 200);
    let s = waiting.await.unwrap();
    assert_eq!(s["changed"], true);
    assert!(s["version"].as_i64().unwrap() > version);
}
