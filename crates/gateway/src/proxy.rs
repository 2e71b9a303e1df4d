//! Forwarding: the request goes upstream with its method, its canonical path (the one the route
//! was chosen by), its query and its streamed body; the answer comes back with its status,
//! headers and streamed body. A request asking to switch protocols (`Connection: upgrade`) is
//! switched only when the upstream answers 101, and then becomes a tunnel of bytes both ways,
//! unread: a route with `upgrades = false` refuses such requests before they get here.
//!
//! What never passes: hop-by-hop headers; the client's copies of the headers the gateway owns
//! (identity, forwarding, path overrides: [`crate::forwarding::is_gateway_owned`]); Basic and
//! Token credentials; the gateway's own cookies, either way (an upstream sharing the gateway's
//! origin could otherwise plant another tenant's session); an `h2c` upgrade (through a tunnel
//! to an upstream speaking HTTP/2, a client could send requests for any path, unchecked).

use std::time::Duration;

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::request::Parts;
use http::{Request, StatusCode, Uri, Version};
use hyper::body::Incoming;
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::body::{self, Body, Response};
use crate::cookies;
use crate::forwarding::{ClientView, is_gateway_owned};
use crate::outcome::Identity;
use crate::path::CanonicalPath;
use crate::problem::{bare, problem};
use crate::routes::Route;
use crate::upstream::Upstreams;

/// RFC 9110 §7.6.1 plus the de-facto ones.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Whether a `Connection` header lists `token` (compared without regard to case).
fn connection_lists(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// Removes the hop-by-hop headers: the standard ones and those the `Connection` header names.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // `Connection: keep-alive` (or `close`, `upgrade`) names nothing more to remove: the common
    // case makes no list.
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|t| {
            !t.is_empty()
                && !t.eq_ignore_ascii_case(b"close")
                && !HOP_BY_HOP
                    .iter()
                    .any(|h| t.eq_ignore_ascii_case(h.as_str().as_bytes()))
        })
        .filter_map(|t| HeaderName::from_bytes(t).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
}

/// Makes the client's headers the ones that go upstream, in place, before the gateway adds its
/// own.
fn strip_request_headers(headers: &mut HeaderMap, forward_authorization: bool) {
    strip_hop_by_hop(headers);
    headers.remove(header::HOST);
    if !forward_authorization {
        headers.remove(header::AUTHORIZATION);
    }
    let owned: Vec<HeaderName> = headers
        .keys()
        .filter(|name| is_gateway_owned(name.as_str()))
        .cloned()
        .collect();
    for name in owned {
        headers.remove(name);
    }
    let carries_gateway_cookie = headers.get_all(header::COOKIE).iter().any(|v| {
        v.to_str()
            .map_or(true, |v| v.split(';').any(cookies::is_gateway_cookie_pair))
    });
    if carries_gateway_cookie {
        let kept: Vec<HeaderValue> = headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .filter_map(cookies::without_gateway_cookies)
            .filter_map(|v| HeaderValue::from_str(&v).ok())
            .collect();
        headers.remove(header::COOKIE);
        for value in kept {
            headers.append(header::COOKIE, value);
        }
    }
}

/// What the checks established about a request: all that decides what goes upstream.
pub struct Checked<'a> {
    pub route: &'a Route,
    pub path: &'a CanonicalPath,
    pub identity: Identity,
    pub client: &'a ClientView,
    pub request_id: &'a HeaderValue,
    pub trace: &'a crate::trace::Trace,
    pub upstreams: &'a Upstreams,
}

