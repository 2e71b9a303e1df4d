//! The effectful half of reconciliation: load a cluster's state, carry out the work
//! [`next_work`] picked (at most one provider step) and commit its outcome on the revision it
//! was decided on. A commit that loses a race writes nothing; the caller simply runs again on
//! fresh state, and since every provider step is idempotent, repeating one does no harm.

use std::fmt::Display;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::cluster::{Cluster, PhaseEvent};
use crate::model::elastic_ip::{ElasticIp, ElasticIpEvent};
use crate::model::firewall::{FirewallEvent, FirewallRule};
use crate::model::kubeconfig::SealedCredentials;
use crate::model::node::{Node, NodeEvent, NodeStatus};
use crate::model::node_pool::PoolStatus;
use crate::model::node_pool::{NodePool, PoolEvent};
use crate::model::operation::OperationKind;
use crate::names::NodeName;
use crate::ports::provisioning::{Endpoint, ProviderError, Step, StepOutcome};
use crate::ports::storage::{Change, ClusterWrite, Freshness, StoreError};
use crate::reconcile::plan::{ClusterState, Work, next_work, node_name};
use crate::reconcile::{Outcome, Progress, ReconcileError, StepReport};
use crate::service::Ports;

/// How many random node names are tried before giving up on finding a free one.
const NODE_NAME_ATTEMPTS: usize = 16;

/// The stored state of a live cluster; `None` when it is unknown or gone.
pub async fn load_state(
    ports: &Ports,
    cluster_id: Uuid,
) -> Result<Option<ClusterState>, StoreError> {
    let Some(cluster) = ports
        .clusters
        .cluster(cluster_id, Freshness::Latest)
        .await?
    else {
        return Ok(None);
    };
    if cluster.is_gone() {
        return Ok(None);
    }
    let nodes = ports.clusters.nodes(cluster_id, None).await?;
    let elastic_ips = ports.clusters.elastic_ips(cluster_id).await?;
    let elastic_ips = elastic_ips
        .into_iter()
        .filter(|e| e.status.is_alive())
        .collect();
    let firewall_rules = ports.clusters.firewall_rules(cluster_id).await?;
    Ok(Some(ClusterState {
        cluster,
        nodes,
        elastic_ips,
        firewall_rules,
    }))
}

/// Takes one cluster one step closer to what was asked: [`Progress::More`] while work remains
/// (call again), [`Progress::Idle`] when it matches (or is gone).
pub async fn reconcile_step(ports: &Ports, cluster_id: Uuid) -> Result<Progress, ReconcileError> {
    reconcile_step_report(ports, cluster_id)
        .await
        .map(|r| r.progress)
}

/// [`reconcile_step`], saying which work it took on and how that ended.
pub async fn reconcile_step_report(
    ports: &Ports,
    cluster_id: Uuid,
) -> Result<StepReport, ReconcileError> {
    let idle = StepReport {
        work: None,
        outcome: Outcome::Idle,
        progress: Progress::Idle,
    };
    let Some(state) = load_state(ports, cluster_id).await? else {
        return Ok(idle);
    };
    let Some(work) = next_work(&state) else {
        return Ok(idle);
    };
    let name = work.name();
    let mut run = Run {
        ports,
        state: &state,
        revision: state.cluster.revision,
        now: ports.clock.now(),
        step: name,
    };
    let progress = upgrade_progress(&work, &state.cluster);
    let outcome = run.carry_out(work).await?;
    if let (Outcome::Done, Some(text)) = (&outcome, progress) {
        ports
            .operations
            .record_progress(cluster_id, OperationKind::Upgrade, text, run.now)
            .await?;
    }
    Ok(StepReport {
        work: Some(name),
        outcome,
        progress: Progress::More,
    })
}

/// One piece of work in progress: the state it was decided on and the revision to commit on.
struct Run<'a> {
    ports: &'a Ports,
    state: &'a ClusterState,
    revision: i64,
    now: DateTime<Utc>,
    step: &'static str,
}

