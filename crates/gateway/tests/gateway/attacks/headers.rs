//! Header spoofing, request smuggling, cookies the gateway owns, and what a shared cache may
//! keep. The gateway sets what it vouches for from what it saw itself, forwards exactly the
//! request it checked, and refuses a request two parsers could read two ways.

use crate::harness::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const TOKEN: &str = "machines-token-0123456789abcdef";

async fn token_route(settings: &[(&str, &str)]) -> Harness {
    let h = harness_with(
        &[route("/token", "machines"), route("/basic", "staff")],
        settings,
    )
    .await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    let staff = h.basic_server(ORG_SLUG, "staff", &[("alice", "alice-password")]);
    h.insert_all(&[&machines, &staff], "/basic").await;
    h
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// Headers a client may send to pose as someone, somewhere or some path else.
const SPOOFED: &[(&str, &str)] = &[
    ("forwarded", "for=203.0.113.7;host=evil.example;proto=https"),
    ("x-forwarded-for", "203.0.113.7"),
    ("x-forwarded-host", "evil.example"),
    ("x-forwarded-proto", "https"),
    ("x-forwarded-port", "443"),
    ("x-forwarded-user", "root"),
    ("x-real-ip", "203.0.113.7"),
    ("x-client-ip", "203.0.113.7"),
    ("true-client-ip", "203.0.113.7"),
    ("cf-connecting-ip", "203.0.113.7"),
    ("x-original-url", "/basic/admin"),
    ("x-rewrite-url", "/basic/admin"),
    ("x-auth-user", "root"),
    ("x-auth-email", "root@example.com"),
    ("x_auth_role", "admin"),
    ("x.auth.groups", "admins"),
    ("x-request-id", "<script>alert(1)</script> plus spaces"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarding_and_identity_headers_come_from_the_gateway_not_the_client() {
    let h = token_route(&[]).await;
    let mut request = http()
        .get(h.url("/token/x"))
        .header("authorization", bearer());
    for (name, value) in SPOOFED {
        request = request.header(*name, *value);
    }
    let e = echo_of(request.send().await.unwrap()).await;
    assert_eq!(e.status, 200, "{:?}", e.body);
    assert_eq!(e.header("x-forwarded-for").as_deref(), Some("127.0.0.1"));
    assert_eq!(e.header("x-forwarded-host"), Some(h.gateway.to_string()));
    assert_eq!(e.header("x-forwarded-proto").as_deref(), Some("http"));
    for (name, _) in SPOOFED {
        if [
            "x-forwarded-for",
            "x-forwarded-host",
            "x-forwarded-proto",
            "x-request-id",
        ]
        .contains(name)
        {
            continue;
        }
        assert_eq!(
            e.header(name),
            None,
            "the client's {name} reached the upstream"
        );
    }
    let request_id = e.header("x-request-id").expect("the gateway's request id");
    assert!(uuid::Uuid::parse_str(&request_id).is_ok(), "{request_id}");
    // A plain id is kept, so a caller can follow its request through the logs.
    let e = echo_of(
        http()
            .get(h.url("/token/x"))
            .header("authorization", bearer())
            .header("x-request-id", "trace-0123_abc.def:9")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        e.header("x-request-id").as_deref(),
        Some("trace-0123_abc.def:9")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxy_may_name_the_client_and_the_limit_counts_that_client() {
    let h = token_route(&[("GATEWAY_TRUSTED_PROXIES", "127.0.0.1/32")]).await;
    let e = echo_of(
        http()
            .get(h.url("/token/x"))
            .header("authorization", bearer())
            .header("x-forwarded-for", "198.51.100.1, 203.0.113.7")
            .header("x-forwarded-proto", "https")
            .header("x-forwarded-host", "api.example.com")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        e.header("x-forwarded-for").as_deref(),
        Some("198.51.100.1, 203.0.113.7, 127.0.0.1")
    );
    assert_eq!(e.header("x-forwarded-proto").as_deref(), Some("https"));
    assert_eq!(
        e.header("x-forwarded-host").as_deref(),
        Some("api.example.com")
    );

    // The limit counts the client the proxy names: one client's failures block it alone.
    let attempt = |client: &'static str, credentials: &'static str| {
        http()
            .get(h.url("/basic"))
            .header("x-forwarded-for", client)
            .header("authorization", basic(credentials))
            .send()
    };
    wait_for_a_fresh_minute().await;
    for _ in 0..10 {
        assert_eq!(
            attempt("203.0.113.7", "alice:wrong")
                .await
                .unwrap()
                .status(),
            401
        );
    }
    assert_eq!(
        attempt("203.0.113.7", "alice:alice-password")
            .await
            .unwrap()
            .status(),
        429
    );
    assert_eq!(
        attempt("203.0.113.8", "alice:alice-password")
            .await
            .unwrap()
            .status(),
        200
    );
}

/// Requests one parser could read differently from another (the upstream's, a cache's):
/// refused before any auth check, never forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_requests_are_refused_before_anything_is_forwarded() {
    let h = token_route(&[]).await;
    let addr = h.gateway;
    let auth = format!("Authorization: {}", bearer());
    let with_body = |headers: &str, body: &str| {
        format!(
            "POST /token/x HTTP/1.1\r\nHost: {addr}\r\n{auth}\r\nConnection: close\r\n{headers}\r\n{body}"
        )
    };
    let table: Vec<(&str, String, u16)> = vec![
        (
            "two different Content-Lengths",
            with_body("Content-Length: 3\r\nContent-Length: 5\r\n", "abcde"),
            400,
        ),
        (
            "two Host headers",
            raw_request("GET", addr, "/token/x", &[&auth, "Host: evil.example"]),
            400,
        ),
        (
            "an absolute target naming another authority",
            raw_request("GET", addr, "http://evil.example/token/x", &[&auth]),
            400,
        ),
        (
            "two Authorization headers",
            raw_request(
                "GET",
                addr,
                "/token/x",
                &[&auth, "Authorization: Basic YTpi"],
            ),
            400,
        ),
        (
            "TRACE",
            raw_request("TRACE", addr, "/token/x", &[&auth]),
            405,
        ),
        (
            "CONNECT",
            format!(
                "CONNECT evil.example:443 HTTP/1.1\r\nHost: evil.example:443\r\n{auth}\r\n\r\n"
            ),
            405,
        ),
    ];
    for (what, request, status) in table {
        let before = h.upstream_hits();
        let r = raw(addr, &request).await;
        assert_eq!(r.status, status, "{what}: {r:?}");
        assert!(!r.answered_by_upstream(), "{what}");
        assert_eq!(h.upstream_hits(), before, "{what} was forwarded");
    }
    // Control: the same request, framed once, is forwarded.
    let r = raw(addr, &with_body("Content-Length: 5\r\n", "abcde")).await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.echo()["body_len"], 5);
}

/// A host route behind a Token server, and the host of another route's tenant.
async fn host_route() -> Harness {
    let h = harness_with(&[route("/", "machines").on_host("acme.example")], &[]).await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert(&machines).await;
    let loaded = eventually(std::time::Duration::from_secs(10), || async {
        raw(
            h.gateway,
            "GET /x HTTP/1.1\r\nHost: acme.example\r\nConnection: close\r\n\r\n",
        )
        .await
        .status
            == 401
    })
    .await;
    assert!(loaded, "the auth server was never loaded");
    h
}

/// An authority with userinfo (`http://acme.example:1@evil.example/`) reads as the host
/// `acme.example` to one parser and `evil.example` to another: the route was chosen by the
/// first, and the upstream, told the whole of it in `X-Forwarded-Host`, built its links (a
/// password reset) from the second. Whatever form the authority comes in, it is a plain
/// `host[:port]` or the request is refused as a bad request, never forwarded; and what the route
/// is chosen by is exactly what the upstream is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authority_that_reads_two_ways_is_refused_and_never_forwarded() {
    let h = host_route().await;
    let addr = h.gateway;
    let auth = format!("Authorization: {}", bearer());
    let request = |line: &str, host: Option<&str>| {
        let host = host.map(|h| format!("Host: {h}\r\n")).unwrap_or_default();
        format!("{line}\r\n{host}{auth}\r\nConnection: close\r\n\r\n")
    };
    let userinfo = "http://acme.example:1@evil.example/reset";
    let table = [
        (
            "absolute-form with userinfo, no Host",
            request(&format!("GET {userinfo} HTTP/1.1"), None),
        ),
        (
            "absolute-form with userinfo, the route's Host",
            request(&format!("GET {userinfo} HTTP/1.1"), Some("acme.example")),
        ),
        (
            "absolute-form with userinfo over HTTP/1.0",
            request(&format!("GET {userinfo} HTTP/1.0"), None),
        ),
        (
            "a Host with userinfo",
            request("GET /reset HTTP/1.1", Some("acme.example:1@evil.example")),
        ),
        (
            "a Host with two ports",
            request("GET /reset HTTP/1.1", Some("acme.example:1:2")),
        ),
        (
            "no Host over HTTP/1.1",
            request("GET /reset HTTP/1.1", None),
        ),
    ];
    for (what, request) in table {
        let before = h.upstream_hits();
        let r = raw(addr, &request).await;
        assert_eq!(r.status, 400, "{what}: {r:?}");
        assert_eq!(
            r.header("content-type"),
            Some("application/problem+json"),
            "{what}"
        );
        assert_eq!(h.upstream_hits(), before, "{what} was forwarded");
    }
    let token = bearer();
    let h2 = h2c_get(addr, userinfo, &[("authorization", &token)]).await;
    assert_eq!(h2.status, 400, "an HTTP/2 :authority with userinfo: {h2:?}");
    assert_eq!(h.upstream_hits(), 0, "an HTTP/2 :authority with userinfo");

    // Control: the same route by absolute-form and by HTTP/2, the authority plain; the upstream
    // is told the host the route was chosen by.
    let r = raw(
        addr,
        &request(
            "GET http://acme.example/reset HTTP/1.1",
            Some("acme.example"),
        ),
    )
    .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.echo()["headers"]["x-forwarded-host"], "acme.example");
    let h2 = h2c_get(
        addr,
        "http://acme.example/reset",
        &[("authorization", &token)],
    )
    .await;
    assert_eq!(h2.status, 200, "{h2:?}");
    assert_eq!(h2.echo()["headers"]["x-forwarded-host"], "acme.example");
}

/// Behind a trusted proxy, a host route's upstream is told the host the route was chosen by:
/// a proxy that passes a client's `X-Forwarded-Host` on unchanged would otherwise let it name
/// any host to the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_proxy_a_host_route_is_told_its_own_host() {
    let h = harness_with(
        &[route("/", "machines").on_host("acme.example")],
        &[("GATEWAY_TRUSTED_PROXIES", "127.0.0.1/32")],
    )
    .await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert(&machines).await;
    let auth = format!("Authorization: {}", bearer());
    let forwarded_host = |claimed: &'static str| {
        let request = format!(
            "GET /reset HTTP/1.1\r\nHost: acme.example\r\n{auth}\r\n\
             X-Forwarded-Host: {claimed}\r\nConnection: close\r\n\r\n"
        );
        let addr = h.gateway;
        async move {
            let r = raw(addr, &request).await;
            (r.status, r.echo()["headers"]["x-forwarded-host"].clone())
        }
    };
    let loaded = eventually(std::time::Duration::from_secs(10), || async {
        forwarded_host("acme.example").await.0 == 200
    })
    .await;
    assert!(loaded, "the auth server was never loaded");
    for (claimed, told) in [
        ("evil.example", "acme.example"),
        ("ACME.example:443", "ACME.example:443"),
    ] {
        assert_eq!(
            forwarded_host(claimed).await,
            (200, serde_json::Value::from(told)),
            "{claimed}"
        );
    }
}

