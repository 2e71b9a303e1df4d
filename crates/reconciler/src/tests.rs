//! The worker loop against a scripted queue and mocked ports: finishing, retry scheduling with
//! backoff, parking after permanent failures, giving a lease back, waking and shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use domain::model::cluster::{ClusterPhase, Exposure};
use domain::model::elastic_ip::AddressPool;
use domain::ports::provisioning::{
    CloudProvider, MockCloudProvider, ProviderError, Step, StepOutcome,
};
use domain::ports::storage::{
    MockClusterRepository, MockOperationLog, Operation, OperationLease, OperationQueue, StoreError,
};
use domain::service::Ports;
use domain::testing::{CLUSTER_1, FixedClock, Mocks, ORG_A, SequentialIds, at, cluster};
use uuid::Uuid;

use crate::{CancellationToken, Reconciler, ReconcilerConfig, ReconcilerHandle, backoff};

/// A queue that hands out the leases it was given, then nothing, and records how each ended.
#[derive(Default)]
struct FakeQueue {
    claims: Mutex<VecDeque<Result<Option<OperationLease>, StoreError>>>,
    claimed: AtomicUsize,
    finished: Mutex<Vec<OperationLease>>,
    retried: Mutex<Vec<(OperationLease, String, DateTime<Utc>)>>,
    /// Cancelled once an outcome is recorded, so a test knows when to look.
    recorded: CancellationToken,
}

impl FakeQueue {
    fn with(claims: Vec<Result<Option<OperationLease>, StoreError>>) -> Arc<Self> {
        Arc::new(FakeQueue {
            claims: Mutex::new(claims.into()),
            ..FakeQueue::default()
        })
    }

    fn retried(&self) -> Vec<(OperationLease, String, DateTime<Utc>)> {
        self.retried.lock().unwrap().clone()
    }
}

#[async_trait]
impl OperationQueue for FakeQueue {
    async fn claim(
        &self,
        _worker: String,
        _lease: Duration,
    ) -> Result<Option<OperationLease>, StoreError> {
        self.claimed.fetch_add(1, Ordering::SeqCst);
        self.claims.lock().unwrap().pop_front().unwrap_or(Ok(None))
    }

    async fn finish(&self, lease: OperationLease) -> Result<(), StoreError> {
        self.finished.lock().unwrap().push(lease);
        self.recorded.cancel();
        Ok(())
    }

    async fn retry(
        &self,
        lease: OperationLease,
        error: String,
        retry_at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.retried.lock().unwrap().push((lease, error, retry_at));
        self.recorded.cancel();
        Ok(())
    }

    async fn requeue(&self, lease: OperationLease) -> Result<(), StoreError> {
        self.retried
            .lock()
            .unwrap()
            .push((lease, "requeued".into(), at(0)));
        self.recorded.cancel();
        Ok(())
    }

    async fn depth(&self) -> Result<u64, StoreError> {
        Ok(self.claims.lock().unwrap().len() as u64)
    }
}

fn lease(attempts: i32, expires_at: DateTime<Utc>) -> OperationLease {
    OperationLease {
        operation: Operation {
            id: Uuid::from_u128(7),
            cluster_id: CLUSTER_1,
            generation: 1,
            attempts,
            last_error: None,
            request_id: None,
        },
        lease_id: Uuid::from_u128(8),
        expires_at,
    }
}

fn config() -> ReconcilerConfig {
    ReconcilerConfig {
        workers: 1,
        lease: Duration::from_secs(30),
        poll_interval: Duration::from_millis(1),
        base_backoff: Duration::from_secs(1),
        max_backoff: Duration::from_secs(60),
        permanent_retry_delay: Duration::from_secs(600),
        step_budget: Duration::from_secs(10),
        shutdown_grace: Duration::from_secs(1),
        name: "test".into(),
    }
}

fn ports(clusters: MockClusterRepository, cloud: Arc<dyn CloudProvider>) -> Ports {
    // The operations clients follow: none open, attempts recorded.
    let mut operations = MockOperationLog::new();
    operations
        .expect_open_operations()
        .returning(|_, _| Ok(Vec::new()));
    operations
        .expect_record_attempt()
        .returning(|_, _, _, _| Ok(()));
    ports_with(clusters, cloud, operations)
}

