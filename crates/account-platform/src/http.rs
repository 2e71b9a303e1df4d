//! The identity port over HTTP: `GET /v1/me` and `GET /v1/organizations/{ref}` of the account
//! platform, behind bounded TTL caches (callers, tokens the platform refused, organizations),
//! with counters for `/metrics`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use domain::model::identity::{Caller, Organization};
use domain::model::secret::Secret;
use domain::names::OrgRef;
use domain::ports::identity::{IdentityError, IdentityProvider};
use moka::Expiry;
use moka::future::Cache;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue};
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use crate::config::PlatformConfig;
use crate::metrics::{PlatformMetrics, PlatformMetricsSnapshot};

/// Bounds memory under a flood of distinct valid tokens; an evicted caller is just fetched again.
const TOKEN_CACHE_CAPACITY: u64 = 100_000;
const ORG_CACHE_CAPACITY: u64 = 10_000;
/// Unknown organizations are remembered briefly so a stream of requests naming one does not
/// reach the platform each time, yet one created meanwhile shows up soon.
const NEGATIVE_ORG_TTL: Duration = Duration::from_secs(5);

/// Everything but RFC 3986 unreserved characters. `.` is escaped too so `.`/`..` can never act
/// as a dot segment.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'~');

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("ACCOUNT_PLATFORM_URL is not an absolute http(s) URL: {0}")]
    BaseUrl(String),
    #[error("the account platform service token is not a valid header value")]
    ServiceToken,
    #[error("cannot build the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

/// The SHA-256 of a bearer token: the token itself is never kept in memory longer than a call.
type TokenKey = [u8; 32];

/// An organization cache key: `id:<uuid>` or `slug:<slug>`, so one namespace never shadows the
/// other.
type OrgKey = String;

/// Found organizations live for the configured TTL, unknown ones for [`NEGATIVE_ORG_TTL`].
struct OrgExpiry {
    found: Duration,
}

impl Expiry<OrgKey, Option<Organization>> for OrgExpiry {
    fn expire_after_create(
        &self,
        _key: &OrgKey,
        value: &Option<Organization>,
        _created_at: Instant,
    ) -> Option<Duration> {
        Some(match value {
            Some(_) => self.found,
            None => NEGATIVE_ORG_TTL.min(self.found),
        })
    }
}

/// Cheap to clone: the client pool, caches and counters are shared.
#[derive(Clone)]
pub struct HttpAccountPlatform {
    inner: Arc<Inner>,
}

struct Inner {
    client: reqwest::Client,
    /// Without a trailing slash.
    base_url: String,
    /// `Bearer <service token>`, marked sensitive so reqwest never prints it.
    service_auth: HeaderValue,
    timeout: Duration,
    tokens: Option<Cache<TokenKey, Caller>>,
    /// Tokens the platform refused lately: the same bad token sent again and again (a
    /// misconfigured client in a retry loop, or an attacker) costs the platform one call a TTL.
    refused: Option<Cache<TokenKey, ()>>,
    orgs: Option<Cache<OrgKey, Option<Organization>>>,
    metrics: Arc<PlatformMetrics>,
}

