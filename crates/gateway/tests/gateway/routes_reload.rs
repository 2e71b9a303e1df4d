//! The routes file read again while the gateway runs: a change takes effect, a bad file is
//! refused whole and the routes in force stay, `SIGHUP` asks for a read.

use crate::harness::*;
use std::time::Duration;

const TOKEN: &str = "machines-token-0123456789abcdef";

/// The status of `GET path` with the machines token.
async fn status(h: &Harness, path: &str) -> u16 {
    http()
        .get(h.url(path))
        .bearer_auth(TOKEN)
        .send()
        .await
        .map_or(0, |r| r.status().as_u16())
}

async fn shows(h: &Harness, path: &str, want: u16) -> bool {
    eventually(Duration::from_secs(10), || async {
        status(h, path).await == want
    })
    .await
}

async fn machines_harness(settings: &[(&str, &str)]) -> Harness {
    let h = harness_with(&[route("/api", "machines")], settings).await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/api").await;
    assert_eq!(status(&h, "/api/x").await, 200);
    assert_eq!(status(&h, "/more/x").await, 404);
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_routes_file_takes_effect_and_a_bad_one_is_refused_whole() {
    let h = machines_harness(&[("GATEWAY_ADMIN_BIND_ADDR", "127.0.0.1:0")]).await;
    let both = h.routes_text(&[route("/api", "machines"), route("/more", "machines")]);
    h.replace_routes_file(&both);
    assert!(
        shows(&h, "/more/x", 200).await,
        "the new route never took effect"
    );
    assert_eq!(routes_refusals(&h).await, Some(0));

    // One more good route, and one the gateway must refuse (a prefix it would rewrite): the
    // file is refused whole, the good route with it.
    let bad = format!(
        "{}{}",
        h.routes_text(&[route("/api", "machines"), route("/new", "machines")]),
        h.routes_text(&[route("/a/../b", "machines")])
    );
    h.replace_routes_file(&bad);
    assert!(
        eventually(Duration::from_secs(10), || async {
            routes_refusals(&h).await == Some(1)
        })
        .await,
        "the bad file was never refused"
    );
    assert_eq!(
        status(&h, "/new/x").await,
        404,
        "half of a refused file applied"
    );
    assert_eq!(
        status(&h, "/more/x").await,
        200,
        "the routes in force changed"
    );
    assert_eq!(status(&h, "/api/x").await, 200);

    // Not TOML at all: the same.
    h.replace_routes_file("[[route]\npath_prefix = ");
    assert!(
        eventually(Duration::from_secs(10), || async {
            routes_refusals(&h).await == Some(2)
        })
        .await,
        "the broken file was never refused"
    );
    assert_eq!(status(&h, "/more/x").await, 200);

    // A good file again: in force, and /more goes with it.
    h.replace_routes_file(&h.routes_text(&[route("/api", "machines")]));
    assert!(shows(&h, "/more/x", 404).await, "the removed route stayed");
    assert_eq!(status(&h, "/api/x").await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reads_the_routes_file_again() {
    // The file is looked at only when asked.
    let h = machines_harness(&[("GATEWAY_ROUTES_CHECK_S", "0")]).await;
    h.replace_routes_file(&h.routes_text(&[route("/api", "machines"), route("/more", "machines")]));
    let sent = std::process::Command::new("kill")
        .args(["-HUP", &std::process::id().to_string()])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    assert!(
        shows(&h, "/more/x", 200).await,
        "SIGHUP did not read the routes file"
    );
}

/// A client blocked on a route for guessing stays blocked there when a reload adds a route in
/// front of it, and is not blocked on the new one: counts follow the route, not its place in
/// the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_neither_lifts_nor_moves_a_clients_failed_attempts() {
    let h = machines_harness(&[]).await;
    wait_for_a_fresh_minute().await;
    let guess = |i: usize| {
        http()
            .get(h.url("/api/x"))
            .bearer_auth(format!("wrong-token-{i:04}-0123456789"))
            .send()
    };
    for i in 0..10 {
        assert_eq!(guess(i).await.unwrap().status(), 401);
    }
    assert_eq!(guess(10).await.unwrap().status(), 429);

    h.replace_routes_file(&h.routes_text(&[route("/new", "machines"), route("/api", "machines")]));
    assert!(
        shows(&h, "/new/x", 200).await,
        "the new route never took effect"
    );
    assert_eq!(
        status(&h, "/api/x").await,
        429,
        "the reload lifted the block"
    );
}
