//! `/metrics` names every route and its traffic: it is served on the admin listener only,
//! never on the port the internet reaches.

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_served_on_the_admin_listener_only() {
    let h = harness_with(
        &[route("/token", "machines")],
        &[("GATEWAY_ADMIN_BIND_ADDR", "127.0.0.1:0")],
    )
    .await;
    let machines = h.token_server(ORG_SLUG, "machines", "machines-token-0123456789abcdef");
    h.insert_all(&[&machines], "/token").await;

    // One answered request, so the route has a series to show.
    let r = http().get(h.url("/token/x")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let proxied = http().get(h.url("/metrics")).send().await.unwrap();
    assert_eq!(proxied.status(), 404);
    let text = proxied.text().await.unwrap();
    assert!(!text.contains("/token"), "{text}");

    let admin = h.admin.expect("the admin listener");
    let r = http()
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("/token"),
        "the admin listener's metrics name the routes: {text}"
    );
    // The admin listener proxies nothing.
    let r = http()
        .get(format!("http://{admin}/token/x"))
        .header("authorization", "Bearer machines-token-0123456789abcdef")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    assert_eq!(h.upstream_hits(), 0);
}
