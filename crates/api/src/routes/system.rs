//! Health, readiness, metrics and the OpenAPI document: no authentication.

use actix_web::http::StatusCode;
use actix_web::web::Data;
use actix_web::{HttpRequest, HttpResponse};

use crate::extract::request_id;
use crate::problem::problem_response;
use crate::render::json;
use crate::state::AppState;
use wire::system::Health;

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "system", responses((status = 200, description = "Alive", body = Health)))]
pub async fn healthz() -> HttpResponse {
    json(
        StatusCode::OK,
        &Health {
            status: "ok".into(),
        },
    )
}

/// The service can answer: database reachable, migrations applied.
#[utoipa::path(get, path = "/readyz", tag = "system",
    responses((status = 200, description = "Ready", body = Health)))]
pub async fn readyz(state: Data<AppState>, req: HttpRequest) -> HttpResponse {
    match state.readiness.ready().await {
        Ok(()) => json(
            StatusCode::OK,
            &Health {
                status: "ready".into(),
            },
        ),
        Err(reason) => {
            tracing::warn!(%reason, "not ready");
            problem_response(&domain::DomainError::ServiceUnavailable, &request_id(&req))
        }
    }
}

/// Metrics in the OpenMetrics text format.
#[utoipa::path(get, path = "/metrics", tag = "system",
    responses((status = 200, description = "Metrics in the OpenMetrics text format (Prometheus scrapes it as is)", body = String, content_type = "application/openmetrics-text")))]
pub async fn metrics(state: Data<AppState>) -> HttpResponse {
    for metric in &state.refresh {
        metric.refresh().await;
    }
    HttpResponse::Ok()
        .content_type(crate::metrics::CONTENT_TYPE)
        .body(state.metrics.render())
}

/// This document.
#[utoipa::path(get, path = "/v1/openapi.json", tag = "system",
    responses((status = 200, description = "The OpenAPI 3.1 document", body = Object)))]
pub async fn openapi() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(crate::openapi::document_json())
}
