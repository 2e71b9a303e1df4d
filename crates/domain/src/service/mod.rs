//! The use cases: one method per operation of the service. Each
//! enforces every rule through the ports and answers with one [`DomainError`].
//!
//! Every change goes through one pipeline (`pipeline.rs`): authorize → claim the idempotency
//! key → load → check the precondition → decide → commit with the audit event and the
//! operation → settle the key. A write use case is its decision.

mod aggregates;
mod approvals;
mod audit;
mod auth_servers;
mod catalog;
mod clusters;
mod elastic_ips;
mod firewall_rules;
mod idempotency;
mod kubeconfigs;
mod node_pools;
mod nodes;
mod operations;
mod pipeline;
mod sessions;
mod upgrades;

use std::sync::Arc;

pub use self::approvals::Asked;
pub use self::audit::AuditPage;
pub use self::auth_servers::Deleted;
pub use self::clusters::{ClusterPage, ExposureOutcome, StateAnswer};
pub use self::idempotency::{Answer, Keyed, Record};
pub use self::kubeconfigs::{KubeconfigAnswer, KubeconfigRequest, Reviewed};
pub use self::operations::OperationPage;
pub use self::pipeline::Command;
pub(crate) use self::pipeline::{Decision, Target};
pub use self::upgrades::UpgradeOptions;

use uuid::Uuid;

use crate::error::{Capacity, Conflict, DomainError, Resource};
use crate::model::audit::{Actor, Audit, AuditEvent, Channel, Outcome, Parent};
use crate::model::catalog::Catalog;
use crate::model::cluster::Cluster;
use crate::model::identity::Caller;
use crate::model::operation::{ClusterOperation, OperationKind, OperationStatus};
use crate::ports::budget::{Unlimited, WriteBudget};
use crate::ports::clock::{Clock, IdSource};
use crate::ports::identity::IdentityProvider;
use crate::ports::provisioning::CloudProvider;
use crate::ports::secrets::SecretVault;
use crate::ports::storage::{
    ApprovalStore, AuditLog, AuthServerRepository, ChangeFeed, ClusterRepository, Freshness,
    IdempotencyStore, KubeconfigCredentials, OperationLog, SessionStore, StoreError, UniqueRule,
};

/// The longest lifetime a download may ask for unless the operator says otherwise: 30 days.
pub const KUBECONFIG_EXPIRY_MAX_SECONDS_DEFAULT: u32 = 30 * 24 * 3600;

/// Settings the rules depend on.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Public API hostnames end in this suffix.
    pub public_hostname_suffix: String,
    /// Elastic IP annotations are `{annotation_domain}/elastic-ip`.
    pub annotation_domain: String,
    /// An operator option: kubeconfig downloads need super_admin.
    pub kubeconfig_requires_super_admin: bool,
    /// The lifetime of a download's own credential when the download names none; `None`: a
    /// download without one gets the cluster's standing credential.
    pub kubeconfig_expiry_default_seconds: Option<u32>,
    /// The longest lifetime a download may ask for.
    pub kubeconfig_expiry_max_seconds: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            public_hostname_suffix: ".k8s.example.com".into(),
            annotation_domain: "k8s.example.com".into(),
            kubeconfig_requires_super_admin: false,
            kubeconfig_expiry_default_seconds: None,
            kubeconfig_expiry_max_seconds: KUBECONFIG_EXPIRY_MAX_SECONDS_DEFAULT,
        }
    }
}

/// Every port the use cases need.
#[derive(Clone)]
pub struct Ports {
    pub clusters: Arc<dyn ClusterRepository>,
    pub idempotency: Arc<dyn IdempotencyStore>,
    pub auth_servers: Arc<dyn AuthServerRepository>,
    pub audit: Arc<dyn AuditLog>,
    pub operations: Arc<dyn OperationLog>,
    pub credentials: Arc<dyn KubeconfigCredentials>,
    pub sessions: Arc<dyn SessionStore>,
    pub approvals: Arc<dyn ApprovalStore>,
    pub changes: Arc<dyn ChangeFeed>,
    pub identity: Arc<dyn IdentityProvider>,
    pub cloud: Arc<dyn CloudProvider>,
    pub vault: Arc<dyn SecretVault>,
    pub clock: Arc<dyn Clock>,
    pub ids: Arc<dyn IdSource>,
}

