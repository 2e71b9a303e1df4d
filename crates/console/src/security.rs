//! What every console answer and every form submission goes through: the security headers,
//! the CSRF token check and the refusal of requests another site sent.

use actix_web::HttpRequest;
use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::middleware::Next;

/// No inline script or style, nothing from another origin, no framing, forms post only here.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; \
     frame-ancestors 'none'; base-uri 'none'";

/// Adds the security headers to every console answer; pages are never cached (they show one
/// person's data), while the hashed assets keep the caching they set.
pub async fn headers(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let mut res = next.call(req).await?;
    let h = res.headers_mut();
    let fixed = [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null` with
        // form posts, and the console could no longer tell its own forms from another site's.
        (header::REFERRER_POLICY, "same-origin"),
        (
            HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
    ];
    for (name, value) in fixed {
        h.insert(name, HeaderValue::from_static(value));
    }
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    Ok(res)
}

/// Equal without telling, by its timing, how much of a guess was right.
pub fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Whether a state-changing request may have come from another site: the browser says so in
/// `Sec-Fetch-Site`, or its `Origin` names another host than the one asked. A request with
/// neither (an old browser, curl) is judged by its CSRF token alone.
pub fn sent_by_another_site(req: &HttpRequest) -> bool {
    let text = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    if let Some(site) = text("sec-fetch-site")
        && !matches!(site.as_str(), "same-origin" | "none")
    {
        return true;
    }
    match (text("origin"), text("host")) {
        (Some(origin), Some(host)) => {
            let origin_host = origin
                .split_once("://")
                .map(|(_, rest)| rest.trim_end_matches('/'))
                .unwrap_or("");
            !origin_host.eq_ignore_ascii_case(&host)
        }
        (Some(_), None) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "abcd"));
        assert!(!same_secret("", "a"));
    }

    #[test]
    fn a_post_from_another_site_is_recognised() {
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[("host", "console.example.com")], false),
            (&[("host", "h"), ("sec-fetch-site", "same-origin")], false),
            (&[("host", "h"), ("sec-fetch-site", "cross-site")], true),
            (&[("host", "h"), ("sec-fetch-site", "same-site")], true),
            (&[("host", "h:8080"), ("origin", "http://h:8080")], false),
            (
                &[("host", "h:8080"), ("origin", "http://evil.example")],
                true,
            ),
            (&[("host", "h"), ("origin", "null")], true),
        ];
        for (headers, another) in cases {
            let mut req = TestRequest::post();
            for (name, value) in *headers {
                req = req.insert_header((*name, *value));
            }
            let req = req.to_http_request();
            assert_eq!(sent_by_another_site(&req), *another, "{headers:?}");
        }
    }
}
