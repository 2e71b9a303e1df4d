//! The audit trail: every change that took effect, with who made it, through which face of
//! the service, what it changed (never a secret), when, for which request, and whether it was
//! applied at once or accepted as provisioning work. An event is written in the transaction
//! of the change it tells about, so there is no change without its event and no event
//! without its change.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::identity::{Caller, ClientKind};

/// How long events are kept unless the operator says otherwise: 400 days, the time the
/// large clouds keep their admin-activity audit logs (a year and a month to compare with).
pub const RETENTION_DAYS_DEFAULT: u32 = 400;

/// The most events one read answers; the default is [`PAGE_DEFAULT`].
pub const PAGE_MAX: u32 = 100;
pub const PAGE_DEFAULT: u32 = 50;

words! {
    /// The kind of object an event is about.
    AuditResource {
        Cluster => "cluster",
        NodePool => "node_pool",
        Node => "node",
        ElasticIp => "elastic_ip",
        FirewallRule => "firewall_rule",
        AuthServer => "auth_server",
        Credential => "credential",
        KubeconfigCredential => "kubeconfig_credential",
        Approval => "approval",
    }
}

words! {
    /// What a change did to its object, in the past tense. A `…Started` action hands work to
    /// provisioning; the cluster's operations say how it goes.
    AuditAction {
        Created => "created",
        Updated => "updated",
        Deleted => "deleted",
        DeletionStarted => "deletion_started",
        ExposureChangeStarted => "exposure_change_started",
        UpgradeStarted => "upgrade_started",
        ControlPlaneFirewallChangeStarted => "control_plane_firewall_change_started",
        Allocated => "allocated",
        ReleaseStarted => "release_started",
        ReplacementStarted => "replacement_started",
        Revoked => "revoked",
        Rotated => "rotated",
        Requested => "requested",
        Approved => "approved",
        Declined => "declined",
        Expired => "expired",
    }
}

words! {
    /// The face of the service a change came through; `assistant`: a person's AI assistant
    /// asked for it and the person approved it.
    Channel {
        Api => "api",
        Console => "console",
        Assistant => "assistant",
    }
}

words! {
    /// What became of the change when it was committed: `Applied` (done, nothing follows) or
    /// `Accepted` (recorded and handed to provisioning, whose progress the cluster's
    /// operations show).
    Outcome {
        Applied => "applied",
        Accepted => "accepted",
    }
}

/// Who made a change: the user as the account platform named them, and the kind of client
/// their token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub user_id: String,
    pub email: Option<String>,
    pub client: ClientKind,
}

impl Actor {
    pub fn of(caller: &Caller) -> Actor {
        Actor {
            user_id: caller.user.id.clone(),
            email: caller.user.email.clone(),
            client: caller.client,
        }
    }
}

/// What one decision records about itself: the object, the action and the fields it changed,
/// as JSON the decision wrote by hand so that no secret can slip in through a derived
/// serialization.
#[derive(Debug, Clone, PartialEq)]
pub struct Audit {
    pub resource: AuditResource,
    pub resource_id: String,
    pub action: AuditAction,
    pub changes: serde_json::Value,
}

impl Audit {
    pub fn new(
        resource: AuditResource,
        resource_id: impl ToString,
        action: AuditAction,
        changes: serde_json::Value,
    ) -> Audit {
        Audit {
            resource,
            resource_id: resource_id.to_string(),
            action,
            changes,
        }
    }
}

/// The object an event's resource lives under, when it is not the organization itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parent {
    Cluster(Uuid),
    AuthServer(Uuid),
}

/// One recorded change.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub at: DateTime<Utc>,
    pub actor: Actor,
    pub via: Channel,
    pub resource: AuditResource,
    pub resource_id: String,
    pub parent: Option<Parent>,
    pub action: String,
    pub changes: serde_json::Value,
    pub request_id: Option<String>,
    pub outcome: Outcome,
    /// The approval a change ran from: the assistant asked, and the actor approved.
    pub approval: Option<Uuid>,
}

impl AuditEvent {
    pub fn cluster_id(&self) -> Option<Uuid> {
        match self.parent {
            Some(Parent::Cluster(id)) => Some(id),
            _ => None,
        }
    }

    pub fn auth_server_id(&self) -> Option<Uuid> {
        match self.parent {
            Some(Parent::AuthServer(id)) => Some(id),
            _ => None,
        }
    }
}

/// Where a read of the trail goes on from: just after this event in newest-first order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuditCursor {
    pub at: DateTime<Utc>,
    pub id: Uuid,
}

impl AuditCursor {
    pub fn after(event: &AuditEvent) -> AuditCursor {
        AuditCursor {
            at: event.at,
            id: event.id,
        }
    }
}

/// Which events a read keeps; every filter is optional.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuditFilter {
    pub resource: Option<AuditResource>,
    pub resource_id: Option<String>,
    /// A cluster and everything under it.
    pub cluster_id: Option<Uuid>,
    /// The actor's user id.
    pub actor: Option<String>,
    /// From this instant on (inclusive).
    pub since: Option<DateTime<Utc>>,
    /// Before this instant (exclusive).
    pub until: Option<DateTime<Utc>>,
}

/// Which events of one organization a read asks for, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditQuery {
    pub organization_id: Uuid,
    pub filter: AuditFilter,
    pub after: Option<AuditCursor>,
    pub limit: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_word_reads_back_as_itself() {
        for r in AuditResource::ALL {
            assert_eq!(AuditResource::parse(r.as_str()), Some(*r));
        }
        for a in AuditAction::ALL {
            assert_eq!(AuditAction::parse(a.as_str()), Some(*a));
        }
        for c in Channel::ALL {
            assert_eq!(Channel::parse(c.as_str()), Some(*c));
        }
        for o in Outcome::ALL {
            assert_eq!(Outcome::parse(o.as_str()), Some(*o));
        }
        assert_eq!(AuditResource::parse("Cluster"), None);
        assert_eq!(AuditResource::parse(""), None);
    }
}
