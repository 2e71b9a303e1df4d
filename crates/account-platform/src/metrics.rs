//! Counters of the account platform client, read by the server's `/metrics` endpoint.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

/// Lock-free counters; `Relaxed` is enough because each is read on its own.
#[derive(Debug, Default)]
pub struct PlatformMetrics {
    me_calls: AtomicU64,
    org_calls: AtomicU64,
    token_cache_hits: AtomicU64,
    token_cache_misses: AtomicU64,
    refusals_cached: AtomicU64,
    org_cache_hits: AtomicU64,
    org_cache_misses: AtomicU64,
    failures: AtomicU64,
}

/// A point-in-time copy of [`PlatformMetrics`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PlatformMetricsSnapshot {
    /// Requests sent to `GET /v1/me`.
    pub me_calls: u64,
    /// Requests sent to `GET /v1/organizations/{ref}`.
    pub org_calls: u64,
    /// Callers answered from the token cache (including waiters on another request's load).
    pub token_cache_hits: u64,
    /// Callers whose lookup loaded from the platform (always, when the cache is off).
    pub token_cache_misses: u64,
    /// Tokens refused without asking the platform, because it refused them moments ago.
    pub refusals_cached: u64,
    pub org_cache_hits: u64,
    pub org_cache_misses: u64,
    /// Platform calls that ended in `Unavailable`.
    pub failures: u64,
}

impl PlatformMetrics {
    pub fn snapshot(&self) -> PlatformMetricsSnapshot {
        PlatformMetricsSnapshot {
            me_calls: self.me_calls.load(Ordering::Relaxed),
            org_calls: self.org_calls.load(Ordering::Relaxed),
            token_cache_hits: self.token_cache_hits.load(Ordering::Relaxed),
            token_cache_misses: self.token_cache_misses.load(Ordering::Relaxed),
            refusals_cached: self.refusals_cached.load(Ordering::Relaxed),
            org_cache_hits: self.org_cache_hits.load(Ordering::Relaxed),
            org_cache_misses: self.org_cache_misses.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
        }
    }

    /// The cache hits of both caches together.
    pub fn cache_hits(&self) -> u64 {
        let s = self.snapshot();
        s.token_cache_hits + s.refusals_cached + s.org_cache_hits
    }

    /// The cache misses of both caches together.
    pub fn cache_misses(&self) -> u64 {
        let s = self.snapshot();
        s.token_cache_misses + s.org_cache_misses
    }

    pub(crate) fn me_call(&self) {
        self.me_calls.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn refusal_cached(&self) {
        self.refusals_cached.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn org_call(&self) {
        self.org_calls.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn token_cache(&self, hit: bool) {
        let c = if hit {
            &self.token_cache_hits
        } else {
            &self.token_cache_misses
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn org_cache(&self, hit: bool) {
        let c = if hit {
            &self.org_cache_hits
        } else {
            &self.org_cache_misses
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn failure(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
    }
}
