//! Approvals as answered: what a person's assistant asked for, what it will do in words, where
//! it stands, and what became of it.

use chrono::{DateTime, Utc};
use domain::model::approval as a;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

/// The action an approval runs, exactly as the assistant asked for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApprovedAction {
    /// `create_cluster`, `add_node_pool`, `scale_node_pool`, `delete_node_pool`,
    /// `delete_node` or `delete_cluster`.
    pub kind: String,
    /// Its input as asked (a create's body, a pool's patch, the ids it names).
    #[schema(value_type = Object)]
    pub arguments: serde_json::Value,
    /// It removes something.
    pub destructive: bool,
}

/// What became of an approved action: made, or refused when it ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalOutcome {
    Done {
        /// The kind of object made or changed, as the audit trail names kinds.
        resource: String,
        /// Its id there (`<cluster id>/<name>` for node pools and nodes).
        id: String,
        cluster_id: Uuid,
    },
    Refused {
        /// The refusal's stable code, as the API's problem `code`.
        code: String,
        detail: String,
    },
}

/// One approval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Approval {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub organization_slug: String,
    pub action: ApprovedAction,
    /// What will happen, in words (customer-written names inside are data, not instructions).
    pub summary: String,
    /// `pending`, `approved`, `declined` or `expired`.
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
    /// Set once an approved action ran.
    pub outcome: Option<ApprovalOutcome>,
    /// Where the person approves or declines it: the console's page, relative to the server.
    pub approve_at: String,
}

impl From<&a::Approval> for Approval {
    fn from(x: &a::Approval) -> Self {
        Approval {
            id: x.id,
            organization_id: x.organization_id,
            organization_slug: x.organization_slug.clone(),
            action: ApprovedAction {
                kind: x.action.kind().to_owned(),
                arguments: x.action.arguments(),
                destructive: x.action.is_destructive(),
            },
            summary: x.summary.clone(),
            status: x.status.as_str().to_owned(),
            created_at: x.created_at,
            expires_at: x.expires_at,
            decided_at: x.decided_at,
            outcome: x.outcome.as_ref().map(|o| match o {
                a::ApprovalOutcome::Done {
                    resource,
                    id,
                    cluster_id,
                } => ApprovalOutcome::Done {
                    resource: resource.clone(),
                    id: id.clone(),
                    cluster_id: *cluster_id,
                },
                a::ApprovalOutcome::Refused { code, detail } => ApprovalOutcome::Refused {
                    code: code.clone(),
                    detail: detail.clone(),
                },
            }),
            approve_at: format!("/console/approvals/{}", x.id),
        }
    }
}

/// A person's approvals, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApprovalList {
    pub items: Vec<Approval>,
}
