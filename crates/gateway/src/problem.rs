//! RFC 9457 problem details for the gateway's own answers (the API's one `Problem` shape),
//! each carrying the id of the request (the one in the `X-Request-Id` header and in the log
//! lines of that request).

use http::StatusCode;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderName, HeaderValue};
use wire::problem::{PROBLEM_JSON, Problem};

use crate::body::{Body, Response};

tokio::task_local! {
    /// The id of the request being answered, as its header value (shared, not copied, by the
    /// answer's `X-Request-Id` and the upstream's).
    pub static REQUEST_ID: HeaderValue;
}

/// The current request's id, or a fresh one outside a request.
pub fn request_id() -> String {
    REQUEST_ID
        .try_with(|id| id.to_str().map(str::to_owned).ok())
        .ok()
        .flatten()
        .unwrap_or_else(new_request_id)
}

/// A random (v4) UUID from the thread's CSPRNG: `Uuid::new_v4` asks the kernel for every one,
/// a system call per request.
fn new_request_id() -> String {
    uuid::Builder::from_random_bytes(rand::random())
        .into_uuid()
        .to_string()
}

/// The caller's `X-Request-Id` when it is sane (1-128 visible ASCII characters of the kinds ids
/// are made of), else a new UUID.
pub fn choose_request_id(given: Option<&HeaderValue>) -> HeaderValue {
    match given {
        Some(id)
            if !id.is_empty()
                && id.len() <= 128
                && id
                    .as_bytes()
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(b)) =>
        {
            id.clone()
        }
        // A UUID's text is always a valid header value.
        _ => HeaderValue::try_from(new_request_id())
            .unwrap_or_else(|_| HeaderValue::from_static("unknown")),
    }
}

/// A problem+json answer. Never cached: it depends on who asked.
pub fn problem(status: StatusCode, code: &str, detail: &str) -> Response {
    let body = Problem::new(
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error"),
        code,
        detail,
        request_id(),
    );
    let mut response = Response::new(Body::full(body.to_json()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// An answer of the gateway's own with no body (a redirect, a switch of protocols).
pub fn bare(status: StatusCode) -> Response {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

/// 302 to `location` (a value that is no valid header sends none: the callers build theirs
/// from URLs and paths they checked).
pub fn found(location: &str) -> Response {
    with_header(bare(StatusCode::FOUND), http::header::LOCATION, location)
}

/// The same answer with one more header (a challenge, `Retry-After`).
pub fn with_header(mut response: Response, name: HeaderName, value: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, v);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sane_request_ids_are_kept() {
        let given = |s: &str| HeaderValue::from_str(s).ok();
        let chosen = |s: &str| choose_request_id(given(s).as_ref());
        assert_eq!(chosen("abc-123_x.y:z"), "abc-123_x.y:z");
        for bad in ["", "a b", "x\ty", "é", &"a".repeat(129)] {
            assert_ne!(chosen(bad), bad);
        }
        let fresh = choose_request_id(None);
        let fresh = fresh.to_str().unwrap_or_default().to_owned();
        let id = uuid::Uuid::parse_str(&fresh).unwrap_or_else(|e| panic!("{fresh}: {e}"));
        assert_eq!(id.get_version_num(), 4);
        assert_ne!(choose_request_id(None), fresh);
    }
}
