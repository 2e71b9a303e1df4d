//! A cluster's operations as answered.

use chrono::{DateTime, Utc};
use domain::model::operation as op;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::AuditActor;
use crate::enums;

/// One change followed through provisioning, from the request that asked for it to the state
/// its object settled in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Operation {
    pub id: Uuid,
    pub cluster_id: Uuid,
    #[schema(value_type = enums::OperationKind)]
    pub kind: String,
    /// The object the change is about, as the audit trail names it.
    #[schema(value_type = enums::AuditResource)]
    pub resource: String,
    pub resource_id: String,
    pub requested_by: AuditActor,
    /// The `X-Request-Id` of the request that asked for the change.
    pub request_id: Option<String>,
    #[schema(value_type = enums::OperationStatus)]
    pub status: String,
    /// Failed attempts of the provisioning work so far (each retried by itself).
    pub attempts: i32,
    /// Why the last attempt failed, or why the operation did, in words to act on.
    pub last_error: Option<String>,
    /// The last step provisioning took for it, in words (an upgrade's: the control plane,
    /// then each pool's nodes); null before the first.
    pub progress: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// Null while `running`.
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<&op::ClusterOperation> for Operation {
    fn from(o: &op::ClusterOperation) -> Self {
        Operation {
            id: o.id,
            cluster_id: o.cluster_id,
            kind: o.kind.as_str().to_owned(),
            resource: o.resource.as_str().to_owned(),
            resource_id: o.resource_id.clone(),
            requested_by: AuditActor::from(&o.requested_by),
            request_id: o.request_id.clone(),
            status: o.status.as_str().to_owned(),
            attempts: o.attempts,
            last_error: o.last_error.clone(),
            progress: o.progress.clone(),
            created_at: o.created_at,
            updated_at: o.updated_at,
            finished_at: o.finished_at,
        }
    }
}

/// A page of a cluster's operations, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct OperationList {
    pub items: Vec<Operation>,
    pub page: u32,
    pub size: u32,
    pub total: u64,
}
