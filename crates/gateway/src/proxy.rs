//! Forwarding: the request goes upstream with its method, its canonical path (the one the route
//! was chosen by), its query and its streamed body; the answer comes back with its status,
//! headers and streamed body.
//!
//! What never passes: hop-by-hop headers; the client's copies of the headers the gateway owns
//! (identity, forwarding, path overrides: [`crate::forwarding::is_gateway_owned`]); Basic and
//! Token credentials; the gateway's own cookies, either way (an upstream sharing the gateway's
//! origin could otherwise plant another tenant's session).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderMap, HeaderName};
use actix_web::{HttpRequest, HttpResponse, HttpResponseBuilder, web};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cookies;
use crate::forwarding::{ClientView, is_gateway_owned};
use crate::outcome::Identity;
use crate::path::CanonicalPath;
use crate::problem::problem;
use crate::routes::{Limits, Route};

/// RFC 9110 §7.6.1 plus the de-facto ones.
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn connection_listed<'a>(values: impl Iterator<Item = &'a [u8]>) -> Vec<String> {
    values
        .filter_map(|v| std::str::from_utf8(v).ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

fn is_hop_by_hop(name: &str, listed: &[String]) -> bool {
    HOP_BY_HOP.contains(&name) || listed.iter().any(|l| l == name)
}

/// The request headers that go upstream, before the gateway adds its own.
fn upstream_headers(
    headers: &HeaderMap,
    forward_authorization: bool,
) -> reqwest::header::HeaderMap {
    let listed = connection_listed(headers.get_all("connection").map(|v| v.as_bytes()));
    let mut out = reqwest::header::HeaderMap::new();
    for (name, value) in headers {
        let n = name.as_str();
        if is_hop_by_hop(n, &listed)
            || n == "host"
            || is_gateway_owned(n)
            || (n == "authorization" && !forward_authorization)
        {
            continue;
        }
        let value = if n == "cookie" {
            match value
                .to_str()
                .ok()
                .and_then(cookies::without_gateway_cookies)
            {
                Some(v) => reqwest::header::HeaderValue::from_str(&v).ok(),
                None => None,
            }
        } else {
            reqwest::header::HeaderValue::from_bytes(value.as_bytes()).ok()
        };
        if let (Some(value), Ok(name)) =
            (value, reqwest::header::HeaderName::from_bytes(n.as_bytes()))
        {
            out.append(name, value);
        }
    }
    out
}

/// What the checks established about a request: all that decides what goes upstream.
pub struct Checked<'a> {
    pub route: &'a Route,
    pub path: &'a CanonicalPath,
    pub identity: Identity,
    pub client: &'a ClientView,
    pub request_id: &'a str,
}

/// Sends the request upstream and streams the answer back, within the route's limits: a
/// declared body over the limit is 413 before the upstream is asked, one that grows over it
/// while streaming ends the upstream request and is 413 too; no answer head within the
/// first-byte timeout is 504; a body that stalls for the idle timeout, either way, is cut.
pub async fn forward(
    req: &HttpRequest,
    payload: web::Payload,
    checked: Checked<'_>,
) -> HttpResponse {
    let Checked {
        route,
        path,
        identity,
        client,
        request_id,
    } = checked;
    let limits = route.limits;
    let declared = req
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let (Some(max), Some(len)) = (limits.max_request_body, declared) {
        if len > max {
            return too_large(max);
        }
    }
    let url = route.upstream_url(path, req.query_string());
    let Ok(method) = reqwest::Method::from_bytes(req.method().as_str().as_bytes()) else {
        return problem(StatusCode::BAD_REQUEST, "bad_request", "unknown method");
    };
    let mut headers = upstream_headers(req.headers(), identity.forward_authorization);
    let mut set = |name: &'static str, value: &str| {
        // Values the gateway derived; one that is not a valid header value is not sent.
        if let Ok(v) = reqwest::header::HeaderValue::from_bytes(value.as_bytes()) {
            headers.insert(name, v);
        }
    };
    for (name, value) in &identity.headers {
        set(name, value);
    }
    set("x-forwarded-for", &client.forwarded_for);
    set("x-forwarded-proto", client.proto);
    if let Some(host) = &client.host {
        set("x-forwarded-host", host);
    }
    set("x-request-id", request_id);

    let websocket = asks_for_websocket(req.headers());
    if websocket && identity.by_session_cookie {
        let origin = req.headers().get("origin").and_then(|v| v.to_str().ok());
        if !same_origin(origin, client.proto, client.host.as_deref()) {
            // Cross-site WebSocket hijacking: another site's page opening a socket that the
            // browser sends the session cookie with.
            return problem(
                StatusCode::FORBIDDEN,
                "forbidden",
                "a WebSocket signed in by the session cookie must be opened from this origin",
            );
        }
    }
    if websocket {
        // The one upgrade passed on: after the switch, both directions are the tunnel below.
        headers.insert(
            "connection",
            reqwest::header::HeaderValue::from_static("upgrade"),
        );
        headers.insert(
            "upgrade",
            reqwest::header::HeaderValue::from_static("websocket"),
        );
    }
    let has_body = !websocket
        && (req.headers().contains_key("content-length")
            || req.headers().contains_key("transfer-encoding"));
    let mut outgoing = route.client.request(method, &url).headers(headers);
    let over_limit = Arc::new(AtomicBool::new(false));
    let payload = if has_body {
        let body = sendable(payload, limits, over_limit.clone());
        outgoing = outgoing.body(reqwest::Body::wrap_stream(body));
        None
    } else {
        Some(payload)
    };
    let response = match tokio::time::timeout(limits.first_byte, outgoing.send()).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) if over_limit.load(Ordering::SeqCst) => {
            return too_large(limits.max_request_body.unwrap_or(0));
        }
        Ok(Err(error)) => {
            let timed_out = error.is_timeout();
            tracing::warn!(route = %route.label(), error = %error.without_url(), "upstream request failed");
            return if timed_out {
                upstream_timeout()
            } else {
                problem(
                    StatusCode::BAD_GATEWAY,
                    "bad_gateway",
                    "the upstream service did not answer",
                )
            };
        }
        Err(_) => {
            tracing::warn!(route = %route.label(), timeout_ms = limits.first_byte.as_millis() as u64, "upstream gave no answer in time");
            return upstream_timeout();
        }
    };
    match payload {
        Some(payload) if websocket && response.status().as_u16() == 101 => {
            tunnel(payload, response, limits.idle).await
        }
        _ => answer(req, response, limits.idle),
    }
}

