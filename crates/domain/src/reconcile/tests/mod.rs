//! Reconciliation rules: [`next_work`] on every state of the lifecycle, and what
//! [`reconcile_step`] commits, against an in-memory store and a scripted cloud.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::executor::block_on;
use uuid::Uuid;

use crate::model::audit::AuditResource;
use crate::model::cluster::ControlPlaneFirewall;
use crate::model::cluster::{
    Cluster, ClusterPhase, Exposure, ExposureChange, ExposureChangeStatus, Registration,
    RegistrationReason, SubStatus,
};
use crate::model::elastic_ip::{AddressPool, ElasticIp, ElasticIpStatus};
use crate::model::firewall::IpCidr;
use crate::model::firewall::{
    Direction, FirewallRule, FirewallRuleStatus, Ipv4Cidr, PortRange, Protocol,
};
use crate::model::kubeconfig::{ClusterCredentials, SealedCredentials};
use crate::model::node::{Node, NodeStatus};
use crate::model::node_pool::{NodePool, PoolStatus};
use crate::model::node_pool::{Taint, TaintEffect};
use crate::model::operation::{ClusterOperation, OperationKind, OperationStatus};
use crate::model::secret::{PasswordHash, SealedSecret, Secret, TokenDigest};
use crate::names::{DnsLabel, NodeName};
use crate::ports::provisioning::{CloudProvider, Endpoint, ProviderError, Step, StepOutcome};
use crate::ports::secrets::{SecretVault, VaultError};
use crate::ports::storage::{Change, StoreError};
use crate::reconcile::memory::{MemoryClusters, MemoryDb};
use crate::reconcile::settle;
use crate::reconcile::{ClusterState, Work};
use crate::reconcile::{
    Outcome, Progress, ReconcileError, next_work, node_name, reconcile_step, reconcile_step_report,
};
use crate::service::Ports;
use crate::testing::{CLUSTER_1, FixedClock, Mocks, ORG_A, SequentialIds, at, cluster, pool};

// ---------------------------------------------------------------- fixtures

fn node(name: &str, pool: &str, status: NodeStatus, created: i64) -> Node {
    Node {
        name: NodeName::parse(name).unwrap(),
        pool: DnsLabel::from_trusted(pool.into()),
        status,
        version: "v1.32.4".into(),
        created_at: at(created),
        labels: Default::default(),
        taints: Vec::new(),
    }
}

fn eip(n: u128, status: ElasticIpStatus) -> ElasticIp {
    ElasticIp {
        id: Uuid::from_u128(0xe1e1_0000_0000_4000_8000_0000_0000_0000 + n),
        cluster_id: CLUSTER_1,
        name: None,
        exposure: Exposure::Private,
        status,
        address: Ipv4Addr::new(10, 96, 0, n as u8),
        failure_reason: None,
        created_at: at(0),
        updated_at: at(0),
    }
}

fn rule(n: u128, status: FirewallRuleStatus) -> FirewallRule {
    FirewallRule {
        id: Uuid::from_u128(0xf1f1_0000_0000_4000_8000_0000_0000_0000 + n),
        cluster_id: CLUSTER_1,
        name: None,
        description: None,
        direction: Direction::Ingress,
        protocol: Protocol::Tcp,
        source_cidrs: vec![Ipv4Cidr::parse("203.0.113.0/24").unwrap()],
        port_range: Some(PortRange { from: 443, to: 443 }),
        status,
        failure_reason: None,
        created_at: at(0),
        updated_at: at(0),
    }
}

const READY: Registration = Registration {
    status: SubStatus::Ready,
    reason: None,
};

/// A freshly created cluster: `Pending`, pool `default` of `count` nodes `Provisioning`.
fn new_cluster(count: u32) -> Cluster {
    let mut c = cluster(ORG_A, ClusterPhase::Pending);
    c.api_endpoint = None;
    c.node_pools = vec![NodePool {
        status: PoolStatus::Provisioning,
        ..pool("default", count)
    }];
    c
}

/// A cluster whose control plane is up and registered, pool `default` of 3 nodes.
fn ready_cluster(phase: ClusterPhase) -> Cluster {
    let mut c = cluster(ORG_A, phase);
    c.hub_registration = READY;
    c.default_environment = READY;
    c
}

fn state(cluster: Cluster) -> ClusterState {
    ClusterState {
        cluster,
        nodes: vec![],
        elastic_ips: vec![],
        firewall_rules: vec![],
    }
}

fn three_ready_nodes() -> Vec<Node> {
    vec![
        node("prod-1-default-aaaaa", "default", NodeStatus::Ready, 1),
        node("prod-1-default-bbbbb", "default", NodeStatus::Ready, 2),
        node("prod-1-default-ccccc", "default", NodeStatus::Ready, 3),
    ]
}

/// A provisioned cluster with its three nodes: nothing to do.
fn provisioned() -> ClusterState {
    ClusterState {
        nodes: three_ready_nodes(),
        ..state(ready_cluster(ClusterPhase::Provisioned))
    }
}

// ---------------------------------------------------------------- next_work

#[test]
fn next_work_gone_or_failed_clusters_have_none() {
    let mut gone = provisioned();
    gone.cluster.deleted_at = Some(at(9));
    gone.cluster.phase = ClusterPhase::Deleting;
    assert_eq!(next_work(&gone), None);
    let failed = state(ready_cluster(ClusterPhase::Failed));
    assert_eq!(next_work(&failed), None);
}

#[test]
fn next_work_deleting_destroys_the_cluster_before_anything_else() {
    let mut s = provisioned();
    s.cluster.phase = ClusterPhase::Deleting;
    s.elastic_ips = vec![eip(1, ElasticIpStatus::Pending)];
    s.firewall_rules = vec![rule(1, FirewallRuleStatus::Deleting)];
    s.nodes[0].status = NodeStatus::Deleting;
    assert_eq!(next_work(&s), Some(Work::DestroyCluster));
}

#[test]
fn next_work_pending_starts_then_provisioning_creates_the_control_plane() {
    let mut s = state(new_cluster(3));
    s.elastic_ips = vec![eip(1, ElasticIpStatus::Pending)];
    assert_eq!(next_work(&s), Some(Work::StartProvisioning));
    s.cluster.phase = ClusterPhase::Provisioning;
    // An Elastic IP waits for the control plane.
    assert_eq!(next_work(&s), Some(Work::CreateControlPlane));
}

