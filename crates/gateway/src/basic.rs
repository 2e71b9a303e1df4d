//! Basic auth (RFC 7617) against Argon2id hashes, with a short cache of successful checks keyed
//! by an HMAC of the credentials so Argon2 runs at most once a minute per client credential.
//!
//! Argon2id is the expensive part of the gateway (19 MiB and tens of milliseconds a run), and
//! unknown usernames cost a decoy run so timing does not tell who exists. So a run is only
//! started under a reserved failed attempt (the limit holds however many guesses arrive at once)
//! and through the process-wide [`Argon2Gate`]: one run per core, and past [`MAX_WAITING`]
//! waiting checks a request is answered 503 at once instead of queueing.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use domain::model::auth_server::{AuthServer, BasicConfig};
use hmac::{Hmac, Mac};
use http::StatusCode;
use http::header::{RETRY_AFTER, WWW_AUTHENTICATE};
use rand::RngCore;
use sha2::Sha256;

use secrets::{Argon2Gate, Queue};

use crate::outcome::{Attempts, Identity, Outcome, too_many};
use crate::problem::{problem, with_header};

const CACHE_TTL: Duration = Duration::from_secs(60);
const CACHE_MAX: usize = 10_000;
/// Password checks waiting for a core before new ones are turned away (503).
pub const MAX_WAITING: usize = 64;

/// Verifies Basic credentials; holds the per-process cache key and the cache.
pub struct BasicVerifier {
    key: [u8; 32],
    /// HMAC of (server, credential, stored hash, username, password) → when it was verified.
    cache: Mutex<HashMap<[u8; 32], Instant>>,
    /// One verification in flight per cache key: when the cache entry of a busy credential
    /// expires, the requests that miss it together wait for one Argon2id run instead of each
    /// running their own (64 at once took p99 past a second on two cores).
    flights: Mutex<HashMap<[u8; 32], std::sync::Arc<tokio::sync::Mutex<()>>>>,
}

impl Default for BasicVerifier {
    fn default() -> Self {
        let mut key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        BasicVerifier {
            key,
            cache: Mutex::new(HashMap::new()),
            flights: Mutex::new(HashMap::new()),
        }
    }
}

impl std::fmt::Debug for BasicVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicVerifier").finish_non_exhaustive()
    }
}

/// `username:password` from an Authorization value, split at the first colon.
pub fn parse(value: &str) -> Option<(String, String)> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

fn challenge(server: &AuthServer, basic: &BasicConfig, detail: &str) -> Outcome {
    let realm = basic.realm_or(server.name.as_str());
    Outcome::Deny(with_header(
        problem(StatusCode::UNAUTHORIZED, "unauthorized", detail),
        WWW_AUTHENTICATE,
        &format!("Basic realm=\"{realm}\""),
    ))
}

impl BasicVerifier {
    fn cache_key(&self, parts: &[&[u8]]) -> [u8; 32] {
        // A keyed hash: the cache never holds anything a password could be guessed from offline.
        let mut mac = match Hmac::<Sha256>::new_from_slice(&self.key) {
            Ok(mac) => mac,
            Err(_) => return [0u8; 32],
        };
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    fn cached(&self, key: &[u8; 32]) -> bool {
        let cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        cache.get(key).is_some_and(|at| at.elapsed() < CACHE_TTL)
    }

    fn remember(&self, key: [u8; 32]) {
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if cache.len() >= CACHE_MAX {
            cache.retain(|_, at| at.elapsed() < CACHE_TTL);
        }
        cache.insert(key, Instant::now());
    }

    pub async fn check(
        &self,
        server: &AuthServer,
        basic: &BasicConfig,
        authorization: Option<&str>,
        attempts: &Attempts<'_>,
    ) -> Outcome {
        let Some(value) = authorization else {
            return challenge(server, basic, "Authorization header missing");
        };
        let Some((username, password)) = parse(value) else {
            attempts.record_failure();
            return challenge(server, basic, "malformed Basic credentials");
        };
        let credential = basic.credentials.iter().find(|c| c.username == username);
        let key = credential.map(|c| {
            self.cache_key(&[
                server.id.as_bytes(),
                c.id.as_bytes(),
                c.password_hash.0.as_bytes(),
                username.as_bytes(),
                password.as_bytes(),
            ])
        });
        if !password.is_empty() && key.as_ref().is_some_and(|k| self.cached(k)) {
            return allow(username);
        }
        let flight = key.map(|k| {
            let mut flights = self
                .flights
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (k, flights.entry(k).or_default().clone())
        });
        let turn = match &flight {
            Some((_, f)) => Some(f.clone().lock_owned().await),
            None => None,
        };
        // The flight ahead of this one may have verified the same credentials.
        if !password.is_empty() && key.as_ref().is_some_and(|k| self.cached(k)) {
            drop(turn);
            self.land(flight);
            return allow(username);
        }
        // Counted before the check, given back if the password was right.
        let attempt = match attempts.begin() {
            Ok(a) => a,
            Err(refusal) => {
                drop(turn);
                self.land(flight);
                return Outcome::Deny(too_many(refusal));
            }
        };
        let hash = credential.map(|c| c.password_hash.clone());
        let candidate = password;
        // Unknown users cost one decoy verification, so timing does not tell who exists.
        let run = Argon2Gate::global()
            .run(Queue::AtMost(MAX_WAITING), move || match hash {
                Some(hash) => secrets::verify_password(&hash, &candidate),
                None => secrets::dummy_verify(&candidate),
            })
            .await;
        drop(turn);
        self.land(flight);
        let matched = match run {
            Ok(done) => done.unwrap_or(false) && key.is_some(),
            Err(secrets::Busy) => {
                // Not the client's fault: the attempt is not counted.
                attempt.succeeded();
                return Outcome::Deny(with_header(
                    problem(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "service_unavailable",
                        "too many password checks in progress; try again shortly",
                    ),
                    RETRY_AFTER,
                    "1",
                ));
            }
        };
        if matched {
            attempt.succeeded();
            if let Some(key) = key {
                self.remember(key);
            }
            allow(username)
        } else {
            attempt.failed();
            challenge(server, basic, "invalid credentials")
        }
    }

    /// Forgets a flight once nobody else waits on it.
    fn land(&self, flight: Option<([u8; 32], std::sync::Arc<tokio::sync::Mutex<()>>)>) {
        if let Some((key, f)) = flight {
            let mut flights = self
                .flights
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Ours and the map's: no one else holds it.
            if std::sync::Arc::strong_count(&f) <= 2 {
                flights.remove(&key);
            }
        }
    }
}

fn allow(username: String) -> Outcome {
    Outcome::Allow(Identity {
        headers: vec![("x-auth-user", username)],
        forward_authorization: false,
        by_session_cookie: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_splits_at_the_first_colon() {
        let b64 = base64::engine::general_purpose::STANDARD.encode("bob:pa:ss:");
        assert_eq!(
            parse(&format!("Basic {b64}")),
            Some(("bob".into(), "pa:ss:".into()))
        );
        assert_eq!(
            parse(&format!("basic  {b64}")),
            Some(("bob".into(), "pa:ss:".into()))
        );
        assert_eq!(parse("Basic !!!notbase64"), None);
        let no_colon = base64::engine::general_purpose::STANDARD.encode("bob");
        assert_eq!(parse(&format!("Basic {no_colon}")), None);
        assert_eq!(parse(&format!("Bearer {b64}")), None);
    }
}
