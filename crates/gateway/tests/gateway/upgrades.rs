//! Upgrades through the gateway (WebSocket, and any other protocol): the upgrade is checked like
//! any request (no credentials, no tunnel, and the upstream never hears of it), then both
//! directions pass whole, in order, until both sides close. The tunnel opens on the upstream's
//! 101 only; `h2c` is never passed on.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};

use crate::harness::*;

const TOKEN: &str = "machines-token-0123456789abcdef";

/// What the WebSocket echo upstream saw.
#[derive(Default)]
struct Seen {
    handshakes: AtomicUsize,
    closes: AtomicUsize,
}

/// A WebSocket upstream that sends every text and binary message back.
async fn websocket_echo() -> (SocketAddr, Arc<Seen>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Seen::default());
    let counts = seen.clone();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let counts = counts.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                counts.handshakes.fetch_add(1, Ordering::SeqCst);
                // After a Close, the next poll sends the reply and then the stream ends.
                while let Some(Ok(message)) = ws.next().await {
                    if message.is_close() {
                        counts.closes.fetch_add(1, Ordering::SeqCst);
                    } else if (message.is_text() || message.is_binary())
                        && ws.send(message).await.is_err()
                    {
                        break;
                    }
                }
            });
        }
    });
    (addr, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_opens_after_the_token_check_and_carries_both_ways_until_closed() {
    let (upstream, seen) = websocket_echo().await;
    let h = harness_with(&[route("/ws", "machines").to(upstream)], &[]).await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/ws").await;
    let url = format!("ws://{}/ws/echo", h.gateway);

    // No token: refused like any request, and no upgrade reaches the upstream.
    match tokio_tungstenite::connect_async(url.as_str()).await {
        Err(tungstenite::Error::Http(refused)) => assert_eq!(refused.status(), 401),
        other => panic!("expected 401, got {other:?}"),
    }
    assert_eq!(seen.handshakes.load(Ordering::SeqCst), 0);

    let mut request = url.as_str().into_client_request().unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {TOKEN}").parse().unwrap());
    let (mut ws, switched) = tokio_tungstenite::connect_async(request).await.unwrap();
    assert_eq!(switched.status(), 101);
    for i in 0..1000u32 {
        let message = if i % 2 == 0 {
            Message::text(format!("message {i}"))
        } else {
            // Larger than one read of the tunnel, so pieces are joined again on the way.
            Message::binary(vec![(i % 251) as u8; 40_000])
        };
        ws.send(message.clone()).await.unwrap();
        assert_eq!(ws.next().await.unwrap().unwrap(), message, "message {i}");
    }
    ws.close(None).await.unwrap();
    while let Some(Ok(_)) = ws.next().await {}
    let closed = eventually(Duration::from_secs(10), || async {
        seen.closes.load(Ordering::SeqCst) == 1
    })
    .await;
    assert!(closed, "the upstream never heard the client close");
    assert_eq!(seen.handshakes.load(Ordering::SeqCst), 1);
}

/// A gateway with a Token route `/up` in front of the upgrading upstream.
async fn upgrade_route() -> (Harness, Heads) {
    let (upstream, heads) = upgrading_upstream().await;
    let h = harness_with(&[route("/up", "machines").to(upstream)], &[]).await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/up").await;
    (h, heads)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_to_any_protocol_tunnels_after_the_check_until_both_sides_close() {
    let (h, heads) = upgrade_route().await;
    let asks = ["Connection: Upgrade", "Upgrade: echo/1"];

    let refused = raw(h.gateway, &upgrade_request(&h, "/up/x", &asks)).await;
    assert_eq!(refused.status, 401, "{refused:?}");
    assert!(heads.lock().unwrap().is_empty(), "the upstream heard of it");

    let authorization = format!("Authorization: Bearer {TOKEN}");
    let mut tcp = TcpStream::connect(h.gateway).await.unwrap();
    let request = upgrade_request(&h, "/up/x", &[&authorization, asks[0], asks[1]]);
    tcp.write_all(request.as_bytes()).await.unwrap();
    let (head, rest) = read_head(&mut tcp).await.expect("an answer");
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("\r\nupgrade: echo/1"), "{head}");
    assert!(rest.is_empty());
    for round in 0..50 {
        let message = format!("round {round} through the tunnel ").repeat(round + 1);
        tcp.write_all(message.as_bytes()).await.unwrap();
        let mut back = vec![0u8; message.len()];
        tcp.read_exact(&mut back).await.unwrap();
        assert_eq!(back, message.as_bytes());
    }
    // The client closes its side: the upstream hears it and closes too, which the client sees.
    tcp.shutdown().await.unwrap();
    let mut after = Vec::new();
    tcp.read_to_end(&mut after).await.unwrap();
    assert!(after.is_empty());

    let heads = heads.lock().unwrap();
    assert_eq!(heads.len(), 1);
    assert!(heads[0].contains("\r\nupgrade: echo/1"), "{}", heads[0]);
    assert!(!heads[0].contains("authorization"), "{}", heads[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_is_never_passed_on_and_only_the_upstreams_101_opens_a_tunnel() {
    let (h, heads) = upgrade_route().await;
    let authorization = format!("Authorization: Bearer {TOKEN}");

    // h2c: forwarded as a plain request, without its upgrade headers.
    let h2c = raw(
        h.gateway,
        &upgrade_request(
            &h,
            "/up/x",
            &[
                &authorization,
                "Connection: Upgrade, HTTP2-Settings, close",
                "Upgrade: h2c",
                "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA",
            ],
        ),
    )
    .await;
    assert_eq!((h2c.status, h2c.body.as_str()), (200, "plain"), "{h2c:?}");
    let head = heads.lock().unwrap().last().cloned().unwrap();
    assert!(
        !head.contains("upgrade") && !head.contains("http2-settings"),
        "{head}"
    );

    // A switch the request did not ask for.
    let unasked = raw(
        h.gateway,
        &upgrade_request(&h, "/up/unasked", &[&authorization, "Connection: close"]),
    )
    .await;
    assert_eq!(unasked.status, 502, "{unasked:?}");

    // The upstream declines the upgrade: the client's connection stays HTTP, and its next
    // request is checked like any other.
    let mut tcp = TcpStream::connect(h.gateway).await.unwrap();
    let declined = upgrade_request(
        &h,
        "/up/refuse",
        &[&authorization, "Connection: Upgrade", "Upgrade: echo/1"],
    );
    let next = upgrade_request(&h, "/up/refuse", &["Connection: close"]);
    tcp.write_all(declined.as_bytes()).await.unwrap();
    let (head, _) = read_head(&mut tcp).await.expect("an answer");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    tcp.write_all(next.as_bytes()).await.unwrap();
    let mut rest = Vec::new();
    tcp.read_to_end(&mut rest).await.unwrap();
    let rest = String::from_utf8_lossy(&rest);
    assert!(rest.contains("HTTP/1.1 401"), "{rest}");
}