impl std::fmt::Debug for HttpAccountPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpAccountPlatform")
            .field("base_url", &self.inner.base_url)
            .field("timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

fn bearer(token: &str) -> Option<HeaderValue> {
    let mut v = HeaderValue::from_str(&format!("Bearer {token}")).ok()?;
    v.set_sensitive(true);
    Some(v)
}

fn token_key(token: &Secret) -> TokenKey {
    Sha256::digest(token.expose().as_bytes()).into()
}

fn org_key(r: &OrgRef) -> OrgKey {
    match r {
        OrgRef::Id(s) => format!("id:{s}"),
        OrgRef::Slug(s) => format!("slug:{s}"),
    }
}

/// The request failed before any answer arrived, for a reason other than the time limit.
fn is_lost_connection(e: &reqwest::Error) -> bool {
    !e.is_timeout() && (e.is_connect() || e.is_request())
}

/// What went wrong on one call, before it becomes an `IdentityError`.
enum CallError {
    Rejected,
    NotFound,
    Unavailable(String),
}

impl HttpAccountPlatform {
    pub fn new(config: PlatformConfig) -> Result<Self, BuildError> {
        let base = url::Url::parse(&config.base_url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| BuildError::BaseUrl(config.base_url.clone()))?;
        let base_url = base.as_str().trim_end_matches('/').to_owned();
        let service_auth = bearer(config.service_token.expose()).ok_or(BuildError::ServiceToken)?;
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .user_agent(concat!("k8s-cluster-api/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(BuildError::Client)?;
        let tokens = (!config.token_cache_ttl.is_zero()).then(|| {
            Cache::builder()
                .name("account-platform-tokens")
                .max_capacity(TOKEN_CACHE_CAPACITY)
                .time_to_live(config.token_cache_ttl)
                .build()
        });
        let refusal_ttl = config.refusal_cache_ttl.min(config.token_cache_ttl);
        let refused = (!refusal_ttl.is_zero()).then(|| {
            Cache::builder()
                .name("account-platform-refused-tokens")
                .max_capacity(TOKEN_CACHE_CAPACITY)
                .time_to_live(refusal_ttl)
                .build()
        });
        let orgs = (!config.org_cache_ttl.is_zero()).then(|| {
            Cache::builder()
                .name("account-platform-organizations")
                .max_capacity(ORG_CACHE_CAPACITY)
                .expire_after(OrgExpiry {
                    found: config.org_cache_ttl,
                })
                .build()
        });
        Ok(Self {
            inner: Arc::new(Inner {
                client,
                base_url,
                service_auth,
                timeout: config.timeout,
                tokens,
                refused,
                orgs,
                metrics: Arc::default(),
            }),
        })
    }

    /// The live counters, shared with this client.
    pub fn metrics(&self) -> Arc<PlatformMetrics> {
        Arc::clone(&self.inner.metrics)
    }

    pub fn metrics_snapshot(&self) -> PlatformMetricsSnapshot {
        self.inner.metrics.snapshot()
    }

    /// Forgets every cached caller and organization (e.g. after a test changes the directory).
    pub fn invalidate_caches(&self) {
        if let Some(c) = &self.inner.tokens {
            c.invalidate_all();
        }
        if let Some(c) = &self.inner.refused {
            c.invalidate_all();
        }
        if let Some(c) = &self.inner.orgs {
            c.invalidate_all();
        }
    }

    async fn fetch_caller(&self, token: &Secret) -> Result<Caller, IdentityError> {
        const WHAT: &str = "GET /v1/me";
        let Some(auth) = bearer(token.expose()) else {
            // A token that cannot be a header value cannot be valid either.
            return Err(IdentityError::InvalidToken);
        };
        self.inner.metrics.me_call();
        let url = format!("{}/v1/me", self.inner.base_url);
        match self.get_json::<Caller>(&url, auth).await {
            Ok(c) => Ok(c),
            Err(CallError::Rejected) => Err(IdentityError::InvalidToken),
            Err(CallError::NotFound) => Err(self.unavailable(WHAT, "unexpected status 404".into())),
            Err(CallError::Unavailable(reason)) => Err(self.unavailable(WHAT, reason)),
        }
    }

    async fn fetch_organization(&self, r: &OrgRef) -> Result<Option<Organization>, IdentityError> {
        const WHAT: &str = "GET /v1/organizations/{ref}";
        self.inner.metrics.org_call();
        let segment = utf8_percent_encode(r.as_str(), PATH_SEGMENT);
        let url = format!("{}/v1/organizations/{segment}", self.inner.base_url);
        let auth = self.inner.service_auth.clone();
        match self.get_json::<Organization>(&url, auth).await {
            Ok(o) => Ok(Some(o)),
            Err(CallError::NotFound) => Ok(None),
            Err(CallError::Rejected) => Err(self.unavailable(
                WHAT,
                "the platform rejected the service token (check ACCOUNT_PLATFORM_SERVICE_TOKEN)"
                    .into(),
            )),
            Err(CallError::Unavailable(reason)) => Err(self.unavailable(WHAT, reason)),
        }
    }

    fn unavailable(&self, what: &str, reason: String) -> IdentityError {
        self.inner.metrics.failure();
        tracing::warn!(request = what, %reason, "account platform unavailable");
        IdentityError::Unavailable(format!("{what}: {reason}"))
    }

    /// One GET. Reasons name the failure's kind, never a header or the URL's credentials (there
    /// are none: tokens travel only in `Authorization`).
    async fn get_json<T: DeserializeOwned>(
        &self,
        url: &str,
        auth: HeaderValue,
    ) -> Result<T, CallError> {
        let send = || {
            self.inner
                .client
                .get(url)
                .header(AUTHORIZATION, auth.clone())
                .header(ACCEPT, "application/json")
                .send()
        };
        let resp = match send().await {
            Ok(r) => r,
            // A kept-alive connection the platform closed while the request was on its way
            // fails without an answer; a GET is safe to send again, once, on a new connection
            // (what browsers and Go's client do). A timeout is not retried: it spent the budget.
            Err(e) if is_lost_connection(&e) => match send().await {
                Ok(r) => r,
                Err(e) => return Err(CallError::Unavailable(self.describe(&e))),
            },
            Err(e) => return Err(CallError::Unavailable(self.describe(&e))),
        };
        match resp.status() {
            StatusCode::OK => {}
            StatusCode::UNAUTHORIZED => return Err(CallError::Rejected),
            StatusCode::NOT_FOUND => return Err(CallError::NotFound),
            s => {
                return Err(CallError::Unavailable(format!(
                    "unexpected status {}",
                    s.as_u16()
                )));
            }
        }
        let body = match resp.bytes().await {
            Ok(b) => b,
            Err(e) => return Err(CallError::Unavailable(self.describe(&e))),
        };
        serde_json::from_slice(&body).map_err(|e| {
            // Only the position: serde's message may quote the body.
            CallError::Unavailable(format!(
                "unreadable answer ({:?} error at line {} column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })
    }

    fn describe(&self, e: &reqwest::Error) -> String {
        let kind = if e.is_timeout() {
            format!("timed out after {} ms", self.inner.timeout.as_millis())
        } else if e.is_connect() {
            "connection failed".to_owned()
        } else if e.is_body() || e.is_decode() {
            "the answer broke off".to_owned()
        } else {
            "request failed".to_owned()
        };
        // The source chain (e.g. "Connection refused") helps operators; unlike reqwest's own
        // text it leaves out the URL, in case ACCOUNT_PLATFORM_URL carries user info.
        let mut chain = String::new();
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            chain.push_str(": ");
            chain.push_str(&s.to_string());
            source = s.source();
        }
        if chain.is_empty() {
            kind
        } else {
            format!("{kind}{chain}")
        }
    }
}

#[async_trait]
impl IdentityProvider for HttpAccountPlatform {
    async fn caller(&self, token: &Secret) -> Result<Caller, IdentityError> {
        let m = &self.inner.metrics;
        let key = token_key(token);
        if let Some(refused) = &self.inner.refused
            && refused.contains_key(&key)
        {
            m.refusal_cached();
            return Err(IdentityError::InvalidToken);
        }
        let Some(cache) = &self.inner.tokens else {
            m.token_cache(false);
            return self.fetch_caller(token).await;
        };
        // Concurrent lookups of one token share a single load; errors are never inserted here,
        // a refusal goes to its own cache below.
        let entry = match cache
            .entry(key)
            .or_try_insert_with(self.fetch_caller(token))
            .await
        {
            Ok(entry) => entry,
            Err(e) => {
                let e = (*e).clone();
                if let (IdentityError::InvalidToken, Some(refused)) = (&e, &self.inner.refused) {
                    refused.insert(key, ()).await;
                }
                return Err(e);
            }
        };
        m.token_cache(!entry.is_fresh());
        Ok(entry.into_value())
    }

    async fn organization(&self, r: &OrgRef) -> Result<Option<Organization>, IdentityError> {
        let m = &self.inner.metrics;
        if !r.is_well_formed() {
            // No organization can have this name (the route answers 404); the platform need not be asked.
            return Ok(None);
        }
        // Ids are compared as UUIDs; the hyphenated lowercase form is the cache's one spelling.
        let r = match r {
            OrgRef::Id(s) => uuid::Uuid::parse_str(s)
                .map(|u| OrgRef::Id(u.hyphenated().to_string()))
                .unwrap_or_else(|_| r.clone()),
            OrgRef::Slug(_) => r.clone(),
        };
        let Some(cache) = &self.inner.orgs else {
            m.org_cache(false);
            return self.fetch_organization(&r).await;
        };
        let entry = cache
            .entry(org_key(&r))
            .or_try_insert_with(self.fetch_organization(&r))
            .await
            .map_err(|e| (*e).clone())?;
        let fresh = entry.is_fresh();
        m.org_cache(!fresh);
        let org = entry.into_value();
        if let (true, Some(o)) = (fresh, &org) {
            // The same organization is likely named the other way next (slug on create, id on
            // by-id routes).
            let other = match r {
                OrgRef::Id(_) => OrgRef::Slug(o.slug.clone()),
                OrgRef::Slug(_) => OrgRef::Id(o.id.hyphenated().to_string()),
            };
            cache.insert(org_key(&other), org.clone()).await;
        }
        Ok(org)
    }

    /// Straight to the platform; the answer replaces what the cache held under both names, so
    /// reads after a credit change see it too.
    async fn organization_fresh(&self, r: &OrgRef) -> Result<Option<Organization>, IdentityError> {
        if !r.is_well_formed() {
            return Ok(None);
        }
        let org = self.fetch_organization(r).await?;
        if let (Some(cache), Some(o)) = (&self.inner.orgs, &org) {
            for name in [
                OrgRef::Id(o.id.hyphenated().to_string()),
                OrgRef::Slug(o.slug.clone()),
            ] {
                cache.insert(org_key(&name), org.clone()).await;
            }
        }
        Ok(org)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_escaped() {
        let s = utf8_percent_encode("a/../b?c#d e.", PATH_SEGMENT).to_string();
        assert_eq!(s, "a%2F%2E%2E%2Fb%3Fc%23d%20e%2E");
        assert_eq!(
            utf8_percent_encode("acme-1", PATH_SEGMENT).to_string(),
            "acme-1"
        );
    }

    #[test]
    fn token_keys_are_digests_not_tokens() {
        let k = token_key(&Secret::new("abc"));
        assert_ne!(&k[..3], b"abc");
        assert_eq!(k, token_key(&Secret::new("abc")));
        assert_ne!(k, token_key(&Secret::new("abd")));
    }

    #[test]
    fn a_bad_base_url_is_refused() {
        for bad in ["", "not a url", "ftp://x", "/v1"] {
            let cfg = PlatformConfig::new(bad, Secret::new("s"));
            assert!(
                matches!(HttpAccountPlatform::new(cfg), Err(BuildError::BaseUrl(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn debug_output_holds_no_service_token() {
        let cfg = PlatformConfig::new("http://127.0.0.1:1", Secret::new("service-secret-xyz"));
        assert!(!format!("{cfg:?}").contains("service-secret-xyz"));
        let p = HttpAccountPlatform::new(cfg)
            .map(|p| format!("{p:?}"))
            .unwrap_or_default();
        assert!(p.contains("127.0.0.1") && !p.contains("service-secret-xyz"));
    }
}
