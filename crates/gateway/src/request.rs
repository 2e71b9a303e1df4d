//! Requests the gateway refuses before reading anything else, because two parties could read
//! them two ways (RFC 9112 §6.1, §3.2): a body framed by both `Content-Length` and
//! `Transfer-Encoding` (HTTP/1.1's parser reads such a body by `Transfer-Encoding` alone and
//! closes the connection after it, so this check is the second line), two lengths, two `Host`
//! headers, a target whose authority and `Host` disagree, or two `Authorization` headers (the
//! gateway would check one and an upstream might read the other). Also the methods a gateway
//! has no business forwarding.
//!
//! The host a request is for comes from one place and is checked once: the target's authority
//! when there is one (absolute-form over HTTP/1.1, `:authority` over HTTP/2; RFC 9112 §3.2.2
//! gives it precedence over `Host`), else `Host`. Either must be a bare `host[:port]`: an
//! authority with userinfo (`http://app.example:1@evil.example/`) would be routed by one
//! reading of it and forwarded as `X-Forwarded-Host` in another.

use http::request::Parts;
use http::{Method, Version};

/// Why a request is refused before routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("a request may not carry both Content-Length and Transfer-Encoding")]
    AmbiguousLength,
    #[error("a request may carry one Content-Length")]
    TwoLengths,
    #[error("a request carries exactly one Host header, and a valid one")]
    Host,
    #[error("the request target's authority must be a host with an optional port")]
    Authority,
    #[error("the request target's authority and the Host header disagree")]
    AuthorityMismatch,
    #[error("a request may carry one Authorization header")]
    TwoAuthorizations,
    #[error("this method is not forwarded")]
    Method,
}

/// Whether a header value is a host with an optional port.
fn valid_host(value: &str) -> bool {
    crate::forwarding::is_host_and_port(value)
}

/// The host the request is for: the target's authority (absolute-form, or HTTP/2's
/// `:authority`), else the `Host` header; each a valid `host[:port]`, and the two the same
/// when both are there.
pub fn check(req: &Parts) -> Result<Option<&str>, Malformed> {
    let headers = &req.headers;
    if matches!(req.method, Method::CONNECT | Method::TRACE) {
        return Err(Malformed::Method);
    }
    if headers.contains_key("transfer-encoding") && headers.contains_key("content-length") {
        return Err(Malformed::AmbiguousLength);
    }
    if headers.get_all("content-length").iter().count() > 1 {
        return Err(Malformed::TwoLengths);
    }
    if headers.get_all("authorization").iter().count() > 1 {
        return Err(Malformed::TwoAuthorizations);
    }
    let mut hosts = headers.get_all("host").iter();
    let host = match (hosts.next(), hosts.next()) {
        // HTTP/1.1 requires it (RFC 9112 §3.2), absolute-form or not.
        (None, _) if req.version == Version::HTTP_11 => return Err(Malformed::Host),
        (None, _) => None,
        (Some(h), None) => Some(
            h.to_str()
                .ok()
                .filter(|h| valid_host(h))
                .ok_or(Malformed::Host)?,
        ),
        (Some(_), Some(_)) => return Err(Malformed::Host),
    };
    let Some(authority) = req.uri.authority() else {
        return Ok(host);
    };
    let scheme_ok = req
        .uri
        .scheme_str()
        .is_none_or(|s| s.eq_ignore_ascii_case("http") || s.eq_ignore_ascii_case("https"));
    if !scheme_ok || !valid_host(authority.as_str()) {
        return Err(Malformed::Authority);
    }
    match host {
        Some(host) if !authority.as_str().eq_ignore_ascii_case(host) => {
            Err(Malformed::AuthorityMismatch)
        }
        _ => Ok(Some(authority.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(version: Version, target: &str, hosts: &[&str]) -> Parts {
        let mut builder = http::Request::builder().version(version).uri(target);
        for host in hosts {
            builder = builder.header("host", *host);
        }
        builder
            .body(())
            .unwrap_or_else(|e| panic!("{target}: {e}"))
            .into_parts()
            .0
    }

    #[test]
    fn the_host_is_one_checked_host_and_port_from_the_target_or_the_host_header() {
        use Version as V;
        for (version, target, hosts, expected) in [
            (
                V::HTTP_11,
                "/x",
                &["app.example"][..],
                Ok(Some("app.example")),
            ),
            (
                V::HTTP_11,
                "/x",
                &["App.Example:8081"],
                Ok(Some("App.Example:8081")),
            ),
            (V::HTTP_11, "/x", &["[::1]:8081"], Ok(Some("[::1]:8081"))),
            (V::HTTP_11, "/x", &[], Err(Malformed::Host)),
            (V::HTTP_10, "/x", &[], Ok(None)),
            (
                V::HTTP_11,
                "/x",
                &["a.example", "b.example"],
                Err(Malformed::Host),
            ),
            (
                V::HTTP_11,
                "/x",
                &["a.example:1@evil.example"],
                Err(Malformed::Host),
            ),
            (V::HTTP_11, "/x", &["a.example:1:2"], Err(Malformed::Host)),
            (V::HTTP_11, "/x", &["a.example:http"], Err(Malformed::Host)),
            (V::HTTP_11, "/x", &["a.example:"], Err(Malformed::Host)),
            (V::HTTP_11, "/x", &["[not-v6]"], Err(Malformed::Host)),
            (
                V::HTTP_11,
                "http://app.example/x",
                &["app.example"],
                Ok(Some("app.example")),
            ),
            (
                V::HTTP_11,
                "http://app.example/x",
                &["evil.example"],
                Err(Malformed::AuthorityMismatch),
            ),
            (
                V::HTTP_11,
                "http://app.example:1@evil.example/x",
                &["app.example:1@evil.example"],
                Err(Malformed::Host),
            ),
            (
                V::HTTP_11,
                "http://app.example:1@evil.example/x",
                &["app.example"],
                Err(Malformed::Authority),
            ),
            (
                V::HTTP_10,
                "http://app.example:1@evil.example/x",
                &[],
                Err(Malformed::Authority),
            ),
            (
                V::HTTP_10,
                "ftp://app.example/x",
                &[],
                Err(Malformed::Authority),
            ),
            // HTTP/2: `:authority` is the target's authority; `Host` may be left out.
            (
                V::HTTP_2,
                "https://app.example/x",
                &[],
                Ok(Some("app.example")),
            ),
            (
                V::HTTP_2,
                "https://user@app.example/x",
                &[],
                Err(Malformed::Authority),
            ),
            (
                V::HTTP_2,
                "https://app.example/x",
                &["other.example"],
                Err(Malformed::AuthorityMismatch),
            ),
        ] {
            let request = parts(version, target, hosts);
            assert_eq!(check(&request), expected, "{version:?} {target} {hosts:?}");
        }
    }
}
