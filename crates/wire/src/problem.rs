//! Pieces of the problem+json answer (RFC 9457) that a client reads field by field.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// One problem with one input field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FieldError {
    /// Path of the field, e.g. `node_pools[0].count`; empty for the body as a whole.
    pub field: String,
    /// What is wrong, in words a person can act on. Never echoes a secret value.
    pub message: String,
}

impl From<&domain::validation::FieldError> for FieldError {
    fn from(e: &domain::validation::FieldError) -> Self {
        FieldError {
            field: e.field.clone(),
            message: e.message.clone(),
        }
    }
}

/// The media type of every error answer.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// An RFC 9457 problem: the body of every error answer of the API and of the gateway's own
/// answers, sent as `application/problem+json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Problem {
    /// Always `about:blank`: `code` is the machine-readable kind.
    #[serde(rename = "type")]
    pub kind: String,
    /// The status's reason phrase.
    pub title: String,
    /// Equals the HTTP status.
    pub status: u16,
    /// Stable snake_case word a client can switch on.
    pub code: String,
    /// What went wrong and how to fix it, in words a person can act on.
    pub detail: String,
    /// One entry per problem, on 422 only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<FieldError>>,
    /// The request's id, as in the `X-Request-Id` header and the server's log lines.
    pub request_id: String,
}

impl Problem {
    /// A problem with no field errors; `title` is the status's reason phrase.
    pub fn new(
        status: u16,
        title: &str,
        code: &str,
        detail: impl Into<String>,
        request_id: impl Into<String>,
    ) -> Self {
        Problem {
            kind: "about:blank".to_owned(),
            title: title.to_owned(),
            status,
            code: code.to_owned(),
            detail: detail.into(),
            errors: None,
            request_id: request_id.into(),
        }
    }

    /// The same problem, listing what is wrong with each input field.
    pub fn with_errors(mut self, errors: Vec<FieldError>) -> Self {
        self.errors = Some(errors);
        self
    }

    /// The body's bytes.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_is_written_with_type_and_without_absent_errors_and_reads_back() {
        let p = Problem::new(404, "Not Found", "not_found", "cluster not found", "rid-1");
        let json: serde_json::Value = serde_json::from_slice(&p.to_json()).unwrap_or_default();
        assert_eq!(json["type"], "about:blank");
        assert_eq!(json["status"], 404);
        assert!(json.get("errors").is_none());
        let with = p.clone().with_errors(vec![FieldError {
            field: "name".into(),
            message: "is required".into(),
        }]);
        let back: Option<Problem> = serde_json::from_slice(&with.to_json()).ok();
        assert_eq!(back, Some(with));
    }
}