#[test]
fn next_work_registers_the_hub_then_installs_the_default_environment() {
    let mut c = cluster(ORG_A, ClusterPhase::ControlPlaneReady);
    c.node_pools[0].status = PoolStatus::Provisioning;
    let mut s = state(c);
    assert_eq!(next_work(&s), Some(Work::RegisterHub));
    s.cluster.hub_registration = Registration {
        status: SubStatus::Failed,
        reason: Some(RegistrationReason::HubRejected),
    };
    assert_eq!(next_work(&s), Some(Work::InstallDefaultEnvironment));
    s.cluster.default_environment = READY;
    assert!(matches!(
        next_work(&s),
        Some(Work::CreateNode { node: None, .. })
    ));
}

#[test]
fn next_work_creates_nodes_until_the_pool_has_its_count_then_settles_then_provisions() {
    let mut c = ready_cluster(ClusterPhase::ControlPlaneReady);
    c.node_pools[0].status = PoolStatus::Provisioning;
    let mut s = state(c);
    let pool_default = s.cluster.node_pools[0].clone();
    assert_eq!(
        next_work(&s),
        Some(Work::CreateNode {
            pool: pool_default.clone(),
            node: None
        })
    );
    s.nodes = three_ready_nodes()[..2].to_vec();
    assert_eq!(
        next_work(&s),
        Some(Work::CreateNode {
            pool: pool_default.clone(),
            node: None
        })
    );
    s.nodes = three_ready_nodes();
    assert_eq!(next_work(&s), Some(Work::SettlePool { pool: pool_default }));
    s.cluster.node_pools[0].status = PoolStatus::Ready;
    assert_eq!(next_work(&s), Some(Work::FinishProvisioning));
    s.cluster.phase = ClusterPhase::Provisioned;
    assert_eq!(next_work(&s), None);
}

#[test]
fn next_work_creates_again_a_node_left_provisioning() {
    let mut s = provisioned();
    s.nodes[1].status = NodeStatus::Provisioning;
    let expected = Work::CreateNode {
        pool: s.cluster.node_pools[0].clone(),
        node: Some(s.nodes[1].clone()),
    };
    assert_eq!(next_work(&s), Some(expected));
}

#[test]
fn next_work_scales_down_removing_a_provisioning_node_first_else_the_newest() {
    let mut s = provisioned();
    s.cluster.node_pools[0].count = 1;
    s.cluster.node_pools[0].status = PoolStatus::Scaling;
    assert_eq!(
        next_work(&s),
        Some(Work::DeleteNode {
            node: s.nodes[2].clone()
        })
    );
    s.nodes[0].status = NodeStatus::Provisioning;
    assert_eq!(
        next_work(&s),
        Some(Work::DeleteNode {
            node: s.nodes[0].clone()
        })
    );
    s.nodes.truncate(1);
    s.nodes[0].status = NodeStatus::Ready;
    assert_eq!(
        next_work(&s),
        Some(Work::SettlePool {
            pool: s.cluster.node_pools[0].clone()
        })
    );
}

#[test]
fn next_work_finishes_a_node_deletion_then_replaces_the_node() {
    let mut s = provisioned();
    s.nodes[1].status = NodeStatus::Deleting;
    assert_eq!(
        next_work(&s),
        Some(Work::DeleteNode {
            node: s.nodes[1].clone()
        })
    );
    s.nodes.remove(1);
    assert_eq!(
        next_work(&s),
        Some(Work::CreateNode {
            pool: s.cluster.node_pools[0].clone(),
            node: None
        })
    );
}

#[test]
fn next_work_empties_a_deleting_pool_then_deletes_it() {
    let mut s = provisioned();
    let mut old = pool("old", 2);
    old.status = PoolStatus::Deleting;
    s.cluster.node_pools.push(old);
    s.nodes
        .push(node("prod-1-old-xxxxx", "old", NodeStatus::Ready, 4));
    assert_eq!(
        next_work(&s),
        Some(Work::DeleteNode {
            node: s.nodes[3].clone()
        })
    );
    s.nodes.pop();
    assert_eq!(
        next_work(&s),
        Some(Work::DeletePool {
            pool: DnsLabel::from_trusted("old".into())
        })
    );
}

#[test]
fn next_work_walks_elastic_ips_through_their_machine() {
    let mut s = provisioned();
    for status in [ElasticIpStatus::Ready, ElasticIpStatus::Failed] {
        s.elastic_ips = vec![eip(1, status)];
        assert_eq!(next_work(&s), None, "{status:?}");
    }
    s.elastic_ips = vec![eip(1, ElasticIpStatus::Pending)];
    assert_eq!(
        next_work(&s),
        Some(Work::StartElasticIp {
            elastic_ip: eip(1, ElasticIpStatus::Pending)
        })
    );
    s.elastic_ips = vec![eip(1, ElasticIpStatus::Provisioning)];
    assert_eq!(
        next_work(&s),
        Some(Work::AttachAddress {
            elastic_ip: eip(1, ElasticIpStatus::Provisioning)
        })
    );
    s.elastic_ips = vec![eip(1, ElasticIpStatus::Deleting)];
    assert_eq!(
        next_work(&s),
        Some(Work::DetachAddress {
            elastic_ip: eip(1, ElasticIpStatus::Deleting)
        })
    );
}

#[test]
fn next_work_elastic_ips_wait_for_the_control_plane() {
    let mut s = state(new_cluster(1));
    s.cluster.phase = ClusterPhase::ControlPlaneReady;
    s.cluster.hub_registration = READY;
    s.cluster.default_environment = READY;
    s.elastic_ips = vec![eip(1, ElasticIpStatus::Pending)];
    assert_eq!(
        next_work(&s),
        Some(Work::StartElasticIp {
            elastic_ip: eip(1, ElasticIpStatus::Pending)
        })
    );
}