/// What an upgrade's operation says once `work` is done on `cluster`, in a customer's words;
/// `None` for work that is not part of an upgrade.
pub fn upgrade_progress(work: &Work, cluster: &Cluster) -> Option<String> {
    let up = cluster.upgrade.as_ref()?;
    let upgrading = |pool: &str| {
        cluster
            .pool(pool)
            .is_some_and(|p| p.status == PoolStatus::Upgrading)
    };
    Some(match work {
        Work::UpgradeControlPlane { to } => {
            format!("The control plane runs {to}; the node pools follow one at a time.")
        }
        Work::StartPoolUpgrade { pool } => format!(
            "Node pool {} is replacing its nodes by nodes of {}.",
            pool.name.as_str(),
            up.to
        ),
        Work::CreateNode { pool, .. } if pool.status == PoolStatus::Upgrading => format!(
            "Node pool {}: a new node of {} is ready.",
            pool.name.as_str(),
            pool.version
        ),
        Work::DeleteNode { node } if upgrading(node.pool.as_str()) => format!(
            "Node pool {}: node {} of {} was drained and removed.",
            node.pool.as_str(),
            node.name.as_str(),
            node.version
        ),
        Work::SettlePool { pool } if pool.status == PoolStatus::Upgrading => {
            format!("Node pool {} runs {}.", pool.name.as_str(), pool.version)
        }
        Work::FinishUpgrade => format!("Every node pool runs {}: the upgrade is done.", up.to),
        _ => return None,
    })
}

fn internal(e: impl Display) -> ReconcileError {
    ReconcileError::Internal(e.to_string())
}

fn api_url(endpoint: &Endpoint) -> String {
    format!("https://{}:6443", endpoint.host)
}

fn outcome_name(o: &StepOutcome) -> &'static str {
    match o {
        StepOutcome::Done => "done",
        StepOutcome::ControlPlane { .. } => "control plane",
        StepOutcome::Registration(_) => "registration",
        StepOutcome::Exposure(_) => "exposure",
    }
}

