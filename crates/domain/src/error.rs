//! The one error of every use case. Each variant maps to exactly one HTTP status of spec §7 or
//! CONTRACT §1 and carries a stable `code` a client can switch on; the API crate renders it.

use crate::validation::Violations;

/// Why a request was not authenticated: the four texts of spec §5, verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    #[error("Authorization header missing")]
    HeaderMissing,
    #[error("scheme must be Bearer")]
    SchemeNotBearer,
    #[error("Bearer token is empty")]
    TokenEmpty,
    #[error("invalid bearer token")]
    InvalidToken,
}

/// Which kind of object a 404 or a name conflict is about.
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
        }
    }
}

/// The 409s, each with its own code (CONTRACT §1).
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
    /// The assistant's limits (spec §1).
    AssistantNotAllowed,
}

/// Which capacity ran out (503 `capacity_exhausted`).
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

    #[error(
        "no organization given: pass the `organization` query parameter or the X-Platform-Organization header, or set a preferred organization"
    )]
    OrganizationRequired,
    #[error("Idempotency-Key must be 8-255 characters from letters, digits, '_', '-', ':' and '.'")]
    InvalidIdempotencyKey,
    #[error("query parameter `{parameter}`: {message}")]
    InvalidQuery {
        parameter: &'static str,
        message: String,
    },
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

    #[error("the organization's prepaid credit is used up: adding nodes needs credit")]
    InsufficientCredit,

    #[error("{}", forbidden_text(.0))]
    Forbidden(Forbidden),

    #[error("{} not found", .0.noun())]
    NotFound(Resource),

    #[error("{}", conflict_text(.0))]
    Conflict(Conflict),

    #[error("request body too large: at most {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("request bodies must be application/json")]
    UnsupportedMediaType,
    #[error("{0}")]
    Validation(Violations),

    #[error("too many failed attempts; retry after {retry_after_seconds} s")]
    RateLimited { retry_after_seconds: u64 },

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
            format!("a {} named {name:?} already exists", resource.noun())
        }
        Conflict::IdempotencyKeyReused => {
            "this Idempotency-Key was used with a different request".into()
        }
        Conflict::IdempotencyKeyInProgress => {
            "a request with this Idempotency-Key is still in progress".into()
        }
        Conflict::ChangeInFlight => "another exposure change is in flight".into(),
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
    /// The HTTP status (spec §7, CONTRACT §1).
    pub fn status(&self) -> u16 {
        match self {
            DomainError::Unauthorized(_) => 401,
            DomainError::AuthBackendUnavailable => 502,
            DomainError::OrganizationRequired
            | DomainError::InvalidIdempotencyKey
            | DomainError::InvalidQuery { .. }
            | DomainError::UnknownZone(_)
            | DomainError::UnknownVersion(_)
            | DomainError::UnknownMachineTier { .. }
            | DomainError::PhaseNotProvisioned(_)
            | DomainError::PublicExposureUnavailable(_) => 400,
            DomainError::InsufficientCredit => 402,
            DomainError::Forbidden(_) => 403,
            DomainError::NotFound(_) => 404,
            DomainError::Conflict(_) => 409,
            DomainError::PayloadTooLarge { .. } => 413,
            DomainError::UnsupportedMediaType => 415,
            DomainError::Validation(_) => 422,
            DomainError::RateLimited { .. } => 429,
            DomainError::CapacityExhausted(_) | DomainError::ServiceUnavailable => 503,
            DomainError::Internal(_) => 500,
        }
    }

    /// The stable machine code (CONTRACT §1). Never changes once shipped.
    pub fn code(&self) -> &'static str {
        match self {
            DomainError::Unauthorized(_) => "unauthorized",
            DomainError::AuthBackendUnavailable => "auth_backend_unavailable",
            DomainError::OrganizationRequired => "organization_required",
            DomainError::InvalidIdempotencyKey => "invalid_idempotency_key",
            DomainError::InvalidQuery { .. } => "invalid_query",
            DomainError::UnknownZone(_) => "unknown_zone",
            DomainError::UnknownVersion(_) => "unknown_version",
            DomainError::UnknownMachineTier { .. } => "unknown_machine_tier",
            DomainError::PhaseNotProvisioned(_) => "phase_not_provisioned",
            DomainError::PublicExposureUnavailable(_) => "public_exposure_unavailable",
            DomainError::InsufficientCredit => "insufficient_credit",
            DomainError::Forbidden(Forbidden::AssistantNotAllowed) => "assistant_not_allowed",
            DomainError::Forbidden(_) => "forbidden",
            DomainError::NotFound(_) => "not_found",
            DomainError::Conflict(c) => match c {
                Conflict::NameTaken { .. } => "name_conflict",
                Conflict::IdempotencyKeyReused => "idempotency_key_reused",
                Conflict::IdempotencyKeyInProgress => "idempotency_key_in_progress",
                Conflict::ChangeInFlight => "change_in_flight",
                Conflict::LastPool => "last_pool",
                Conflict::ExposureMismatch { .. } => "exposure_mismatch",
                Conflict::InvalidState { .. } => "invalid_state",
                Conflict::ClusterNotProvisioned { .. } => "cluster_not_provisioned",
                Conflict::ClusterDeleting => "cluster_deleting",
                Conflict::ClusterFailed => "cluster_failed",
                Conflict::LastCredential => "last_credential",
                Conflict::ConcurrentModification => "concurrent_modification",
            },
            DomainError::PayloadTooLarge { .. } => "payload_too_large",
            DomainError::UnsupportedMediaType => "unsupported_media_type",
            DomainError::Validation(_) => "validation_failed",
            DomainError::RateLimited { .. } => "rate_limited",
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

    /// Seconds a client should wait before retrying, where the answer calls for `Retry-After`.
    pub fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            DomainError::RateLimited {
                retry_after_seconds,
            } => Some(*retry_after_seconds),
            DomainError::CapacityExhausted(_) | DomainError::ServiceUnavailable => Some(5),
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
    fn the_four_401_texts_are_the_specs_words() {
        let texts: Vec<String> = [
            AuthFailure::HeaderMissing,
            AuthFailure::SchemeNotBearer,
            AuthFailure::TokenEmpty,
            AuthFailure::InvalidToken,
        ]
        .iter()
        .map(|f| DomainError::Unauthorized(*f).to_string())
        .collect();
        assert_eq!(
            texts,
            [
                "Authorization header missing",
                "scheme must be Bearer",
                "Bearer token is empty",
                "invalid bearer token"
            ]
        );
    }

    #[test]
    fn every_error_maps_to_the_contracts_status_and_code() {
        let cases: Vec<(DomainError, u16, &str)> = vec![
            (
                DomainError::Unauthorized(AuthFailure::InvalidToken),
                401,
                "unauthorized",
            ),
            (
                DomainError::AuthBackendUnavailable,
                502,
                "auth_backend_unavailable",
            ),
            (
                DomainError::OrganizationRequired,
                400,
                "organization_required",
            ),
            (
                DomainError::InvalidIdempotencyKey,
                400,
                "invalid_idempotency_key",
            ),
            (
                DomainError::InvalidQuery {
                    parameter: "page",
                    message: "x".into(),
                },
                400,
                "invalid_query",
            ),
            (DomainError::UnknownZone("z".into()), 400, "unknown_zone"),
            (
                DomainError::UnknownVersion("v".into()),
                400,
                "unknown_version",
            ),
            (
                DomainError::UnknownMachineTier {
                    field: "f".into(),
                    value: "v".into(),
                },
                400,
                "unknown_machine_tier",
            ),
            (
                DomainError::PhaseNotProvisioned("Pending"),
                400,
                "phase_not_provisioned",
            ),
            (
                DomainError::PublicExposureUnavailable("z".into()),
                400,
                "public_exposure_unavailable",
            ),
            (DomainError::InsufficientCredit, 402, "insufficient_credit"),
            (
                DomainError::Forbidden(Forbidden::NotMember),
                403,
                "forbidden",
            ),
            (
                DomainError::Forbidden(Forbidden::NoWriteRights),
                403,
                "forbidden",
            ),
            (
                DomainError::Forbidden(Forbidden::AssistantNotAllowed),
                403,
                "assistant_not_allowed",
            ),
            (DomainError::NotFound(Resource::Cluster), 404, "not_found"),
            (
                DomainError::Conflict(Conflict::NameTaken {
                    resource: Resource::Cluster,
                    name: "a".into(),
                }),
                409,
                "name_conflict",
            ),
            (
                DomainError::Conflict(Conflict::IdempotencyKeyReused),
                409,
                "idempotency_key_reused",
            ),
            (
                DomainError::Conflict(Conflict::IdempotencyKeyInProgress),
                409,
                "idempotency_key_in_progress",
            ),
            (
                DomainError::Conflict(Conflict::ChangeInFlight),
                409,
                "change_in_flight",
            ),
            (DomainError::Conflict(Conflict::LastPool), 409, "last_pool"),
            (
                DomainError::Conflict(Conflict::ExposureMismatch {
                    network_mode: "intranet",
                    allowed: "private",
                }),
                409,
                "exposure_mismatch",
            ),
            (
                DomainError::Conflict(Conflict::InvalidState {
                    resource: Resource::ElasticIp,
                    status: "Pending",
                    operation: "released",
                }),
                409,
                "invalid_state",
            ),
            (
                DomainError::Conflict(Conflict::ClusterNotProvisioned { phase: "Pending" }),
                409,
                "cluster_not_provisioned",
            ),
            (
                DomainError::Conflict(Conflict::ClusterDeleting),
                409,
                "cluster_deleting",
            ),
            (
                DomainError::Conflict(Conflict::ClusterFailed),
                409,
                "cluster_failed",
            ),
            (
                DomainError::Conflict(Conflict::LastCredential),
                409,
                "last_credential",
            ),
            (
                DomainError::PayloadTooLarge { limit: 1 },
                413,
                "payload_too_large",
            ),
            (
                DomainError::UnsupportedMediaType,
                415,
                "unsupported_media_type",
            ),
            (DomainError::validation("f", "m"), 422, "validation_failed"),
            (
                DomainError::RateLimited {
                    retry_after_seconds: 3,
                },
                429,
                "rate_limited",
            ),
            (
                DomainError::CapacityExhausted(Capacity::ZoneNodes),
                503,
                "capacity_exhausted",
            ),
            (DomainError::ServiceUnavailable, 503, "service_unavailable"),
        ];
        for (e, status, code) in cases {
            assert_eq!((e.status(), e.code()), (status, code), "{e:?}");
        }
    }

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
}
