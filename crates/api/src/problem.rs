//! RFC 9457 problem details: the body of every 4xx and 5xx (CONTRACT §1).

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use domain::DomainError;
use domain::validation::FieldError;
use serde::Serialize;

/// `application/problem+json`.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Problem {
    /// Always `about:blank`: `code` is the machine-readable kind.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub title: String,
    /// Equals the HTTP status.
    pub status: u16,
    /// Stable snake_case word a client can switch on.
    pub code: &'static str,
    pub detail: String,
    /// One entry per problem, on 422 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<FieldError>>,
    pub request_id: String,
}

impl Problem {
    pub fn from_domain(e: &DomainError, request_id: &str) -> Self {
        let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Problem {
            kind: "about:blank",
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            code: e.code(),
            detail: e.public_detail(),
            errors: match e {
                DomainError::Validation(v) => Some(v.errors().to_vec()),
                _ => None,
            },
            request_id: request_id.to_owned(),
        }
    }

    pub fn body(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

pub const PROBLEM_JSON: &str = "application/problem+json";

/// A domain error on its way out, with the request id its body carries.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct ApiError {
    pub error: DomainError,
    pub request_id: String,
}

impl ApiError {
    pub fn new(error: DomainError, request_id: impl Into<String>) -> Self {
        ApiError {
            error,
            request_id: request_id.into(),
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        StatusCode::from_u16(self.error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }

    fn error_response(&self) -> HttpResponse {
        problem_response(&self.error, &self.request_id)
    }
}

/// The HTTP answer for a domain error: problem+json, plus `WWW-Authenticate` on 401 and
/// `Retry-After` where the error calls for it. Internal causes are logged, never sent.
pub fn problem_response(e: &DomainError, request_id: &str) -> HttpResponse {
    let problem = Problem::from_domain(e, request_id);
    if let DomainError::Internal(cause) = e {
        tracing::error!(request_id, cause = %cause, "internal error");
    }
    let mut builder = HttpResponse::build(
        StatusCode::from_u16(problem.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
    );
    builder.insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)));
    if matches!(e, DomainError::Unauthorized(_)) {
        builder.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
    }
    if let Some(seconds) = e.retry_after_seconds() {
        builder.insert_header((header::RETRY_AFTER, seconds.to_string()));
    }
    builder.body(problem.body())
}