impl Run<'_> {
    fn cluster(&self) -> &Cluster {
        &self.state.cluster
    }

    /// Commits on the revision this run holds; `false` when the cluster moved meanwhile.
    async fn commit(&mut self, changes: Vec<Change>) -> Result<bool, ReconcileError> {
        let write = ClusterWrite::plain(self.cluster().id, Some(self.revision), changes, self.now);
        match self.ports.clusters.commit(write).await {
            Ok(revision) => {
                self.revision = revision;
                Ok(true)
            }
            Err(StoreError::RevisionMismatch) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    async fn commit_done(&mut self, changes: Vec<Change>) -> Result<Outcome, ReconcileError> {
        Ok(if self.commit(changes).await? {
            Outcome::Done
        } else {
            Outcome::Raced
        })
    }

    /// Runs a provider step: the outcome, or the provider's reason for giving up for good.
    async fn execute(&self, step: Step) -> Result<Result<StepOutcome, String>, ReconcileError> {
        match self.ports.cloud.execute(step).await {
            Ok(outcome) => Ok(Ok(outcome)),
            Err(ProviderError::Permanent(reason)) => Ok(Err(reason)),
            Err(ProviderError::Transient(message)) => Err(ReconcileError::Transient {
                step: self.step,
                message,
            }),
        }
    }

    fn unexpected(&self, outcome: &StepOutcome) -> ReconcileError {
        ReconcileError::Internal(format!(
            "{}: the provider answered with a {} outcome",
            self.step,
            outcome_name(outcome)
        ))
    }

    fn permanent(&self, message: String) -> ReconcileError {
        ReconcileError::Permanent {
            step: self.step,
            message,
        }
    }

    /// The cluster after `event`, touched now.
    fn advanced(&self, event: PhaseEvent) -> Result<Cluster, ReconcileError> {
        let mut next = self.cluster().clone();
        next.phase = next.phase.apply(event).map_err(internal)?;
        next.updated_at = self.now;
        Ok(next)
    }

    /// The provider gave up on the cluster's own provisioning: `Failed` with its reason while
    /// the phase machine allows it, a permanent error (recorded on the operation) otherwise.
    async fn fail_cluster(&mut self, reason: String) -> Result<Outcome, ReconcileError> {
        let Ok(mut next) = self.advanced(PhaseEvent::Fail) else {
            return Err(self.permanent(reason));
        };
        next.failure_reason = Some(reason.clone());
        Ok(if self.commit(vec![Change::UpdateCluster(next)]).await? {
            Outcome::Failed { reason }
        } else {
            Outcome::Raced
        })
    }

    async fn carry_out(&mut self, work: Work) -> Result<Outcome, ReconcileError> {
        match work {
            Work::StartProvisioning => {
                let next = self.advanced(PhaseEvent::StartProvisioning)?;
                self.commit_done(vec![Change::UpdateCluster(next)]).await
            }
            Work::CreateControlPlane => self.create_control_plane().await,
            Work::RegisterHub | Work::InstallDefaultEnvironment => {
                self.register(work == Work::RegisterHub).await
            }
            Work::SetExposure { to } => {
                let c = self.cluster();
                let step = Step::SetExposure {
                    cluster_id: c.id,
                    cluster_name: c.name.as_str().to_owned(),
                    to,
                };
                let endpoint = match self.execute(step).await? {
                    Ok(StepOutcome::Exposure(endpoint)) => endpoint,
                    Ok(other) => return Err(self.unexpected(&other)),
                    Err(reason) => return Err(self.permanent(reason)),
                };
                let mut next = self.cluster().clone();
                let url = api_url(&endpoint);
                if !next.complete_exposure_change(endpoint.public_hostname, url) {
                    return Err(internal("no exposure change in flight"));
                }
                next.updated_at = self.now;
                self.commit_done(vec![Change::UpdateCluster(next)]).await
            }
            Work::SetControlPlaneFirewall { to } => {
                let step = Step::SetControlPlaneFirewall {
                    cluster_id: self.cluster().id,
                    firewall: to.clone(),
                };
                if let Err(reason) = self.execute(step).await? {
                    return Err(self.permanent(reason));
                }
                let mut next = self.cluster().clone();
                // Only the change this work was decided on completes: the revision check of
                // the commit refuses it when another one replaced it meanwhile.
                if next.control_plane_firewall_change.as_ref() != Some(&to)
                    || !next.complete_control_plane_firewall_change()
                {
                    return Err(internal("no control-plane firewall change in flight"));
                }
                next.updated_at = self.now;
                self.commit_done(vec![Change::UpdateCluster(next)]).await
            }
            Work::RemoveFirewallRule { rule } => {
                let step = Step::RemoveFirewallRule {
                    cluster_id: self.cluster().id,
                    rule_id: rule.id,
                };
                if let Err(reason) = self.execute(step).await? {
                    return Err(self.permanent(reason));
                }
                self.commit_done(vec![Change::DeleteFirewallRule(rule.id)])
                    .await
            }
            Work::ApplyFirewallRule { rule } => self.apply_firewall_rule(rule).await,
            Work::DetachAddress { elastic_ip } => {
                // The machine must allow the end before the address is let go.
                elastic_ip
                    .status
                    .apply(ElasticIpEvent::Released)
                    .map_err(internal)?;
                let step = Step::DetachAddress {
                    cluster_id: self.cluster().id,
                    elastic_ip_id: elastic_ip.id,
                    address: elastic_ip.address,
                };
                if let Err(reason) = self.execute(step).await? {
                    return Err(self.permanent(reason));
                }
                self.commit_done(vec![Change::DeleteElasticIp(elastic_ip.id)])
                    .await
            }
            Work::StartElasticIp { elastic_ip } => {
                let next = self.elastic_ip_after(&elastic_ip, ElasticIpEvent::StartProvisioning)?;
                self.commit_done(vec![Change::UpdateElasticIp(next)]).await
            }
            Work::AttachAddress { elastic_ip } => self.attach_address(elastic_ip).await,
            Work::DeleteNode { node } => self.delete_node(node).await,
            Work::CreateNode { pool, node } => self.create_node(pool, node).await,
            Work::ConfigureNode { pool, node } => {
                let step = Step::ConfigureNode {
                    cluster_id: self.cluster().id,
                    node: node.name.as_str().to_owned(),
                    labels: pool.labels.clone(),
                    taints: pool.taints.clone(),
                };
                if let Err(reason) = self.execute(step).await? {
                    return Err(self.permanent(reason));
                }
                let mut next = node;
                next.labels = pool.labels;
                next.taints = pool.taints;
                self.commit_done(vec![Change::UpdateNode(next)]).await
            }
            Work::DeletePool { pool } => self.commit_done(vec![Change::DeletePool(pool)]).await,
            Work::SettlePool { pool } => {
                let mut next = pool;
                next.status = next.status.apply(PoolEvent::Settled).map_err(internal)?;
                next.updated_at = self.now;
                self.commit_done(vec![Change::UpdatePool(next)]).await
            }
            Work::FinishProvisioning => {
                let next = self.advanced(PhaseEvent::NodesReady)?;
                self.commit_done(vec![Change::UpdateCluster(next)]).await
            }
            Work::UpgradeControlPlane { to } => {
                let step = Step::UpgradeControlPlane {
                    cluster_id: self.cluster().id,
                    version: to.clone(),
                };
                if let Err(reason) = self.execute(step).await? {
                    return Err(self.permanent(reason));
                }
                let mut next = self.cluster().clone();
                next.version = to;
                next.updated_at = self.now;
                self.commit_done(vec![Change::UpdateCluster(next)]).await
            }
            Work::StartPoolUpgrade { pool } => {
                let Some(to) = self.cluster().upgrade.as_ref().map(|u| u.to.clone()) else {
                    return Err(internal("no upgrade in flight"));
                };
                let mut next = pool;
                next.status = next
                    .status
                    .apply(PoolEvent::StartUpgrade)
                    .map_err(internal)?;
                next.version = to;
                next.updated_at = self.now;
                self.commit_done(vec![Change::UpdatePool(next)]).await
            }
            Work::FinishUpgrade => {
                let mut next = self.cluster().clone();
                next.upgrade = None;
                next.updated_at = self.now;
                self.commit_done(vec![Change::UpdateCluster(next)]).await
            }
            Work::DestroyCluster => {
                if let Err(reason) = self
                    .execute(Step::DestroyCluster {
                        cluster_id: self.cluster().id,
                    })
                    .await?
                {
                    return Err(self.permanent(reason));
                }
                self.commit_done(vec![Change::RemoveCluster]).await
            }
        }
    }

    async fn create_control_plane(&mut self) -> Result<Outcome, ReconcileError> {
        let c = self.cluster();
        let step = Step::CreateControlPlane {
            cluster_id: c.id,
            cluster_name: c.name.as_str().to_owned(),
            zone: c.zone.clone(),
            version: c.version.clone(),
            exposure: c.exposure,
            control_plane_firewall: c.control_plane_firewall.clone(),
        };
        let (endpoint, credentials) = match self.execute(step).await? {
            Ok(StepOutcome::ControlPlane {
                endpoint,
                credentials,
            }) => (endpoint, credentials),
            Ok(other) => return Err(self.unexpected(&other)),
            Err(reason) => return self.fail_cluster(reason).await,
        };
        let mut next = self.advanced(PhaseEvent::ControlPlaneUp)?;
        next.api_endpoint = Some(api_url(&endpoint));
        next.public_hostname = endpoint.public_hostname;
        let mut changes = vec![Change::UpdateCluster(next)];
        // A repeated step issues a new CA and token; the first ones stored stay, so every
        // download of the kubeconfig is the same.
        if self.ports.clusters.credentials(c.id).await?.is_none() {
            let token = self
                .ports
                .vault
                .seal(&credentials.token)
                .map_err(|e| internal(format!("sealing the cluster token: {e}")))?;
            changes.push(Change::SetCredentials(SealedCredentials {
                ca_certificate_pem: credentials.ca_certificate_pem,
                token,
            }));
        }
        self.commit_done(changes).await
    }

    async fn register(&mut self, hub: bool) -> Result<Outcome, ReconcileError> {
        let cluster_id = self.cluster().id;
        let step = if hub {
            Step::RegisterHub { cluster_id }
        } else {
            Step::InstallDefaultEnvironment { cluster_id }
        };
        let registration = match self.execute(step).await? {
            Ok(StepOutcome::Registration(r)) => r,
            Ok(other) => return Err(self.unexpected(&other)),
            Err(reason) => return self.fail_cluster(reason).await,
        };
        let mut next = self.cluster().clone();
        if hub {
            next.hub_registration = registration;
        } else {
            next.default_environment = registration;
        }
        next.updated_at = self.now;
        self.commit_done(vec![Change::UpdateCluster(next)]).await
    }

    async fn apply_firewall_rule(&mut self, rule: FirewallRule) -> Result<Outcome, ReconcileError> {
        let result = self
            .execute(Step::ApplyFirewallRule { rule: rule.clone() })
            .await?;
        let mut next = rule;
        next.updated_at = self.now;
        match result {
            Ok(_) => {
                next.status = next
                    .status
                    .apply(FirewallEvent::Applied)
                    .map_err(internal)?;
                self.commit_done(vec![Change::UpdateFirewallRule(next)])
                    .await
            }
            Err(reason) => {
                next.status = next.status.apply(FirewallEvent::Fail).map_err(internal)?;
                next.failure_reason = Some(reason.clone());
                Ok(
                    match self
                        .commit_done(vec![Change::UpdateFirewallRule(next)])
                        .await?
                    {
                        Outcome::Done => Outcome::Failed { reason },
                        other => other,
                    },
                )
            }
        }
    }

    fn elastic_ip_after(
        &self,
        eip: &ElasticIp,
        event: ElasticIpEvent,
    ) -> Result<ElasticIp, ReconcileError> {
        let mut next = eip.clone();
        next.status = next.status.apply(event).map_err(internal)?;
        next.updated_at = self.now;
        Ok(next)
    }

    async fn attach_address(&mut self, eip: ElasticIp) -> Result<Outcome, ReconcileError> {
        let step = Step::AttachAddress {
            cluster_id: self.cluster().id,
            elastic_ip_id: eip.id,
            address: eip.address,
            exposure: eip.exposure,
        };
        match self.execute(step).await? {
            Ok(_) => {
                let next = self.elastic_ip_after(&eip, ElasticIpEvent::Attached)?;
                self.commit_done(vec![Change::UpdateElasticIp(next)]).await
            }
            Err(reason) => {
                let mut next = self.elastic_ip_after(&eip, ElasticIpEvent::Fail)?;
                next.failure_reason = Some(reason.clone());
                Ok(
                    match self
                        .commit_done(vec![Change::UpdateElasticIp(next)])
                        .await?
                    {
                        Outcome::Done => Outcome::Failed { reason },
                        other => other,
                    },
                )
            }
        }
    }

    /// Marks the node `Deleting` (its own commit, so a crash later resumes the deletion), removes
    /// it at the provider, then forgets it.
    async fn delete_node(&mut self, node: Node) -> Result<Outcome, ReconcileError> {
        if node.status != NodeStatus::Deleting {
            let mut deleting = node.clone();
            deleting.status = node.status.apply(NodeEvent::Delete).map_err(internal)?;
            if !self.commit(vec![Change::UpdateNode(deleting)]).await? {
                return Ok(Outcome::Raced);
            }
        }
        let step = Step::DeleteNode {
            cluster_id: self.cluster().id,
            node: node.name.as_str().to_owned(),
        };
        if let Err(reason) = self.execute(step).await? {
            return Err(self.permanent(reason));
        }
        self.commit_done(vec![Change::DeleteNode(node.name)]).await
    }

    /// Inserts a new node as `Provisioning` (its own commit: a crash later finds it and creates
    /// it again), creates it at the provider, then marks it `Ready`.
    async fn create_node(
        &mut self,
        pool: NodePool,
        node: Option<Node>,
    ) -> Result<Outcome, ReconcileError> {
        let node = match node {
            Some(node) => node,
            None => {
                // Recorded bare: it carries the pool's labels and taints once it is up with them.
                let node = Node {
                    name: self.fresh_node_name(&pool)?,
                    pool: pool.name.clone(),
                    status: NodeStatus::Provisioning,
                    version: pool.version.clone(),
                    created_at: self.now,
                    labels: Default::default(),
                    taints: Vec::new(),
                };
                if !self.commit(vec![Change::InsertNode(node.clone())]).await? {
                    return Ok(Outcome::Raced);
                }
                node
            }
        };
        let step = Step::CreateNode {
            cluster_id: self.cluster().id,
            pool: pool.name.as_str().to_owned(),
            node: node.name.as_str().to_owned(),
            size: pool.size.clone(),
            version: node.version.clone(),
            labels: pool.labels.clone(),
            taints: pool.taints.clone(),
        };
        if let Err(reason) = self.execute(step).await? {
            // Before `Provisioned` a node that cannot be created fails the cluster; after, the
            // phase machine refuses and the error is recorded on the operation.
            return self.fail_cluster(reason).await;
        }
        let mut up = node;
        up.status = up.status.apply(NodeEvent::Up).map_err(internal)?;
        up.labels = pool.labels;
        up.taints = pool.taints;
        self.commit_done(vec![Change::UpdateNode(up)]).await
    }

    fn fresh_node_name(&self, pool: &NodePool) -> Result<NodeName, ReconcileError> {
        for _ in 0..NODE_NAME_ATTEMPTS {
            let name = node_name(
                self.cluster().name.as_str(),
                pool.name.as_str(),
                self.ports.ids.new_id(),
            )
            .map_err(ReconcileError::Internal)?;
            if !self.state.nodes.iter().any(|n| n.name == name) {
                return Ok(name);
            }
        }
        Err(internal("no free node name found"))
    }
}
