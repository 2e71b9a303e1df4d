//! What the gateway speaks to an upstream: HTTP/1.1 by default, HTTP/2 where the route says
//! so, over connections it keeps, and never an error for one the upstream dropped meanwhile;
//! and a stop that lets the requests in flight finish.

use std::sync::atomic::Ordering;
use std::time::Duration;

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_connection_the_upstream_dropped_is_never_an_error() {
    // Each request on a connection of its own, dropped after the answer without saying
    // `Connection: close`: every connection the gateway keeps for it goes stale.
    let (upstream, accepted) =
        raw_upstream(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").await;
    let h = harness_with(&[route("/once", "machines").to(upstream)], &[]).await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/once").await;
    let client = http();
    for i in 0..20 {
        let r = client
            .get(h.url("/once/x"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "request {i}");
        assert_eq!(r.text().await.unwrap(), "ok", "request {i}");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_finishes_the_requests_in_flight_and_takes_no_new_ones() {
    let h = harness_with(&[route("/token", "machines")], &[]).await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/token").await;
    let running = h.launch(&[]).await;
    let handle = running.handle.clone();
    let addr = running.spawn();
    let url = format!("http://{addr}/token/x/slow");
    let in_flight = tokio::spawn(http().get(url).bearer_auth(TOKEN).send());
    let arrived = eventually(Duration::from_secs(10), || async { h.upstream_hits() == 1 }).await;
    assert!(arrived, "the slow request never reached the upstream");

    handle.stop();
    let answer = in_flight.await.unwrap().unwrap();
    assert_eq!(answer.status(), 200);
    let refused = eventually(Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(addr).await.is_err()
    })
    .await;
    assert!(refused, "a stopped gateway still took connections");
}

/// Each worker listens on its own socket of one address (`SO_REUSEPORT`), which would let a
/// second gateway on that address silently take a share of the connections: it does not start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_gateway_on_the_same_address_does_not_start() {
    let h = harness(&[("/token", "machines")]).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let first = h.try_launch(&[("GATEWAY_BIND_ADDR", &addr)]).await;
    assert!(first.is_ok(), "the first gateway starts");
    let second = h.try_launch(&[("GATEWAY_BIND_ADDR", &addr)]).await;
    let error = second.err().expect("the second is refused").to_string();
    assert!(error.contains("cannot listen on"), "{error}");
}