/// Sends the request upstream and streams the answer back, within the route's limits: a
/// declared body over the limit is 413 before the upstream is asked, one that grows over it
/// while streaming ends the upstream request and is 413 too; no answer head within the
/// first-byte timeout is 504; a body that stalls for the idle timeout, either way, is cut.
pub async fn forward(mut parts: Parts, incoming: Incoming, checked: Checked<'_>) -> Response {
    let Checked {
        route,
        path,
        identity,
        client,
        request_id,
        trace,
        upstreams,
    } = checked;
    let limits = route.limits;
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if let (Some(max), Some(len)) = (limits.max_request_body, declared)
        && len > max
    {
        return too_large(max);
    }
    let Ok(uri) = Uri::try_from(route.upstream_url(path, parts.uri.query().unwrap_or(""))) else {
        return problem(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "the request target cannot be forwarded",
        );
    };
    let upgrade = (parts.version == Version::HTTP_11)
        .then(|| requested_upgrade(&parts.headers))
        .flatten();
    if upgrade.is_some() && identity.by_session_cookie {
        let origin = parts
            .headers
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok());
        if !same_origin(origin, client.proto, client.host.as_deref()) {
            // Cross-site WebSocket hijacking: another site's page opening a socket that the
            // browser sends the session cookie with.
            return problem(
                StatusCode::FORBIDDEN,
                "forbidden",
                "a connection upgraded on the session cookie must be opened from this origin",
            );
        }
    }
    let mut headers = std::mem::take(&mut parts.headers);
    strip_request_headers(&mut headers, identity.forward_authorization);
    // Values the gateway derived, shared rather than copied where it holds them as values.
    headers.insert(
        HeaderName::from_static("x-forwarded-proto"),
        HeaderValue::from_static(client.proto),
    );
    headers.insert(
        HeaderName::from_static("x-forwarded-for"),
        client.forwarded_for.clone(),
    );
    headers.insert(HeaderName::from_static("x-request-id"), request_id.clone());
    headers.insert(HeaderName::from_static("traceparent"), trace.traceparent());
    if let Some(state) = &trace.state {
        headers.insert(HeaderName::from_static("tracestate"), state.clone());
    }
    let mut set = |name: HeaderName, value: &str| {
        // One that is not a valid header value is not sent.
        if let Ok(v) = HeaderValue::from_str(value) {
            headers.insert(name, v);
        }
    };
    for (name, value) in &identity.headers {
        set(HeaderName::from_static(name), value);
    }
    if let Some(host) = &client.host {
        set(HeaderName::from_static("x-forwarded-host"), host);
    }
    if let Some(protocols) = &upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, protocols.clone());
    }
    let body = if hyper::body::Body::is_end_stream(&incoming) {
        Body::empty()
    } else {
        Body::request(incoming, limits.idle, limits.max_request_body)
    };
    let mut request = Request::new(body);
    let bodiless_answer = parts.method == http::Method::HEAD;
    *request.method_mut() = parts.method;
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    let client_upgrade = upgrade
        .is_some()
        .then(|| parts.extensions.remove::<OnUpgrade>())
        .flatten();

    let response = match tokio::time::timeout(
        limits.first_byte,
        upstreams.send(route.client, request),
    )
    .await
    {
        Ok(Ok(r)) => r,
        Ok(Err(error)) if body::over_limit(&*error) => {
            return too_large(limits.max_request_body.unwrap_or(0));
        }
        Ok(Err(error)) => {
            let timed_out = timed_out(&*error);
            tracing::warn!(route = %route.label(), error = %chain(&*error), "upstream request failed");
            return if timed_out {
                upstream_timeout()
            } else {
                upstream_failed()
            };
        }
        Err(_) => {
            tracing::warn!(route = %route.label(), timeout_ms = limits.first_byte.as_millis() as u64, "upstream gave no answer in time");
            return upstream_timeout();
        }
    };
    let (mut head, answer) = response.into_parts();
    if head.status == StatusCode::SWITCHING_PROTOCOLS {
        let upstream_upgrade = head.extensions.remove::<OnUpgrade>();
        return match (client_upgrade, upstream_upgrade) {
            (Some(client_side), Some(upstream_side)) => {
                switched(head.headers, client_side, upstream_side, limits.idle)
            }
            _ => {
                // A switch nobody asked for (or from an HTTP/2 upstream): the connection could
                // not be read as HTTP any more.
                tracing::warn!(route = %route.label(), "upstream switched protocols unasked");
                upstream_failed()
            }
        };
    }
    let bodiless = bodiless_answer || head.status == StatusCode::NOT_MODIFIED;
    answer_length(&mut head.headers, bodiless);
    strip_answer_headers(&mut head.headers);
    if !head.headers.contains_key(header::CACHE_CONTROL) {
        // Answered to an authenticated request: no shared cache may keep it for others.
        head.headers
            .insert(header::CACHE_CONTROL, HeaderValue::from_static("private"));
    }
    head.version = Version::HTTP_11;
    Response::from_parts(head, Body::answer(answer, limits.idle))
}

/// Whether the request asks to switch protocols in a way the gateway would pass on (over
/// HTTP/1.1, one `Upgrade` that is not `h2c`).
pub fn asks_to_switch(parts: &Parts) -> bool {
    parts.version == Version::HTTP_11 && requested_upgrade(&parts.headers).is_some()
}

/// The upgrade a request asks for (`Connection: upgrade` and the `Upgrade` header's protocols),
/// unless it names `h2c`: that one is not passed on, and the request goes on as a plain one.
fn requested_upgrade(headers: &HeaderMap) -> Option<HeaderValue> {
    if !headers.contains_key(header::UPGRADE) || !connection_lists(headers, "upgrade") {
        return None;
    }
    let mut values = headers.get_all(header::UPGRADE).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let protocols = value.to_str().ok()?;
    let named_h2c = protocols.split(',').any(|p| {
        p.trim()
            .split('/')
            .next()
            .is_some_and(|n| n.eq_ignore_ascii_case("h2c"))
    });
    (!protocols.trim().is_empty() && !named_h2c).then(|| value.clone())
}

