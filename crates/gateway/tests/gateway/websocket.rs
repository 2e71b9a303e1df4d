//! WebSocket through the gateway: the upgrade is checked like any request (no credentials, no
//! tunnel, and the upstream never hears of it), then both directions pass whole, in order,
//! until either side closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

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