/// The application: the use cases over the ports.
#[derive(Clone)]
pub struct Services {
    ports: Ports,
    catalog: Arc<Catalog>,
    settings: Arc<Settings>,
    /// The request these use cases serve, when a face gave one: recorded as the cause of the
    /// provisioning work a change schedules.
    request_id: Option<Arc<str>>,
    /// The trace the request is part of (W3C `traceparent` text, opaque here), passed on to
    /// the provisioning work it schedules.
    trace: Option<Arc<str>>,
    /// The face of the service these use cases serve, as the audit trail records it.
    via: Channel,
    /// Each organization's writes per minute (unlimited unless a face sets one).
    writes: Arc<dyn WriteBudget>,
    /// The approval the changes run from, when an assistant asked for them.
    approval: Option<Uuid>,
    /// How long an approval waits for its person.
    approval_ttl: chrono::Duration,
}

/// Where the operation a change started can be followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OperationRef {
    pub cluster_id: Uuid,
    pub id: Uuid,
}

/// A change's answer with the operation it started, if it handed work to provisioning; reads
/// as the answer itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Scheduled<T> {
    pub value: T,
    pub operation: Option<OperationRef>,
}

impl<T> Scheduled<T> {
    pub fn into_value(self) -> T {
        self.value
    }
}

impl<T> std::ops::Deref for Scheduled<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// How often a change decided on a stale revision is decided again before giving up with
/// `Conflict::ConcurrentModification`.
const MAX_ATTEMPTS: usize = 8;

impl Services {
    pub fn new(ports: Ports, catalog: Catalog, settings: Settings) -> Self {
        Services {
            ports,
            catalog: Arc::new(catalog),
            settings: Arc::new(settings),
            request_id: None,
            trace: None,
            via: Channel::Api,
            writes: Arc::new(Unlimited),
            approval: None,
            approval_ttl: chrono::Duration::minutes(crate::model::approval::DEFAULT_TTL_MINUTES),
        }
    }

    /// The same use cases with approvals that wait `ttl` for their person.
    pub fn with_approval_ttl(self, ttl: chrono::Duration) -> Services {
        Services {
            approval_ttl: ttl,
            ..self
        }
    }

    /// The same use cases serving another face of the service (the console), as the audit
    /// trail records it.
    pub fn via(self, channel: Channel) -> Services {
        Services {
            via: channel,
            ..self
        }
    }

    /// The operation that follows a change `caller` asked of the cluster `cluster_id`,
    /// running from now.
    pub(crate) fn new_operation(
        &self,
        caller: &Caller,
        cluster_id: Uuid,
        organization_id: Uuid,
        kind: OperationKind,
        audit: &Audit,
    ) -> ClusterOperation {
        let now = self.ports.clock.now();
        ClusterOperation {
            id: self.ports.ids.new_id(),
            cluster_id,
            organization_id,
            kind,
            resource: audit.resource,
            resource_id: audit.resource_id.clone(),
            requested_by: Actor::of(caller),
            request_id: self.request_id.as_deref().map(str::to_owned),
            status: OperationStatus::Running,
            attempts: 0,
            last_error: None,
            progress: None,
            created_at: now,
            updated_at: now,
            finished_at: None,
        }
    }

    /// The audit event of a change `caller` made in `organization_id`, stamped now.
    pub(crate) fn audit_event(
        &self,
        caller: &Caller,
        organization_id: Uuid,
        parent: Option<Parent>,
        audit: Audit,
        outcome: Outcome,
    ) -> AuditEvent {
        let Audit {
            resource,
            resource_id,
            action,
            changes,
        } = audit;
        AuditEvent {
            id: self.ports.ids.new_id(),
            organization_id,
            at: self.ports.clock.now(),
            actor: Actor::of(caller),
            via: self.via,
            resource,
            resource_id,
            parent,
            action: action.as_str().to_owned(),
            changes,
            request_id: self.request_id.as_deref().map(str::to_owned),
            outcome,
            approval: self.approval,
        }
    }

    /// The same use cases, counting each organization's writes against `budget`.
    pub fn with_write_budget(self, budget: Arc<dyn WriteBudget>) -> Services {
        Services {
            writes: budget,
            ..self
        }
    }

    /// Counts a write against the organization it changes: called once the caller is
    /// authorized for it, so no outsider spends an organization's budget.
    pub(crate) fn spend_write(&self, organization: &Uuid) -> Result<(), DomainError> {
        self.writes
            .take(*organization)
            .map_err(|retry_after_seconds| DomainError::RateLimited {
                retry_after_seconds,
            })
    }

    /// The same use cases serving one request: the changes they make name it as their cause.
    pub fn for_request(&self, request_id: &str) -> Services {
        Services {
            request_id: Some(Arc::from(request_id)),
            ..self.clone()
        }
    }