fn ports_with(
    clusters: MockClusterRepository,
    cloud: Arc<dyn CloudProvider>,
    operations: MockOperationLog,
) -> Ports {
    let m = Mocks::new();
    Ports {
        clusters: Arc::new(clusters),
        idempotency: Arc::new(m.idempotency),
        auth_servers: Arc::new(m.auth_servers),
        audit: Arc::new(m.audit),
        operations: Arc::new(operations),
        credentials: Arc::new(m.credentials),
        sessions: Arc::new(m.sessions),
        approvals: Arc::new(m.approvals),
        changes: Arc::new(m.changes),
        identity: Arc::new(m.identity),
        cloud,
        vault: Arc::new(m.vault),
        clock: Arc::new(FixedClock::default()),
        ids: Arc::new(SequentialIds::default()),
    }
}

/// A repository holding one cluster in `phase` with nothing under it.
fn repo_with(phase: ClusterPhase) -> MockClusterRepository {
    let mut r = MockClusterRepository::new();
    r.expect_cluster()
        .returning(move |_, _| Ok(Some(cluster(ORG_A, phase))));
    r.expect_nodes().returning(|_, _| Ok(vec![]));
    r.expect_elastic_ips().returning(|_| Ok(vec![]));
    r.expect_firewall_rules().returning(|_| Ok(vec![]));
    r
}

fn cloud_answering(result: Result<StepOutcome, ProviderError>) -> Arc<dyn CloudProvider> {
    let mut c = MockCloudProvider::new();
    c.expect_execute().returning(move |_| result.clone());
    Arc::new(c)
}

/// Starts one worker, waits until the queue recorded an outcome, stops the worker.
async fn run_until_recorded(
    ports: Ports,
    queue: Arc<FakeQueue>,
    config: ReconcilerConfig,
) -> ReconcilerHandle {
    let shutdown = CancellationToken::new();
    let handle = Reconciler::start(ports, queue.clone(), config, shutdown.clone());
    // A guard against a hang, not a timing assertion.
    tokio::time::timeout(Duration::from_secs(30), queue.recorded.cancelled())
        .await
        .expect("an outcome is recorded");
    shutdown.cancel();
    handle
}

#[test]
fn backoff_doubles_from_the_base_and_is_capped() {
    let (base, max) = (Duration::from_secs(1), Duration::from_secs(60));
    let delays: Vec<u64> = (1..=8).map(|a| backoff(a, base, max).as_secs()).collect();
    assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
    assert_eq!(backoff(0, base, max), base);
    assert_eq!(backoff(i32::MAX, base, max), max);
}

#[test]
fn defaults_follow_the_settings() {
    let c = ReconcilerConfig::default();
    assert_eq!(c.workers, 2);
    assert_eq!(c.lease, Duration::from_secs(30));
    assert_eq!(c.poll_interval, Duration::from_millis(200));
    assert_eq!(c.max_backoff, Duration::from_secs(60));
    assert!(c.step_budget < c.lease);
}

#[tokio::test]
async fn an_idle_cluster_finishes_its_operation() {
    let mut repo = MockClusterRepository::new();
    repo.expect_cluster().returning(|_, _| Ok(None));
    let queue = FakeQueue::with(vec![Ok(Some(lease(1, at(30))))]);
    let handle = run_until_recorded(
        ports(repo, Arc::new(MockCloudProvider::new())),
        queue.clone(),
        config(),
    )
    .await;
    let metrics = handle.metrics().await;
    handle.join().await;
    assert_eq!(queue.finished.lock().unwrap().clone(), [lease(1, at(30))]);
    assert!(queue.retried().is_empty());
    assert_eq!(
        (
            metrics.operations_claimed,
            metrics.operations_finished,
            metrics.steps
        ),
        (1, 1, 0)
    );
    assert_eq!(metrics.queue_depth, Some(0));
}