/// Both framings at once (the classic CL.TE smuggling): read by `Transfer-Encoding` alone, as
/// HTTP/1.1 says a server may, forwarded with one framing of the gateway's own, and the
/// connection closed after the answer, so the bytes after the chunked body (a second request
/// for another route) are never read as a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_framed_twice_is_read_one_way_and_its_connection_closed() {
    let h = token_route(&[]).await;
    let addr = h.gateway;
    let smuggled = format!("GET /basic/x HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let request = format!(
        "POST /token/x HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {}\r\n\
         Content-Length: {}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n{smuggled}",
        bearer(),
        5 + smuggled.len(),
    );
    let before = h.upstream_hits();
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(answer.matches("HTTP/1.1 ").count(), 1, "{answer}");
    assert_eq!(h.upstream_hits(), before + 1);
    let r = raw_answer(&answer);
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.echo()["body_len"], 0);
    assert!(r.echo()["headers"].get("content-length").is_none(), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_cookies_never_cross_to_or_from_an_upstream() {
    let h = token_route(&[]).await;
    let r = http()
        .get(h.url("/token/set-cookie"))
        .header("authorization", bearer())
        .header(
            "cookie",
            "gateway_session_0123=stolen; theme=dark; __Host-gateway_login_abc=x; \
             __Secure-gateway_session_9=y",
        )
        .send()
        .await
        .unwrap();
    let planted: Vec<String> = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        planted,
        vec!["theme=dark; Path=/".to_owned()],
        "an upstream planted a gateway cookie"
    );
    let e = echo_of(r).await;
    assert_eq!(e.header("cookie").as_deref(), Some("theme=dark"));
}

