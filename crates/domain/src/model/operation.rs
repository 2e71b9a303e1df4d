//! Operations: each change that hands work to provisioning (a create, a scale, an exposure
//! change, an upgrade, a node replacement, an Elastic IP, a firewall rule, a deletion) is followed as one
//! or control-plane firewall change, a node replacement, an Elastic IP, a firewall rule, a deletion) is followed as one
//! operation a client can watch, from the request that asked for it to the state its object
//! settles in. Provisioning itself reconciles the whole cluster at once; an operation is
//! settled when that reconcile finishes with the cluster as asked (`reconcile::settle` says
//! how), and carries the attempts and the last failure of the work meanwhile, in words a
//! customer can act on.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::audit::{Actor, AuditAction, AuditResource};

words! {
    /// What an operation carries out.
    OperationKind {
        Create => "create",
        Delete => "delete",
        ExposureChange => "exposure_change",
        Upgrade => "upgrade",
        ControlPlaneFirewallChange => "control_plane_firewall_change",
        NodePoolCreate => "node_pool_create",
        NodePoolChange => "node_pool_change",
        NodePoolDelete => "node_pool_delete",
        NodeReplacement => "node_replacement",
        ElasticIpAllocate => "elastic_ip_allocate",
        ElasticIpRelease => "elastic_ip_release",
        FirewallRuleCreate => "firewall_rule_create",
        FirewallRuleDelete => "firewall_rule_delete",
    }
}

words! {
    /// `running` until provisioning settles it; then `succeeded`, `failed` (with the reason)
    /// or `cancelled` (the cluster was deleted first).
    OperationStatus {
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
        Cancelled => "cancelled",
    }
}

impl OperationKind {
    /// The operation a change starts, named by what the audit trail says of it; `None` for a
    /// change provisioning has no work for.
    pub fn of(resource: AuditResource, action: AuditAction) -> Option<OperationKind> {
        use AuditAction as A;
        use AuditResource as R;
        Some(match (resource, action) {
            (R::Cluster, A::Created) => OperationKind::Create,
            (R::Cluster, A::DeletionStarted) => OperationKind::Delete,
            (R::Cluster, A::ExposureChangeStarted) => OperationKind::ExposureChange,
            (R::Cluster, A::UpgradeStarted) => OperationKind::Upgrade,
            (R::Cluster, A::ControlPlaneFirewallChangeStarted) => {
                OperationKind::ControlPlaneFirewallChange
            }
            (R::NodePool, A::Created) => OperationKind::NodePoolCreate,
            (R::NodePool, A::Updated) => OperationKind::NodePoolChange,
            (R::NodePool, A::DeletionStarted) => OperationKind::NodePoolDelete,
            (R::Node, A::ReplacementStarted) => OperationKind::NodeReplacement,
            (R::ElasticIp, A::Allocated) => OperationKind::ElasticIpAllocate,
            (R::ElasticIp, A::ReleaseStarted) => OperationKind::ElasticIpRelease,
            (R::FirewallRule, A::Created) => OperationKind::FirewallRuleCreate,
            (R::FirewallRule, A::DeletionStarted) => OperationKind::FirewallRuleDelete,
            _ => return None,
        })
    }
}

/// One change followed through provisioning.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterOperation {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub organization_id: Uuid,
    pub kind: OperationKind,
    /// The object the change is about, as the audit trail names it.
    pub resource: AuditResource,
    pub resource_id: String,
    pub requested_by: Actor,
    pub request_id: Option<String>,
    pub status: OperationStatus,
    /// Failed attempts of the provisioning work so far.
    pub attempts: i32,
    /// Why the last attempt failed, or why the operation did, in a customer's words.
    pub last_error: Option<String>,
    /// The last step provisioning took for it, in a customer's words (an upgrade's: the
    /// control plane, then each pool's nodes); none before the first.
    pub progress: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settled {
    pub id: Uuid,
    pub status: OperationStatus,
    /// The reason, for `failed` and `cancelled`.
    pub reason: Option<String>,
}

impl Settled {
    pub fn of(op: &ClusterOperation, status: OperationStatus, reason: Option<String>) -> Settled {
        Settled {
            id: op.id,
            status,
            reason,
        }
    }
}