#[test]
fn next_work_applies_and_removes_firewall_rules() {
    let mut s = provisioned();
    for status in [FirewallRuleStatus::Active, FirewallRuleStatus::Failed] {
        s.firewall_rules = vec![rule(1, status)];
        assert_eq!(next_work(&s), None, "{status:?}");
    }
    s.firewall_rules = vec![
        rule(1, FirewallRuleStatus::Pending),
        rule(2, FirewallRuleStatus::Deleting),
    ];
    assert_eq!(
        next_work(&s),
        Some(Work::RemoveFirewallRule {
            rule: rule(2, FirewallRuleStatus::Deleting)
        })
    );
    s.firewall_rules.pop();
    assert_eq!(
        next_work(&s),
        Some(Work::ApplyFirewallRule {
            rule: rule(1, FirewallRuleStatus::Pending)
        })
    );
}

#[test]
fn next_work_sets_the_exposure_change_in_flight_only_when_provisioned() {
    let mut s = provisioned();
    s.cluster.exposure_change = Some(ExposureChange {
        to: Exposure::Public,
        status: ExposureChangeStatus::InProgress,
    });
    assert_eq!(
        next_work(&s),
        Some(Work::SetExposure {
            to: Exposure::Public
        })
    );
    s.cluster.phase = ClusterPhase::ControlPlaneReady;
    assert_eq!(next_work(&s), Some(Work::FinishProvisioning));
}

fn gpu_taint() -> Taint {
    Taint {
        key: "nvidia.com/gpu".into(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    }
}

/// A pool whose labels and taints changed: its `Ready` nodes are configured one by one, in
/// place; a node still coming up is created (with them) first; nothing is ever deleted or
/// added for it, and a node that already matches is left alone.
#[test]
fn next_work_configures_ready_nodes_whose_labels_or_taints_differ_never_replacing_them() {
    let mut s = provisioned();
    s.cluster.node_pools[0].labels = [("role".to_owned(), "gpu".to_owned())].into();
    s.cluster.node_pools[0].taints = vec![gpu_taint()];
    let pool = s.cluster.node_pools[0].clone();
    assert_eq!(
        next_work(&s),
        Some(Work::ConfigureNode {
            pool: pool.clone(),
            node: s.nodes[0].clone()
        })
    );
    // The first node done: the next one, never a deletion or a creation.
    let mut walked = s.clone();
    for i in 0..3 {
        match next_work(&walked) {
            Some(Work::ConfigureNode { node, .. }) => {
                assert_eq!(node.name, s.nodes[i].name);
                walked.nodes[i].labels = pool.labels.clone();
                walked.nodes[i].taints = pool.taints.clone();
            }
            other => panic!("step {i}: {other:?}"),
        }
    }
    assert_eq!(next_work(&walked), None);
    // Only labels, only taints: each is a difference.
    let mut only_taints = walked.clone();
    only_taints.cluster.node_pools[0].taints = vec![];
    assert!(matches!(
        next_work(&only_taints),
        Some(Work::ConfigureNode { .. })
    ));
    // A node still coming up is created (with the pool's labels and taints) first.
    let mut up = s.clone();
    up.nodes[2].status = NodeStatus::Provisioning;
    assert!(matches!(
        next_work(&up),
        Some(Work::CreateNode { node: Some(n), .. }) if n.name == s.nodes[2].name
    ));
    // A node being deleted is finished first, and is never configured.
    let mut deleting = s.clone();
    deleting.nodes[0].status = NodeStatus::Deleting;
    assert!(matches!(
        next_work(&deleting),
        Some(Work::DeleteNode { node }) if node.name == s.nodes[0].name
    ));
}

#[test]
fn next_work_applies_the_control_plane_firewall_change_only_when_provisioned() {
    let mut s = provisioned();
    let to = ControlPlaneFirewall {
        enabled: true,
        allowed_addresses: vec![IpCidr::parse("203.0.113.0/24").unwrap()],
    };
    s.cluster.control_plane_firewall_change = Some(to.clone());
    assert_eq!(
        next_work(&s),
        Some(Work::SetControlPlaneFirewall { to: to.clone() })
    );
    s.cluster.phase = ClusterPhase::ControlPlaneReady;
    assert_eq!(next_work(&s), Some(Work::FinishProvisioning));
}

#[test]
fn node_names_are_cluster_pool_and_five_base36_characters() {
    let name = node_name("prod-1", "default", Uuid::from_u128(36 * 36 + 35)).unwrap();
    assert_eq!(name.as_str(), "prod-1-default-z0100");
    let long = "a".repeat(63);
    let name = node_name(&long, &long, Uuid::new_v4()).unwrap();
    assert_eq!(name.as_str().len(), 63 + 1 + 63 + 1 + 5);
    let suffix = &name.as_str()[128..];
    assert!(
        suffix
            .chars()
            .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()),
        "{suffix}"
    );
}

#[test]
fn node_names_are_cut_to_fit_the_node_name_rule() {
    let name = node_name(
        &"b".repeat(200),
        &format!("{}-x", "c".repeat(100)),
        Uuid::new_v4(),
    )
    .unwrap();
    assert!(name.as_str().len() <= 254);
    assert!(NodeName::parse(name.as_str()).is_ok());
    // A cut landing on a hyphen does not leave a double hyphen before the suffix.
    let name = node_name(&"d".repeat(247), "e", Uuid::from_u128(0)).unwrap();
    assert_eq!(name.as_str(), format!("{}-00000", "d".repeat(247)));
}

// ---------------------------------------------------------------- fakes

/// A cloud that answers every step, fails the steps it is told to, and issues a new CA and
/// token on every `CreateControlPlane` as the simulated one does.
#[derive(Default)]
struct FakeCloud {
    fail: Mutex<HashMap<&'static str, ProviderError>>,
    registration: Mutex<Option<Registration>>,
    steps: Mutex<Vec<Step>>,
}

impl FakeCloud {
    fn failing(step: &'static str, e: ProviderError) -> Self {
        let cloud = FakeCloud::default();
        cloud.fail.lock().unwrap().insert(step, e);
        cloud
    }

    fn step_names(&self) -> Vec<&'static str> {
        self.steps.lock().unwrap().iter().map(Step::name).collect()
    }
}

fn endpoint(name: &str, exposure: Exposure) -> Endpoint {
    match exposure {
        Exposure::Public => {
            let host = format!("{name}.k8s.example.com");
            Endpoint {
                public_hostname: Some(host.clone()),
                host,
            }
        }
        Exposure::Private => Endpoint {
            host: format!("{name}.internal"),
            public_hostname: None,
        },
    }
}

