//! An OpenID provider as the gateway uses it: its discovery document and signing keys (fetched
//! through the outbound guard, cached per issuer), and the verification of its JWTs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use domain::model::auth_server::OidcConfig;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::outbound::{Outbound, OutboundError};

const LEEWAY_S: u64 = 60;
const ALLOWED: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];
/// How long a verified bearer token is trusted without checking its signature again (never
/// past its `exp`); also bounds how long a key removed from the issuer's JWKS keeps working.
const VERIFIED_TTL: Duration = Duration::from_secs(60);
/// Entries kept at most; the cache is cleared when full (tokens are re-verified, nothing breaks).
const VERIFIED_MAX: usize = 10_000;
/// After a provider failed to answer, requests are answered "unavailable" at once for this long
/// instead of each waiting on another fetch.
const OUTAGE_HOLD: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The provider could not be reached, is not allowed, or answered nonsense.
    #[error("the OpenID provider is unavailable: {0}")]
    Unavailable(String),
    /// The token is not acceptable; the reason is for logs, never for the client.
    #[error("invalid token: {0}")]
    Invalid(String),
}

impl From<OutboundError> for OidcError {
    fn from(e: OutboundError) -> Self {
        OidcError::Unavailable(e.to_string())
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct Discovery {
    issuer: String,
    pub authorization_endpoint: url::Url,
    pub token_endpoint: url::Url,
    jwks_uri: url::Url,
}

#[derive(Clone)]
struct VerifyKey {
    kid: Option<String>,
    alg: Algorithm,
    key: DecodingKey,
}

#[derive(Default)]
struct ProviderState {
    discovery: Option<Discovery>,
    keys: Vec<VerifyKey>,
    fetched_at: Option<Instant>,
    failed_at: Option<Instant>,
}

/// A verified token's claims and when to forget them.
type Verified = (Map<String, Value>, Instant);

/// The providers of every configured issuer.
pub struct Providers {
    outbound: Outbound,
    /// Hosts besides the issuer's own that `jwks_uri` and `token_endpoint` may name.
    endpoint_hosts: Vec<String>,
    min_refresh: Duration,
    states: Mutex<HashMap<String, Arc<tokio::sync::Mutex<ProviderState>>>>,
    /// Bearer tokens already verified (SHA-256 of issuer, client id and token), so an RSA check
    /// runs once per token and minute, not per request.
    verified: Mutex<HashMap<[u8; 32], Verified>>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Providers").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The key a JWK verifies with, if it is a signing key of an allowed algorithm.
fn verify_key(jwk: &Jwk) -> Option<VerifyKey> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
        return None;
    }
    let alg = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(p) if p.curve == EllipticCurve::P256 => Algorithm::ES256,
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    let declared_ok = match jwk.common.key_algorithm {
        None => true,
        Some(KeyAlgorithm::RS256) => alg == Algorithm::RS256,
        Some(KeyAlgorithm::ES256) => alg == Algorithm::ES256,
        Some(KeyAlgorithm::EdDSA) => alg == Algorithm::EdDSA,
        Some(_) => false,
    };
    if !declared_ok {
        return None;
    }
    Some(VerifyKey {
        kid: jwk.common.key_id.clone(),
        alg,
        key: DecodingKey::from_jwk(jwk).ok()?,
    })
}

fn audience_ok(claims: &Map<String, Value>, client_id: &str) -> bool {
    let in_aud = match claims.get("aud") {
        Some(Value::String(a)) => a == client_id,
        Some(Value::Array(a)) => a.iter().any(|v| v.as_str() == Some(client_id)),
        _ => false,
    };
    in_aud
        || claims.get("azp").and_then(Value::as_str) == Some(client_id)
        || claims.get("client_id").and_then(Value::as_str) == Some(client_id)
}

fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

impl Providers {
    pub fn new(outbound: Outbound, endpoint_hosts: Vec<String>, min_refresh: Duration) -> Self {
        Providers {
            outbound,
            endpoint_hosts,
            min_refresh,
            states: Mutex::new(HashMap::new()),
            verified: Mutex::new(HashMap::new()),
        }
    }

    fn state(&self, issuer: &str) -> Arc<tokio::sync::Mutex<ProviderState>> {
        lock(&self.states)
            .entry(issuer.to_owned())
            .or_default()
            .clone()
    }

    /// Whether `url` may be fetched on the issuer's behalf: its origin, or a host the operator
    /// listed. A discovery document naming another origin would otherwise decide where the
    /// gateway sends the client secret.
    fn endpoint_allowed(&self, issuer: &url::Url, url: &url::Url) -> bool {
        url.origin() == issuer.origin()
            || url.host_str().is_some_and(|h| {
                self.endpoint_hosts
                    .iter()
                    .any(|allowed| allowed.eq_ignore_ascii_case(h))
            })
    }

    async fn discovery_in(
        &self,
        issuer: &str,
        state: &mut ProviderState,
    ) -> Result<Discovery, OidcError> {
        if let Some(d) = &state.discovery {
            return Ok(d.clone());
        }
        if state.failed_at.is_some_and(|at| at.elapsed() < OUTAGE_HOLD) {
            return Err(OidcError::Unavailable("failed moments ago".into()));
        }
        let result = self.fetch_discovery(issuer).await;
        match &result {
            Ok(d) => state.discovery = Some(d.clone()),
            Err(_) => state.failed_at = Some(Instant::now()),
        }
        result
    }

