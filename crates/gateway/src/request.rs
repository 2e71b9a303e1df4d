//! Requests the gateway refuses before reading anything else, because two parties could read
//! them two ways (RFC 9112 §6.1, §3.2): a body framed by both `Content-Length` and
//! `Transfer-Encoding` (HTTP/1.1's parser reads such a body by `Transfer-Encoding` alone and
//! closes the connection after it, so this check is the second line), two lengths, two `Host`
//! headers, a target whose authority and `Host` disagree, or two `Authorization` headers (the
//! gateway would check one and an upstream might read the other). Also the methods a gateway
//! has no business forwarding.

use http::Method;
use http::request::Parts;

/// Why a request is refused before routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    #[error("a request may not carry both Content-Length and Transfer-Encoding")]
    AmbiguousLength,
    #[error("a request may carry one Content-Length")]
    TwoLengths,
    #[error("a request carries exactly one Host header, and a valid one")]
    Host,
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

/// The host the request is for: the target's authority (absolute-form) or the `Host` header.
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
        (None, _) => None,
        (Some(h), None) => Some(
            h.to_str()
                .ok()
                .filter(|h| valid_host(h))
                .ok_or(Malformed::Host)?,
        ),
        (Some(_), Some(_)) => return Err(Malformed::Host),
    };
    match (req.uri.authority(), host) {
        (Some(authority), Some(host)) if !authority.as_str().eq_ignore_ascii_case(host) => {
            Err(Malformed::AuthorityMismatch)
        }
        (Some(authority), _) => Ok(Some(authority.as_str())),
        (None, host) => Ok(host),
    }
}