/// An upstream plants a gateway cookie under a name the filter once read differently from a
/// browser: an empty name (`=gateway_session_…=v`, which a browser sends back as
/// `gateway_session_…=v`), no `=` at all, blanks around the name, a prefix in another case.
/// None reaches the client; the application's own cookies, odd ones included, do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_cannot_plant_a_gateway_cookie_under_any_spelling() {
    const PLANTED: [&str; 8] = [
        "=gateway_session_0123=planted; Path=/",
        "   =gateway_session_0123=planted; Path=/",
        "=\t__Host-gateway_session_0123=planted; Path=/; Secure",
        "gateway_session_0123; Path=/",
        " gateway_login_abc =planted; Path=/",
        "__HOST-gateway_session_0123=planted; Path=/; Secure",
        "__secure-Gateway_Login_abc=planted; Secure",
        "=__Secure-gateway_login_abc=planted; Secure",
    ];
    const KEPT: [&str; 3] = [
        "theme=dark; Path=/",
        "=nameless-but-harmless",
        "gateway=not-ours; Path=/",
    ];
    let (upstream, _) = keep_alive_upstream(|_| {
        let mut answer = String::from("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n");
        for cookie in PLANTED.iter().chain(KEPT.iter()) {
            answer.push_str(&format!("set-cookie: {cookie}\r\n"));
        }
        answer.push_str("\r\nok");
        (answer.into_bytes(), true)
    })
    .await;
    let h = token_gateway("/plant", upstream, TOKEN).await;
    let r = raw_get(
        h.gateway,
        "/plant/x",
        &[&format!("Authorization: {}", bearer())],
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"), "{r:?}");
    let set: Vec<&str> = r
        .headers
        .iter()
        .filter(|(name, _)| name == "set-cookie")
        .map(|(_, value)| value.as_str())
        .collect();
    assert_eq!(set, KEPT, "an upstream planted a gateway cookie");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_shared_cache_keeps_an_answer_meant_for_one_client() {
    let h = token_route(&[]).await;
    let cache_control = |r: &reqwest::Response| header(r, "cache-control");
    let c = http();
    // The gateway's own answers: never stored.
    let denied = c.get(h.url("/token/x")).send().await.unwrap();
    assert_eq!(denied.status(), 401);
    assert_eq!(cache_control(&denied).as_deref(), Some("no-store"));
    // (Raw: a client library resolves the dot segments itself.)
    let refused = raw_get(h.gateway, "/token/%2e%2e/%2e%2e", &[]).await;
    assert_eq!(refused.status, 400);
    assert_eq!(refused.header("cache-control"), Some("no-store"));
    let unknown = c.get(h.url("/nowhere")).send().await.unwrap();
    assert_eq!(unknown.status(), 404);
    assert_eq!(cache_control(&unknown).as_deref(), Some("no-store"));
    // A proxied answer that says nothing is private; one that says something keeps it.
    let authed = |path: &str| c.get(h.url(path)).header("authorization", bearer()).send();
    let r = authed("/token/page").await.unwrap();
    assert_eq!(cache_control(&r).as_deref(), Some("private"));
    let r = authed("/token/cacheable").await.unwrap();
    assert_eq!(cache_control(&r).as_deref(), Some("public, max-age=60"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_route_belongs_to_its_host_whatever_the_path() {
    let h = harness_with(
        &[
            route("/", "machines").on_host("acme.example"),
            route("/", "machines")
                .of(OTHER_ORG_SLUG)
                .on_host("globex.example"),
        ],
        &[],
    )
    .await;
    let ours = h.token_server(ORG_SLUG, "machines", TOKEN);
    let theirs = h.token_server(OTHER_ORG_SLUG, "machines", "globex-token-0123456789abcdef");
    for server in [&ours, &theirs] {
        h.insert(server).await;
    }
    let as_with = |token: &'static str, host: &'static str, target: &'static str| {
        let auth = format!("Authorization: Bearer {token}");
        let host = format!("Host: {host}");
        let addr = h.gateway;
        async move {
            raw(
                addr,
                &format!("GET {target} HTTP/1.1\r\n{host}\r\n{auth}\r\nConnection: close\r\n\r\n"),
            )
            .await
        }
    };
    let on = |host: &'static str, target: &'static str| as_with(TOKEN, host, target);
    // Both servers in force (each insert is its own notification).
    let loaded = eventually(std::time::Duration::from_secs(10), || async {
        on("acme.example", "/x").await.status == 200
            && as_with("globex-token-0123456789abcdef", "globex.example", "/x")
                .await
                .status
                == 200
    })
    .await;
    assert!(loaded);
    let r = on("acme.example", "/page").await;
    assert_eq!(r.echo()["path"], "/page");
    // acme's token on globex's host, by Host, by a port, by case: judged by globex.
    for host in ["globex.example", "globex.example:8081", "GLOBEX.example"] {
        let before = h.upstream_hits();
        let r = on(host, "/page").await;
        assert_eq!(r.status, 401, "{host}: {r:?}");
        assert_eq!(h.upstream_hits(), before, "{host}");
    }
    // A host no route names: nothing.
    assert_eq!(on("evil.example", "/page").await.status, 404);
}

/// An HTTP/2 upstream (h2c) that answers with the names of the trailers its request carried.
async fn trailer_reporting_upstream() -> std::net::SocketAddr {
    use http_body_util::BodyExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = hyper::service::service_fn(
                    |request: hyper::Request<hyper::body::Incoming>| async move {
                        let mut body = request.into_body();
                        let mut names = Vec::new();
                        while let Some(Ok(frame)) = body.frame().await {
                            if let Some(trailers) = frame.trailers_ref() {
                                names.extend(trailers.keys().map(|k| k.to_string()));
                            }
                        }
                        let text = bytes::Bytes::from(names.join(","));
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(
                            http_body_util::Full::new(text),
                        ))
                    },
                );
                let _ =
                    hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
                        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                        .await;
            });
        }
    });
    addr
}

