//! The one error of every use case. Each variant carries a stable `code` a client can switch
//! on; the adapter that speaks to clients renders each variant in one fixed way.

use crate::validation::Violations;

/// Why a request was not authenticated. (The adapter that speaks to clients answers each with a
/// fixed text of its own.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    #[error("no credentials were presented")]
    Missing,
    #[error("the credentials are not a bearer token")]
    NotBearer,
    #[error("the bearer token is empty")]
    EmptyToken,
    #[error("invalid bearer token")]
    InvalidToken,
}

/// Which kind of object a `DomainError::NotFound` or a name conflict is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Organization,
    Cluster,
    NodePool,
    Node,
    ElasticIp,
    FirewallRule,
    AuthServer,
    Credential,
    Operation,
    Approval,
}

impl Resource {
    pub fn noun(self) -> &'static str {
        match self {
            Resource::Organization => "organization",
            Resource::Cluster => "cluster",
            Resource::NodePool => "node pool",
            Resource::Node => "node",
            Resource::ElasticIp => "Elastic IP",
            Resource::FirewallRule => "firewall rule",
            Resource::AuthServer => "auth server",
            Resource::Credential => "credential",
            Resource::Operation => "operation",
            Resource::Approval => "approval",
        }
    }
}

/// The conflicts, each with its own code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conflict {
    NameTaken {
        resource: Resource,
        name: String,
    },
    IdempotencyKeyReused,
    IdempotencyKeyInProgress,
    /// An exposure change is already in flight.
    ChangeInFlight,
    /// A control-plane firewall change is already in flight (the same code).
    FirewallChangeInFlight,
    LastPool,
    /// The Elastic IP's exposure does not fit the cluster's network mode.
    ExposureMismatch {
        network_mode: &'static str,
        allowed: &'static str,
    },
    /// The object's status does not allow the operation.
    InvalidState {
        resource: Resource,
        status: &'static str,
        operation: &'static str,
    },
    ClusterNotProvisioned {
        phase: &'static str,
    },
    ClusterDeleting,
    ClusterFailed,
    LastCredential,
    /// A concurrent change kept winning; the request changed nothing and can be retried.
    ConcurrentModification,
    /// The cluster is still carrying out another change (an upgrade, an exposure change, a
    /// pool's change) that must finish first.
    ClusterBusy,
}

/// Forbidden, and why (never revealing whether an object exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// Not a member of the organization (or a role without read rights).
    NotMember,
    /// A member without super_admin attempting a mutation.
    NotSuperAdmin,
    /// A writer who is super_admin nowhere (decided before any object is loaded).
    NoWriteRights,
    /// The assistant's limits.
    AssistantNotAllowed,
}

/// Which capacity ran out (`DomainError::CapacityExhausted`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capacity {
    ZoneNodes,
    AddressPool { exposure: &'static str },
    PublicPoolDisabled,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DomainError {
    #[error("{0}")]
    Unauthorized(AuthFailure),
    #[error("the account platform could not validate the token")]
    AuthBackendUnavailable,

    #[error("no organization given, and the caller has no preferred organization")]
    OrganizationRequired,
    #[error(
        "the idempotency key must be 8-255 characters from letters, digits, '_', '-', ':' and '.'"
    )]
    InvalidIdempotencyKey,
    #[error("unknown zone {0:?}")]
    UnknownZone(String),
    #[error("unknown Kubernetes version {0:?} in this zone")]
    UnknownVersion(String),
    #[error("{field}: unknown machine tier {value:?}")]
    UnknownMachineTier { field: String, value: String },
    #[error("the exposure can only change once the cluster is Provisioned (it is {0})")]
    PhaseNotProvisioned(&'static str),
    #[error("public exposure is not available in zone {0:?}")]
    PublicExposureUnavailable(String),
    /// The version is offered but the cluster cannot move to it (down, or more than one minor).
    #[error("{}", .refusal.text(.to))]
    UpgradeRefused {
        to: String,
        refusal: crate::model::upgrade::UpgradeRefusal,
    },

    #[error("the organization's prepaid credit is used up: adding nodes needs credit")]
    InsufficientCredit,

    #[error("{}", forbidden_text(.0))]
    Forbidden(Forbidden),

    #[error("{} not found", .0.noun())]
    NotFound(Resource),

    #[error("{}", conflict_text(.0))]
    Conflict(Conflict),
    /// The organization made more changes this minute than its fair share.
    #[error("too many changes for this organization: retry in {retry_after_seconds} s")]
    RateLimited { retry_after_seconds: u64 },
    /// A conditional write found the object changed since its caller last saw it.
    #[error("the object changed since you last read it: read it again, then decide again")]
    PreconditionFailed,

    #[error("{0}")]
    Validation(Violations),

    #[error("{}", capacity_text(.0))]
    CapacityExhausted(Capacity),
    #[error("the service is temporarily unavailable; retry shortly")]
    ServiceUnavailable,

    /// A fault of ours. The text is logged, never sent.
    #[error("internal error: {0}")]
    Internal(String),
}