#[async_trait]
impl CloudProvider for FakeCloud {
    fn zone_capacity(&self, _: &str) -> u64 {
        10_000
    }

    fn address_pool(&self, _: Exposure) -> Option<AddressPool> {
        None
    }

    async fn execute(&self, step: Step) -> Result<StepOutcome, ProviderError> {
        let issued = {
            let mut steps = self.steps.lock().unwrap();
            steps.push(step.clone());
            steps
                .iter()
                .filter(|s| matches!(s, Step::CreateControlPlane { .. }))
                .count()
        };
        if let Some(e) = self.fail.lock().unwrap().get(step.name()) {
            return Err(e.clone());
        }
        Ok(match step {
            Step::CreateControlPlane {
                cluster_name,
                exposure,
                ..
            } => StepOutcome::ControlPlane {
                endpoint: endpoint(&cluster_name, exposure),
                credentials: ClusterCredentials {
                    ca_certificate_pem: format!("CA #{issued}"),
                    token: Secret::new(format!("token-{issued}")),
                },
            },
            Step::RegisterHub { .. } | Step::InstallDefaultEnvironment { .. } => {
                StepOutcome::Registration(self.registration.lock().unwrap().unwrap_or(READY))
            }
            Step::SetExposure {
                cluster_name, to, ..
            } => StepOutcome::Exposure(endpoint(&cluster_name, to)),
            _ => StepOutcome::Done,
        })
    }
}

/// Seals by wrapping, so a test sees what was sealed without a real key.
struct FakeVault;

#[async_trait]
impl SecretVault for FakeVault {
    async fn hash_password(&self, _: &Secret) -> Result<PasswordHash, VaultError> {
        Err(VaultError::Internal("not used".into()))
    }

    fn digest_token(&self, _: &Secret) -> TokenDigest {
        TokenDigest(String::new())
    }

    fn seal(&self, secret: &Secret) -> Result<SealedSecret, VaultError> {
        Ok(SealedSecret(format!("sealed({})", secret.expose())))
    }

    fn open(&self, sealed: &SealedSecret) -> Result<Secret, VaultError> {
        Ok(Secret::new(
            sealed.0.trim_start_matches("sealed(").trim_end_matches(')'),
        ))
    }
}

struct World {
    store: Arc<MemoryClusters>,
    cloud: Arc<FakeCloud>,
    clock: Arc<FixedClock>,
    /// What the operations were told of an upgrade's steps, in order.
    progress: Arc<Mutex<Vec<String>>>,
    ports: Ports,
}

fn world(state: ClusterState, cloud: FakeCloud) -> World {
    let store = Arc::new(MemoryClusters::new(state));
    let cloud = Arc::new(cloud);
    let clock = Arc::new(FixedClock::default());
    let progress = Arc::new(Mutex::new(Vec::new()));
    let mut m = Mocks::new();
    let told = progress.clone();
    m.operations
        .expect_record_progress()
        .returning(move |_, _, text, _| {
            told.lock().unwrap().push(text);
            Ok(())
        });
    let ports = Ports {
        clusters: store.clone(),
        idempotency: Arc::new(m.idempotency),
        auth_servers: Arc::new(m.auth_servers),
        audit: Arc::new(m.audit),
        operations: Arc::new(m.operations),
        credentials: Arc::new(m.credentials),
        sessions: Arc::new(m.sessions),
        approvals: Arc::new(m.approvals),
        changes: Arc::new(m.changes),
        identity: Arc::new(m.identity),
        cloud: cloud.clone(),
        vault: Arc::new(FakeVault),
        clock: clock.clone(),
        ids: Arc::new(SequentialIds::default()),
    };
    World {
        store,
        cloud,
        clock,
        progress,
        ports,
    }
}

impl World {
    fn step(&self) -> Result<Progress, ReconcileError> {
        block_on(reconcile_step(&self.ports, CLUSTER_1))
    }

    /// Steps until idle; panics if that takes unreasonably long.
    fn settle(&self) -> usize {
        for n in 0..200 {
            if self.step().unwrap() == Progress::Idle {
                return n;
            }
        }
        panic!("the cluster never settled");
    }

    fn cluster(&self) -> Cluster {
        self.store.db().cluster.clone().unwrap()
    }

    /// Moves the clock to `at(secs)`.
    fn ports_clock_to(&self, secs: i64) {
        self.clock
            .0
            .store(secs as u64, std::sync::atomic::Ordering::SeqCst);
    }

    fn last_changes(&self) -> Vec<Change> {
        self.store
            .db()
            .commits
            .last()
            .map(|w| w.changes.clone())
            .unwrap_or_default()
    }

    fn commits(&self) -> usize {
        self.store.db().commits.len()
    }

    /// A user's change, as the use cases commit it.
    fn user_change(&self, f: impl FnOnce(&mut MemoryDb)) {
        self.store.db().user_change(f);
    }
}

// ---------------------------------------------------------------- reconcile_step

#[test]
fn step_unknown_or_gone_cluster_is_idle() {
    let w = world(state(new_cluster(1)), FakeCloud::default());
    assert_eq!(
        block_on(reconcile_step(&w.ports, Uuid::nil())),
        Ok(Progress::Idle)
    );
    w.user_change(|db| db.cluster.as_mut().unwrap().deleted_at = Some(at(1)));
    assert_eq!(w.step(), Ok(Progress::Idle));
    assert_eq!(w.commits(), 0);
    assert!(w.cloud.step_names().is_empty());
}

#[test]
fn step_pending_commits_provisioning_on_the_read_revision_without_scheduling() {
    let w = world(state(new_cluster(1)), FakeCloud::default());
    assert_eq!(w.step(), Ok(Progress::More));
    let write = w.store.db().commits[0].clone();
    assert_eq!(write.expected_revision, Some(5));
    assert!(!write.reconcile);
    assert!(write.idempotency.is_none());
    assert!(
        matches!(&write.changes[..], [Change::UpdateCluster(c)] if c.phase == ClusterPhase::Provisioning)
    );
    assert!(
        w.cloud.step_names().is_empty(),
        "no provider step to start provisioning"
    );
}

