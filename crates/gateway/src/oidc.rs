//! OIDC: Bearer JWTs verified against the issuer's JWKS, and the browser code flow (state,
//! nonce, PKCE S256) ending in an encrypted session cookie bound to one auth server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use domain::model::auth_server::{AuthServer, ClaimNames, OidcConfig};
use domain::ports::secrets::SecretVault;
use hmac::{Hmac, Mac};
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::outcome::{Identity, Outcome};
use crate::problem::problem;
use crate::token::{bearer, refuse};

/// Every session cookie's name starts so; the rest is the auth server's id.
pub const SESSION_COOKIE_PREFIX: &str = "gateway_session_";
const SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
const LOGIN_TTL: Duration = Duration::from_secs(600);
const MAX_PENDING: usize = 10_000;
const LEEWAY_S: u64 = 60;
const ALLOWED: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];

#[derive(Debug, thiserror::Error)]
pub enum OidcError {
    /// The provider could not be reached or answered nonsense.
    #[error("the OpenID provider is unavailable: {0}")]
    Unavailable(String),
    /// The token is not acceptable; the reason is for logs, never for the client.
    #[error("invalid token: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Deserialize)]
struct Discovery {
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
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
}

struct PendingLogin {
    server_id: Uuid,
    nonce: String,
    verifier: String,
    redirect_uri: String,
    return_to: String,
    created: Instant,
}

#[derive(Serialize, Deserialize)]
struct Session {
    /// The auth server it was made for.
    s: Uuid,
    /// Expiry, Unix seconds.
    e: u64,
    /// The identity headers.
    h: Vec<(String, String)>,
}

/// The OIDC side of the gateway: provider caches, logins in progress, the session key.
pub struct Oidc {
    http: reqwest::Client,
    providers: Mutex<HashMap<String, Arc<tokio::sync::Mutex<ProviderState>>>>,
    pending: Mutex<HashMap<String, PendingLogin>>,
    session: ChaCha20Poly1305,
    vault: secrets::Vault,
    min_refresh: Duration,
    /// Bearer tokens already verified (SHA-256 of issuer, client id and token → claims and
    /// when to forget them), so an RSA check runs once per token and minute, not per request.
    verified: Mutex<HashMap<[u8; 32], Verified>>,
}

/// A verified token's claims and when to forget them.
type Verified = (Map<String, Value>, Instant);

/// How long a verified bearer token is trusted without checking its signature again (never
/// past its `exp`); also bounds how long a key removed from the issuer's JWKS keeps working.
const VERIFIED_TTL: Duration = Duration::from_secs(60);
/// Entries kept at most; the cache is cleared when full (tokens are re-verified, nothing breaks).
const VERIFIED_MAX: usize = 10_000;

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc").finish_non_exhaustive()
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn random_b64(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::rngs::OsRng.fill_bytes(&mut buf);
    URL_SAFE_NO_PAD.encode(buf)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether the host of `authorized_domain` (port removed) is a loopback name (RFC 8252).
pub fn is_loopback(authorized_domain: &str) -> bool {
    let host = match authorized_domain.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => authorized_domain.split(':').next().unwrap_or(""),
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// `https://<authorized_domain><redirect_path>`, `http` for a loopback host.
pub fn redirect_uri(config: &OidcConfig) -> String {
    let scheme = if is_loopback(&config.authorized_domain) {
        "http"
    } else {
        "https"
    };
    format!(
        "{scheme}://{}{}",
        config.authorized_domain, config.redirect_path
    )
}

fn session_cookie_name(server_id: Uuid) -> String {
    format!("{SESSION_COOKIE_PREFIX}{}", server_id.simple())
}

fn claim_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(claim_text)
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => None,
    }
}

/// The configured claims as `X-Auth-*` headers.
pub fn claim_headers(
    names: &ClaimNames,
    claims: &Map<String, Value>,
) -> Vec<(&'static str, String)> {
    [
        ("x-auth-user", &names.username_claim),
        ("x-auth-email", &names.email_claim),
        ("x-auth-role", &names.role_claim),
        ("x-auth-groups", &names.group_claim),
    ]
    .into_iter()
    .filter_map(|(header, claim)| {
        let value = claims.get(claim.as_deref()?)?;
        let text = claim_text(value)?;
        // A header value holds no control characters; a claim that does is not passed.
        (!text.chars().any(char::is_control)).then_some((header, text))
    })
    .collect()
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

impl Oidc {
    pub fn new(secrets_key: &str, vault: secrets::Vault, min_refresh: Duration) -> Oidc {
        // The cookie key is derived from SECRETS_KEY for this one use, so a cookie never opens
        // a sealed secret and the other way round.
        let derived: [u8; 32] =
            match <Hmac<Sha256> as Mac>::new_from_slice(secrets_key.trim().as_bytes()) {
                Ok(mut mac) => {
                    mac.update(b"gateway session cookie v1");
                    mac.finalize().into_bytes().into()
                }
                Err(_) => [0u8; 32],
            };
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        Oidc {
            http,
            providers: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            verified: Mutex::new(HashMap::new()),
            session: ChaCha20Poly1305::new(Key::from_slice(&derived)),
            vault,
            min_refresh,
        }
    }

    fn provider(&self, issuer: &str) -> Arc<tokio::sync::Mutex<ProviderState>> {
        lock(&self.providers)
            .entry(issuer.to_owned())
            .or_default()
            .clone()
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Result<T, OidcError> {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| OidcError::Unavailable(e.without_url().to_string()))?;
        if !response.status().is_success() {
            return Err(OidcError::Unavailable(format!(
                "{url} answered {}",
                response.status()
            )));
        }
        response
            .json()
            .await
            .map_err(|e| OidcError::Unavailable(format!("{url}: {}", e.without_url())))
    }

    async fn discovery_in(
        &self,
        issuer: &str,
        state: &mut ProviderState,
    ) -> Result<Discovery, OidcError> {
        if let Some(d) = &state.discovery {
            return Ok(d.clone());
        }
        let url = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        );
        let d: Discovery = self.get_json(&url).await?;
        state.discovery = Some(d.clone());
        Ok(d)
    }

    async fn discovery(&self, issuer: &str) -> Result<Discovery, OidcError> {
        let provider = self.provider(issuer);
        let mut state = provider.lock().await;
        self.discovery_in(issuer, &mut state).await
    }

    async fn fetch_keys(&self, issuer: &str, state: &mut ProviderState) -> Result<(), OidcError> {
        let discovery = self.discovery_in(issuer, state).await?;
        #[derive(Deserialize)]
        struct Set {
            keys: Vec<Value>,
        }
        let set: Set = self.get_json(&discovery.jwks_uri).await?;
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

    /// Verifies a JWT of `issuer`; `nonce` is checked for ID tokens.
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
        let cache_key = nonce.is_none().then(|| {
            use sha2::{Digest, Sha256};
            let mut h = Sha256::new();
            for part in [issuer, config.client_id.as_str(), token] {
                h.update(part.as_bytes());
                h.update([0u8]);
            }
            <[u8; 32]>::from(h.finalize())
        });
        if let Some(k) = &cache_key {
            if let Some((claims, until)) = lock(&self.verified).get(k) {
                if *until > Instant::now() {
                    return Ok(claims.clone());
                }
            }
        }
        let provider = self.provider(issuer);
        let mut state = provider.lock().await;
        if state.fetched_at.is_none() {
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
                    }
                    if let Some(k) = cache_key {
                        let exp = claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
                        let left = Duration::from_secs(exp.saturating_sub(now_s()));
                        let mut cache = lock(&self.verified);
                        if cache.len() >= VERIFIED_MAX {
                            cache.clear();
                        }
                        cache.insert(k, (claims.clone(), Instant::now() + left.min(VERIFIED_TTL)));
                    }
                    return Ok(claims);
                }
                Err(e) => last = e.to_string(),
            }
        }
        Err(OidcError::Invalid(last))
    }

    fn open_session(&self, server_id: Uuid, req: &HttpRequest) -> Option<Vec<(String, String)>> {
        let cookie = req.cookie(&session_cookie_name(server_id))?;
        let raw = URL_SAFE_NO_PAD.decode(cookie.value()).ok()?;
        if raw.len() < 12 {
            return None;
        }
        let (nonce, ciphertext) = raw.split_at(12);
        let aad = format!("gateway-session-v1:{server_id}");
        let plain = self
            .session
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: aad.as_bytes(),
                },
            )
            .ok()?;
        let session: Session = serde_json::from_slice(&plain).ok()?;
        (session.s == server_id && session.e > now_s()).then_some(session.h)
    }

    fn seal_session(&self, session: &Session) -> Option<String> {
        let plain = serde_json::to_vec(session).ok()?;
        let mut nonce = [0u8; 12];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let aad = format!("gateway-session-v1:{}", session.s);
        let ciphertext = self
            .session
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &plain,
                    aad: aad.as_bytes(),
                },
            )
            .ok()?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&ciphertext);
        Some(URL_SAFE_NO_PAD.encode(out))
    }

    /// Decides a request on an OIDC route.
    pub async fn check(
        &self,
        server: &AuthServer,
        config: &OidcConfig,
        req: &HttpRequest,
    ) -> Outcome {
        if let Some(value) = req.headers().get(header::AUTHORIZATION) {
            let token = match bearer(value) {
                Ok(t) => t,
                Err(detail) => return refuse(detail, true),
            };
            return match self.verify(config, token, None).await {
                Ok(claims) => Outcome::Allow(Identity {
                    headers: claim_headers(&config.claims, &claims),
                    forward_authorization: true,
                }),
                Err(OidcError::Invalid(reason)) => {
                    tracing::info!(auth_server = %server.id, %reason, "bearer token refused");
                    refuse("invalid bearer token", true)
                }
                Err(e @ OidcError::Unavailable(_)) => unavailable(&e),
            };
        }
        if let Some(headers) = self.open_session(server.id, req) {
            return Outcome::Allow(Identity {
                headers: headers
                    .into_iter()
                    .filter_map(|(name, value)| {
                        let name = match name.as_str() {
                            "x-auth-user" => "x-auth-user",
                            "x-auth-email" => "x-auth-email",
                            "x-auth-role" => "x-auth-role",
                            "x-auth-groups" => "x-auth-groups",
                            _ => return None,
                        };
                        Some((name, value))
                    })
                    .collect(),
                forward_authorization: false,
            });
        }
        let browser = req
            .headers()
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("text/html"));
        let navigable = matches!(req.method().as_str(), "GET" | "HEAD");
        if browser && navigable {
            return match self.begin_login(server, config, req).await {
                Ok(response) => Outcome::Deny {
                    response,
                    failed: false,
                },
                Err(e) => unavailable(&e),
            };
        }
        refuse("Authorization header missing", false)
    }

    async fn begin_login(
        &self,
        server: &AuthServer,
        config: &OidcConfig,
        req: &HttpRequest,
    ) -> Result<HttpResponse, OidcError> {
        let discovery = self.discovery(&config.issuer_url).await?;
        let state = random_b64(32);
        let nonce = random_b64(32);
        let verifier = random_b64(32);
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        let redirect_uri = redirect_uri(config);
        let mut location = url::Url::parse(&discovery.authorization_endpoint)
            .map_err(|_| OidcError::Unavailable("bad authorization_endpoint".into()))?;
        location
            .query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &config.client_id)
            .append_pair("redirect_uri", &redirect_uri)
            .append_pair("scope", "openid profile email")
            .append_pair("state", &state)
            .append_pair("nonce", &nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        let return_to = match req.uri().path_and_query() {
            Some(pq) => pq.as_str().to_owned(),
            None => "/".to_owned(),
        };
        {
            let mut pending = lock(&self.pending);
            if pending.len() >= MAX_PENDING {
                pending.retain(|_, p| p.created.elapsed() < LOGIN_TTL);
            }
            if pending.len() >= MAX_PENDING {
                return Err(OidcError::Unavailable(
                    "too many sign-ins in progress".into(),
                ));
            }
            pending.insert(
                state,
                PendingLogin {
                    server_id: server.id,
                    nonce,
                    verifier,
                    redirect_uri,
                    return_to,
                    created: Instant::now(),
                },
            );
        }
        Ok(HttpResponse::Found()
            .insert_header((header::LOCATION, location.as_str()))
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .finish())
    }

    /// Finishes a login at `redirect_path`: `servers` are the OIDC servers answering there.
    pub async fn callback(&self, req: &HttpRequest, servers: &[Arc<AuthServer>]) -> HttpResponse {
        let query: HashMap<String, String> =
            url::form_urlencoded::parse(req.query_string().as_bytes())
                .into_owned()
                .collect();
        let refused = |detail: &str| problem(StatusCode::BAD_REQUEST, "bad_request", detail);
        let Some(state) = query.get("state") else {
            return refused("the sign-in callback has no state");
        };
        // Taken out at once: a state (and the code it came with) is good for one try only.
        let Some(login) = lock(&self.pending).remove(state) else {
            return refused("unknown or expired sign-in state");
        };
        if login.created.elapsed() > LOGIN_TTL {
            return refused("unknown or expired sign-in state");
        }
        let Some(server) = servers.iter().find(|s| s.id == login.server_id) else {
            return refused("unknown or expired sign-in state");
        };
        let Some(config) = crate::registry::oidc(server) else {
            return refused("unknown or expired sign-in state");
        };
        if query.contains_key("error") {
            return problem(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "the identity provider refused the sign-in",
            );
        }
        let Some(code) = query.get("code") else {
            return refused("the sign-in callback has no code");
        };
        match self.finish_login(server, config, &login, code).await {
            Ok(cookie) => {
                // `return_to` was taken from this gateway's own request line: a path, never
                // another origin; `//host` and `\` forms are refused all the same.
                let target = if login.return_to.starts_with('/')
                    && !login.return_to.starts_with("//")
                    && !login.return_to.contains('\\')
                {
                    login.return_to.clone()
                } else {
                    "/".to_owned()
                };
                HttpResponse::Found()
                    .insert_header((header::LOCATION, target))
                    .insert_header((header::CACHE_CONTROL, "no-store"))
                    .insert_header((header::SET_COOKIE, cookie))
                    .finish()
            }
            Err(OidcError::Invalid(reason)) => {
                tracing::info!(auth_server = %server.id, %reason, "sign-in refused");
                problem(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "the sign-in could not be completed",
                )
            }
            Err(e) => match unavailable(&e) {
                Outcome::Deny { response, .. } => response,
                Outcome::Allow(_) => refused("sign-in failed"),
            },
        }
    }

    async fn finish_login(
        &self,
        server: &AuthServer,
        config: &OidcConfig,
        login: &PendingLogin,
        code: &str,
    ) -> Result<String, OidcError> {
        let discovery = self.discovery(&config.issuer_url).await?;
        let secret = self
            .vault
            .open(&config.client_secret)
            .map_err(|_| OidcError::Unavailable("the client secret cannot be opened".into()))?;
        let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
        let basic = base64::engine::general_purpose::STANDARD.encode(format!(
            "{}:{}",
            enc(&config.client_id),
            enc(secret.expose())
        ));
        let response = self
            .http
            .post(&discovery.token_endpoint)
            .header(header::AUTHORIZATION.as_str(), format!("Basic {basic}"))
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", code),
                ("redirect_uri", login.redirect_uri.as_str()),
                ("code_verifier", login.verifier.as_str()),
            ])
            .send()
            .await
            .map_err(|e| OidcError::Unavailable(e.without_url().to_string()))?;
        if response.status().is_server_error() {
            return Err(OidcError::Unavailable(format!(
                "token endpoint answered {}",
                response.status()
            )));
        }
        if !response.status().is_success() {
            return Err(OidcError::Invalid(format!(
                "token endpoint answered {}",
                response.status()
            )));
        }
        #[derive(Deserialize)]
        struct TokenResponse {
            id_token: Option<String>,
        }
        let tokens: TokenResponse = response
            .json()
            .await
            .map_err(|e| OidcError::Unavailable(e.without_url().to_string()))?;
        let id_token = tokens
            .id_token
            .ok_or_else(|| OidcError::Invalid("no id_token in the token response".into()))?;
        let claims = self.verify(config, &id_token, Some(&login.nonce)).await?;
        let session = Session {
            s: server.id,
            e: now_s() + SESSION_TTL.as_secs(),
            h: claim_headers(&config.claims, &claims)
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v))
                .collect(),
        };
        let value = self
            .seal_session(&session)
            .ok_or_else(|| OidcError::Unavailable("cannot seal the session".into()))?;
        let secure =
            if is_loopback(&config.authorized_domain) && login.redirect_uri.starts_with("http:") {
                ""
            } else {
                "; Secure"
            };
        Ok(format!(
            "{}={value}; Path=/; Max-Age={}; HttpOnly; SameSite=Lax{secure}",
            session_cookie_name(server.id),
            SESSION_TTL.as_secs()
        ))
    }
}

