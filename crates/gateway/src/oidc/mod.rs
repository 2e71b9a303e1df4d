//! OIDC: Bearer JWTs verified against the issuer's keys, and the browser code flow (state,
//! nonce, PKCE S256) ending in a sealed session cookie bound to one auth server and the version
//! of its configuration. Nothing a browser sends before it has signed in is kept by the gateway.
//! A session signed out (`signout.rs`) is no session any more, on every gateway sharing the
//! database ([`Revocations`]).

mod claims;
mod login;
mod provider;
mod session;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use domain::model::auth_server::{AuthServer, OidcConfig};
use domain::model::session::SessionSubject;
use domain::ports::secrets::SecretVault;
use domain::ports::storage::{SessionStore, StoreError};
use http::StatusCode;
use http::header;
use rand::RngCore;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use store_postgres::PgStore;
use subtle::ConstantTimeEq;
use uuid::Uuid;

pub use provider::OidcError;

use crate::body::Response;
use crate::cookies::{self, Sealer};
use crate::outbound::Outbound;
use crate::outcome::{Attempts, Facts, Identity, Outcome, too_many};
use crate::problem::{found, problem, with_header};
use crate::revocations::Revocations;
use crate::token::{bearer, refuse};
use login::PendingLogin;
pub use login::local_path;
use provider::Providers;
use session::{Issued, Session};

/// What the OIDC side is configured with.
#[derive(Debug, Clone)]
pub struct OidcSettings {
    pub min_refresh: Duration,
    pub session_ttl: Duration,
    /// Part of the session cookie key: changing it ends every session.
    pub session_epoch: String,
    /// Hosts besides an issuer's own its `jwks_uri` and `token_endpoint` may be on.
    pub endpoint_hosts: Vec<String>,
}

/// The OIDC side of the gateway: provider caches and the cookie keys.
pub struct Oidc {
    providers: Providers,
    outbound: Outbound,
    vault: secrets::Vault,
    logins: Sealer,
    sessions: Sealer,
    session_ttl: Duration,
    /// Sessions ended before their time.
    revocations: Revocations,
}

/// A session cookie a sign-out found: its name, and whether it is the Secure one (so it is
/// cleared with the attributes it was set with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Presented {
    pub name: String,
    pub secure: bool,
}

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
    let scheme = if secure(config) { "https" } else { "http" };
    format!(
        "{scheme}://{}{}",
        config.authorized_domain, config.redirect_path
    )
}

/// Whether this server's cookies are Secure: always, except on a loopback host over http.
fn secure(config: &OidcConfig) -> bool {
    !is_loopback(&config.authorized_domain)
}

/// The OIDC configuration of a server, if it is one.
pub fn config_of(server: &AuthServer) -> Option<&OidcConfig> {
    match &server.config {
        domain::model::auth_server::AuthServerConfig::Oidc(c) => Some(c),
        _ => None,
    }
}

fn unavailable(e: &OidcError) -> Response {
    tracing::warn!(error = %e, "OpenID provider unavailable");
    problem(
        StatusCode::BAD_GATEWAY,
        "auth_backend_unavailable",
        "the identity provider is unavailable",
    )
}

fn no_store(mut response: Response) -> Response {
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    response
}

impl Oidc {
    pub fn new(
        vault: secrets::Vault,
        outbound: Outbound,
        settings: &OidcSettings,
        revocations: Revocations,
    ) -> Oidc {
        // One key per purpose, derived from each key of the SECRETS_KEY ring: a cookie never opens a sealed secret
        // and a login cookie never passes for a session. v3: sessions made before claim values
        // were trimmed and refused when they could read as several carry headers made under
        // the old rule, so none of them opens any more.
        let session_purpose = format!("gateway session cookie v3\0{}", settings.session_epoch);
        let logins = Sealer::new(vault.derive_keys("gateway login cookie v1"), "login");
        let sessions = Sealer::new(vault.derive_keys(&session_purpose), "session");
        Oidc {
            providers: Providers::new(
                outbound.clone(),
                settings.endpoint_hosts.clone(),
                settings.min_refresh,
            ),
            outbound,
            vault,
            logins,
            sessions,
            session_ttl: settings.session_ttl,
            revocations,
        }
    }

