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

/// Extra lines for `/metrics` from the adapters (account platform, pool, queue).
#[async_trait]
pub trait MetricsSource: Send + Sync {
    async fn render(&self, out: &mut String);
}

#[derive(Clone)]
pub struct AppState {
    pub services: Services,
    pub readiness: Arc<dyn Readiness>,
    pub metrics: Arc<Metrics>,
    pub sources: Vec<Arc<dyn MetricsSource>>,
}
