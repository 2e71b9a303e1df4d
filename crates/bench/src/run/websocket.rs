//! Item 6, WebSocket: one message at a time over one connection, each awaited back from an echo
//! upstream, straight to the upstream and then through the gateway's Token route. The round
//! trip of each message is measured by the client.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use crate::results::WebSocketEcho;
use crate::stats::Summary;

/// The size of each message: a small application frame.
const MESSAGE_BYTES: usize = 256;

/// A WebSocket upstream on a free loopback port that sends each message back; it runs until
/// the process ends.
pub async fn start_echo() -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let _ = tcp.set_nodelay(true);
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(tcp).await else {
                    return;
                };
                while let Some(Ok(message)) = ws.next().await {
                    if (message.is_text() || message.is_binary()) && ws.send(message).await.is_err()
                    {
                        break;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// Round trips of `messages` messages over one connection to `url` (with `authorization`).
async fn round_trips(
    url: &str,
    authorization: Option<&str>,
    messages: usize,
) -> anyhow::Result<Summary> {
    let mut request = url.into_client_request()?;
    if let Some(value) = authorization {
        request
            .headers_mut()
            .insert("authorization", value.parse()?);
    }
    let (mut ws, _) = tokio_tungstenite::connect_async_with_config(request, None, true)
        .await
        .with_context(|| format!("opening {url}"))?;
    let payload = vec![b'x'; MESSAGE_BYTES];
    let mut times = Vec::with_capacity(messages);
    for _ in 0..messages {
        let sent = Instant::now();
        ws.send(Message::binary(payload.clone())).await?;
        match tokio::time::timeout(Duration::from_secs(5), ws.next()).await {
            Ok(Some(Ok(m))) if m.len() == MESSAGE_BYTES => times.push(sent.elapsed()),
            other => bail!("{url}: no echo within 5 s: {other:?}"),
        }
    }
    ws.close(None).await?;
    Ok(Summary::of(&times))
}

/// Straight to `echo`, then through `gateway_url` with the route's `authorization`.
pub async fn measure(
    echo: SocketAddr,
    gateway_url: &str,
    authorization: &str,
    messages: usize,
) -> anyhow::Result<WebSocketEcho> {
    let direct = round_trips(&format!("ws://{echo}/echo"), None, messages).await?;
    let gateway = round_trips(gateway_url, Some(authorization), messages).await?;
    Ok(WebSocketEcho {
        messages,
        message_bytes: MESSAGE_BYTES,
        direct,
        gateway,
    })
}
