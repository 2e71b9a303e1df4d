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

/// What became of an approved action: `done` (the object made or changed is named) or
/// `refused` when it ran (the refusal's code and words). One flat object, so that a generated
/// client reads it without a union.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ApprovalOutcome {
    /// `done` or `refused`.
    pub result: String,
    /// done: the kind of object made or changed, as the audit trail names kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// done: its id there (`<cluster id>/<name>` for node pools and nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// done: the cluster it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<Uuid>,
    /// refused: the refusal's stable code, as the API's problem `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// refused: the refusal in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
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
                } => ApprovalOutcome {
                    result: "done".to_owned(),
                    resource: Some(resource.clone()),
                    id: Some(id.clone()),
                    cluster_id: Some(*cluster_id),
                    code: None,
                    detail: None,
                },
                a::ApprovalOutcome::Refused { code, detail } => ApprovalOutcome {
                    result: "refused".to_owned(),
                    resource: None,
                    id: None,
                    cluster_id: None,
                    code: Some(code.clone()),
                    detail: Some(detail.clone()),
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