fn forbidden_text(f: &Forbidden) -> &'static str {
    match f {
        Forbidden::NotMember => "you are not a member of this organization",
        Forbidden::NotSuperAdmin => "this action needs the super_admin role in the organization",
        Forbidden::NoWriteRights => "this action needs the super_admin role",
        Forbidden::AssistantNotAllowed => {
            "the assistant may not allocate or release Elastic IPs or change firewall rules"
        }
    }
}

fn conflict_text(c: &Conflict) -> String {
    match c {
        Conflict::NameTaken { resource, name } => {
            let noun = resource.noun();
            let article = if noun.starts_with(['a', 'e', 'i', 'o', 'u', 'E']) {
                "an"
            } else {
                "a"
            };
            format!("{article} {noun} named {name:?} already exists")
        }
        Conflict::IdempotencyKeyReused => {
            "this idempotency key was used with a different request".into()
        }
        Conflict::IdempotencyKeyInProgress => {
            "a request with this idempotency key is still in progress".into()
        }
        Conflict::ChangeInFlight => "another exposure change is in flight".into(),
        Conflict::FirewallChangeInFlight => {
            "another control-plane firewall change is in flight; wait for its operation to finish"
                .into()
        }
        Conflict::LastPool => "the last node pool of a cluster cannot be deleted".into(),
        Conflict::ExposureMismatch {
            network_mode,
            allowed,
        } => {
            format!(
                "a cluster in network mode {network_mode} allows only exposure={allowed} Elastic IPs"
            )
        }
        Conflict::InvalidState {
            resource,
            status,
            operation,
        } => {
            format!(
                "a {} in status {status} cannot be {operation}",
                resource.noun()
            )
        }
        Conflict::ClusterNotProvisioned { phase } => {
            format!("the cluster must be Provisioned (it is {phase})")
        }
        Conflict::ClusterDeleting => "the cluster is being deleted".into(),
        Conflict::ClusterFailed => "the cluster failed: it can only be read and deleted".into(),
        Conflict::LastCredential => {
            "the last credential of an auth server cannot be removed".into()
        }
        Conflict::ConcurrentModification => {
            "the object was changed concurrently; retry the request".into()
        }
        Conflict::ClusterBusy => "the cluster is still carrying out another change (an upgrade, an exposure change or a node pool's change): wait for its operation to finish".into(),
    }
}

fn capacity_text(c: &Capacity) -> String {
    match c {
        Capacity::ZoneNodes => "the zone has no capacity for more nodes".into(),
        Capacity::AddressPool { exposure } => {
            format!("the {exposure} Elastic IP address pool is exhausted")
        }
        Capacity::PublicPoolDisabled => {
            "the public Elastic IP pool is disabled in this zone".into()
        }
    }
}

