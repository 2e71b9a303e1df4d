//! Path confusion: a credential for one route must open that route and nothing else, however
//! the path is spelled. The route is chosen on one canonical path and exactly that path goes
//! upstream, under the upstream's base path.

use std::net::SocketAddr;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::harness::*;

const TOKEN: &str = "machines-token-0123456789abcdef";

/// `/token` and `/based` (upstream base path `/base`) are machines' (Token), `/basic` is
/// staff's (Basic), `/globex` belongs to another organization.
async fn routes() -> Harness {
    let h = harness_with(
        &[
            route("/token", "machines"),
            route("/based", "machines").under("/base"),
            route("/basic", "staff"),
            route("/globex", "machines").of(OTHER_ORG_SLUG),
        ],
        &[],
    )
    .await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    let staff = h.basic_server(ORG_SLUG, "staff", &[("alice", "alice-password")]);
    let theirs = h.token_server(OTHER_ORG_SLUG, "machines", "globex-token-0123456789abcdef");
    h.insert_all(&[&machines, &staff, &theirs], "/globex").await;
    h
}

fn bearer() -> String {
    format!("Authorization: Bearer {TOKEN}")
}

/// What a request target with the token must get.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Forwarded, and the upstream received this path.
    Forwarded(&'static str),
    /// Judged by the Basic route: its challenge, nothing forwarded.
    BasicChallenge,
    /// Judged by the other organization's Token route: the token is not theirs.
    InvalidToken,
    /// Refused by the gateway with this status, nothing forwarded.
    Refused(u16),
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_route_credential_opens_its_routes_and_nothing_else() {
    let h = routes().await;
    use Expect::*;
    let table: &[(&str, Expect)] = &[
        // The confirmed walks out of /token, each judged by the route it really names.
        ("/token/%2e%2e/basic/x", BasicChallenge),
        ("/token/../basic/x", BasicChallenge),
        ("/token/.%2E/basic/x", BasicChallenge),
        ("/token/%2E%2e/globex/x", InvalidToken),
        ("/token/a/../../globex/x", InvalidToken),
        // Paths with no canonical form are refused, never forwarded.
        ("/token/%2e%2e/%2e%2e/elsewhere", Refused(400)),
        ("/based/x/%2e%2e/%2e%2e/%2e%2e/etc/passwd", Refused(400)),
        ("/token/..\\basic", Refused(400)),
        ("/token/%5c..%5cbasic", Refused(400)),
        ("/token/%2F../basic/x", Refused(400)),
        ("/token/x%2fy", Refused(400)),
        ("/token/%00", Refused(400)),
        ("/token/%0d%0aX-Injected:%20yes", Refused(400)),
        ("/token/..;x/basic", Refused(400)),
        ("/token/%zz", Refused(400)),
        ("*", Refused(400)),
        ("token/x", Refused(400)),
        // Whole segments only: /tokens is not /token.
        ("/tokens", Refused(404)),
        // Harmless spellings are forwarded in their one canonical form.
        ("/token/a/./b/../c", Forwarded("/token/a/c")),
        ("/token//a///b/", Forwarded("/token/a/b/")),
        ("/token/%7e%41%2d", Forwarded("/token/~A-")),
        ("/token", Forwarded("/token")),
        ("/based/x", Forwarded("/base/based/x")),
        // Out of /based into /token: the same auth server, so forwarded, as /token.
        ("/based/%2e%2e/token/y", Forwarded("/token/y")),
    ];
    for (target, expect) in table {
        let before = h.upstream_hits();
        let r = raw_get(h.gateway, target, &[&bearer()]).await;
        let forwarded = h.upstream_hits() - before;
        match expect {
            Forwarded(path) => {
                assert_eq!(r.status, 200, "{target}: {r:?}");
                assert_eq!(r.echo()["path"], *path, "{target}");
                assert_eq!(forwarded, 1, "{target}");
            }
            BasicChallenge => {
                assert_eq!(r.status, 401, "{target}: {r:?}");
                assert_eq!(
                    r.header("www-authenticate"),
                    Some("Basic realm=\"staff\""),
                    "{target}"
                );
                assert_eq!(forwarded, 0, "{target}");
            }
            InvalidToken => {
                assert_eq!(r.status, 401, "{target}: {r:?}");
                assert_eq!(
                    r.header("www-authenticate"),
                    Some("Bearer error=\"invalid_token\""),
                    "{target}"
                );
                assert_eq!(forwarded, 0, "{target}");
            }
            Refused(status) => {
                assert_eq!(r.status, *status, "{target}: {r:?}");
                assert!(!r.answered_by_upstream(), "{target}");
                assert_eq!(forwarded, 0, "{target}");
            }
        }
    }
}

/// Blocking GET for the property runner (which is not async).
fn get_blocking(addr: SocketAddr, target: &str) -> Raw {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(raw_get(addr, target, &[&bearer()]))
}

/// Path segments an attacker would combine: route names, dot segments in every spelling,
/// encoded separators, parameters, controls, empty segments.
fn segment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "token",
        "based",
        "basic",
        "globex",
        "base",
        "a",
        ".",
        "..",
        "%2e",
        "%2E%2e",
        ".%2e",
        "%2e.",
        "%2f",
        "%2F..",
        "%5c",
        "\\",
        "..;",
        ".;x",
        "x;y",
        "",
        "%00",
        "%7e",
        "%41",
        "a%2Fb",
        "%252e%252e",
        "..%00",
        "%c0%ae%c0%ae",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_request_target_forwards_under_its_route_and_base_path() {
    let h = routes().await;
    let gateway = h.gateway;
    let hits = std::sync::Arc::new(h);
    let h2 = hits.clone();
    tokio::task::spawn_blocking(move || {
        let strategy = (
            prop::collection::vec(segment(), 0..7),
            any::<bool>(),
            any::<bool>(),
        );
        let mut runner = TestRunner::new(Config {
            cases: 300,
            failure_persistence: None,
            ..Config::default()
        });
        runner
            .run(&strategy, |(segments, trailing, query)| {
                let mut target = format!("/{}", segments.join("/"));
                if trailing {
                    target.push('/');
                }
                if query {
                    target.push_str("?next=/basic/%2e%2e/x");
                }
                let before = h2.upstream_hits();
                let r = get_blocking(gateway, &target);
                let forwarded = h2.upstream_hits() - before;
                if !r.answered_by_upstream() {
                    prop_assert_eq!(forwarded, 0, "{} was forwarded but not answered", target);
                    prop_assert!(r.status >= 400, "{}: {:?}", target, r);
                    return Ok(());
                }
                let path = r.echo()["path"].as_str().unwrap_or_default().to_owned();
                let under =
                    |prefix: &str| path == prefix || path.starts_with(&format!("{prefix}/"));
                prop_assert!(
                    under("/token") || under("/base/based"),
                    "{} reached the upstream as {}",
                    target,
                    path
                );
                for seg in path.split('/') {
                    let lower = seg.to_ascii_lowercase();
                    prop_assert!(seg != "." && seg != "..", "{} -> {}", target, path);
                    prop_assert!(
                        !lower.contains("%2f") && !lower.contains("%5c") && !seg.contains('\\'),
                        "{} -> {}",
                        target,
                        path
                    );
                    prop_assert!(
                        !lower.contains("%2e%2e") && lower != ".%2e",
                        "{} -> {}",
                        target,
                        path
                    );
                }
                Ok(())
            })
            .expect("the property holds");
    })
    .await
    .expect("property runner");
    drop(hits);
}
