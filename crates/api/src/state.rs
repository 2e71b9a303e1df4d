//! What every handler shares: the use cases, the readiness probe and the metrics.

use std::sync::Arc;

use async_trait::async_trait;
use domain::service::Services;

use crate::metrics::Metrics;

/// `/readyz`: whether the service can answer (database reachable, migrations applied).
#[async_trait]
pub trait Readiness: Send + Sync {
    async fn ready(&self) -> Result<(), String>;
}

/// A metric that must be read asynchronously (a database query) before a scrape is rendered:
/// `refresh` reads it; the collector registered for it encodes what was read.
#[async_trait]
pub trait MetricsRefresh: Send + Sync {
    async fn refresh(&self);
}

#[derive(Clone)]
pub struct AppState {
    pub services: Services,
    pub readiness: Arc<dyn Readiness>,
    pub metrics: Arc<Metrics>,
    pub refresh: Vec<Arc<dyn MetricsRefresh>>,
    /// Each token's requests and writes per minute (`ratelimit::limit`).
    pub limiter: Arc<crate::ratelimit::RateLimiter>,
}