#[tokio::test]
async fn steps_run_while_there_is_more_then_the_operation_finishes() {
    let mut repo = MockClusterRepository::new();
    let reads = Arc::new(AtomicUsize::new(0));
    repo.expect_cluster().returning(move |_, _| {
        // Pending on the first read; once provisioning started, the cluster is gone.
        Ok((reads.fetch_add(1, Ordering::SeqCst) == 0)
            .then(|| cluster(ORG_A, ClusterPhase::Pending)))
    });
    repo.expect_nodes().returning(|_, _| Ok(vec![]));
    repo.expect_elastic_ips().returning(|_| Ok(vec![]));
    repo.expect_firewall_rules().returning(|_| Ok(vec![]));
    repo.expect_commit().times(1).returning(|w| {
        assert_eq!((w.expected_revision, w.reconcile), (Some(5), false));
        Ok(6)
    });
    let queue = FakeQueue::with(vec![Ok(Some(lease(1, at(30))))]);
    let handle = run_until_recorded(
        ports(repo, Arc::new(MockCloudProvider::new())),
        queue.clone(),
        config(),
    )
    .await;
    let metrics = handle.metrics().await;
    handle.join().await;
    assert_eq!(queue.finished.lock().unwrap().len(), 1);
    assert_eq!((metrics.steps, metrics.operations_finished), (1, 1));
}

#[tokio::test]
async fn a_transient_failure_is_retried_with_exponential_backoff() {
    let cloud = cloud_answering(Err(ProviderError::Transient("provider timed out".into())));
    let queue = FakeQueue::with(vec![Ok(Some(lease(3, at(30))))]);
    let handle = run_until_recorded(
        ports(repo_with(ClusterPhase::Provisioning), cloud),
        queue.clone(),
        config(),
    )
    .await;
    let metrics = handle.metrics().await;
    handle.join().await;
    let retried = queue.retried();
    let [(l, error, retry_at)] = &retried[..] else {
        panic!("one retry expected: {retried:?}")
    };
    assert_eq!(l, &lease(3, at(30)));
    assert_eq!(
        error,
        "create_control_plane: transient provider failure: provider timed out"
    );
    assert_eq!(*retry_at, at(4), "third attempt: 1 s doubled twice");
    assert!(queue.finished.lock().unwrap().is_empty());
    assert_eq!(metrics.operations_retried, 1);
}