/// Whether a browser's `Origin` is the request's own: `proto://host`, the port included when
/// the request's host carries one, compared without regard to case.
fn same_origin(origin: Option<&str>, proto: &str, host: Option<&str>) -> bool {
    match (origin, host) {
        (Some(origin), Some(host)) => origin.eq_ignore_ascii_case(&format!("{proto}://{host}")),
        _ => false,
    }
}

/// Whether the request asks to switch to WebSocket (`Connection: upgrade`, `Upgrade:
/// websocket`): the only upgrade after which the server hands the connection's bytes on.
fn asks_for_websocket(headers: &HeaderMap) -> bool {
    let listed = connection_listed(headers.get_all("connection").map(|v| v.as_bytes()));
    listed.iter().any(|t| t == "upgrade")
        && headers
            .get("upgrade")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"))
}

/// The upstream switched to WebSocket: the client gets the 101 with the upstream's own headers
/// (its `Sec-WebSocket-Accept`, its chosen protocol), then the bytes of each side go to the
/// other until either closes. The gateway reads nothing of them: it checked the request that
/// opened the tunnel. Quiet for the route's idle timeout upstream → client, the tunnel ends.
async fn tunnel(
    payload: web::Payload,
    response: reqwest::Response,
    idle: Duration,
) -> HttpResponse {
    let mut out = HttpResponse::SwitchingProtocols();
    copy_headers(&response, &mut out);
    let upgraded = match response.upgrade().await {
        Ok(u) => u,
        Err(error) => {
            tracing::warn!(error = %error.without_url(), "upstream switched protocols but gave no connection");
            return problem(
                StatusCode::BAD_GATEWAY,
                "bad_gateway",
                "the upstream service did not answer",
            );
        }
    };
    let (from_upstream, mut to_upstream) = tokio::io::split(upgraded);
    actix_web::rt::spawn(async move {
        let mut payload = payload;
        while let Some(Ok(chunk)) = payload.next().await {
            if to_upstream.write_all(&chunk).await.is_err() {
                break;
            }
        }
        // The client closed its side: the upstream hears it.
        let _ = to_upstream.shutdown().await;
    });
    let reads = futures::stream::unfold(Some(from_upstream), |state| async move {
        let mut from = state?;
        let mut buf = bytes::BytesMut::with_capacity(16 * 1024);
        match from.read_buf(&mut buf).await {
            Ok(0) => None,
            Ok(_) => Some((Ok::<_, std::io::Error>(buf.freeze()), Some(from))),
            Err(e) => Some((Err(e), None)),
        }
    });
    out.upgrade("websocket")
        .streaming(with_idle_timeout(Box::pin(reads), idle))
}

