//! What an upstream's answer cannot do: be read two ways, or leave bytes behind that the
//! gateway would take for the answer to the next request on the same connection (response
//! splitting, one client's request answered with what was meant for, or forged for, another).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::*;

const TOKEN: &str = "machines-token-0123456789abcdef";

/// The upstream sends more than its answer's length: a second, forged answer right behind it.
/// Every request gets the first, and the connection that carried the rest is never used again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_after_an_answer_never_answer_the_next_request() {
    let (upstream, accepted) = keep_alive_upstream(|_| {
        let a = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok\
                 HTTP/1.1 200 OK\r\ncontent-length: 6\r\nx-forged: yes\r\n\r\nforged";
        (a.as_bytes().to_vec(), false)
    })
    .await;
    let h = token_gateway("/a", upstream, TOKEN).await;
    let auth = format!("Authorization: Bearer {TOKEN}");
    for i in 0..5 {
        // A new client each time: the forged answer would go to someone else.
        let mut client = tokio::net::TcpStream::connect(h.gateway).await.unwrap();
        let r = kept_request(&mut client, "GET", "/a/x", &[&auth]).await;
        assert_eq!(
            (r.status, r.body.as_str()),
            (200, "ok"),
            "request {i}: {r:?}"
        );
        assert_eq!(r.header("x-forged"), None, "request {i}");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 5);
}

