//! What an auth check reads of a request, and what it decides.

use std::net::IpAddr;

use http::StatusCode;
use http::header::RETRY_AFTER;

use crate::body::Response;
use crate::problem::{problem, with_header};
use crate::ratelimit::{Attempt, Limiter, Refusal, Scope};

/// The parts of a request the auth checks read, each taken once from the request.
#[derive(Debug)]
pub struct Facts<'a> {
    /// The one `Authorization` header (a request with two is refused before any check).
    pub authorization: Option<&'a str>,
    /// Every `Cookie` header.
    pub cookies: Vec<&'a str>,
    /// `Accept` includes `text/html`: a browser, which may be sent to sign in.
    pub accepts_html: bool,
    /// GET or HEAD: a navigation a sign-in can return to.
    pub navigable: bool,
    /// The canonical path and the query as received.
    pub path: &'a str,
    pub query: &'a str,
}

/// Who the request was authenticated as: the `X-Auth-*` headers to send upstream.
#[derive(Debug, Default)]
pub struct Identity {
    pub headers: Vec<(&'static str, String)>,
    /// OIDC bearer tokens go on to the upstream; Basic and Token credentials do not.
    pub forward_authorization: bool,
    /// Authenticated by the browser session's cookie, which a browser sends whichever page
    /// opened the request: a WebSocket opened this way must come from the request's own origin.
    pub by_session_cookie: bool,
}

pub enum Outcome {
    Allow(Identity),
    /// Refused with this answer.
    Deny(Response),
}

/// The failed-attempt limit of one client on one route (or on the sign-in callbacks).
#[derive(Debug, Clone, Copy)]
pub struct Attempts<'a> {
    pub limiter: &'a Limiter,
    pub client: IpAddr,
    pub scope: Scope,
}

impl Attempts<'_> {
    /// Starts a costly credential check (Argon2id, a code exchange), or says why not (answered
    /// by [`too_many`]).
    pub fn begin(&self) -> Result<Attempt, Refusal> {
        self.limiter.begin(self.client, self.scope)
    }

    /// Counts a failure of a check that was not begun: malformed credentials, a wrong static
    /// token, an invalid bearer JWT.
    pub fn record_failure(&self) {
        self.limiter.fail(self.client, self.scope);
    }

    /// The 429 for a client whose failures are used up, if they are.
    pub fn blocked(&self) -> Option<Response> {
        self.limiter
            .blocked(self.client, self.scope)
            .map(|retry_after| too_many(Refusal::Blocked { retry_after }))
    }
}

/// 429 `rate_limited` with `Retry-After`.
pub fn too_many(refusal: Refusal) -> Response {
    let (retry, detail) = match refusal {
        Refusal::Blocked { retry_after } => {
            (retry_after, "too many failed attempts; try again later")
        }
        Refusal::Busy => (1, "too many attempts in progress; try again in a second"),
    };
    with_header(
        problem(StatusCode::TOO_MANY_REQUESTS, "rate_limited", detail),
        RETRY_AFTER,
        &retry.to_string(),
    )
}