fn upstream_timeout() -> HttpResponse {
    problem(
        StatusCode::GATEWAY_TIMEOUT,
        "gateway_timeout",
        "the upstream service did not answer in time",
    )
}

fn too_large(max: u64) -> HttpResponse {
    problem(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        &format!("the request body is larger than this route takes ({max} bytes)"),
    )
}

/// `stream`, ended with an error when no piece comes for `idle`.
fn with_idle_timeout<S, T, E>(
    stream: S,
    idle: Duration,
) -> impl futures::Stream<Item = Result<T, std::io::Error>>
where
    S: futures::Stream<Item = Result<T, E>> + Unpin,
    E: std::fmt::Display,
{
    futures::stream::unfold(Some(stream), move |state| async move {
        let mut stream = state?;
        match tokio::time::timeout(idle, stream.next()).await {
            Ok(Some(Ok(piece))) => Some((Ok(piece), Some(stream))),
            Ok(Some(Err(e))) => Some((Err(std::io::Error::other(e.to_string())), None)),
            Ok(None) => None,
            Err(_) => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "the body stalled",
                )),
                None,
            )),
        }
    })
}

/// The upstream's answer headers that go to the client: not the hop-by-hop ones, not its
/// length (actix frames the body itself; a stale length would corrupt a streamed answer), never
/// a cookie of the gateway's. Says whether the answer had its own `Cache-Control`.
fn copy_headers(response: &reqwest::Response, out: &mut HttpResponseBuilder) -> bool {
    let listed = connection_listed(
        response
            .headers()
            .get_all("connection")
            .iter()
            .map(|v| v.as_bytes()),
    );
    let mut cache_control = false;
    for (name, value) in response.headers() {
        let n = name.as_str();
        if is_hop_by_hop(n, &listed) || n == "content-length" {
            continue;
        }
        if n == "set-cookie" && value.to_str().map_or(true, cookies::sets_gateway_cookie) {
            tracing::warn!("an upstream tried to set a gateway cookie; dropped");
            continue;
        }
        cache_control |= n == "cache-control";
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(n.as_bytes()),
            actix_web::http::header::HeaderValue::from_bytes(value.as_bytes()),
        ) {
            out.append_header((name, value));
        }
    }
    cache_control
}

/// The upstream's answer as the client gets it.
fn answer(req: &HttpRequest, response: reqwest::Response, idle: Duration) -> HttpResponse {
    let status =
        StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut out = HttpResponse::build(status);
    let cache_control = copy_headers(&response, &mut out);
    if !cache_control {
        // Answered to an authenticated request: no shared cache may keep it for others.
        out.insert_header(("cache-control", "private"));
    }
    let bodiless = req.method() == actix_web::http::Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    let length = response.content_length();
    let body = with_idle_timeout(Box::pin(response.bytes_stream()), idle);
    if let (Some(len), false) = (length, bodiless) {
        // Passed on explicitly: a known length lets actix send it without chunking.
        return out.no_chunking(len).streaming(body);
    }
    out.streaming(body)
}

