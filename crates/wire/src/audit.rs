//! The audit trail as answered.

use chrono::{DateTime, Utc};
use domain::model::audit as a;
use domain::model::identity::ClientKind;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::enums;

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditActor {
    /// The user id the account platform gave.
    pub user_id: String,
    pub email: Option<String>,
    #[schema(value_type = enums::ClientKind)]
    pub client: ClientKind,
}

impl From<&a::Actor> for AuditActor {
    fn from(a: &a::Actor) -> Self {
        AuditActor::from(a.clone())
    }
}

impl From<a::Actor> for AuditActor {
    fn from(a: a::Actor) -> Self {
        AuditActor {
            user_id: a.user_id,
            email: a.email,
            client: a.client,
        }
    }
}

/// One change that took effect: who made it, through which face, what it changed (secrets
/// never appear: a changed secret shows as `"[redacted]"`), when, for which request, and
/// whether it was applied at once or accepted for provisioning.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditEvent {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub at: DateTime<Utc>,
    pub actor: AuditActor,
    #[schema(value_type = enums::AuditVia)]
    pub via: String,
    #[schema(value_type = enums::AuditResource)]
    pub resource: String,
    /// The object's id: a uuid, or `<cluster id>/<name>` for node pools and nodes.
    pub resource_id: String,
    /// The cluster the object belongs to (the cluster itself for a cluster's events).
    pub cluster_id: Option<Uuid>,
    /// The auth server the object belongs to (the server itself for its own events).
    pub auth_server_id: Option<Uuid>,
    /// A past-tense word: `created`, `updated`, `deleted`, `deletion_started`,
    /// `exposure_change_started`, `allocated`, `release_started`, `replacement_started`.
    pub action: String,
    /// The fields the change set, by name (an update: `{"from": …, "to": …}` where the old
    /// value is known).
    #[schema(value_type = Object)]
    pub changes: serde_json::Value,
    /// The `X-Request-Id` of the request that made the change.
    pub request_id: Option<String>,
    #[schema(value_type = enums::AuditOutcome)]
    pub outcome: String,
    /// The approval the change ran from: a person's assistant asked, and the actor approved.
    pub approval_id: Option<Uuid>,
}

/// Taken by value: a page of events is answered once, so its texts and `changes` move into the
/// answer rather than being copied.
impl From<a::AuditEvent> for AuditEvent {
    fn from(e: a::AuditEvent) -> Self {
        AuditEvent {
            id: e.id,
            organization_id: e.organization_id,
            at: e.at,
            cluster_id: e.cluster_id(),
            auth_server_id: e.auth_server_id(),
            via: e.via.as_str().to_owned(),
            resource: e.resource.as_str().to_owned(),
            outcome: e.outcome.as_str().to_owned(),
            actor: AuditActor::from(e.actor),
            resource_id: e.resource_id,
            action: e.action,
            changes: e.changes,
            request_id: e.request_id,
            approval_id: e.approval,
        }
    }
}

/// A page of the audit trail, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct AuditEventList {
    pub items: Vec<AuditEvent>,
    /// Pass as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}
