//! The HTTP adapter: actix-web routes over the domain's use cases. Handlers stay thin:
//! extract and validate, call the use case, map the answer to HTTP.

pub mod conditional;
pub mod extract;
pub mod metrics;
pub mod middleware;
pub mod openapi;
pub mod problem;
pub mod query;
pub mod ratelimit;
pub mod render;
pub mod replay;
pub mod routes;
pub mod state;

use actix_web::web::{self, ServiceConfig};

pub use state::{AppState, MetricsRefresh, Readiness};

/// Registers the application on a `ServiceConfig`: state, body limits, every route and the
/// 404 answer. The caller wraps the app with [`middleware::observe`].
pub fn configure(state: AppState) -> impl FnOnce(&mut ServiceConfig) {
    move |cfg: &mut ServiceConfig| {
        cfg.app_data(web::Data::new(state))
            .app_data(web::PayloadConfig::new(extract::MAX_BODY_BYTES));
        routes::configure(cfg);
        cfg.default_service(web::to(routes::not_found));
    }
}