/// Whether a browser's `Origin` is the request's own: `proto://host`, the port included when
/// the request's host carries one, compared without regard to case.
pub(crate) fn same_origin(origin: Option<&str>, proto: &str, host: Option<&str>) -> bool {
    match (origin, host) {
        (Some(origin), Some(host)) => origin.split_once("://").is_some_and(|(scheme, rest)| {
            scheme.eq_ignore_ascii_case(proto) && rest.eq_ignore_ascii_case(host)
        }),
        _ => false,
    }
}

/// The upstream switched protocols as the client asked: the client gets the 101 with the
/// upstream's own headers (its `Sec-WebSocket-Accept`, its chosen protocol), then the bytes of
/// each side go to the other until either closes. The gateway reads nothing of them: it checked
/// the request that opened the tunnel. Quiet both ways for the route's idle timeout, the tunnel
/// ends.
fn switched(
    upstream_headers: HeaderMap,
    client_side: OnUpgrade,
    upstream_side: OnUpgrade,
    idle: Duration,
) -> Response {
    let protocol = upstream_headers.get(header::UPGRADE).cloned();
    let mut headers = upstream_headers;
    strip_answer_headers(&mut headers);
    let Some(protocol) = protocol else {
        tracing::warn!("upstream switched protocols without naming one");
        return upstream_failed();
    };
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, protocol);
    tokio::spawn(async move {
        match tokio::try_join!(client_side, upstream_side) {
            Ok((client, upstream)) => tunnel(client, upstream, idle).await,
            Err(error) => tracing::debug!(%error, "an upgrade did not complete"),
        }
    });
    let mut response = bare(StatusCode::SWITCHING_PROTOCOLS);
    *response.headers_mut() = headers;
    response
}

/// Copies bytes both ways until both sides have closed, or neither has sent anything for
/// `idle`. A side that closes has its close passed on to the other.
async fn tunnel(client: Upgraded, upstream: Upgraded, idle: Duration) {
    let (mut from_client, mut to_client) = tokio::io::split(TokioIo::new(client));
    let (mut from_upstream, mut to_upstream) = tokio::io::split(TokioIo::new(upstream));
    let mut up = vec![0u8; 16 * 1024];
    let mut down = vec![0u8; 16 * 1024];
    let (mut client_open, mut upstream_open) = (true, true);
    let quiet = tokio::time::sleep(idle);
    tokio::pin!(quiet);
    while client_open || upstream_open {
        tokio::select! {
            read = from_client.read(&mut up), if client_open => match read {
                Ok(n) if n > 0 => {
                    if to_upstream.write_all(&up[..n]).await.is_err() {
                        break;
                    }
                }
                _ => {
                    client_open = false;
                    let _ = to_upstream.shutdown().await;
                }
            },
            read = from_upstream.read(&mut down), if upstream_open => match read {
                Ok(n) if n > 0 => {
                    if to_client.write_all(&down[..n]).await.is_err() {
                        break;
                    }
                }
                _ => {
                    upstream_open = false;
                    let _ = to_client.shutdown().await;
                }
            },
            () = &mut quiet => break,
        }
        quiet.as_mut().reset(tokio::time::Instant::now() + idle);
    }
}

/// Whether an upstream call failed by running out of time (the connect timeout).
fn timed_out(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::TimedOut)
        {
            return true;
        }
        next = e.source();
    }
    false
}

/// An error with its causes, for the log (never for the client: it names the upstream).
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut next = error.source();
    while let Some(e) = next {
        text.push_str(": ");
        text.push_str(&e.to_string());
        next = e.source();
    }
    text
}

fn upstream_failed() -> Response {
    problem(
        StatusCode::BAD_GATEWAY,
        "bad_gateway",
        "the upstream service did not answer",
    )
}

fn upstream_timeout() -> Response {
    problem(
        StatusCode::GATEWAY_TIMEOUT,
        "gateway_timeout",
        "the upstream service did not answer in time",
    )
}

fn too_large(max: u64) -> Response {
    problem(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        &format!("the request body is larger than this route takes ({max} bytes)"),
    )
}

/// The answer's length as the client is told it. The body is passed on as hyper read it, and
/// hyper says its length from that (or chunks it), so the upstream's `Content-Length` goes: with
/// `Transfer-Encoding` beside it, it is not the body's length (RFC 9112 §6.3: an intermediary
/// removes it), and a repeated one would reach the client twice. Only an answer without a body
/// (to HEAD, a 304) keeps it, as one value when all its values agree: it tells the length of
/// the body it stands for.
fn answer_length(headers: &mut HeaderMap, bodiless: bool) {
    let chunked = headers.contains_key(header::TRANSFER_ENCODING);
    let mut values = headers
        .get_all(header::CONTENT_LENGTH)
        .iter()
        .map(|v| v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()));
    let first = values.next().flatten();
    let declared = first.filter(|n| values.all(|v| v == Some(*n)));
    headers.remove(header::CONTENT_LENGTH);
    if let (true, false, Some(n)) = (bodiless, chunked, declared) {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
}

