//! What the gateway speaks to an upstream: HTTP/1.1 by default, HTTP/2 where the route says so.

use crate::harness::*;

const TOKEN: &str = "machines-token-0123456789abcdef";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_can_speak_http2_to_its_upstream() {
    let h = harness_with(
        &[
            route("/h1", "machines"),
            route("/h2", "machines").with("upstream_http2 = true"),
        ],
        &[],
    )
    .await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/h2").await;
    for (path, version) in [("/h1/x", "HTTP/1.1"), ("/h2/x", "HTTP/2.0")] {
        let r = http()
            .post(h.url(path))
            .bearer_auth(TOKEN)
            .body(vec![1u8; 100_000])
            .send()
            .await
            .unwrap();
        let echo = echo_of(r).await;
        assert_eq!(echo.status, 200, "{path}");
        assert_eq!(echo.body["version"], version, "{path}");
        assert_eq!(echo.body["body_len"], 100_000, "{path}");
    }
}
