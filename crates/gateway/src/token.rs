//! Static tokens: `Authorization: Bearer <token>` against the stored keyed digests.

use domain::model::auth_server::TokenConfig;
use http::StatusCode;
use http::header::WWW_AUTHENTICATE;

use crate::outcome::{Attempts, Identity, Outcome, too_many};
use crate::problem::{problem, with_header};

/// The bearer token of an Authorization value: `Err(detail)` when the value is no Bearer one.
pub fn bearer(value: &str) -> Result<&str, &'static str> {
    let value = value.trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err("scheme must be Bearer");
    }
    let token = rest.trim();
    if token.is_empty() {
        return Err("Bearer token is empty");
    }
    Ok(token)
}

/// 401 with a Bearer challenge; `invalid_token` when a token was sent.
pub fn refuse(detail: &str, token_sent: bool) -> Outcome {
    let challenge = if token_sent {
        "Bearer error=\"invalid_token\""
    } else {
        "Bearer"
    };
    Outcome::Deny(with_header(
        problem(StatusCode::UNAUTHORIZED, "unauthorized", detail),
        WWW_AUTHENTICATE,
        challenge,
    ))
}

pub fn check(
    vault: &secrets::Vault,
    config: &TokenConfig,
    authorization: Option<&str>,
    attempts: &Attempts<'_>,
) -> Outcome {
    let Some(value) = authorization else {
        return refuse("Authorization header missing", false);
    };
    let token = match bearer(value) {
        Ok(t) => t,
        Err(detail) => {
            attempts.record_failure();
            return refuse(detail, true);
        }
    };
    let attempt = match attempts.begin() {
        Ok(a) => a,
        Err(refusal) => return Outcome::Deny(too_many(refusal)),
    };
    // Every digest is compared (each in constant time), so timing says nothing about which.
    let matched = config
        .tokens
        .iter()
        .fold(false, |m, t| vault.token_matches(&t.digest, token) | m);
    if matched {
        attempt.succeeded();
        Outcome::Allow(Identity::default())
    } else {
        attempt.failed();
        refuse("invalid bearer token", true)
    }
}