impl DomainError {
    /// Whether the failure is the service's, not the request's: a retry of the same request
    /// may succeed (the account platform or capacity came back, the fault passed). Such an
    /// outcome is never remembered for an idempotency key, so the retry runs anew.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            DomainError::AuthBackendUnavailable
                | DomainError::CapacityExhausted(_)
                | DomainError::ServiceUnavailable
                | DomainError::Internal(_)
        )
    }

    /// The stable machine code. Never changes once shipped.
    pub fn code(&self) -> &'static str {
        match self {
            DomainError::Unauthorized(_) => "unauthorized",
            DomainError::AuthBackendUnavailable => "auth_backend_unavailable",
            DomainError::OrganizationRequired => "organization_required",
            DomainError::InvalidIdempotencyKey => "invalid_idempotency_key",
            DomainError::UnknownZone(_) => "unknown_zone",
            DomainError::UnknownVersion(_) => "unknown_version",
            DomainError::UnknownMachineTier { .. } => "unknown_machine_tier",
            DomainError::PhaseNotProvisioned(_) => "phase_not_provisioned",
            DomainError::PublicExposureUnavailable(_) => "public_exposure_unavailable",
            DomainError::UpgradeRefused { .. } => "upgrade_not_allowed",
            DomainError::InsufficientCredit => "insufficient_credit",
            DomainError::Forbidden(Forbidden::AssistantNotAllowed) => "assistant_not_allowed",
            DomainError::Forbidden(_) => "forbidden",
            DomainError::NotFound(_) => "not_found",
            DomainError::Conflict(c) => match c {
                Conflict::NameTaken { .. } => "name_conflict",
                Conflict::IdempotencyKeyReused => "idempotency_key_reused",
                Conflict::IdempotencyKeyInProgress => "idempotency_key_in_progress",
                Conflict::ChangeInFlight | Conflict::FirewallChangeInFlight => "change_in_flight",
                Conflict::LastPool => "last_pool",
                Conflict::ExposureMismatch { .. } => "exposure_mismatch",
                Conflict::InvalidState { .. } => "invalid_state",
                Conflict::ClusterNotProvisioned { .. } => "cluster_not_provisioned",
                Conflict::ClusterDeleting => "cluster_deleting",
                Conflict::ClusterFailed => "cluster_failed",
                Conflict::LastCredential => "last_credential",
                Conflict::ConcurrentModification => "concurrent_modification",
                Conflict::ClusterBusy => "change_in_flight",
            },
            DomainError::PreconditionFailed => "precondition_failed",
            DomainError::RateLimited { .. } => "rate_limited",
            DomainError::Validation(_) => "validation_failed",
            DomainError::CapacityExhausted(_) => "capacity_exhausted",
            DomainError::ServiceUnavailable => "service_unavailable",
            DomainError::Internal(_) => "internal_error",
        }
    }

    /// The text a client sees. Internal faults say nothing about their cause.
    pub fn public_detail(&self) -> String {
        match self {
            DomainError::Internal(_) => "an internal error occurred; it has been logged".into(),
            other => other.to_string(),
        }
    }

    /// Seconds a client should wait before retrying, where a retry is worth making later.
    pub fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            DomainError::CapacityExhausted(_) | DomainError::ServiceUnavailable => Some(5),
            DomainError::RateLimited {
                retry_after_seconds,
            } => Some(*retry_after_seconds),
            _ => None,
        }
    }

    pub fn validation(field: impl Into<String>, message: impl Into<String>) -> Self {
        DomainError::Validation(Violations::one(field, message))
    }

    pub fn conflict(c: Conflict) -> Self {
        DomainError::Conflict(c)
    }
}

impl From<Violations> for DomainError {
    fn from(v: Violations) -> Self {
        DomainError::Validation(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_tell_the_client_nothing_internal() {
        let e = DomainError::Internal("relation \"clusters\" does not exist".into());
        assert!(!e.public_detail().contains("relation"));
    }

    #[test]
    fn every_503_carries_a_retry_hint() {
        assert!(
            DomainError::ServiceUnavailable
                .retry_after_seconds()
                .is_some()
        );
        assert!(
            DomainError::CapacityExhausted(Capacity::PublicPoolDisabled)
                .retry_after_seconds()
                .is_some()
        );
    }

    #[test]
    fn a_taken_name_reads_with_its_article() {
        let taken = |resource| {
            conflict_text(&Conflict::NameTaken {
                resource,
                name: "web".into(),
            })
        };
        assert_eq!(
            taken(Resource::Cluster),
            "a cluster named \"web\" already exists"
        );
        assert_eq!(
            taken(Resource::AuthServer),
            "an auth server named \"web\" already exists"
        );
        assert_eq!(
            taken(Resource::ElasticIp),
            "an Elastic IP named \"web\" already exists"
        );
    }
}