#[tokio::test]
async fn a_finished_reconcile_settles_the_operations_it_carried_out() {
    use domain::model::audit::AuditResource;
    use domain::model::operation::{OperationKind, OperationStatus};
    let mut repo = MockClusterRepository::new();
    repo.expect_cluster().returning(|_, _| Ok(None));
    let deletion = domain::testing::running_operation(
        OperationKind::Delete,
        AuditResource::Cluster,
        CLUSTER_1.to_string(),
    );
    let mut operations = MockOperationLog::new();
    operations
        .expect_open_operations()
        // The cluster is gone: every open operation ends, whatever its generation.
        .withf(|c, generation| (*c, *generation) == (CLUSTER_1, i64::MAX))
        .times(1)
        .returning(move |_, _| Ok(vec![deletion.clone()]));
    operations
        .expect_settle_operations()
        .withf(|c, settled, _| {
            *c == CLUSTER_1
                && settled.len() == 1
                && settled[0].id == Uuid::from_u128(0x0909)
                && settled[0].status == OperationStatus::Succeeded
        })
        .times(1)
        .returning(|_, _, _| Ok(()));
    let queue = FakeQueue::with(vec![Ok(Some(lease(1, at(30))))]);
    let handle = run_until_recorded(
        ports_with(repo, Arc::new(MockCloudProvider::new()), operations),
        queue.clone(),
        config(),
    )
    .await;
    handle.join().await;
    assert_eq!(queue.finished.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_failed_attempt_shows_on_the_operations_in_words_a_customer_can_act_on() {
    let cloud = cloud_answering(Err(ProviderError::Transient("provider timed out".into())));
    let mut operations = MockOperationLog::new();
    operations
        .expect_record_attempt()
        .withf(|c, attempts, error, _| {
            *c == CLUSTER_1
                && *attempts == 3
                && error.contains("creating the control plane")
                && error.contains("retried automatically")
        })
        .times(1)
        .returning(|_, _, _, _| Ok(()));
    let queue = FakeQueue::with(vec![Ok(Some(lease(3, at(30))))]);
    let handle = run_until_recorded(
        ports_with(repo_with(ClusterPhase::Provisioning), cloud, operations),
        queue.clone(),
        config(),
    )
    .await;
    handle.join().await;
    assert_eq!(queue.retried().len(), 1);
}

#[tokio::test]
async fn the_backoff_is_capped_at_max_backoff() {
    let cloud = cloud_answering(Err(ProviderError::Transient("provider timed out".into())));
    let queue = FakeQueue::with(vec![Ok(Some(lease(12, at(30))))]);
    let handle = run_until_recorded(
        ports(repo_with(ClusterPhase::Provisioning), cloud),
        queue.clone(),
        config(),
    )
    .await;
    handle.join().await;
    assert_eq!(queue.retried()[0].2, at(60));
}

#[tokio::test]
async fn a_permanent_failure_is_recorded_and_parked_for_long() {
    let cloud = cloud_answering(Err(ProviderError::Permanent("volume stuck".into())));
    let queue = FakeQueue::with(vec![Ok(Some(lease(1, at(30))))]);
    let handle = run_until_recorded(
        ports(repo_with(ClusterPhase::Deleting), cloud),
        queue.clone(),
        config(),
    )
    .await;
    let metrics = handle.metrics().await;
    handle.join().await;
    let retried = queue.retried();
    assert_eq!(retried.len(), 1);
    assert_eq!(
        retried[0].1,
        "destroy_cluster: provider failure: volume stuck"
    );
    assert_eq!(retried[0].2, at(600));
    assert_eq!(
        (metrics.operations_failed, metrics.operations_retried),
        (1, 0)
    );
}

#[tokio::test]
async fn a_lease_too_short_for_a_step_is_given_back_at_once() {
    let mut repo = MockClusterRepository::new();
    repo.expect_cluster().times(0);
    let queue = FakeQueue::with(vec![Ok(Some(lease(1, at(5))))]);
    let handle = run_until_recorded(
        ports(repo, Arc::new(MockCloudProvider::new())),
        queue.clone(),
        config(),
    )
    .await;
    let metrics = handle.metrics().await;
    handle.join().await;
    let retried = queue.retried();
    assert_eq!((retried[0].1.as_str(), retried[0].2), ("requeued", at(0)));
    assert_eq!(metrics.operations_requeued, 1);
}

#[tokio::test]
async fn a_failed_claim_does_not_stop_the_worker() {
    let mut repo = MockClusterRepository::new();
    repo.expect_cluster().returning(|_, _| Ok(None));
    let queue = FakeQueue::with(vec![
        Err(StoreError::Unavailable("db restarting".into())),
        Ok(Some(lease(1, at(30)))),
    ]);
    let handle = run_until_recorded(
        ports(repo, Arc::new(MockCloudProvider::new())),
        queue.clone(),
        config(),
    )
    .await;
    handle.join().await;
    assert_eq!(queue.finished.lock().unwrap().len(), 1);
    assert!(queue.claimed.load(Ordering::SeqCst) >= 2);
}

#[tokio::test]
async fn a_wake_up_claims_new_work_before_the_next_poll() {
    let mut repo = MockClusterRepository::new();
    repo.expect_cluster().returning(|_, _| Ok(None));
    let queue = FakeQueue::with(vec![]);
    let shutdown = CancellationToken::new();
    let slow_poll = ReconcilerConfig {
        poll_interval: Duration::from_secs(3600),
        ..config()
    };
    let handle = Reconciler::start(
        ports(repo, Arc::new(MockCloudProvider::new())),
        queue.clone(),
        slow_poll,
        shutdown.clone(),
    );
    queue
        .claims
        .lock()
        .unwrap()
        .push_back(Ok(Some(lease(1, at(30)))));
    handle.waker().wake();
    tokio::time::timeout(Duration::from_secs(30), queue.recorded.cancelled())
        .await
        .expect("woken worker claims");
    handle.shutdown().await;
    assert_eq!(queue.finished.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn no_workers_means_nothing_is_ever_claimed() {
    let queue = FakeQueue::with(vec![Ok(Some(lease(1, at(30))))]);
    let shutdown = CancellationToken::new();
    let cfg = ReconcilerConfig {
        workers: 0,
        ..config()
    };
    let handle = Reconciler::start(
        ports(
            MockClusterRepository::new(),
            Arc::new(MockCloudProvider::new()),
        ),
        queue.clone(),
        cfg,
        shutdown,
    );
    assert_eq!(handle.metrics().await.workers, 0);
    handle.join().await;
    assert_eq!(queue.claimed.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn after_shutdown_nothing_is_claimed() {
    let queue = FakeQueue::with(vec![Ok(Some(lease(1, at(30))))]);
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    let handle = Reconciler::start(
        ports(
            MockClusterRepository::new(),
            Arc::new(MockCloudProvider::new()),
        ),
        queue.clone(),
        config(),
        shutdown,
    );
    handle.join().await;
    assert_eq!(queue.claimed.load(Ordering::SeqCst), 0);
}

/// A provider whose steps never end; it asks for shutdown once a step is under way.
struct StuckCloud(CancellationToken);

#[async_trait]
impl CloudProvider for StuckCloud {
    fn zone_capacity(&self, _: &str) -> u64 {
        0
    }

    fn address_pool(&self, _: Exposure) -> Option<AddressPool> {
        None
    }

    async fn execute(&self, _: Step) -> Result<StepOutcome, ProviderError> {
        self.0.cancel();
        tokio::time::sleep(Duration::from_secs(24 * 3600)).await;
        Ok(StepOutcome::Done)
    }
}

#[tokio::test(start_paused = true)]
async fn shutdown_abandons_a_step_after_the_grace_and_gives_the_lease_back() {
    let shutdown = CancellationToken::new();
    let cloud = Arc::new(StuckCloud(shutdown.clone()));
    let queue = FakeQueue::with(vec![Ok(Some(lease(1, at(30))))]);
    let handle = Reconciler::start(
        ports(repo_with(ClusterPhase::Provisioning), cloud),
        queue.clone(),
        config(),
        shutdown,
    );
    handle.join().await;
    let retried = queue.retried();
    assert_eq!((retried.len(), retried[0].1.as_str()), (1, "requeued"));
    assert_eq!(retried[0].2, at(0), "due again at once");
    assert!(queue.finished.lock().unwrap().is_empty());
    assert_eq!(queue.claimed.load(Ordering::SeqCst), 1);
}

/// The workers against the simulated cloud, the real vault and the in-memory store.
mod with_the_simulated_cloud {
    use domain::model::cluster::Registration;
    use domain::model::elastic_ip::{ElasticIp, ElasticIpStatus};
    use domain::model::kubeconfig::{self, ClusterCredentials};
    use domain::model::node::NodeStatus;
    use domain::model::node_pool::PoolStatus;
    use domain::ports::secrets::SecretVault;
    use domain::reconcile::ClusterState;
    use domain::reconcile::memory::MemoryClusters;
    use provisioner_sim::{FaultConfig, SimConfig, SimulatedCloud};
    use std::net::Ipv4Addr;

    use super::*;

    struct Setup {
        store: Arc<MemoryClusters>,
        vault: Arc<secrets::Vault>,
        queue: Arc<FakeQueue>,
    }

    /// Runs one operation on a new public cluster with one Elastic IP to its end.
    async fn provision(faults: FaultConfig) -> Setup {
        let mut c = cluster(ORG_A, ClusterPhase::Pending);
        c.exposure = Exposure::Public;
        c.api_endpoint = None;
        c.node_pools[0].status = PoolStatus::Provisioning;
        let eip = ElasticIp {
            id: Uuid::from_u128(0xe1),
            cluster_id: CLUSTER_1,
            name: None,
            exposure: Exposure::Private,
            status: ElasticIpStatus::Pending,
            address: Ipv4Addr::new(10, 96, 0, 1),
            failure_reason: None,
            created_at: at(0),
            updated_at: at(0),
        };
        let state = ClusterState {
            cluster: c,
            nodes: vec![],
            elastic_ips: vec![eip],
            firewall_rules: vec![],
        };
        let store = Arc::new(MemoryClusters::new(state));
        let vault =
            Arc::new(secrets::Vault::from_base64_key(&secrets::Vault::generate_key()).unwrap());
        let cloud = Arc::new(SimulatedCloud::new(SimConfig {
            faults,
            ..SimConfig::for_tests()
        }));
        let mut ports = ports(MockClusterRepository::new(), cloud);
        ports.clusters = store.clone();
        ports.vault = vault.clone();
        let queue = FakeQueue::with(vec![Ok(Some(lease(1, at(30))))]);
        run_until_recorded(ports, queue.clone(), config())
            .await
            .join()
            .await;
        Setup {
            store,
            vault,
            queue,
        }
    }

    #[tokio::test]
    async fn a_new_cluster_is_provisioned_with_sealed_credentials_and_its_kubeconfig() {
        let s = provision(FaultConfig::default()).await;
        assert_eq!(s.queue.finished.lock().unwrap().len(), 1);
        let db = s.store.db();
        let c = db.cluster.clone().unwrap();
        assert_eq!(c.phase, ClusterPhase::Provisioned);
        let ready = Registration {
            status: domain::model::cluster::SubStatus::Ready,
            reason: None,
        };
        assert_eq!((c.hub_registration, c.default_environment), (ready, ready));
        let host = c.public_hostname.clone().unwrap();
        assert!(host.ends_with(".k8s.example.com"), "{host}");
        assert_eq!(c.api_endpoint, Some(format!("https://{host}:6443")));
        assert_eq!(db.nodes.len(), 3);
        assert!(db.nodes.iter().all(
            |n| n.status == NodeStatus::Ready && n.name.as_str().starts_with("prod-1-default-")
        ));
        assert_eq!(db.elastic_ips[0].status, ElasticIpStatus::Ready);
        let sealed = db.credentials.clone().unwrap();
        assert!(
            sealed
                .ca_certificate_pem
                .starts_with("-----BEGIN CERTIFICATE-----")
        );
        let token = s.vault.open(&sealed.token).unwrap();
        assert!(
            !sealed.token.0.contains(token.expose()),
            "the token is stored sealed"
        );
        let yaml = kubeconfig::render(
            c.name.as_str(),
            c.api_endpoint.as_deref().unwrap(),
            &ClusterCredentials {
                ca_certificate_pem: sealed.ca_certificate_pem,
                token,
            },
            None,
            "k8s.example.com",
        );
        assert!(yaml.contains(&format!("server: https://{host}:6443")));
        assert!(db.commits.iter().all(|w| !w.reconcile));
    }

    #[tokio::test]
    async fn an_injected_control_plane_failure_fails_the_cluster_with_its_reason() {
        let faults = FaultConfig {
            fail_steps: ["create_control_plane".to_owned()].into(),
            ..FaultConfig::default()
        };
        let s = provision(faults).await;
        assert_eq!(
            s.queue.finished.lock().unwrap().len(),
            1,
            "a Failed cluster is idle"
        );
        let c = s.store.db().cluster.clone().unwrap();
        assert_eq!(c.phase, ClusterPhase::Failed);
        assert_eq!(
            c.failure_reason.as_deref(),
            Some("injected failure of step create_control_plane")
        );
        assert_eq!(s.store.db().credentials, None);
    }

    #[tokio::test]
    async fn an_injected_attach_failure_fails_only_the_elastic_ip() {
        let faults = FaultConfig {
            fail_steps: ["attach_address".to_owned()].into(),
            ..FaultConfig::default()
        };
        let s = provision(faults).await;
        let db = s.store.db();
        assert_eq!(
            db.cluster.as_ref().map(|c| c.phase),
            Some(ClusterPhase::Provisioned)
        );
        assert_eq!(db.elastic_ips[0].status, ElasticIpStatus::Failed);
        assert_eq!(
            db.elastic_ips[0].failure_reason.as_deref(),
            Some("injected failure of step attach_address")
        );
    }
}