    async fn fetch_discovery(&self, issuer: &str) -> Result<Discovery, OidcError> {
        let issuer_url = url::Url::parse(issuer)
            .map_err(|_| OidcError::Unavailable("the issuer is not a URL".into()))?;
        let url = url::Url::parse(&format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ))
        .map_err(|_| OidcError::Unavailable("the issuer is not a URL".into()))?;
        let d: Discovery = self.outbound.get_json(&url).await?;
        // OpenID Connect Discovery 1.0 §4.3: the document speaks for exactly this issuer.
        if !same_issuer(&d.issuer, issuer) {
            return Err(OidcError::Unavailable(
                "the discovery document names another issuer".into(),
            ));
        }
        for (what, endpoint) in [
            ("jwks_uri", &d.jwks_uri),
            ("token_endpoint", &d.token_endpoint),
        ] {
            if !self.endpoint_allowed(&issuer_url, endpoint) {
                return Err(OidcError::Unavailable(format!(
                    "{what} is not on the issuer's origin (GATEWAY_OIDC_ENDPOINT_HOSTS lists others)"
                )));
            }
            self.outbound.check(endpoint)?;
        }
        // Browsers are sent there: https, or http to a loopback host, nothing else.
        self.outbound.check(&d.authorization_endpoint)?;
        Ok(d)
    }

    pub async fn discovery(&self, issuer: &str) -> Result<Discovery, OidcError> {
        let state = self.state(issuer);
        let mut state = state.lock().await;
        self.discovery_in(issuer, &mut state).await
    }

    async fn fetch_keys(&self, issuer: &str, state: &mut ProviderState) -> Result<(), OidcError> {
        let discovery = self.discovery_in(issuer, state).await?;
        #[derive(Deserialize)]
        struct Set {
            keys: Vec<Value>,
        }
        let set: Set = match self.outbound.get_json(&discovery.jwks_uri).await {
            Ok(set) => set,
            Err(e) => {
                state.failed_at = Some(Instant::now());
                return Err(e.into());
            }
        };
        // One odd key (an encryption key, an unknown type) must not hide the others.
        state.keys = set
            .keys
            .into_iter()
            .filter_map(|k| serde_json::from_value::<Jwk>(k).ok())
            .filter_map(|k| verify_key(&k))
            .collect();
        state.fetched_at = Some(Instant::now());
        // New keys (a rotation): tokens trusted under the old ones are checked again.
        lock(&self.verified).clear();
        Ok(())
    }

    fn cache_key(config: &OidcConfig, token: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        for part in [config.issuer_url.as_str(), config.client_id.as_str(), token] {
            h.update(part.as_bytes());
            h.update([0u8]);
        }
        h.finalize().into()
    }

    /// The claims of a bearer token verified less than a minute ago, without any work.
    pub fn recently_verified(
        &self,
        config: &OidcConfig,
        token: &str,
    ) -> Option<Map<String, Value>> {
        let key = Self::cache_key(config, token);
        let cache = lock(&self.verified);
        cache
            .get(&key)
            .filter(|(_, until)| *until > Instant::now())
            .map(|(claims, _)| claims.clone())
    }

    /// Verifies a JWT of the configured issuer; `nonce` is checked (and the result not cached)
    /// for ID tokens.
    pub async fn verify(
        &self,
        config: &OidcConfig,
        token: &str,
        nonce: Option<&str>,
    ) -> Result<Map<String, Value>, OidcError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| OidcError::Invalid(format!("header: {e}")))?;
        if !ALLOWED.contains(&header.alg) {
            return Err(OidcError::Invalid(format!(
                "algorithm {:?} not allowed",
                header.alg
            )));
        }
        let issuer = config.issuer_url.as_str();
        let state = self.state(issuer);
        let mut state = state.lock().await;
        if state.fetched_at.is_none() {
            if state.failed_at.is_some_and(|at| at.elapsed() < OUTAGE_HOLD) {
                return Err(OidcError::Unavailable("failed moments ago".into()));
            }
            self.fetch_keys(issuer, &mut state).await?;
        }
        let fits =
            |k: &VerifyKey| k.alg == header.alg && (header.kid.is_none() || k.kid == header.kid);
        if !state.keys.iter().any(fits)
            && header.kid.is_some()
            && state
                .fetched_at
                .is_none_or(|at| at.elapsed() >= self.min_refresh)
        {
            // An unknown kid may be a rotated key: fetch again, but not more often than allowed.
            self.fetch_keys(issuer, &mut state).await?;
        }
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_S;
        validation.validate_nbf = true;
        validation.validate_aud = false;
        validation.set_issuer(&[issuer]);
        validation.set_required_spec_claims(&["exp", "iss"]);
        // Verify outside the issuer's lock: signature checks of one issuer run in parallel.
        let keys: Vec<VerifyKey> = state.keys.iter().filter(|k| fits(k)).cloned().collect();
        drop(state);
        let mut last = String::from("no key of the issuer fits");
        for key in &keys {
            match jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation) {
                Ok(data) => {
                    let claims = data.claims;
                    if !audience_ok(&claims, &config.client_id) {
                        return Err(OidcError::Invalid("audience".into()));
                    }
                    if let Some(expected) = nonce {
                        if claims.get("nonce").and_then(Value::as_str) != Some(expected) {
                            return Err(OidcError::Invalid("nonce".into()));
                        }
                    } else {
                        self.remember(config, token, &claims);
                    }
                    return Ok(claims);
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(OidcError::Invalid(last))
    }

    fn remember(&self, config: &OidcConfig, token: &str, claims: &Map<String, Value>) {
        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        let left = Duration::from_secs(exp.saturating_sub(now_s()));
        let mut cache = lock(&self.verified);
        if cache.len() >= VERIFIED_MAX {
            cache.clear();
        }
        cache.insert(
            Self::cache_key(config, token),
            (claims.clone(), Instant::now() + left.min(VERIFIED_TTL)),
        );
    }
}