/// The upstream's answer headers as the client gets them: not the hop-by-hop ones, never a
/// cookie of the gateway's.
fn strip_answer_headers(headers: &mut HeaderMap) {
    strip_hop_by_hop(headers);
    let plants_gateway_cookie = headers
        .get_all(header::SET_COOKIE)
        .iter()
        .any(|v| v.to_str().map_or(true, cookies::sets_gateway_cookie));
    if plants_gateway_cookie {
        tracing::warn!("an upstream tried to set a gateway cookie; dropped");
        let kept: Vec<HeaderValue> = headers
            .get_all(header::SET_COOKIE)
            .iter()
            .filter(|v| v.to_str().is_ok_and(|v| !cookies::sets_gateway_cookie(v)))
            .cloned()
            .collect();
        headers.remove(header::SET_COOKIE);
        for value in kept {
            headers.append(header::SET_COOKIE, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
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
    }

    #[test]
    fn an_upgrade_passes_on_except_to_h2c() {
        let upgrade = |pairs: &[(&str, &str)]| {
            requested_upgrade(&headers(pairs)).map(|v| v.to_str().map(str::to_owned).ok())
        };
        assert_eq!(
            upgrade(&[
                ("connection", "keep-alive, Upgrade"),
                ("upgrade", "WebSocket")
            ]),
            Some(Some("WebSocket".into()))
        );
        assert_eq!(
            upgrade(&[("connection", "upgrade"), ("upgrade", "my-protocol/2")]),
            Some(Some("my-protocol/2".into()))
        );
        for refused in [
            &[("upgrade", "websocket")][..],
            &[("connection", "upgrade"), ("upgrade", "h2c")],
            &[("connection", "upgrade"), ("upgrade", "websocket, H2C")],
            &[("connection", "upgrade"), ("upgrade", "h2c/1")],
            &[("connection", "upgrade"), ("upgrade", " ")],
            &[
                ("connection", "upgrade"),
                ("upgrade", "websocket"),
                ("upgrade", "h2c"),
            ],
        ] {
            assert_eq!(upgrade(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn owned_headers_credentials_and_gateway_cookies_stay_behind() {
        let h = headers(&[
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
            ("cookie", "b=2"),
            ("cookie", "GATEWAY_session=x"),
            ("connection", "keep-alive, x-drop-me"),
            ("x-drop-me", "1"),
            ("host", "example.com"),
            ("accept", "text/plain"),
        ]);
        let mut out = h.clone();
        strip_request_headers(&mut out, false);
        let mut names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, vec!["accept", "cookie"], "{out:?}");
        let cookies: Vec<&str> = out
            .get_all("cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(cookies, vec!["a=1", "b=2"]);
        let mut with_authorization = h;
        strip_request_headers(&mut with_authorization, true);
        assert!(with_authorization.contains_key("authorization"));
    }

    #[test]
    fn an_upstream_never_sets_a_gateway_cookie() {
        let mut h = headers(&[
            ("set-cookie", "app=1; Path=/"),
            ("set-cookie", "__Host-gateway_session_x=evil; Path=/"),
            ("set-cookie", "Gateway_login_1=evil"),
            ("transfer-encoding", "chunked"),
        ]);
        strip_answer_headers(&mut h);
        let kept: Vec<&str> = h
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect();
        assert_eq!(kept, vec!["app=1; Path=/"]);
        assert!(!h.contains_key("transfer-encoding"));
    }

    #[test]
    fn an_answers_length_is_the_bodys_own_unless_it_has_none() {
        let length = |pairs: &[(&str, &str)], bodiless: bool| {
            let mut h = headers(pairs);
            answer_length(&mut h, bodiless);
            let values: Vec<String> = h
                .get_all("content-length")
                .iter()
                .filter_map(|v| v.to_str().ok().map(str::to_owned))
                .collect();
            values
        };
        let chunked_too = [("content-length", "3"), ("transfer-encoding", "chunked")];
        assert!(length(&chunked_too, false).is_empty());
        assert!(length(&chunked_too, true).is_empty());
        assert!(length(&[("content-length", "12")], false).is_empty());
        assert_eq!(length(&[("content-length", "12")], true), vec!["12"]);
        let twice = [("content-length", "12"), ("content-length", "12")];
        assert_eq!(length(&twice, true), vec!["12"]);
        let disagree = [("content-length", "12"), ("content-length", "13")];
        assert!(length(&disagree, true).is_empty());
    }
}
