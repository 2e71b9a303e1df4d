//! Static tokens: `Authorization: Bearer <token>` against the stored keyed digests.

use domain::model::auth_server::TokenConfig;
use http::StatusCode;
use http::header::WWW_AUTHENTICATE;

use crate::outcome::{Attempts, Identity, Outcome};
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
    // Every digest is compared (each in constant time), so timing says nothing about which.
    // Microseconds of work: not reserved, counted only if it fails (see ratelimit.rs), so a
    // client's many requests at once are all answered.
    let matched = config
        .tokens
        .iter()
        .fold(false, |m, t| vault.token_matches(&t.digest, token) | m);
    if matched {
        Outcome::Allow(Identity::default())
    } else {
        attempts.record_failure();
        refuse("invalid bearer token", true)
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use domain::model::auth_server::TokenCredential;
    use domain::model::secret::Secret;
    use domain::ports::secrets::SecretVault;

    use super::*;
    use crate::ratelimit::{Limiter, MAX_FAILURES, Scope};

    const TOKEN: &str = "machines-token-0123456789abcdef";

    fn setup() -> (secrets::Vault, TokenConfig) {
        let vault = secrets::Vault::from_base64_key(&secrets::Vault::generate_key())
            .unwrap_or_else(|e| panic!("{e}"));
        let config = TokenConfig {
            tokens: vec![TokenCredential {
                id: uuid::Uuid::new_v4(),
                digest: vault.digest_token(&Secret::new(TOKEN)),
                hint: "…cdef".into(),
            }],
        };
        (vault, config)
    }

    const CLIENT: [u8; 4] = [127, 0, 0, 1];
    const SCOPE: Scope = Scope::Route(7);

    fn attempts_of(limiter: &Limiter) -> Attempts<'_> {
        Attempts {
            limiter,
            client: IpAddr::from(CLIENT),
            scope: SCOPE,
        }
    }

    fn allowed(outcome: &Outcome) -> bool {
        matches!(outcome, Outcome::Allow(_))
    }

    /// A client with costly checks in flight (as many as it may have) still gets its valid
    /// tokens through: a token check is never refused for being one of many at once.
    #[test]
    fn a_valid_token_is_never_refused_for_the_clients_other_checks() {
        let (vault, config) = setup();
        let limiter = Limiter::default();
        let attempts = attempts_of(&limiter);
        let begin = || limiter.begin(IpAddr::from(CLIENT), SCOPE);
        let in_flight: Vec<_> = std::iter::from_fn(|| begin().ok()).take(10).collect();
        assert!(begin().is_err(), "the client is busy");
        let bearer = format!("Bearer {TOKEN}");
        assert!(allowed(&check(&vault, &config, Some(&bearer), &attempts)));
        for attempt in in_flight {
            attempt.succeeded();
        }
    }

    #[test]
    fn wrong_tokens_are_counted_until_the_client_is_blocked() {
        let (vault, config) = setup();
        let limiter = Limiter::default();
        let attempts = attempts_of(&limiter);
        for _ in 0..MAX_FAILURES {
            assert!(attempts.blocked().is_none());
            assert!(!allowed(&check(
                &vault,
                &config,
                Some("Bearer wrong"),
                &attempts
            )));
        }
        assert!(attempts.blocked().is_some());
    }
}
