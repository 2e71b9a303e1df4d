//! The gateway's own pages, under `/.gateway/` on every host, answered before any route is
//! looked at: nothing under that prefix is ever routed or sent upstream.
//!
//! - `POST /.gateway/sign-out` ends every session cookie the request presents, on the server
//!   (a copy of the cookie kept anywhere is no session any more, on every gateway sharing the
//!   database), and clears them.
//! - `POST /.gateway/sign-out-everywhere` also ends every other session of each presented
//!   session's person: their other browsers and devices.
//!
//! Both then send the browser to `rd` (the query's, or the form's) when it is a page of this
//! origin, else answer a small page saying it is signed out. Only POST: a link or an image
//! (GET) must not sign anyone out. Another site's page can still post a form here; its request
//! carries no session cookie (they are `SameSite=Lax`), and is refused anyway: a request the
//! browser marks `Sec-Fetch-Site: cross-site`, or whose `Origin` is not the request's own, is
//! 403, so no other site (nor a sibling host of the same site) can sign a user out.

use std::pin::Pin;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::request::Parts;
use http::{Method, StatusCode};
use http_body::Body as _;
use hyper::body::Incoming;
use store_postgres::PgStore;

use crate::body::{Body, Response};
use crate::forwarding::ClientView;
use crate::oidc::{Oidc, Presented, local_path};
use crate::path::CanonicalPath;
use crate::problem::{problem, with_header};

/// The prefix the gateway keeps for itself on every host.
pub const PREFIX: &str = "/.gateway";
const SIGN_OUT: &str = "/.gateway/sign-out";
const SIGN_OUT_EVERYWHERE: &str = "/.gateway/sign-out-everywhere";
/// A sign-out form holds one short field; a body beyond this was not sent by one.
const MAX_FORM_BYTES: usize = 8 * 1024;
/// How long a sign-out form's body may take to arrive.
const FORM_WAIT: Duration = Duration::from_secs(10);