    /// Decides a request on an OIDC route.
    pub async fn check(
        &self,
        server: &AuthServer,
        config: &OidcConfig,
        facts: &Facts<'_>,
        attempts: &Attempts<'_>,
    ) -> Outcome {
        if let Some(value) = facts.authorization {
            let token = match bearer(value) {
                Ok(t) => t,
                Err(detail) => {
                    attempts.record_failure();
                    return refuse(detail, true);
                }
            };
            let identity = |claims: &serde_json::Map<String, serde_json::Value>| {
                Outcome::Allow(Identity {
                    headers: claims::headers(&config.claims, claims),
                    forward_authorization: true,
                    by_session_cookie: false,
                })
            };
            if let Some(claims) = self.providers.recently_verified(config, token) {
                return identity(&claims);
            }
            // A signature check: microseconds, not reserved, counted only if it fails (see
            // ratelimit.rs), so a client's many requests at once are all answered even while
            // the issuer's keys are fetched.
            return match self.providers.verify(config, token, None).await {
                Ok(claims) => identity(&claims),
                Err(OidcError::Invalid(reason)) => {
                    attempts.record_failure();
                    tracing::info!(auth_server = %server.id, %reason, "bearer token refused");
                    refuse("invalid bearer token", true)
                }
                // Not the client's fault: not counted.
                Err(e @ OidcError::Unavailable(_)) => Outcome::Deny(unavailable(&e)),
            };
        }
        if let Some(headers) = self.session(server, config, facts) {
            return Outcome::Allow(Identity {
                headers,
                forward_authorization: false,
                by_session_cookie: true,
            });
        }
        if facts.accepts_html && facts.navigable {
            return Outcome::Deny(match self.begin_login(server, config, facts).await {
                Ok(response) => response,
                Err(e) => unavailable(&e),
            });
        }
        refuse("Authorization header missing", false)
    }

    /// The identity headers of a live session of `server` in the request's cookies.
    fn session(
        &self,
        server: &AuthServer,
        config: &OidcConfig,
        facts: &Facts<'_>,
    ) -> Option<Vec<(&'static str, String)>> {
        let name = session::cookie_name(server.id, secure(config));
        let value = cookies::find(&facts.cookies, &name)?;
        let stored: Session = self.sessions.open(&name, value)?;
        if stored
            .standing()
            .is_some_and(|standing| self.revocations.ends(&standing))
        {
            return None;
        }
        let headers = session::accept(
            stored,
            server.id,
            &session::version(server, config),
            now_s(),
        )?;
        Some(
            headers
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
        )
    }

