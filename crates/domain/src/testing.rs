//! Fixtures and mock wiring for tests of the domain and of the adapters (feature `mocks`):
//! fixed time, predictable ids, callers, organizations, clusters, and a JSON renderer.

use crate::model::maintenance_window::MaintenanceWindow;
use crate::model::upgrade::SurgeSettings;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, TimeZone, Utc};
use uuid::Uuid;

use crate::error::DomainError;
use crate::model::catalog::Catalog;
use crate::model::cluster::{Cluster, ClusterPhase, Exposure, NetworkMode, Registration};
use crate::model::idempotency::Replay;
use crate::model::identity::{
    Billing, Caller, ClientKind, Membership, OrgSummary, Organization, Plan, Role, User,
};
use crate::model::node_pool::{NodePool, PoolStatus};
use crate::names::DnsLabel;
use crate::ports::clock::{Clock, IdSource};
use crate::ports::identity::MockIdentityProvider;
use crate::ports::provisioning::MockCloudProvider;
use crate::ports::secrets::MockSecretVault;
use crate::ports::storage::{
    MockApprovalStore, MockAuditLog, MockAuthServerRepository, MockChangeFeed,
    MockClusterRepository, MockIdempotencyStore, MockKubeconfigCredentials, MockOperationLog,
    MockSessionStore,
};
use crate::service::{Ports, Record, Services, Settings};

pub const ORG_A: Uuid = Uuid::from_u128(0xa0a0_a0a0_0000_4000_8000_0000_0000_000a);
pub const ORG_B: Uuid = Uuid::from_u128(0xb0b0_b0b0_0000_4000_8000_0000_0000_000b);
pub const CLUSTER_1: Uuid = Uuid::from_u128(0xc1c1_c1c1_0000_4000_8000_0000_0000_0001);

/// A fixed instant, `secs` after 2026-01-01T00:00:00Z.
pub fn at(secs: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(1_767_225_600 + secs, 0)
        .single()
        .unwrap_or_default()
}

/// A clock that always says `at(0)` unless moved.
#[derive(Debug, Default)]
pub struct FixedClock(pub AtomicU64);

impl Clock for FixedClock {
    fn now(&self) -> DateTime<Utc> {
        at(self.0.load(Ordering::SeqCst) as i64)
    }
}

/// Ids 1, 2, 3, … as UUIDs.
#[derive(Debug, Default)]
pub struct SequentialIds(AtomicU64);

impl IdSource for SequentialIds {
    fn new_id(&self) -> Uuid {
        Uuid::from_u128(
            0x1000_0000_0000_4000_8000_0000_0000_0000
                + u128::from(self.0.fetch_add(1, Ordering::SeqCst) + 1),
        )
    }
}

pub fn slug_of(org: Uuid) -> &'static str {
    if org == ORG_A {
        "acme"
    } else if org == ORG_B {
        "globex"
    } else {
        "other"
    }
}

/// A caller with these memberships.
pub fn caller(memberships: &[(Uuid, Role)]) -> Caller {
    Caller {
        user: User {
            id: "user-1".into(),
            email: Some("user@example.com".into()),
        },
        preferred_organization: None,
        memberships: memberships
            .iter()
            .map(|(id, role)| Membership {
                organization: OrgSummary {
                    id: *id,
                    slug: slug_of(*id).into(),
                },
                role: *role,
            })
            .collect(),
        client: ClientKind::Api,
    }
}

pub fn organization(id: Uuid, plan: Plan, credit_cents: i64) -> Organization {
    Organization {
        id,
        slug: slug_of(id).into(),
        billing: Billing { plan, credit_cents },
    }
}

pub fn pool(name: &str, count: u32) -> NodePool {
    NodePool {
        name: DnsLabel::from_trusted(name.into()),
        size: "kube.c5.large".into(),
        count,
        auto_scale: false,
        min_nodes: 1,
        max_nodes: None,
        labels: Default::default(),
        taints: Vec::new(),
        tags: Default::default(),
        root_volume_size_gib: 50,
        version: "v1.32.4".into(),
        surge: SurgeSettings::DEFAULT,
        status: PoolStatus::Ready,
        created_at: at(0),
        updated_at: at(0),
    }
}