/// Whether `path` is the gateway's own (canonical, so `/%2Egateway/` is this too).
pub fn is_reserved(path: &CanonicalPath) -> bool {
    path.as_str()
        .strip_prefix(PREFIX)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// Answers a request for a path under [`PREFIX`].
pub async fn answer(
    parts: &Parts,
    body: Incoming,
    path: &CanonicalPath,
    client: &ClientView,
    oidc: &Oidc,
    store: &PgStore,
) -> Response {
    let everywhere = match path.as_str() {
        SIGN_OUT => false,
        SIGN_OUT_EVERYWHERE => true,
        _ => {
            return problem(
                StatusCode::NOT_FOUND,
                "not_found",
                "the gateway has no such page",
            );
        }
    };
    if parts.method != Method::POST {
        return with_header(
            problem(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "signing out takes a POST (a form's button), never a link",
            ),
            header::ALLOW,
            "POST",
        );
    }
    if from_another_site(parts, client) {
        return problem(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a sign-out must come from a page of this origin",
        );
    }
    let rd = match return_page(parts, body).await {
        Ok(rd) => rd,
        Err(refusal) => return refusal.answer(),
    };
    let cookies: Vec<&str> = parts
        .headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    match oidc.sign_out(store, &cookies, everywhere).await {
        Ok(presented) => signed_out(&presented, rd.as_deref(), everywhere),
        Err(error) => {
            // Nothing is cleared: the user is told, rather than believing a copy of the cookie
            // is dead when it is not.
            tracing::warn!(%error, "cannot record a sign-out");
            with_header(
                problem(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "service_unavailable",
                    "the sign-out could not be recorded; try again",
                ),
                header::RETRY_AFTER,
                "5",
            )
        }
    }
}

/// Whether the browser says the request comes from another site, or from another origin than
/// the request's own (`Origin: null` included). Browsers send `Origin` with every form POST;
/// a client without one (curl) is not a browser being used against its user.
fn from_another_site(parts: &Parts, client: &ClientView) -> bool {
    let cross_site = parts.headers.get_all("sec-fetch-site").iter().any(|v| {
        v.as_bytes()
            .trim_ascii()
            .eq_ignore_ascii_case(b"cross-site")
    });
    cross_site
        || parts.headers.get_all(header::ORIGIN).iter().any(|origin| {
            !crate::proxy::same_origin(origin.to_str().ok(), client.proto, client.host.as_deref())
        })
}

/// Why a sign-out's form was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
enum FormError {
    #[error("a sign-out form is a few bytes")]
    TooLarge,
    #[error("the sign-out form did not arrive whole")]
    Incomplete,
}

impl FormError {
    fn answer(self) -> Response {
        let (status, code) = match self {
            FormError::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            FormError::Incomplete => (StatusCode::BAD_REQUEST, "bad_request"),
        };
        problem(status, code, &self.to_string())
    }
}

/// The page to go to afterwards: `rd` of the query, else of a form body, when it is a page of
/// this origin. A body too large or too slow for a form is refused.
async fn return_page(parts: &Parts, body: Incoming) -> Result<Option<String>, FormError> {
    if let Some(rd) = parts.uri.query().and_then(|q| field(q.as_bytes(), "rd")) {
        return Ok(local_path(&rd));
    }
    let is_form = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !is_form {
        return Ok(None);
    }
    let form = read_form(body).await?;
    Ok(field(&form, "rd").and_then(|rd| local_path(&rd)))
}

/// The first value of `name` in a URL-encoded form or query.
fn field(form: &[u8], name: &str) -> Option<String> {
    url::form_urlencoded::parse(form)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// A form body, whole: at most [`MAX_FORM_BYTES`], within [`FORM_WAIT`].
async fn read_form(mut body: Incoming) -> Result<Bytes, FormError> {
    if body.size_hint().lower() > MAX_FORM_BYTES as u64 {
        return Err(FormError::TooLarge);
    }
    let read = async {
        let mut form = BytesMut::new();
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let Ok(frame) = frame else {
                return Err(FormError::Incomplete);
            };
            if let Some(data) = frame.data_ref() {
                if form.len() + data.len() > MAX_FORM_BYTES {
                    return Err(FormError::TooLarge);
                }
                form.extend_from_slice(data);
            }
        }
        Ok(form.freeze())
    };
    tokio::time::timeout(FORM_WAIT, read)
        .await
        .unwrap_or(Err(FormError::Incomplete))
}

/// The answer once every presented session is ended: each cleared, then `rd` or a page.
fn signed_out(presented: &[Presented], rd: Option<&str>, everywhere: bool) -> Response {
    let mut response = match rd {
        Some(rd) => with_header(
            crate::problem::bare(StatusCode::SEE_OTHER),
            header::LOCATION,
            rd,
        ),
        None => {
            let said = if everywhere {
                "You are signed out, on this browser and on every other one you had signed in with."
            } else {
                "You are signed out."
            };
            let page = format!(
                "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
                 <title>Signed out</title></head><body><p>{said}</p></body></html>\n"
            );
            with_header(
                Response::new(Body::full(page)),
                header::CONTENT_TYPE,
                "text/html; charset=utf-8",
            )
        }
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    for session in presented {
        if let Ok(clear) = HeaderValue::from_str(&Oidc::clear(session)) {
            headers.append(header::SET_COOKIE, clear);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prefix_is_reserved_whole_segments_only() {
        for (path, reserved) in [
            ("/.gateway", true),
            ("/.gateway/", true),
            ("/.gateway/sign-out", true),
            ("/.gateway/anything/else", true),
            ("/%2Egateway/sign-out", true),
            ("/app/../.gateway/sign-out", true),
            ("/.gatewayx", false),
            ("/.gateway-x/sign-out", false),
            ("/app/.gateway/sign-out", false),
            ("/.GATEWAY/sign-out", false),
        ] {
            let canonical = crate::path::normalize(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            assert_eq!(is_reserved(&canonical), reserved, "{path}");
        }
    }

    #[test]
    fn rd_is_read_from_a_form_or_a_query() {
        assert_eq!(
            field(b"a=1&rd=%2Fapp%3Fx%3D1", "rd").as_deref(),
            Some("/app?x=1")
        );
        assert_eq!(field(b"rd=/one&rd=/two", "rd").as_deref(), Some("/one"));
        assert_eq!(field(b"rdx=/a", "rd"), None);
    }
}