    async fn begin_login(
        &self,
        server: &AuthServer,
        config: &OidcConfig,
        facts: &Facts<'_>,
    ) -> Result<Response, OidcError> {
        let discovery = self.providers.discovery(&config.issuer_url).await?;
        let login = PendingLogin {
            server: server.id,
            version: session::version(server, config),
            state: random_b64(32),
            nonce: random_b64(32),
            verifier: random_b64(32),
            return_to: login::return_to(facts.path, facts.query),
            expires: now_s() + login::LOGIN_TTL_S,
        };
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(login.verifier.as_bytes()));
        let mut location = discovery.authorization_endpoint.clone();
        location
            .query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &config.client_id)
            .append_pair("redirect_uri", &redirect_uri(config))
            .append_pair("scope", "openid profile email")
            .append_pair("state", &login.state)
            .append_pair("nonce", &login.nonce)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256");
        let name = login::cookie_name(&login.state, secure(config));
        let sealed = self
            .logins
            .seal(&name, &login)
            .ok_or_else(|| OidcError::Unavailable("cannot seal the sign-in".into()))?;
        let cookie = cookies::set_cookie(
            &name,
            &sealed,
            &config.redirect_path,
            login::LOGIN_TTL_S,
            secure(config),
        );
        Ok(with_header(
            no_store(found(location.as_str())),
            header::SET_COOKIE,
            &cookie,
        ))
    }

    /// Finishes a sign-in at a redirect path: `servers` are the OIDC servers answering there.
    pub async fn callback(
        &self,
        facts: &Facts<'_>,
        servers: &[Arc<AuthServer>],
        attempts: &Attempts<'_>,
    ) -> Response {
        let query: HashMap<String, String> = url::form_urlencoded::parse(facts.query.as_bytes())
            .into_owned()
            .collect();
        let refused =
            |detail: &str| no_store(problem(StatusCode::BAD_REQUEST, "bad_request", detail));
        let Some(state) = query
            .get("state")
            .filter(|s| !s.is_empty() && s.len() <= 512)
        else {
            return refused("the sign-in callback has no state");
        };
        // The sign-in's own cookie: only the browser that began it has one for this state.
        let mut sign_in = None;
        for server in servers {
            let Some(config) = config_of(server) else {
                continue;
            };
            let name = login::cookie_name(state, secure(config));
            if let Some(value) = cookies::find(&facts.cookies, &name) {
                sign_in = Some((name, value));
                break;
            }
        }
        let Some((name, value)) = sign_in else {
            return refused("this sign-in was not started in this browser");
        };
        let clear = |mut response: Response, path: &str, secure: bool| {
            if let Ok(v) =
                header::HeaderValue::from_str(&cookies::clear_cookie(&name, path, secure))
            {
                response.headers_mut().append(header::SET_COOKIE, v);
            }
            no_store(response)
        };
        let login: Option<PendingLogin> = self.logins.open(&name, value);
        let Some(login) = login.filter(|l| {
            bool::from(l.state.as_bytes().ct_eq(state.as_bytes())) && l.expires > now_s()
        }) else {
            return refused("unknown or expired sign-in");
        };
        let Some((server, config)) = servers
            .iter()
            .find(|s| s.id == login.server)
            .and_then(|s| config_of(s).map(|c| (s, c)))
        else {
            return refused("unknown or expired sign-in");
        };
        let secure = secure(config);
        if login.version != session::version(server, config) {
            return clear(
                refused("the auth server changed during the sign-in; sign in again"),
                &config.redirect_path,
                secure,
            );
        }
        if query.contains_key("error") {
            return clear(
                problem(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "the identity provider refused the sign-in",
                ),
                &config.redirect_path,
                secure,
            );
        }
        let Some(code) = query.get("code") else {
            return clear(
                refused("the sign-in callback has no code"),
                &config.redirect_path,
                secure,
            );
        };
        let attempt = match attempts.begin() {
            Ok(a) => a,
            Err(refusal) => return too_many(refusal),
        };
        let response = match self.finish_login(server, config, &login, code).await {
            Ok(cookie) => {
                attempt.succeeded();
                with_header(found(&login.return_to), header::SET_COOKIE, &cookie)
            }
            Err(OidcError::Invalid(reason)) => {
                attempt.failed();
                tracing::info!(auth_server = %server.id, %reason, "sign-in refused");
                problem(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "the sign-in could not be completed",
                )
            }
            Err(e) => {
                attempt.succeeded();
                unavailable(&e)
            }
        };
        clear(response, &config.redirect_path, secure)
    }

    async fn finish_login(
        &self,
        server: &AuthServer,
        config: &OidcConfig,
        login: &PendingLogin,
        code: &str,
    ) -> Result<String, OidcError> {
        let discovery = self.providers.discovery(&config.issuer_url).await?;
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
        let redirect = redirect_uri(config);
        let (status, body) = self
            .outbound
            .post_form(
                &discovery.token_endpoint,
                &format!("Basic {basic}"),
                &[
                    ("grant_type", "authorization_code"),
                    ("code", code),
                    ("redirect_uri", redirect.as_str()),
                    ("code_verifier", login.verifier.as_str()),
                ],
            )
            .await?;
        if status >= 500 {
            return Err(OidcError::Unavailable(format!(
                "token endpoint answered {status}"
            )));
        }
        if !(200..300).contains(&status) {
            return Err(OidcError::Invalid(format!(
                "token endpoint answered {status}"
            )));
        }
        #[derive(Deserialize)]
        struct TokenResponse {
            id_token: Option<String>,
        }
        let tokens: TokenResponse = serde_json::from_slice(&body)
            .map_err(|e| OidcError::Unavailable(format!("token endpoint: {e}")))?;
        let id_token = tokens
            .id_token
            .ok_or_else(|| OidcError::Invalid("no id_token in the token response".into()))?;
        let claims = self
            .providers
            .verify(config, &id_token, Some(&login.nonce))
            .await?;
        // Whose session this is, for "sign out everywhere": the issuer's own name for the
        // person, whatever claims the server maps to headers.
        let sub = claims
            .get("sub")
            .and_then(serde_json::Value::as_str)
            .filter(|sub| !sub.is_empty())
            .ok_or_else(|| OidcError::Invalid("the ID token has no sub".into()))?;
        let issued_at = Utc::now();
        let stored = Session {
            server: server.id,
            version: login.version.clone(),
            expires: u64::try_from(issued_at.timestamp()).unwrap_or(0) + self.session_ttl.as_secs(),
            headers: claims::headers(&config.claims, &claims)
                .into_iter()
                .map(|(n, v)| (n.to_owned(), v))
                .collect(),
            issued: Some(Issued {
                id: Uuid::new_v4(),
                at_ms: issued_at.timestamp_millis(),
                subject: SessionSubject::gateway(&config.issuer_url, sub)
                    .as_str()
                    .to_owned(),
            }),
        };
        let name = session::cookie_name(server.id, secure(config));
        let value = self
            .sessions
            .seal(&name, &stored)
            .ok_or_else(|| OidcError::Unavailable("cannot seal the session".into()))?;
        Ok(cookies::set_cookie(
            &name,
            &value,
            "/",
            self.session_ttl.as_secs(),
            secure(config),
        ))
    }
}