/// A cluster of `org` in `phase`, one pool `default` of 3 nodes, revision 5.
pub fn cluster(org: Uuid, phase: ClusterPhase) -> Cluster {
    Cluster {
        id: CLUSTER_1,
        organization_id: org,
        organization_slug: slug_of(org).into(),
        name: DnsLabel::from_trusted("prod-1".into()),
        description: None,
        tags: vec![],
        zone: "zone-1".into(),
        version: "v1.32.4".into(),
        control_plane_option_id: "cp-standard".into(),
        exposure: Exposure::Private,
        network_mode: NetworkMode::Intranet,
        phase,
        failure_reason: None,
        public_hostname: None,
        api_endpoint: Some("https://prod-1-c1c1c1c1.internal:6443".into()),
        node_pools: vec![pool("default", 3)],
        hub_registration: Registration::PENDING,
        default_environment: Registration::PENDING,
        exposure_change: None,
        upgrade: None,
        maintenance_window: MaintenanceWindow::default(),
        auto_upgrade: false,
        last_auto_upgrade_window: None,
        control_plane_firewall: Default::default(),
        control_plane_firewall_change: None,
        created_at: at(0),
        updated_at: at(0),
        revision: 5,
        deleted_at: None,
    }
}

/// A stand-in recorder: an answer as its Debug text after `status`, a refusal as its code, so
/// a replay can be told from a fresh answer. The use cases never read what a recorder wrote;
/// they carry it to the store and back.
pub struct JsonRender(pub u16);

impl<T: std::fmt::Debug> Record<T> for JsonRender {
    fn answer(&self, value: &T) -> Replay {
        Replay(format!("{} {value:?}", self.0).into_bytes())
    }

    fn refusal(&self, error: &DomainError) -> Replay {
        Replay(format!("{} {}", self.0, error.code()).into_bytes())
    }
}

/// Every port as a mock, to set expectations on before building [`Services`].
#[derive(Default)]
pub struct Mocks {
    pub clusters: MockClusterRepository,
    pub idempotency: MockIdempotencyStore,
    pub auth_servers: MockAuthServerRepository,
    pub audit: MockAuditLog,
    pub operations: MockOperationLog,
    pub credentials: MockKubeconfigCredentials,
    pub sessions: MockSessionStore,
    pub approvals: MockApprovalStore,
    pub changes: MockChangeFeed,
    pub identity: MockIdentityProvider,
    pub cloud: MockCloudProvider,
    pub vault: MockSecretVault,
}

impl Mocks {
    pub fn new() -> Self {
        Self::default()
    }

    /// Services over these mocks, the built-in catalog, a fixed clock and sequential ids.
    pub fn services(self) -> Services {
        self.services_with(Settings::default())
    }

    pub fn services_with(self, settings: Settings) -> Services {
        let ports = Ports {
            clusters: Arc::new(self.clusters),
            idempotency: Arc::new(self.idempotency),
            auth_servers: Arc::new(self.auth_servers),
            audit: Arc::new(self.audit),
            operations: Arc::new(self.operations),
            credentials: Arc::new(self.credentials),
            sessions: Arc::new(self.sessions),
            approvals: Arc::new(self.approvals),
            changes: Arc::new(self.changes),
            identity: Arc::new(self.identity),
            cloud: Arc::new(self.cloud),
            vault: Arc::new(self.vault),
            clock: Arc::new(FixedClock::default()),
            ids: Arc::new(SequentialIds::default()),
        };
        Services::new(ports, Catalog::builtin(), settings)
    }

    /// The cluster repository answers `cluster()` with this cluster.
    pub fn with_cluster(mut self, c: Cluster) -> Self {
        self.clusters
            .expect_cluster()
            .returning(move |_, _| Ok(Some(c.clone())));
        self
    }

    /// The platform knows these organizations.
    pub fn with_organizations(mut self, orgs: Vec<Organization>) -> Self {
        let fresh = orgs.clone();
        self.identity
            .expect_organization()
            .returning(move |r| Ok(orgs.iter().find(|o| r.matches(&o.id, &o.slug)).cloned()));
        self.identity
            .expect_organization_fresh()
            .returning(move |r| Ok(fresh.iter().find(|o| r.matches(&o.id, &o.slug)).cloned()));
        self
    }
}

/// A running operation of `CLUSTER_1` in `ORG_A`, asked by alice through the API.
pub fn running_operation(
    kind: crate::model::operation::OperationKind,
    resource: crate::model::audit::AuditResource,
    resource_id: String,
) -> crate::model::operation::ClusterOperation {
    crate::model::operation::ClusterOperation {
        id: Uuid::from_u128(0x0909),
        cluster_id: CLUSTER_1,
        organization_id: ORG_A,
        kind,
        resource,
        resource_id,
        requested_by: crate::model::audit::Actor {
            user_id: "alice".into(),
            email: None,
            client: ClientKind::Api,
        },
        request_id: None,
        status: crate::model::operation::OperationStatus::Running,
        attempts: 0,
        last_error: None,
        progress: None,
        created_at: at(0),
        updated_at: at(0),
        finished_at: None,
    }
}