/// Header fields after a chunked body (trailers) were never checked, and some servers merge
/// them into the headers: they never go upstream, even to an HTTP/2 upstream that could carry
/// them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_trailers_never_reach_an_upstream() {
    let upstream = trailer_reporting_upstream().await;
    let h = harness_with(
        &[route("/h2", "machines")
            .to(upstream)
            .with("upstream_http2 = true")],
        &[],
    )
    .await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/h2").await;
    let addr = h.gateway;
    let request = format!(
        "POST /h2/x HTTP/1.1\r\nHost: {addr}\r\nAuthorization: {}\r\nConnection: close\r\n\
         Transfer-Encoding: chunked\r\nTrailer: X-Auth-User\r\n\r\n\
         5\r\nhello\r\n0\r\nX-Auth-User: root\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n",
        bearer()
    );
    let r = raw(addr, &request).await;
    assert_eq!((r.status, r.body.as_str()), (200, ""), "{r:?}");
}

/// An answer framed both ways by its upstream (chunked, and a `Content-Length` that is not its
/// length) reaches the client framed one way, by the body it has: a client or a cache in front
/// reading the stale length would take the rest for the next answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_framed_twice_reaches_the_client_framed_once() {
    let (upstream, _) = raw_upstream(
        b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n\
          b\r\nhello world\r\n0\r\n\r\n",
    )
    .await;
    let h = harness_with(&[route("/twice", "machines").to(upstream)], &[]).await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/twice").await;
    let r = raw_get(
        h.gateway,
        "/twice/x",
        &[&format!("Authorization: {}", bearer())],
    )
    .await;
    assert_eq!((r.status, r.body.as_str()), (200, "hello world"), "{r:?}");
    assert_ne!(r.header("content-length"), Some("3"), "{r:?}");
}

