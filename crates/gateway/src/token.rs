//! Static tokens: `Authorization: Bearer <token>` against stored SHA-256 digests.

use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderValue, WWW_AUTHENTICATE};
use domain::model::auth_server::TokenConfig;

use crate::outcome::{Identity, Outcome};
use crate::problem::{problem, with_header};

/// The bearer token of an Authorization value: `Err(detail)` when the value is no Bearer one.
pub fn bearer(value: &HeaderValue) -> Result<&str, &'static str> {
    let value = value.to_str().map_err(|_| "scheme must be Bearer")?.trim();
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
    Outcome::Deny {
        response: with_header(
            problem(StatusCode::UNAUTHORIZED, "unauthorized", detail),
            WWW_AUTHENTICATE,
            challenge,
        ),
        failed: token_sent,
    }
}

pub fn check(config: &TokenConfig, authorization: Option<&HeaderValue>) -> Outcome {
    let Some(value) = authorization else {
        return refuse("Authorization header missing", false);
    };
    let token = match bearer(value) {
        Ok(t) => t,
        Err(detail) => return refuse(detail, true),
    };
    // Every digest is compared (each in constant time), so timing says nothing about which.
    let matched = config
        .tokens
        .iter()
        .fold(false, |m, t| secrets::token_matches(&t.digest, token) | m);
    if matched {
        Outcome::Allow(Identity::default())
    } else {
        refuse("invalid bearer token", true)
    }
}
