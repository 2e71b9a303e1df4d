//! Answers of the routes that are not about a resource.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `/healthz` and `/readyz`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
}
