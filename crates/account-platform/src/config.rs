//! The settings of the HTTP account platform client (`ACCOUNT_PLATFORM_*`,
//! `TOKEN_CACHE_TTL_S`, `ORG_CACHE_TTL_S`).

use std::time::Duration;

use domain::model::secret::Secret;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);
pub const DEFAULT_TOKEN_CACHE_TTL: Duration = Duration::from_secs(10);
pub const DEFAULT_ORG_CACHE_TTL: Duration = Duration::from_secs(60);
pub const DEFAULT_REFUSAL_CACHE_TTL: Duration = Duration::from_secs(5);

/// `Debug` is safe to log: `Secret` prints as `Secret(***)`.
#[derive(Debug, Clone)]
pub struct PlatformConfig {
    /// `ACCOUNT_PLATFORM_URL`, e.g. `https://accounts.example.com` (a path prefix is kept).
    pub base_url: String,
    /// `ACCOUNT_PLATFORM_SERVICE_TOKEN`, sent only on organization lookups.
    pub service_token: Secret,
    /// The whole request, connect included (`ACCOUNT_PLATFORM_TIMEOUT_MS`).
    pub timeout: Duration,
    /// token → caller; zero disables the cache (`TOKEN_CACHE_TTL_S`).
    pub token_cache_ttl: Duration,
    /// organization lookups; zero disables the cache (`ORG_CACHE_TTL_S`).
    pub org_cache_ttl: Duration,
    /// tokens the platform refused (`TOKEN_REFUSAL_CACHE_TTL_S`); never longer than
    /// `token_cache_ttl`, so switching the token cache off switches this off too.
    pub refusal_cache_ttl: Duration,
}

impl PlatformConfig {
    /// The documented defaults (docs/configuration.md) for everything but the two required
    /// settings.
    pub fn new(base_url: impl Into<String>, service_token: Secret) -> Self {
        Self {
            base_url: base_url.into(),
            service_token,
            timeout: DEFAULT_TIMEOUT,
            token_cache_ttl: DEFAULT_TOKEN_CACHE_TTL,
            org_cache_ttl: DEFAULT_ORG_CACHE_TTL,
            refusal_cache_ttl: DEFAULT_REFUSAL_CACHE_TTL,
        }
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn with_token_cache_ttl(mut self, ttl: Duration) -> Self {
        self.token_cache_ttl = ttl;
        self
    }

    pub fn with_refusal_cache_ttl(mut self, ttl: Duration) -> Self {
        self.refusal_cache_ttl = ttl;
        self
    }

    pub fn with_org_cache_ttl(mut self, ttl: Duration) -> Self {
        self.org_cache_ttl = ttl;
        self
    }
}