#[test]
fn step_control_plane_stores_the_endpoint_and_sealed_credentials_then_control_plane_ready() {
    let mut c = new_cluster(1);
    c.phase = ClusterPhase::Provisioning;
    c.exposure = Exposure::Public;
    let w = world(state(c), FakeCloud::default());
    assert_eq!(w.step(), Ok(Progress::More));
    match &w.last_changes()[..] {
        [Change::UpdateCluster(c), Change::SetCredentials(s)] => {
            assert_eq!(c.phase, ClusterPhase::ControlPlaneReady);
            assert_eq!(
                c.api_endpoint.as_deref(),
                Some("https://prod-1.k8s.example.com:6443")
            );
            assert_eq!(c.public_hostname.as_deref(), Some("prod-1.k8s.example.com"));
            assert_eq!(s.ca_certificate_pem, "CA #1");
            assert_eq!(s.token, SealedSecret("sealed(token-1)".into()));
        }
        other => panic!("unexpected changes {other:?}"),
    }
}

#[test]
fn step_control_plane_keeps_credentials_stored_before() {
    let mut c = new_cluster(1);
    c.phase = ClusterPhase::Provisioning;
    let w = world(state(c), FakeCloud::default());
    let first = SealedCredentials {
        ca_certificate_pem: "CA #0".into(),
        token: SealedSecret("sealed(token-0)".into()),
    };
    w.store.db().credentials = Some(first.clone());
    assert_eq!(w.step(), Ok(Progress::More));
    assert!(
        matches!(&w.last_changes()[..], [Change::UpdateCluster(c)] if c.phase == ClusterPhase::ControlPlaneReady && c.public_hostname.is_none())
    );
    assert_eq!(w.store.db().credentials, Some(first));
}

#[test]
fn step_credentials_are_stored_once_when_a_race_repeats_the_control_plane() {
    let mut c = new_cluster(1);
    c.phase = ClusterPhase::Provisioning;
    let w = world(state(c), FakeCloud::default());
    w.store.db().lose_races = 1;
    assert_eq!(
        w.step(),
        Ok(Progress::More),
        "a lost race asks to run again"
    );
    assert_eq!(w.cluster().phase, ClusterPhase::Provisioning);
    assert_eq!(w.store.db().credentials, None);
    assert_eq!(w.step(), Ok(Progress::More));
    w.settle();
    let creds = w.store.db().credentials.clone().unwrap();
    assert_eq!(creds.ca_certificate_pem, "CA #2");
    let commits_with_credentials = w
        .store
        .db()
        .commits
        .iter()
        .filter(|c| {
            c.changes
                .iter()
                .any(|ch| matches!(ch, Change::SetCredentials(_)))
        })
        .count();
    assert_eq!(commits_with_credentials, 1);
}

#[test]
fn step_permanent_failure_of_the_control_plane_fails_the_cluster_with_the_providers_text() {
    let mut c = new_cluster(1);
    c.phase = ClusterPhase::Provisioning;
    let cloud = FakeCloud::failing(
        "create_control_plane",
        ProviderError::Permanent("injected failure of step create_control_plane".into()),
    );
    let w = world(state(c), cloud);
    let report = block_on(reconcile_step_report(&w.ports, CLUSTER_1)).unwrap();
    assert_eq!(report.work, Some("create_control_plane"));
    assert_eq!(
        report.outcome,
        Outcome::Failed {
            reason: "injected failure of step create_control_plane".into()
        }
    );
    let c = w.cluster();
    assert_eq!(c.phase, ClusterPhase::Failed);
    assert_eq!(
        c.failure_reason.as_deref(),
        Some("injected failure of step create_control_plane")
    );
    assert_eq!(w.step(), Ok(Progress::Idle));
}

#[test]
fn step_permanent_failure_of_the_hub_registration_fails_the_cluster() {
    let c = cluster(ORG_A, ClusterPhase::ControlPlaneReady);
    let w = world(
        state(c),
        FakeCloud::failing(
            "register_hub",
            ProviderError::Permanent("hub down for good".into()),
        ),
    );
    assert_eq!(w.step(), Ok(Progress::More));
    assert_eq!(w.cluster().phase, ClusterPhase::Failed);
    assert_eq!(
        w.cluster().failure_reason.as_deref(),
        Some("hub down for good")
    );
}

#[test]
fn step_registration_outcomes_are_stored_as_returned() {
    let c = cluster(ORG_A, ClusterPhase::ControlPlaneReady);
    let w = world(state(c), FakeCloud::default());
    let refused = Registration {
        status: SubStatus::Failed,
        reason: Some(RegistrationReason::QuotaExceeded),
    };
    *w.cloud.registration.lock().unwrap() = Some(refused);
    w.step().unwrap();
    w.step().unwrap();
    let c = w.cluster();
    assert_eq!(c.hub_registration, refused);
    assert_eq!(c.default_environment, refused);
    assert_eq!(
        w.cloud.step_names(),
        ["register_hub", "install_default_environment"]
    );
}

#[test]
fn step_transient_failure_is_an_error_and_commits_nothing() {
    let mut c = new_cluster(1);
    c.phase = ClusterPhase::Provisioning;
    let w = world(
        state(c),
        FakeCloud::failing(
            "create_control_plane",
            ProviderError::Transient("timeout".into()),
        ),
    );
    let e = w.step().unwrap_err();
    assert_eq!(
        e,
        ReconcileError::Transient {
            step: "create_control_plane",
            message: "timeout".into()
        }
    );
    assert!(e.is_transient());
    assert_eq!(w.commits(), 0);
}

#[test]
fn step_storage_errors_are_store_errors() {
    let w = world(state(new_cluster(1)), FakeCloud::default());
    w.store.db().unavailable = true;
    let e = w.step().unwrap_err();
    assert!(matches!(
        e,
        ReconcileError::Store(StoreError::Unavailable(_))
    ));
    assert!(e.is_transient());
}

#[test]
fn step_a_lost_race_is_more_and_writes_nothing() {
    let w = world(state(new_cluster(1)), FakeCloud::default());
    w.store.db().lose_races = 1;
    let report = block_on(reconcile_step_report(&w.ports, CLUSTER_1)).unwrap();
    assert_eq!(
        (report.outcome, report.progress),
        (Outcome::Raced, Progress::More)
    );
    assert_eq!(w.cluster().phase, ClusterPhase::Pending);
}