/// The upstream receives the gateway's own `traceparent`: the client's trace continued with a
/// span of the gateway's, or a new trace when the client's value does not parse (its bytes and
/// its `tracestate` never pass then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_trace_context_is_continued_never_copied() {
    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = format!("00-{TRACE}-00f067aa0ba902b7-01");
    let h = token_route(&[]).await;
    let send = async |traceparent: &str, tracestate: &str| {
        let r = http()
            .get(h.url("/token/x"))
            .header("authorization", bearer())
            .header("traceparent", traceparent)
            .header("tracestate", tracestate)
            .send()
            .await
            .unwrap();
        let e = echo_of(r).await;
        assert_eq!(e.status, 200, "{:?}", e.body);
        (
            e.header("traceparent").unwrap_or_default(),
            e.header("tracestate"),
        )
    };

    let (forwarded, state) = send(&parent, "vendor=abc").await;
    let fields: Vec<&str> = forwarded.split('-').collect();
    assert_eq!(fields.len(), 4, "{forwarded}");
    assert_eq!((fields[0], fields[1], fields[3]), ("00", TRACE, "01"));
    assert_ne!(
        fields[2], "00f067aa0ba902b7",
        "the gateway's span is the parent now"
    );
    assert_eq!(state.as_deref(), Some("vendor=abc"));

    for hostile in [
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-and-more",
        "<script>",
    ] {
        let (forwarded, state) = send(hostile, "vendor=abc").await;
        assert_ne!(forwarded, hostile);
        assert!(!forwarded.contains(TRACE), "{forwarded}");
        assert_eq!(forwarded.len(), 55, "a fresh traceparent: {forwarded}");
        assert_eq!(
            state, None,
            "tracestate without a valid traceparent: {hostile}"
        );
    }
}