/// An upstream that answers without a body by the framing (HEAD, `/no-content` 204,
/// `/not-modified` 304) and 0.3 s later sends a forged whole answer on the same connection, as
/// an upstream answering HEAD like GET sends a body nobody reads; anything else gets `genuine`.
/// Request bodies are read by their `Content-Length`. Counts the connections it accepted.
async fn late_answer_upstream() -> (SocketAddr, Arc<AtomicUsize>) {
    const FORGED: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\nx-forged: yes\r\n\r\nforged";
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                while let Some((head, mut body)) = read_head(&mut tcp).await {
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|n| n.trim().parse().ok())
                        .unwrap_or(0);
                    while body.len() < length {
                        let mut more = [0u8; 4096];
                        match tcp.read(&mut more).await {
                            Ok(n) if n > 0 => body.extend_from_slice(&more[..n]),
                            _ => return,
                        }
                    }
                    let bodiless: Option<&[u8]> = if head.starts_with("head ") {
                        Some(b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\n")
                    } else if head.contains("/no-content ") {
                        Some(b"HTTP/1.1 204 No Content\r\n\r\n")
                    } else if head.contains("/not-modified ") {
                        Some(b"HTTP/1.1 304 Not Modified\r\netag: \"1\"\r\n\r\n")
                    } else {
                        None
                    };
                    let written = match bodiless {
                        Some(answer) => {
                            let first = tcp.write_all(answer).await;
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            first.and(tcp.write_all(FORGED).await)
                        }
                        None => {
                            tcp.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\ngenuine")
                                .await
                        }
                    };
                    if written.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// An answer without a body by its framing (to HEAD, a 204, a 304), followed 0.3 s later by a
/// forged answer on the same upstream connection: the next request routed there gets its own
/// answer, never the forged one, whichever of the gateway's upstream clients carries it (its
/// own for bodiless requests, hyper's for requests with a body). Answers with a body keep their
/// connection for the next request. One worker, so every request meets the connections the
/// one before it left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_body_after_a_bodiless_answer_never_answers_the_next_request() {
    let auth = format!("Authorization: Bearer {TOKEN}");
    let request = |method: &str, path: &str| {
        let body = if method == "POST" {
            "Content-Length: 4\r\n\r\nbody"
        } else {
            "\r\n"
        };
        format!("{method} {path} HTTP/1.1\r\nHost: gw\r\n{auth}\r\nConnection: close\r\n{body}")
    };
    // The request answered without a body, its status, and the request that follows it.
    for (first, path, status, next) in [
        ("HEAD", "/late/x", 200, "GET"),
        ("GET", "/late/not-modified", 304, "GET"),
        ("POST", "/late/no-content", 204, "POST"),
    ] {
        let (upstream, _) = late_answer_upstream().await;
        let h = token_gateway_with("/late", upstream, TOKEN, &[("GATEWAY_WORKERS", "1")]).await;
        for round in 0..3 {
            let r = raw(h.gateway, &request(first, path)).await;
            assert_eq!(r.status, status, "{first} {path}, round {round}: {r:?}");
            // At once, from another client: the forged answer is not there yet.
            let r = raw(h.gateway, &request(next, "/late/x")).await;
            assert_eq!(
                (r.status, r.body.as_str(), r.header("x-forged")),
                (200, "genuine", None),
                "{next} after {first} {path}, round {round}"
            );
        }
    }
    // The common path: answers with a body keep the one connection, on both clients.
    for method in ["GET", "POST"] {
        let (upstream, accepted) = late_answer_upstream().await;
        let h = token_gateway_with("/late", upstream, TOKEN, &[("GATEWAY_WORKERS", "1")]).await;
        for round in 0..3 {
            let r = raw(h.gateway, &request(method, "/late/x")).await;
            assert_eq!(
                (r.status, r.body.as_str()),
                (200, "genuine"),
                "{method} {round}"
            );
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "{method}");
    }
}

/// Answers whose end cannot be known for sure are a 502 problem that names nothing of the
/// upstream, and the next request on the client's connection is answered right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_framed_ambiguously_are_refused_as_bad_gateway() {
    type Case = (&'static str, fn(&str) -> (Vec<u8>, bool));
    let cases: [Case; 6] = [
        ("lengths that disagree", |_| {
            let a = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 9\r\n\r\nok";
            (a.as_bytes().to_vec(), false)
        }),
        ("a length that is not a number", |_| {
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: +2\r\n\r\nok".to_vec(),
                false,
            )
        }),
        ("chunked, then another coding", |_| {
            let a =
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\n2\r\nok\r\n0\r\n\r\n";
            (a.as_bytes().to_vec(), false)
        }),
        ("a header line without a colon", |_| {
            (
                b"HTTP/1.1 200 OK\r\nsecret-upstream-detail\r\n\r\n".to_vec(),
                false,
            )
        }),
        ("a protocol switch nobody asked for", |_| {
            let a = "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n\r\n";
            (a.as_bytes().to_vec(), false)
        }),
        ("not HTTP at all", |_| {
            (b"SSH-2.0-OpenSSH_9.2\r\n\r\n".to_vec(), false)
        }),
    ];
    for (name, answer) in cases {
        let (upstream, _) = keep_alive_upstream(answer).await;
        let h = token_gateway("/a", upstream, TOKEN).await;
        let mut client = tokio::net::TcpStream::connect(h.gateway).await.unwrap();
        let auth = format!("Authorization: Bearer {TOKEN}");
        for i in 0..2 {
            let r = kept_request(&mut client, "GET", "/a/x", &[&auth]).await;
            assert_eq!(r.status, 502, "{name}, request {i}: {r:?}");
            let problem: serde_json::Value = serde_json::from_str(&r.body).unwrap();
            assert_eq!(problem["code"], "bad_gateway", "{name}: {r:?}");
            for leaked in ["secret", "SSH", "websocket", "gzip", "content-length"] {
                assert!(!r.body.contains(leaked), "{name}: {r:?}");
            }
        }
    }
}

/// A chunked answer whose framing breaks in the middle is cut there: the connection closes
/// with at most what came before the break (what of it was still in the gateway's buffers is
/// lost with the connection), never the bytes after it, and no chunked end, so the client can
/// tell the answer is incomplete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_answer_broken_midway_is_cut_there() {
    let (upstream, _) = keep_alive_upstream(|_| {
        let a = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
                 2\r\nok\r\nzz\r\nHTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nforged";
        (a.as_bytes().to_vec(), false)
    })
    .await;
    let h = token_gateway("/a", upstream, TOKEN).await;
    let request = raw_request(
        "GET",
        h.gateway,
        "/a/x",
        &[&format!("Authorization: Bearer {TOKEN}")],
    );
    let mut client = tokio::net::TcpStream::connect(h.gateway).await.unwrap();
    client.write_all(request.as_bytes()).await.unwrap();
    let mut bytes = Vec::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        client.read_to_end(&mut bytes),
    )
    .await
    .expect("the gateway closes the connection")
    .ok();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        !text.contains("forged") && !text.ends_with("0\r\n\r\n"),
        "{text}"
    );
}
