//! RFC 9457 problem details: the body of every 4xx and 5xx.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpResponse, ResponseError};
use domain::DomainError;
use domain::error::{AuthFailure, Conflict};
use wire::problem::FieldError;
pub use wire::problem::{PROBLEM_JSON, Problem};

/// The one table from what went wrong to the HTTP status that says it (docs/api.md, "Errors").
/// Every variant is listed: a new one does not compile until it has its status here.
pub fn status_of(e: &DomainError) -> StatusCode {
    match e {
        DomainError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
        DomainError::AuthBackendUnavailable => StatusCode::BAD_GATEWAY,
        DomainError::OrganizationRequired
        | DomainError::InvalidIdempotencyKey
        | DomainError::UnknownZone(_)
        | DomainError::UnknownVersion(_)
        | DomainError::UnknownMachineTier { .. }
        | DomainError::PhaseNotProvisioned(_)
        | DomainError::PublicExposureUnavailable(_)
        | DomainError::UpgradeRefused { .. } => StatusCode::BAD_REQUEST,
        DomainError::InsufficientCredit => StatusCode::PAYMENT_REQUIRED,
        DomainError::Forbidden(_) => StatusCode::FORBIDDEN,
        DomainError::NotFound(_) => StatusCode::NOT_FOUND,
        DomainError::Conflict(_) => StatusCode::CONFLICT,
        DomainError::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
        DomainError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
        DomainError::Validation(_) => StatusCode::UNPROCESSABLE_ENTITY,
        DomainError::CapacityExhausted(_) | DomainError::ServiceUnavailable => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        DomainError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The `detail` a client reads. Where the way to fix a request is in HTTP terms (a header, a
/// query parameter), the API says it that way; everything else is the domain's own text.
pub fn detail_of(e: &DomainError) -> String {
    match e {
        DomainError::Unauthorized(failure) => match failure {
            AuthFailure::Missing => "Authorization header missing",
            AuthFailure::NotBearer => "scheme must be Bearer",
            AuthFailure::EmptyToken => "Bearer token is empty",
            AuthFailure::InvalidToken => "invalid bearer token",
        }
        .into(),
        DomainError::OrganizationRequired => {
            "no organization given: pass the `organization` query \
             parameter or the X-Platform-Organization header, or set a preferred organization"
                .into()
        }
        DomainError::InvalidIdempotencyKey => "Idempotency-Key must be 8-255 characters from \
             letters, digits, '_', '-', ':' and '.'"
            .into(),
        DomainError::Conflict(Conflict::IdempotencyKeyReused) => {
            "this Idempotency-Key was used with a different request".into()
        }
        DomainError::Conflict(Conflict::IdempotencyKeyInProgress) => {
            "a request with this Idempotency-Key is still in progress".into()
        }
        other => other.public_detail(),
    }
}

/// A problem with the status's reason phrase as its title.
pub fn problem(
    status: StatusCode,
    code: &str,
    detail: String,
    errors: Option<Vec<FieldError>>,
    request_id: &str,
) -> Problem {
    let p = Problem::new(
        status.as_u16(),
        status.canonical_reason().unwrap_or("Error"),
        code,
        detail,
        request_id,
    );
    match errors {
        Some(errors) => p.with_errors(errors),
        None => p,
    }
}

/// The problem that says a use case's error.
pub fn of_domain(e: &DomainError, request_id: &str) -> Problem {
    let errors = match e {
        DomainError::Validation(v) => Some(v.errors().iter().map(FieldError::from).collect()),
        _ => None,
    };
    problem(status_of(e), e.code(), detail_of(e), errors, request_id)
}

/// The problem that says what the API refused by itself.
pub fn of_request(e: &RequestError, request_id: &str) -> Problem {
    problem(e.status(), e.code(), e.to_string(), None, request_id)
}

/// The answer's start: the problem's status and the problem+json media type; the caller adds
/// any header the problem calls for, then the body (`Problem::to_json`).
pub fn start(p: &Problem) -> actix_web::HttpResponseBuilder {
    let status = StatusCode::from_u16(p.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut builder = HttpResponse::build(status);
    builder.insert_header((header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON)));
    builder
}

/// What the API refuses by itself, before any use case runs: its own rules about the HTTP
/// request (the body's media type and size, the query string).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("request body too large: at most {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("request bodies must be application/json")]
    UnsupportedMediaType,
    #[error("query parameter `{parameter}`: {message}")]
    InvalidQuery {
        parameter: &'static str,
        message: String,
    },
}

impl RequestError {
    pub fn status(&self) -> StatusCode {
        match self {
            RequestError::PayloadTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            RequestError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            RequestError::InvalidQuery { .. } => StatusCode::BAD_REQUEST,
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            RequestError::PayloadTooLarge { .. } => "payload_too_large",
            RequestError::UnsupportedMediaType => "unsupported_media_type",
            RequestError::InvalidQuery { .. } => "invalid_query",
        }
    }
}

/// Why an answer is a problem: the request (refused by the API) or the use case.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Failure {
    #[error("{0}")]
    Request(#[from] RequestError),
    #[error("{0}")]
    Domain(#[from] DomainError),
}

/// A failure on its way out, with the request id its body carries.
#[derive(Debug, thiserror::Error)]
#[error("{error}")]
pub struct ApiError {
    pub error: Failure,
    pub request_id: String,
}

impl ApiError {
    pub fn new(error: impl Into<Failure>, request_id: impl Into<String>) -> Self {
        ApiError {
            error: error.into(),
            request_id: request_id.into(),
        }
    }
}

/// A failure of the request being served: its id comes from the serving scope, so handlers
/// answer a refusal with `?`.
impl From<DomainError> for ApiError {
    fn from(e: DomainError) -> ApiError {
        ApiError::new(e, crate::extract::current_request_id())
    }
}

impl From<RequestError> for ApiError {
    fn from(e: RequestError) -> ApiError {
        ApiError::new(e, crate::extract::current_request_id())
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match &self.error {
            Failure::Request(e) => e.status(),
            Failure::Domain(e) => status_of(e),
        }
    }

    fn error_response(&self) -> HttpResponse {
        match &self.error {
            Failure::Domain(e) => problem_response(e, &self.request_id),
            Failure::Request(e) => {
                let problem = of_request(e, &self.request_id);
                start(&problem).body(problem.to_json())
            }
        }
    }
}

/// The HTTP answer for a domain error: problem+json, plus `WWW-Authenticate` on 401 and
/// `Retry-After` where the error calls for it. Internal causes are logged, never sent.
pub fn problem_response(e: &DomainError, request_id: &str) -> HttpResponse {
    let problem = of_domain(e, request_id);
    if let DomainError::Internal(cause) = e {
        tracing::error!(request_id, cause = %cause, "internal error");
    }
    let mut builder = start(&problem);
    if matches!(e, DomainError::Unauthorized(_)) {
        builder.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
    }
    if let Some(seconds) = e.retry_after_seconds() {
        builder.insert_header((header::RETRY_AFTER, seconds.to_string()));
    }
    builder.body(problem.to_json())
}

#[cfg(test)]
mod tests {
    use domain::error::{Capacity, Forbidden, Resource};

    use super::*;

    #[test]
    fn what_the_api_refuses_by_itself_has_its_status_and_code() {
        let query = RequestError::InvalidQuery {
            parameter: "page",
            message: "x".into(),
        };
        for (e, status, code) in [
            (
                RequestError::PayloadTooLarge { limit: 1 },
                413,
                "payload_too_large",
            ),
            (
                RequestError::UnsupportedMediaType,
                415,
                "unsupported_media_type",
            ),
            (query, 400, "invalid_query"),
        ] {
            assert_eq!((e.status().as_u16(), e.code()), (status, code), "{e:?}");
            let answer = ApiError::new(e, "rid").error_response();
            assert_eq!(answer.status().as_u16(), status);
        }
    }

    #[test]
    fn every_error_has_its_documented_status_and_code() {
        let cases: Vec<(DomainError, u16, &str)> = vec![
            (
                DomainError::Unauthorized(AuthFailure::InvalidToken),
                401,
                "unauthorized",
            ),
            (
                DomainError::AuthBackendUnavailable,
                502,
                "auth_backend_unavailable",
            ),
            (
                DomainError::OrganizationRequired,
                400,
                "organization_required",
            ),
            (
                DomainError::InvalidIdempotencyKey,
                400,
                "invalid_idempotency_key",
            ),
            (DomainError::UnknownZone("z".into()), 400, "unknown_zone"),
            (
                DomainError::UnknownVersion("v".into()),
                400,
                "unknown_version",
            ),
            (
                DomainError::UnknownMachineTier {
                    field: "f".into(),
                    value: "v".into(),
                },
                400,
                "unknown_machine_tier",
            ),
            (
                DomainError::PhaseNotProvisioned("Pending"),
                400,
                "phase_not_provisioned",
            ),
            (
                DomainError::PublicExposureUnavailable("z".into()),
                400,
                "public_exposure_unavailable",
            ),
            (DomainError::InsufficientCredit, 402, "insufficient_credit"),
            (
                DomainError::Forbidden(Forbidden::NotMember),
                403,
                "forbidden",
            ),
            (
                DomainError::Forbidden(Forbidden::NoWriteRights),
                403,
                "forbidden",
            ),
            (
                DomainError::Forbidden(Forbidden::AssistantNotAllowed),
                403,
                "assistant_not_allowed",
            ),
            (DomainError::NotFound(Resource::Cluster), 404, "not_found"),
            (
                DomainError::Conflict(Conflict::NameTaken {
                    resource: Resource::Cluster,
                    name: "a".into(),
                }),
                409,
                "name_conflict",
            ),
            (
                DomainError::Conflict(Conflict::IdempotencyKeyReused),
                409,
                "idempotency_key_reused",
            ),
            (
                DomainError::Conflict(Conflict::IdempotencyKeyInProgress),
                409,
                "idempotency_key_in_progress",
            ),
            (
                DomainError::Conflict(Conflict::ChangeInFlight),
                409,
                "change_in_flight",
            ),
            (
                DomainError::Conflict(Conflict::FirewallChangeInFlight),
                409,
                "change_in_flight",
            ),
            (DomainError::Conflict(Conflict::LastPool), 409, "last_pool"),
            (
                DomainError::Conflict(Conflict::ExposureMismatch {
                    network_mode: "intranet",
                    allowed: "private",
                }),
                409,
                "exposure_mismatch",
            ),
            (
                DomainError::Conflict(Conflict::InvalidState {
                    resource: Resource::ElasticIp,
                    status: "Pending",
                    operation: "released",
                }),
                409,
                "invalid_state",
            ),
            (
                DomainError::Conflict(Conflict::ClusterNotProvisioned { phase: "Pending" }),
                409,
                "cluster_not_provisioned",
            ),
            (
                DomainError::Conflict(Conflict::ClusterDeleting),
                409,
                "cluster_deleting",
            ),
            (
                DomainError::Conflict(Conflict::ClusterFailed),
                409,
                "cluster_failed",
            ),
            (
                DomainError::Conflict(Conflict::LastCredential),
                409,
                "last_credential",
            ),
            (DomainError::validation("f", "m"), 422, "validation_failed"),
            (
                DomainError::CapacityExhausted(Capacity::ZoneNodes),
                503,
                "capacity_exhausted",
            ),
            (DomainError::ServiceUnavailable, 503, "service_unavailable"),
        ];
        for (e, status, code) in cases {
            assert_eq!((status_of(&e).as_u16(), e.code()), (status, code), "{e:?}");
            // The service's own failures, and only they, are 5xx.
            assert_eq!(e.is_transient(), status >= 500, "{e:?}");
        }
    }

    #[test]
    fn the_four_401_texts_are_fixed() {
        let texts: Vec<String> = [
            AuthFailure::Missing,
            AuthFailure::NotBearer,
            AuthFailure::EmptyToken,
            AuthFailure::InvalidToken,
        ]
        .iter()
        .map(|f| detail_of(&DomainError::Unauthorized(*f)))
        .collect();
        assert_eq!(
            texts,
            [
                "Authorization header missing",
                "scheme must be Bearer",
                "Bearer token is empty",
                "invalid bearer token"
            ]
        );
    }
}