impl Oidc {
    /// Ends, on the server, every session among the request's cookies that is still live:
    /// each by its id and, `everywhere`, every session of its person issued until now. A
    /// session already ended, expired, or sealed before sessions had ids is recorded nothing
    /// for (an ended session can end nothing more). Returns the session cookies presented, to
    /// clear whatever they held. Stops at the first record that cannot be written.
    pub async fn sign_out(
        &self,
        store: &PgStore,
        cookie_headers: &[&str],
        everywhere: bool,
    ) -> Result<Vec<Presented>, StoreError> {
        let now = Utc::now();
        let mut presented: Vec<Presented> = Vec::new();
        let mut ended: Vec<Uuid> = Vec::new();
        let mut subjects: Vec<(SessionSubject, DateTime<Utc>)> = Vec::new();
        let outcome = async {
            for (name, value) in cookies::pairs(cookie_headers) {
                // A browser sends each cookie once; the first of a name is the one a request is
                // checked by.
                let Some(secure) = session::is_cookie_name(name) else {
                    continue;
                };
                if presented.iter().any(|p| p.name == name) {
                    continue;
                }
                presented.push(Presented {
                    name: name.to_owned(),
                    secure,
                });
                let Some(standing) = self
                    .sessions
                    .open::<Session>(name, value)
                    .and_then(|s| s.standing())
                else {
                    continue;
                };
                if standing.expires_at <= now || self.revocations.ends(&standing) {
                    continue;
                }
                if let Some(id) = standing.id {
                    store.end_session(id, standing.expires_at).await?;
                    ended.push(id);
                }
                if everywhere && !subjects.iter().any(|(s, _)| *s == standing.subject) {
                    // Every session of this person was issued at most one session lifetime
                    // before it ends: the record can go then.
                    let until = chrono::Duration::from_std(self.session_ttl)
                        .ok()
                        .and_then(|longest| now.checked_add_signed(longest))
                        .unwrap_or(DateTime::<Utc>::MAX_UTC);
                    store.end_sessions_of(&standing.subject, now, until).await?;
                    subjects.push((standing.subject, now));
                }
            }
            Ok::<(), StoreError>(())
        }
        .await;
        // What was written is in force here at once, even when a later write failed.
        self.revocations.add(&ended, &subjects).await;
        outcome.map(|()| presented)
    }

    /// A `Set-Cookie` value that clears a session cookie `presented`.
    pub fn clear(presented: &Presented) -> String {
        cookies::clear_cookie(&presented.name, "/", presented.secure)
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
}