#[test]
fn step_a_node_is_inserted_provisioning_then_created_then_marked_ready() {
    let mut c = ready_cluster(ClusterPhase::ControlPlaneReady);
    c.node_pools[0].count = 1;
    c.node_pools[0].status = PoolStatus::Provisioning;
    let w = world(state(c), FakeCloud::default());
    assert_eq!(w.step(), Ok(Progress::More));
    let commits = w.store.db().commits.clone();
    let [insert, ready] = &commits[..] else {
        panic!("two commits expected, got {commits:?}")
    };
    assert_eq!(
        (insert.expected_revision, ready.expected_revision),
        (Some(5), Some(6))
    );
    let Change::InsertNode(n) = &insert.changes[0] else {
        panic!("{:?}", insert.changes)
    };
    assert_eq!(n.status, NodeStatus::Provisioning);
    assert!(
        n.name.as_str().starts_with("prod-1-default-")
            && n.name.as_str().len() == "prod-1-default-".len() + 5
    );
    assert!(
        matches!(&ready.changes[..], [Change::UpdateNode(r)] if r.name == n.name && r.status == NodeStatus::Ready)
    );
    assert_eq!(w.cloud.step_names(), ["create_node"]);
}

/// A label and taint change of a pool reaches every node in place: one provider step per
/// node, each node keeps its name, and none is deleted or created.
#[test]
fn step_labels_and_taints_reach_every_node_without_replacing_one() {
    let w = world(provisioned(), FakeCloud::default());
    let labels: std::collections::BTreeMap<String, String> =
        [("role".to_owned(), "gpu".to_owned())].into();
    w.user_change(|db| {
        let pool = &mut db.cluster.as_mut().unwrap().node_pools[0];
        pool.labels = labels.clone();
        pool.taints = vec![gpu_taint()];
    });
    let before: Vec<_> = w.store.db().nodes.iter().map(|n| n.name.clone()).collect();
    assert_eq!(w.settle(), 3);
    assert_eq!(
        w.cloud.step_names(),
        ["configure_node", "configure_node", "configure_node"]
    );
    let nodes = w.store.db().nodes.clone();
    assert_eq!(
        nodes.iter().map(|n| n.name.clone()).collect::<Vec<_>>(),
        before
    );
    for n in &nodes {
        assert_eq!((&n.labels, &n.taints), (&labels, &vec![gpu_taint()]));
        assert_eq!(n.status, NodeStatus::Ready);
    }
    let steps = w.cloud.steps.lock().unwrap().clone();
    assert!(steps.iter().all(|s| matches!(
        s,
        Step::ConfigureNode { labels: l, taints: t, .. } if *l == labels && *t == vec![gpu_taint()]
    )));
    // Repeated (a worker that died before its commit): the same step, nothing else.
    w.user_change(|db| db.nodes[0].taints.clear());
    assert_eq!(w.settle(), 1);
    assert_eq!(w.store.db().nodes[0].taints, vec![gpu_taint()]);
}

/// A new node comes up with its pool's labels and taints, set by its creation.
#[test]
fn step_a_new_node_is_created_with_its_pools_labels_and_taints() {
    let mut c = ready_cluster(ClusterPhase::Provisioned);
    c.node_pools[0].count = 1;
    c.node_pools[0].labels = [("role".to_owned(), "gpu".to_owned())].into();
    c.node_pools[0].taints = vec![gpu_taint()];
    let w = world(state(c.clone()), FakeCloud::default());
    assert_eq!(w.step(), Ok(Progress::More));
    let steps = w.cloud.steps.lock().unwrap().clone();
    assert!(
        matches!(&steps[..], [Step::CreateNode { labels, taints, .. }] if *labels == c.node_pools[0].labels && *taints == vec![gpu_taint()]),
        "{steps:?}"
    );
    let node = w.store.db().nodes[0].clone();
    assert_eq!(node.status, NodeStatus::Ready);
    assert!(node.matches_pool(&c.node_pools[0]));
    assert_eq!(w.settle(), 0, "nothing left to configure");
}

#[test]
fn step_the_control_plane_firewall_change_is_applied_then_enforced() {
    let mut s = provisioned();
    let to = ControlPlaneFirewall {
        enabled: true,
        allowed_addresses: vec![IpCidr::parse("2001:db8::/32").unwrap()],
    };
    s.cluster.control_plane_firewall_change = Some(to.clone());
    let w = world(s, FakeCloud::default());
    assert_eq!(w.settle(), 1);
    assert_eq!(w.cloud.step_names(), ["set_control_plane_firewall"]);
    let c = w.cluster();
    assert_eq!(
        (c.control_plane_firewall, c.control_plane_firewall_change),
        (to, None)
    );
}

#[test]
fn step_a_node_left_provisioning_by_a_crash_is_created_again() {
    let mut c = ready_cluster(ClusterPhase::ControlPlaneReady);
    c.node_pools[0].count = 1;
    let crashed = node(
        "prod-1-default-aaaaa",
        "default",
        NodeStatus::Provisioning,
        1,
    );
    let w = world(
        ClusterState {
            nodes: vec![crashed.clone()],
            ..state(c)
        },
        FakeCloud::default(),
    );
    assert_eq!(w.step(), Ok(Progress::More));
    assert!(
        matches!(&w.last_changes()[..], [Change::UpdateNode(n)] if n.name == crashed.name && n.status == NodeStatus::Ready)
    );
    assert!(
        matches!(&w.cloud.steps.lock().unwrap()[..], [Step::CreateNode { node, .. }] if node == "prod-1-default-aaaaa")
    );
}

#[test]
fn step_node_creation_failing_before_provisioned_fails_the_cluster() {
    let mut c = ready_cluster(ClusterPhase::ControlPlaneReady);
    c.node_pools[0].status = PoolStatus::Provisioning;
    let w = world(
        state(c),
        FakeCloud::failing(
            "create_node",
            ProviderError::Permanent("zone capacity exhausted".into()),
        ),
    );
    assert_eq!(w.step(), Ok(Progress::More));
    assert_eq!(w.cluster().phase, ClusterPhase::Failed);
    assert_eq!(
        w.cluster().failure_reason.as_deref(),
        Some("zone capacity exhausted")
    );
}

