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

/// Every framing an HTTP/1.1 upstream may give its answer reaches the client whole, three
/// times over one client connection; the gateway's connection to the upstream is kept for the
/// next request exactly when the answer allows it: its end known, and a body to read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_of_every_framing_pass_whole_and_keep_the_connection_when_they_may() {
    type Case = (
        &'static str,
        fn(&str) -> (Vec<u8>, bool),
        &'static str,
        usize,
    );
    let cases: [Case; 7] = [
        (
            "length",
            |_| {
                (
                    b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello".to_vec(),
                    false,
                )
            },
            "hello",
            1,
        ),
        (
            "chunked, extensions and trailers",
            |_| {
                let a = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                         5;x=1\r\nhello\r\n6\r\n world\r\n0\r\nx-trailer: 1\r\n\r\n";
                (a.as_bytes().to_vec(), false)
            },
            "hello world",
            1,
        ),
        (
            "informational answers first",
            |_| {
                let a = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\n\
                         link: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                (a.as_bytes().to_vec(), false)
            },
            "ok",
            1,
        ),
        // No body by its status: a body sent late would answer the next request.
        (
            "no content",
            |_| (b"HTTP/1.1 204 No Content\r\n\r\n".to_vec(), false),
            "",
            3,
        ),
        (
            "connection: close",
            |_| {
                let a = "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok";
                (a.as_bytes().to_vec(), true)
            },
            "ok",
            3,
        ),
        (
            "HTTP/1.0",
            |_| {
                (
                    b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
                    true,
                )
            },
            "ok",
            3,
        ),
        (
            "until the upstream closes",
            |_| (b"HTTP/1.1 200 OK\r\n\r\nall of it".to_vec(), true),
            "all of it",
            3,
        ),
    ];
    for (name, answer, body, connections) in cases {
        let (upstream, accepted) = keep_alive_upstream(answer).await;
        let h = token_gateway("/f", upstream, TOKEN).await;
        let mut client = tokio::net::TcpStream::connect(h.gateway).await.unwrap();
        let auth = format!("Authorization: Bearer {TOKEN}");
        for i in 0..3 {
            let r = kept_request(&mut client, "GET", "/f/x", &[&auth]).await;
            assert_eq!(
                (r.status / 100, r.body.as_str()),
                (2, body),
                "{name}, request {i}: {r:?}"
            );
            assert_eq!(r.header("x-trailer"), None, "{name}");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), connections, "{name}");
    }
}

/// A HEAD answer's `Content-Length` tells the length of a body it does not have: the client
/// gets the length, and its connection goes on with the next answer read right. The upstream
/// connection that carried the HEAD is not used again (a body sent late after it would answer
/// the next request): the GET goes on a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_answer_keeps_its_length_and_the_connection_stays_in_step() {
    let (upstream, accepted) = keep_alive_upstream(|head| {
        let answer: &[u8] = if head.starts_with("head ") {
            b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"
        } else {
            b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nget"
        };
        (answer.to_vec(), false)
    })
    .await;
    let h = token_gateway("/f", upstream, TOKEN).await;
    let mut client = tokio::net::TcpStream::connect(h.gateway).await.unwrap();
    let auth = format!("Authorization: Bearer {TOKEN}");
    let head = kept_request(&mut client, "HEAD", "/f/x", &[&auth]).await;
    assert_eq!(
        (head.status, head.header("content-length")),
        (200, Some("5")),
        "{head:?}"
    );
    let get = kept_request(&mut client, "GET", "/f/x", &[&auth]).await;
    assert_eq!((get.status, get.body.as_str()), (200, "get"), "{get:?}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

/// An upstream that sends its answer a byte at a time (head, chunk sizes, trailers) is read
/// whole: the gateway parses a head or a trailer section once its empty line is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_sent_a_byte_at_a_time_is_read_whole() {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tcp.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                while read_head(&mut tcp).await.is_some() {
                    let answer = "HTTP/1.1 200 OK\r\nx-slow: yes\r\ntransfer-encoding: chunked\r\n\r\n\
                                  5\r\nhello\r\n6;e=1\r\n world\r\n0\r\nx-t: 1\r\n\r\n";
                    for byte in answer.as_bytes() {
                        if tcp.write_all(&[*byte]).await.is_err() {
                            return;
                        }
                        tokio::task::yield_now().await;
                    }
                }
            });
        }
    });
    let h = token_gateway("/slow", upstream, TOKEN).await;
    let mut client = tokio::net::TcpStream::connect(h.gateway).await.unwrap();
    let auth = format!("Authorization: Bearer {TOKEN}");
    for i in 0..2 {
        let r = kept_request(&mut client, "GET", "/slow/x", &[&auth]).await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (200, "hello world"),
            "request {i}: {r:?}"
        );
        assert_eq!(r.header("x-slow"), Some("yes"), "{r:?}");
    }
}
