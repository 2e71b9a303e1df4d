//! RFC 9457 problem details for the gateway's own answers (CONTRACT §1).

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{HeaderName, HeaderValue};
use serde::Serialize;

#[derive(Debug, Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'a str,
    status: u16,
    code: &'a str,
    detail: &'a str,
    request_id: String,
}

/// A problem+json answer.
pub fn problem(status: StatusCode, code: &str, detail: &str) -> HttpResponse {
    let body = Problem {
        kind: "about:blank",
        title: status.canonical_reason().unwrap_or("Error"),
        status: status.as_u16(),
        code,
        detail,
        request_id: uuid::Uuid::new_v4().to_string(),
    };
    let json = serde_json::to_string(&body).unwrap_or_else(|_| "{}".into());
    HttpResponse::build(status)
        .content_type("application/problem+json")
        .body(json)
}

/// The same answer with one more header (a challenge, `Retry-After`).
pub fn with_header(mut response: HttpResponse, name: HeaderName, value: &str) -> HttpResponse {
    if let Ok(v) = HeaderValue::from_str(value) {
        response.headers_mut().insert(name, v);
    }
    response
}