#[test]
fn step_node_creation_failing_after_provisioned_is_a_permanent_error() {
    let mut s = provisioned();
    s.nodes.pop();
    let w = world(
        s,
        FakeCloud::failing(
            "create_node",
            ProviderError::Permanent("zone capacity exhausted".into()),
        ),
    );
    let e = w.step().unwrap_err();
    assert_eq!(
        e,
        ReconcileError::Permanent {
            step: "create_node",
            message: "zone capacity exhausted".into()
        }
    );
    assert!(!e.is_transient());
    assert_eq!(w.cluster().phase, ClusterPhase::Provisioned);
}

#[test]
fn step_elastic_ip_attach_failure_fails_that_elastic_ip() {
    let mut s = provisioned();
    s.elastic_ips = vec![
        eip(1, ElasticIpStatus::Provisioning),
        eip(2, ElasticIpStatus::Ready),
    ];
    let w = world(
        s,
        FakeCloud::failing(
            "attach_address",
            ProviderError::Permanent("address in use upstream".into()),
        ),
    );
    assert_eq!(w.step(), Ok(Progress::More));
    let eips = w.store.db().elastic_ips.clone();
    assert_eq!(
        (eips[0].status, eips[0].failure_reason.as_deref()),
        (ElasticIpStatus::Failed, Some("address in use upstream"))
    );
    assert_eq!(eips[1].status, ElasticIpStatus::Ready);
    assert_eq!(w.cluster().phase, ClusterPhase::Provisioned);
    assert_eq!(w.step(), Ok(Progress::Idle));
}

#[test]
fn step_firewall_apply_failure_fails_that_rule() {
    let mut s = provisioned();
    s.firewall_rules = vec![rule(1, FirewallRuleStatus::Pending)];
    let w = world(
        s,
        FakeCloud::failing(
            "apply_firewall_rule",
            ProviderError::Permanent("quota of rules reached".into()),
        ),
    );
    assert_eq!(w.step(), Ok(Progress::More));
    let r = w.store.db().firewall_rules[0].clone();
    assert_eq!(
        (r.status, r.failure_reason.as_deref()),
        (FirewallRuleStatus::Failed, Some("quota of rules reached"))
    );
    assert_eq!(w.step(), Ok(Progress::Idle));
}

#[test]
fn step_deletion_failure_is_a_permanent_error() {
    let mut s = provisioned();
    s.cluster.phase = ClusterPhase::Deleting;
    let w = world(
        s,
        FakeCloud::failing("destroy_cluster", ProviderError::Permanent("stuck".into())),
    );
    assert!(matches!(
        w.step(),
        Err(ReconcileError::Permanent {
            step: "destroy_cluster",
            ..
        })
    ));
    assert_eq!(w.commits(), 0);
}

#[test]
fn lifecycle_from_create_to_gone() {
    let mut s = state(new_cluster(3));
    s.elastic_ips = vec![eip(1, ElasticIpStatus::Pending)];
    let w = world(s, FakeCloud::default());
    w.settle();
    let c = w.cluster();
    assert_eq!(c.phase, ClusterPhase::Provisioned);
    assert_eq!((c.hub_registration, c.default_environment), (READY, READY));
    assert_eq!(c.node_pools[0].status, PoolStatus::Ready);
    assert_eq!(
        c.api_endpoint.as_deref(),
        Some("https://prod-1.internal:6443")
    );
    let nodes = w.store.db().nodes.clone();
    assert_eq!(nodes.len(), 3);
    assert!(
        nodes
            .iter()
            .all(|n| n.status == NodeStatus::Ready && NodeName::parse(n.name.as_str()).is_ok())
    );
    assert_eq!(w.store.db().elastic_ips[0].status, ElasticIpStatus::Ready);
    assert!(w.store.db().commits.iter().all(|c| !c.reconcile));
    let credentials = w.store.db().credentials.clone();

    // scale down to 1
    w.user_change(|db| {
        let p = &mut db.cluster.as_mut().unwrap().node_pools[0];
        p.count = 1;
        p.status = PoolStatus::Scaling;
    });
    w.settle();
    assert_eq!(w.store.db().nodes.len(), 1);
    assert_eq!(w.cluster().node_pools[0].status, PoolStatus::Ready);

    // a deleted node is replaced
    let survivor = w.store.db().nodes[0].name.clone();
    w.user_change(|db| db.nodes[0].status = NodeStatus::Deleting);
    w.settle();
    let nodes = w.store.db().nodes.clone();
    assert_eq!(nodes.len(), 1);
    assert_ne!(nodes[0].name, survivor);
    assert_eq!(nodes[0].status, NodeStatus::Ready);

    // a pool added, then deleted
    w.user_change(|db| {
        db.cluster.as_mut().unwrap().node_pools.push(NodePool {
            status: PoolStatus::Provisioning,
            ..pool("extra", 2)
        })
    });
    w.settle();
    assert_eq!(
        w.store
            .db()
            .nodes
            .iter()
            .filter(|n| n.pool.as_str() == "extra")
            .count(),
        2
    );
    w.user_change(|db| db.cluster.as_mut().unwrap().node_pools[1].status = PoolStatus::Deleting);
    w.settle();
    assert_eq!(w.cluster().node_pools.len(), 1);
    assert!(
        w.store
            .db()
            .nodes
            .iter()
            .all(|n| n.pool.as_str() == "default")
    );

    // exposure change, firewall rule, Elastic IP release
    w.user_change(|db| {
        db.cluster.as_mut().unwrap().exposure_change = Some(ExposureChange {
            to: Exposure::Public,
            status: ExposureChangeStatus::InProgress,
        });
        db.firewall_rules.push(rule(1, FirewallRuleStatus::Pending));
        db.elastic_ips[0].status = ElasticIpStatus::Deleting;
    });
    w.settle();
    let c = w.cluster();
    assert_eq!((c.exposure, c.exposure_change), (Exposure::Public, None));
    assert_eq!(
        c.api_endpoint.as_deref(),
        Some("https://prod-1.k8s.example.com:6443")
    );
    assert_eq!(c.public_hostname.as_deref(), Some("prod-1.k8s.example.com"));
    assert_eq!(
        w.store.db().firewall_rules[0].status,
        FirewallRuleStatus::Active
    );
    assert!(w.store.db().elastic_ips.is_empty());
    assert_eq!(
        w.store.db().credentials,
        credentials,
        "the kubeconfig credentials never change"
    );
    w.user_change(|db| db.firewall_rules[0].status = FirewallRuleStatus::Deleting);
    w.settle();
    assert!(w.store.db().firewall_rules.is_empty());

    // delete
    w.user_change(|db| db.cluster.as_mut().unwrap().phase = ClusterPhase::Deleting);
    w.settle();
    assert!(w.cluster().is_gone());
    assert_eq!(w.last_changes(), [Change::RemoveCluster]);
    assert_eq!(w.cloud.step_names().last(), Some(&"destroy_cluster"));
    assert_eq!(
        w.cloud
            .step_names()
            .iter()
            .filter(|s| **s == "create_control_plane")
            .count(),
        1
    );
}