    /// The same use cases as part of trace `trace` (a W3C `traceparent` naming the caller's
    /// span): the provisioning work they schedule joins it.
    pub fn traced(self, trace: &str) -> Services {
        Services {
            trace: Some(Arc::from(trace)),
            ..self
        }
    }

    /// What the provisioning work a change schedules records as its cause.
    pub(crate) fn cause(&self) -> Option<String> {
        crate::ports::storage::cause(self.request_id.as_deref(), self.trace.as_deref())
    }

    pub fn catalog_data(&self) -> &Catalog {
        &self.catalog
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// The caller a bearer token belongs to. Its span is at `debug`: every request
    /// authenticates, and its lines carry the request's fields already.
    #[tracing::instrument(level = "debug", skip_all)]
    pub async fn authenticate(
        &self,
        token: &crate::model::secret::Secret,
    ) -> Result<crate::model::identity::Caller, DomainError> {
        crate::access::authenticate(self.ports.identity.as_ref(), token).await
    }

    /// Loads a live cluster by its id, as current as the database: unknown or gone →
    /// `DomainError::NotFound`.
    async fn live_cluster(&self, id: Uuid) -> Result<Cluster, DomainError> {
        self.live_cluster_as(id, Freshness::Latest).await
    }

    /// [`Self::live_cluster`] with the freshness a read asked for.
    async fn live_cluster_as(
        &self,
        id: Uuid,
        freshness: Freshness,
    ) -> Result<Cluster, DomainError> {
        let cluster = self.cluster_as(id, freshness).await?;
        if cluster.is_gone() {
            Err(DomainError::NotFound(Resource::Cluster))
        } else {
            Ok(cluster)
        }
    }

    /// Loads a cluster by its id, tombstones included (an idempotent replay of a deletion
    /// must still find the organization its key belongs to).
    async fn any_cluster(&self, id: Uuid) -> Result<Cluster, DomainError> {
        self.cluster_as(id, Freshness::Latest).await
    }

    async fn cluster_as(&self, id: Uuid, freshness: Freshness) -> Result<Cluster, DomainError> {
        self.ports
            .clusters
            .cluster(id, freshness)
            .await
            .map_err(store_error)?
            .ok_or(DomainError::NotFound(Resource::Cluster))
    }
}

/// Storage errors as the caller sees them: a lost race or a name already taken is the caller's
/// `DomainError::Conflict`, an unreachable database `DomainError::ServiceUnavailable`, anything
/// else our `DomainError::Internal`.
pub(crate) fn store_error(e: StoreError) -> DomainError {
    match e {
        StoreError::Duplicate(rule) => DomainError::Conflict(Conflict::NameTaken {
            resource: rule_resource(rule),
            name: String::new(),
        }),
        StoreError::RevisionMismatch => DomainError::Conflict(Conflict::ConcurrentModification),
        StoreError::LeaseLost => DomainError::Conflict(Conflict::IdempotencyKeyInProgress),
        StoreError::CapacityExhausted => DomainError::CapacityExhausted(Capacity::ZoneNodes),
        StoreError::Unavailable(_) => DomainError::ServiceUnavailable,
        StoreError::Internal(m) => DomainError::Internal(m),
    }
}

fn rule_resource(rule: UniqueRule) -> Resource {
    match rule {
        UniqueRule::ClusterName => Resource::Cluster,
        UniqueRule::PoolName => Resource::NodePool,
        UniqueRule::ElasticIpName | UniqueRule::ElasticIpAddress => Resource::ElasticIp,
        UniqueRule::FirewallRuleName => Resource::FirewallRule,
        UniqueRule::AuthServerName => Resource::AuthServer,
        UniqueRule::CredentialName => Resource::Credential,
    }
}

/// A duplicate on the named rule becomes `name_conflict` naming what was taken.
pub(crate) fn name_taken(e: StoreError, resource: Resource, name: &str) -> DomainError {
    match e {
        StoreError::Duplicate(_) => DomainError::Conflict(Conflict::NameTaken {
            resource,
            name: name.to_owned(),
        }),
        other => store_error(other),
    }
}

/// Refuses changes to a cluster that is being deleted or has failed.
pub(crate) fn require_changeable(cluster: &Cluster) -> Result<(), DomainError> {
    use crate::model::cluster::ClusterPhase;
    match cluster.phase {
        ClusterPhase::Deleting => Err(DomainError::Conflict(Conflict::ClusterDeleting)),
        ClusterPhase::Failed => Err(DomainError::Conflict(Conflict::ClusterFailed)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests;
