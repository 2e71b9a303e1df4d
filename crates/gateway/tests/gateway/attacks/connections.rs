//! A flood of connections: at most `GATEWAY_MAX_CONNECTIONS` are open at once, all listeners
//! together; one more is closed at accept, before a byte of it is read, and a connection that
//! closes makes room again.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::*;

/// A keep-alive connection that got its answer (so the gateway admitted it), left open.
async fn admitted(addr: std::net::SocketAddr) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    tcp.write_all(request.as_bytes()).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = tcp.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    tcp
}

/// Whether the gateway closes `tcp` without answering.
async fn closed_unanswered(mut tcp: TcpStream) -> bool {
    let addr = tcp.peer_addr().unwrap();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let _ = tcp.write_all(request.as_bytes()).await;
    let mut buf = [0u8; 1024];
    matches!(
        tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_limit_are_closed_at_accept_until_one_closes() {
    let h = harness_with(
        &[route("/token", "machines")],
        &[
            ("GATEWAY_MAX_CONNECTIONS", "2"),
            ("GATEWAY_ADMIN_BIND_ADDR", "127.0.0.1:0"),
        ],
    )
    .await;
    let first = admitted(h.gateway).await;
    let _second = admitted(h.gateway).await;
    let third = TcpStream::connect(h.gateway).await.unwrap();
    assert!(
        closed_unanswered(third).await,
        "a third connection was served"
    );

    drop(first);
    let room = eventually(Duration::from_secs(10), || async {
        let Ok(mut tcp) = TcpStream::connect(h.gateway).await else {
            return false;
        };
        let request = format!(
            "GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            h.gateway
        );
        let _ = tcp.write_all(request.as_bytes()).await;
        let mut answer = Vec::new();
        let _ = tcp.read_to_end(&mut answer).await;
        answer.starts_with(b"HTTP/1.1 200")
    })
    .await;
    assert!(room, "a closed connection made no room");
    let admin = h.admin.expect("the admin listener");
    let metrics = http()
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // The third, and any try of the loop above made before the first close was seen.
    let refused: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("gateway_connections_refused_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(refused >= 1, "{metrics}");
}