// ---------------------------------------------------------------- settle

fn open_op(kind: OperationKind, resource: AuditResource, resource_id: String) -> ClusterOperation {
    crate::testing::running_operation(kind, resource, resource_id)
}

/// What a case names, the operation, the cluster as stored (none: gone), how it should end.
type SettleCase = (
    &'static str,
    ClusterOperation,
    Option<ClusterState>,
    Option<(OperationStatus, Option<&'static str>)>,
);

#[test]
fn settle_ends_each_operation_by_the_state_its_object_settled_in() {
    use OperationStatus::{Cancelled, Failed, Succeeded};
    let cluster_op = |kind| open_op(kind, AuditResource::Cluster, CLUSTER_1.to_string());
    let failed_eip = ElasticIp {
        failure_reason: Some("no route to the address pool".into()),
        ..eip(1, ElasticIpStatus::Failed)
    };
    let mut failed_cluster = ready_cluster(ClusterPhase::Failed);
    failed_cluster.failure_reason = Some("control plane did not come up".into());
    let with_eips = |eips: Vec<ElasticIp>| ClusterState {
        elastic_ips: eips,
        ..provisioned()
    };
    let with_rules = |rules: Vec<FirewallRule>| ClusterState {
        firewall_rules: rules,
        ..provisioned()
    };
    let eip_op = open_op(
        OperationKind::ElasticIpAllocate,
        AuditResource::ElasticIp,
        eip(1, ElasticIpStatus::Ready).id.to_string(),
    );
    let rule_op = open_op(
        OperationKind::FirewallRuleCreate,
        AuditResource::FirewallRule,
        rule(1, FirewallRuleStatus::Active).id.to_string(),
    );
    let cases: Vec<SettleCase> = vec![
        (
            "a create on a provisioned cluster",
            cluster_op(OperationKind::Create),
            Some(provisioned()),
            Some((Succeeded, None)),
        ),
        (
            "a create whose cluster failed",
            cluster_op(OperationKind::Create),
            Some(state(failed_cluster.clone())),
            Some((Failed, Some("control plane did not come up"))),
        ),
        (
            "a scale whose cluster failed",
            cluster_op(OperationKind::NodePoolChange),
            Some(state(failed_cluster)),
            Some((
                Failed,
                Some("the cluster failed: control plane did not come up"),
            )),
        ),
        (
            "a create not provisioned yet",
            cluster_op(OperationKind::Create),
            Some(state(ready_cluster(ClusterPhase::ControlPlaneReady))),
            None,
        ),
        (
            "a deletion, the cluster gone",
            cluster_op(OperationKind::Delete),
            None,
            Some((Succeeded, None)),
        ),
        (
            "a scale, the cluster gone first",
            cluster_op(OperationKind::NodePoolChange),
            None,
            Some((
                Cancelled,
                Some("the cluster was deleted before this change was carried out"),
            )),
        ),
        (
            "an Elastic IP ready",
            eip_op.clone(),
            Some(with_eips(vec![eip(1, ElasticIpStatus::Ready)])),
            Some((Succeeded, None)),
        ),
        (
            "an Elastic IP failed",
            eip_op.clone(),
            Some(with_eips(vec![failed_eip])),
            Some((Failed, Some("no route to the address pool"))),
        ),
        (
            "an Elastic IP still provisioning",
            eip_op.clone(),
            Some(with_eips(vec![eip(1, ElasticIpStatus::Provisioning)])),
            None,
        ),
        (
            "an Elastic IP released meanwhile",
            eip_op,
            Some(with_eips(vec![])),
            Some((Succeeded, None)),
        ),
        (
            "a rule active",
            rule_op.clone(),
            Some(with_rules(vec![rule(1, FirewallRuleStatus::Active)])),
            Some((Succeeded, None)),
        ),
        (
            "a rule failed",
            rule_op.clone(),
            Some(with_rules(vec![rule(1, FirewallRuleStatus::Failed)])),
            Some((Failed, Some("the rule could not be applied"))),
        ),
        (
            "a rule pending",
            rule_op,
            Some(with_rules(vec![rule(1, FirewallRuleStatus::Pending)])),
            None,
        ),
    ];
    for (case, op, state, expected) in cases {
        let got = settle(&op, state.as_ref());
        let got = got.as_ref().map(|s| (s.status, s.reason.as_deref()));
        assert_eq!(got, expected, "{case}");
    }
}

#[test]
fn a_failed_step_is_told_in_words_a_customer_can_act_on() {
    let transient = ReconcileError::Transient {
        step: "create_node",
        message: "timeout".into(),
    };
    let text = transient.customer_message();
    assert!(
        text.contains("creating a node") && text.contains("retried automatically"),
        "{text}"
    );
    let permanent = ReconcileError::Permanent {
        step: "attach_address",
        message: "address pool exhausted".into(),
    };
    let text = permanent.customer_message();
    assert!(
        text.contains("attaching an Elastic IP") && text.contains("contact support"),
        "{text}"
    );
    let internal = ReconcileError::Internal("sealing failed: key mismatch".into());
    assert!(!internal.customer_message().contains("key mismatch"));
}

mod upgrade;
