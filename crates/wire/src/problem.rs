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
