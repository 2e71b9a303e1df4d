//! What an upstream's answer cannot do: be read two ways, or leave bytes behind that the
//! gateway would take for the answer to the next request on the same connection (response
//! splitting, one client's request answered with what was meant for, or forged for, another).

use std::sync::atomic::Ordering;

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
