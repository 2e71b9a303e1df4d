//! What a protocol switch opens: once the upstream answers 101, the tunnel carries whatever
//! bytes the client sends, unread by the gateway, to the upstream, HTTP requests for any of its
//! paths among them (those of routes with other auth servers too). A route whose upstream has
//! no use for upgrades says `upgrades = false`, and requests to switch are refused there before
//! anything reaches the upstream.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::harness::*;

const TOKEN: &str = "machines-token-0123456789abcdef";

/// `/up` (Token, upgrades taken), `/locked` (Token, `upgrades = false`) and `/staff` (Basic)
/// in front of one upgrading upstream.
async fn shared_upstream() -> (Harness, Heads) {
    let (upstream, heads) = upgrading_upstream().await;
    let h = harness_with(
        &[
            route("/up", "machines").to(upstream),
            route("/locked", "machines")
                .to(upstream)
                .with("upgrades = false"),
            route("/staff", "staff").to(upstream),
        ],
        &[],
    )
    .await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    let staff = h.basic_server(ORG_SLUG, "staff", &[("alice", "alice-password")]);
    h.insert_all(&[&staff, &machines], "/locked").await;
    (h, heads)
}

/// Through a tunnel opened on `/up`, a request for `/staff/admin` reaches the upstream without
/// the Basic credentials its route asks for: the gateway reads nothing of a tunnel. This is
/// what `upgrades = false` is for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_carries_requests_for_any_path_of_its_upstream() {
    let (h, heads) = shared_upstream().await;
    let authorization = format!("Authorization: Bearer {TOKEN}");
    let mut tcp = TcpStream::connect(h.gateway).await.unwrap();
    let request = upgrade_request(
        &h,
        "/up/x",
        &[&authorization, "Connection: Upgrade", "Upgrade: echo/1"],
    );
    tcp.write_all(request.as_bytes()).await.unwrap();
    let (head, _) = read_head(&mut tcp).await.expect("an answer");
    assert!(head.starts_with("http/1.1 101"), "{head}");
    let smuggled = format!("GET /staff/admin HTTP/1.1\r\nHost: {}\r\n\r\n", h.gateway);
    tcp.write_all(smuggled.as_bytes()).await.unwrap();
    let mut back = vec![0u8; smuggled.len()];
    tcp.read_exact(&mut back).await.unwrap();
    assert_eq!(back, smuggled.as_bytes(), "the upstream got it whole");
    // The gateway saw one request: the upgrade it checked.
    assert_eq!(heads.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_without_upgrades_refuses_them_before_anything_reaches_the_upstream() {
    let (h, heads) = shared_upstream().await;
    let authorization = format!("Authorization: Bearer {TOKEN}");
    let websocket = [
        "Connection: Upgrade",
        "Upgrade: websocket",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    ];
    let table: [(&str, Vec<&str>); 3] = [
        (
            "any protocol",
            vec![&authorization, "Connection: Upgrade", "Upgrade: echo/1"],
        ),
        (
            "a WebSocket",
            [authorization.as_str()]
                .into_iter()
                .chain(websocket)
                .collect(),
        ),
        (
            "without credentials",
            vec!["Connection: keep-alive, Upgrade", "Upgrade: echo/1"],
        ),
    ];
    for (what, lines) in table {
        let mut lines = lines;
        lines.push("Connection: close");
        let r = raw(h.gateway, &upgrade_request(&h, "/locked/x", &lines)).await;
        assert_eq!(r.status, 403, "{what}: {r:?}");
        assert_eq!(
            r.header("content-type"),
            Some("application/problem+json"),
            "{what}"
        );
        assert!(r.body.contains("switch protocols"), "{what}: {r:?}");
        assert!(
            heads.lock().unwrap().is_empty(),
            "{what} reached the upstream"
        );
    }
    // The route's plain requests pass, and a route that takes upgrades still opens tunnels.
    let plain = raw(
        h.gateway,
        &upgrade_request(&h, "/locked/x", &[&authorization, "Connection: close"]),
    )
    .await;
    assert_eq!((plain.status, plain.body.as_str()), (200, "plain"));
    let mut tcp = TcpStream::connect(h.gateway).await.unwrap();
    let open = upgrade_request(
        &h,
        "/up/x",
        &[&authorization, "Connection: Upgrade", "Upgrade: echo/1"],
    );
    tcp.write_all(open.as_bytes()).await.unwrap();
    let (head, _) = read_head(&mut tcp).await.expect("an answer");
    assert!(head.starts_with("http/1.1 101"), "{head}");
}