fn unavailable(e: &OidcError) -> Outcome {
    tracing::warn!(error = %e, "OpenID provider unavailable");
    Outcome::Deny {
        response: problem(
            StatusCode::BAD_GATEWAY,
            "auth_backend_unavailable",
            "the identity provider is unavailable",
        ),
        failed: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_get_http_redirects() {
        assert!(is_loopback("localhost:8443"));
        assert!(is_loopback("127.0.0.1"));
        assert!(is_loopback("[::1]:80"));
        assert!(!is_loopback("app.example.com"));
        assert!(!is_loopback("localhost.example.com"));
    }

    #[test]
    fn array_claims_are_joined_with_commas() {
        let names = ClaimNames {
            username_claim: Some("preferred_username".into()),
            email_claim: None,
            role_claim: Some("role".into()),
            group_claim: Some("groups".into()),
        };
        let claims = serde_json::json!({"preferred_username": "alice", "groups": ["a", "b"], "role": "admin"});
        let claims = claims.as_object().cloned().unwrap_or_default();
        let headers = claim_headers(&names, &claims);
        assert_eq!(
            headers,
            vec![
                ("x-auth-user", "alice".to_owned()),
                ("x-auth-role", "admin".to_owned()),
                ("x-auth-groups", "a,b".to_owned())
            ]
        );
    }
}
