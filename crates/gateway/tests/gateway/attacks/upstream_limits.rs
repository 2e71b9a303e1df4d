//! What one request may cost through a route: an upstream that never answers, a body that
//! stalls either way, a request body or headers larger than the route takes. Each is bounded
//! by the route's limits (or the listener's) and answered as problem+json that names no
//! upstream detail.

use crate::harness::*;

const TOKEN: &str = "machines-token-0123456789abcdef";

/// Routes /slow (short timeouts) and /small (a 1,000-byte body limit, 2,048 bytes of headers)
/// behind one token, and /roomy with the default limits.
async fn limited() -> Harness {
    let h = harness_with(
        &[
            route("/slow", "machines").with("timeouts = { first_byte_ms = 300, idle_ms = 300 }"),
            route("/small", "machines")
                .with("max_request_body_bytes = 1000\nmax_request_header_bytes = 2048"),
            route("/roomy", "machines"),
        ],
        &[],
    )
    .await;
    let machines = h.token_server(ORG_SLUG, "machines", TOKEN);
    h.insert_all(&[&machines], "/small").await;
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_never_answers_is_504_after_the_first_byte_timeout() {
    let h = limited().await;
    let r = http()
        .get(h.url("/slow/stall-head"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let (status, content_type, body) = problem_code(r).await;
    assert_eq!(status, 504);
    assert_eq!(content_type.as_deref(), Some("application/problem+json"));
    assert_eq!(body["code"], "gateway_timeout");
    let text = body.to_string();
    assert!(
        !text.contains("127.0.0.1") && !text.contains("stall"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_body_that_stalls_is_cut_after_the_idle_timeout() {
    let h = limited().await;
    let r = http()
        .get(h.url("/slow/stall-body"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the head came in time");
    assert!(
        r.bytes().await.is_err(),
        "the stalled body must end as an error, not hang or look complete"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_body_over_the_route_limit_is_413() {
    let h = limited().await;
    let post = |body: reqwest::Body| {
        http()
            .post(h.url("/small/upload"))
            .bearer_auth(TOKEN)
            .body(body)
            .send()
    };
    // Declared too large: refused before the upstream is asked.
    let (status, _, body) = problem_code(post(vec![7u8; 1001].into()).await.unwrap()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("payload_too_large"))
    );
    assert_eq!(h.upstream_hits(), 0);

    // Chunked, no length said: cut once it passes the limit.
    let chunks = futures::stream::iter(
        (0..8).map(|_| Ok::<_, std::io::Error>(bytes::Bytes::from(vec![7u8; 200]))),
    );
    let (status, _, body) =
        problem_code(post(reqwest::Body::wrap_stream(chunks)).await.unwrap()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (413, Some("payload_too_large"))
    );

    // At the limit exactly: through, whole.
    let echo = echo_of(post(vec![7u8; 1000].into()).await.unwrap()).await;
    assert_eq!(echo.status, 200);
    assert_eq!(echo.body["body_len"], 1000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_over_the_route_limit_are_431_and_over_the_listeners_never_parsed() {
    let h = limited().await;
    let get = |path: &str, filler: usize| {
        http()
            .get(h.url(path))
            .bearer_auth(TOKEN)
            .header("x-filler", "f".repeat(filler))
            .send()
    };
    let (status, _, body) = problem_code(get("/small/x", 3000).await.unwrap()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (431, Some("request_header_fields_too_large"))
    );
    assert_eq!(h.upstream_hits(), 0);
    assert_eq!(get("/roomy/x", 3000).await.unwrap().status(), 200);
    assert_eq!(h.upstream_hits(), 1);

    // Past the listener's bound (64 KiB of headers, 100 fields): refused while reading the
    // head, whatever the route.
    let huge = raw_get(
        h.gateway,
        "/roomy/x",
        &[&format!("X-Filler: {}", "f".repeat(80_000))],
    )
    .await;
    assert_eq!(huge.status, 431, "{huge:?}");
    let lines: Vec<String> = (0..200).map(|i| format!("X-Field-{i}: {i}")).collect();
    let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
    let many = raw_get(h.gateway, "/roomy/x", &lines).await;
    assert_eq!(many.status, 431, "{many:?}");
    assert_eq!(h.upstream_hits(), 1);
}
