//! Forwarding: the request goes upstream with its method, path, query and streamed body; the
//! answer comes back with its status, headers and streamed body. Hop-by-hop headers and the
//! client's own `X-Auth-*` headers never pass.

use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderMap, HeaderName};
use actix_web::{HttpRequest, HttpResponse, web};
use futures::StreamExt;

use crate::outcome::Identity;
use crate::problem::problem;
use crate::routes::Route;

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

/// `X-Auth-User`, `x_auth_user`, `X-AUTH_user`…: all spellings a server might fold together.
pub fn is_identity_header(name: &str) -> bool {
    let folded = name.to_ascii_lowercase().replace('_', "-");
    folded.starts_with("x-auth-")
}

fn connection_listed(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("connection")
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

fn is_hop_by_hop(name: &str, listed: &[String]) -> bool {
    HOP_BY_HOP.contains(&name) || listed.iter().any(|l| l == name)
}

/// The Cookie header less the gateway's own session cookies.
fn without_session_cookies(value: &str) -> Option<String> {
    let kept: Vec<&str> = value
        .split(';')
        .map(str::trim)
        .filter(|c| !c.is_empty() && !c.starts_with(crate::oidc::SESSION_COOKIE_PREFIX))
        .collect();
    (!kept.is_empty()).then(|| kept.join("; "))
}

pub async fn forward(
    client: &reqwest::Client,
    req: &HttpRequest,
    payload: web::Payload,
    route: &Route,
    identity: Identity,
) -> HttpResponse {
    let mut url = format!("{}{}", route.upstream, req.path());
    if !req.query_string().is_empty() {
        url.push('?');
        url.push_str(req.query_string());
    }
    let method = match reqwest::Method::from_bytes(req.method().as_str().as_bytes()) {
        Ok(m) => m,
        Err(_) => return problem(StatusCode::BAD_REQUEST, "bad_request", "unknown method"),
    };
    let listed = connection_listed(req.headers());
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in req.headers() {
        let n = name.as_str();
        if is_hop_by_hop(n, &listed)
            || n == "host"
            || is_identity_header(n)
            || (n == "authorization" && !identity.forward_authorization)
        {
            continue;
        }
        let value = if n == "cookie" {
            match value.to_str().ok().and_then(without_session_cookies) {
                Some(v) => match reqwest::header::HeaderValue::from_str(&v) {
                    Ok(v) => v,
                    Err(_) => continue,
                },
                None => continue,
            }
        } else {
            match reqwest::header::HeaderValue::from_bytes(value.as_bytes()) {
                Ok(v) => v,
                Err(_) => continue,
            }
        };
        if let Ok(name) = reqwest::header::HeaderName::from_bytes(n.as_bytes()) {
            headers.append(name, value);
        }
    }
    for (name, value) in identity.headers {
        if let Ok(v) = reqwest::header::HeaderValue::from_str(&value) {
            headers.insert(name, v);
        }
    }
    if let Some(peer) = req.peer_addr() {
        let forwarded = match req
            .headers()
            .get("x-forwarded-for")
            .and_then(|v| v.to_str().ok())
        {
            Some(prior) => format!("{prior}, {}", peer.ip()),
            None => peer.ip().to_string(),
        };
        if let Ok(v) = reqwest::header::HeaderValue::from_str(&forwarded) {
            headers.insert("x-forwarded-for", v);
        }
    }
    if let Ok(v) = reqwest::header::HeaderValue::from_str(req.connection_info().host()) {
        headers.insert("x-forwarded-host", v);
    }
    if let Ok(v) = reqwest::header::HeaderValue::from_str(req.connection_info().scheme()) {
        headers.insert("x-forwarded-proto", v);
    }

    let has_body = req.headers().contains_key("content-length")
        || req.headers().contains_key("transfer-encoding");
    let mut upstream = client.request(method, &url).headers(headers);
    if has_body {
        upstream = upstream.body(reqwest::Body::wrap_stream(sendable(payload)));
    }
    let response = match upstream.send().await {
        Ok(r) => r,
        Err(error) => {
            tracing::warn!(upstream = %route.upstream, error = %error.without_url(), "upstream request failed");
            return problem(
                StatusCode::BAD_GATEWAY,
                "bad_gateway",
                "the upstream service did not answer",
            );
        }
    };
    let status =
        StatusCode::from_u16(response.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut out = HttpResponse::build(status);
    let listed: Vec<String> = response
        .headers()
        .get_all("connection")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim().to_ascii_lowercase())
        .collect();
    for (name, value) in response.headers() {
        let n = name.as_str();
        // actix frames the body itself; a stale length would corrupt a streamed answer.
        if is_hop_by_hop(n, &listed) || n == "content-length" {
            continue;
        }
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(n.as_bytes()),
            actix_web::http::header::HeaderValue::from_bytes(value.as_bytes()),
        ) {
            out.append_header((name, value));
        }
    }
    let bodiless = req.method() == actix_web::http::Method::HEAD
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    if let (Some(len), false) = (response.content_length(), bodiless) {
        // Passed on explicitly: a known length lets actix send it without chunking.
        return out.no_chunking(len).streaming(response.bytes_stream());
    }
    out.streaming(response.bytes_stream())
}

/// actix's payload is tied to its worker thread; reqwest wants a `Send` stream. A small
/// bounded channel bridges them, so at most a few chunks are in memory at a time.
fn sendable(
    mut payload: web::Payload,
) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'static {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(4);
    actix_web::rt::spawn(async move {
        while let Some(chunk) = payload.next().await {
            let item = chunk.map_err(|e| std::io::Error::other(e.to_string()));
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

    #[test]
    fn identity_headers_in_every_spelling_are_recognised() {
        for name in [
            "X-Auth-User",
            "x_auth_user",
            "X-AUTH_groups",
            "x-auth-email",
        ] {
            assert!(is_identity_header(name), "{name}");
        }
        assert!(!is_identity_header("x-authorization"));
        assert!(!is_identity_header("authorization"));
    }

    #[test]
    fn session_cookies_are_removed_from_the_cookie_header() {
        let v = format!("a=1; {}abc=x; b=2", crate::oidc::SESSION_COOKIE_PREFIX);
        assert_eq!(without_session_cookies(&v), Some("a=1; b=2".into()));
        let only = format!("{}abc=x", crate::oidc::SESSION_COOKIE_PREFIX);
        assert_eq!(without_session_cookies(&only), None);
    }
}