/// actix's payload is tied to its worker thread; reqwest wants a `Send` stream. A small
/// bounded channel bridges them, so at most a few chunks are in memory at a time. The body
/// ends with an error once it passes the route's limit (`over_limit` then says so) or stalls
/// for its idle timeout.
fn sendable(
    payload: web::Payload,
    limits: Limits,
    over_limit: Arc<AtomicBool>,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(4);
    actix_web::rt::spawn(async move {
        let mut payload = std::pin::pin!(with_idle_timeout(payload, limits.idle));
        let mut sent: u64 = 0;
        while let Some(mut item) = payload.next().await {
            if let Ok(chunk) = &item {
                sent = sent.saturating_add(chunk.len() as u64);
                if limits.max_request_body.is_some_and(|max| sent > max) {
                    over_limit.store(true, Ordering::SeqCst);
                    item = Err(std::io::Error::other(
                        "the request body passed the route's limit",
                    ));
                }
            }
            let stop = item.is_err();
            if tx.send(item).await.is_err() || stop {
                break;
            }
        }
    });
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::http::header::HeaderValue;

    #[test]
    fn a_session_websocket_must_come_from_its_own_origin() {
        for (origin, proto, host, same) in [
            (
                Some("https://app.example.com"),
                "https",
                Some("app.example.com"),
                true,
            ),
            (
                Some("HTTPS://App.Example.com"),
                "https",
                Some("app.example.com"),
                true,
            ),
            (
                Some("http://127.0.0.1:8081"),
                "http",
                Some("127.0.0.1:8081"),
                true,
            ),
            (
                Some("https://evil.example"),
                "https",
                Some("app.example.com"),
                false,
            ),
            (
                Some("http://app.example.com"),
                "https",
                Some("app.example.com"),
                false,
            ),
            (
                Some("https://app.example.com:444"),
                "https",
                Some("app.example.com"),
                false,
            ),
            (Some("null"), "https", Some("app.example.com"), false),
            (None, "https", Some("app.example.com"), false),
            (Some("https://app.example.com"), "https", None, false),
        ] {
            assert_eq!(
                same_origin(origin, proto, host),
                same,
                "{origin:?} {host:?}"
            );
        }
    }

    #[test]
    fn only_a_websocket_upgrade_is_switched() {
        let headers = |pairs: &[(&str, &str)]| {
            let mut h = HeaderMap::new();
            for (n, v) in pairs {
                if let (Ok(n), Ok(v)) = (
                    HeaderName::from_bytes(n.as_bytes()),
                    HeaderValue::from_str(v),
                ) {
                    h.append(n, v);
                }
            }
            h
        };
        assert!(asks_for_websocket(&headers(&[
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "WebSocket"),
        ])));
        assert!(!asks_for_websocket(&headers(&[("upgrade", "websocket")])));
        assert!(!asks_for_websocket(&headers(&[
            ("connection", "upgrade"),
            ("upgrade", "h2c"),
        ])));
    }

    #[test]
    fn owned_headers_credentials_and_gateway_cookies_stay_behind() {
        let mut h = HeaderMap::new();
        for (n, v) in [
            ("x-auth-user", "root"),
            ("x_auth_role", "admin"),
            ("forwarded", "for=1.2.3.4"),
            ("x-forwarded-for", "6.6.6.6"),
            ("x-real-ip", "6.6.6.6"),
            ("x-original-url", "/admin"),
            ("authorization", "Basic eDp5"),
            (
                "cookie",
                "a=1; __Host-gateway_session_abc=s; gateway_login_1=l",
            ),
            ("connection", "keep-alive, x-drop-me"),
            ("x-drop-me", "1"),
            ("accept", "text/plain"),
        ] {
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(n.as_bytes()),
                HeaderValue::from_str(v),
            ) {
                h.append(n, v);
            }
        }
        let out = upstream_headers(&h, false);
        let mut names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, vec!["accept", "cookie"], "{out:?}");
        assert_eq!(out.get("cookie").and_then(|v| v.to_str().ok()), Some("a=1"));
        assert!(upstream_headers(&h, true).contains_key("authorization"));
    }
}
