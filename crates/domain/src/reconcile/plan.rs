//! The pure half of reconciliation: given what is stored about a cluster, the one next piece
//! of work that brings it closer to what was asked. Level-triggered: the answer depends only on
//! the state, never on what happened before, so a worker that died mid-way simply asks again.

use uuid::Uuid;

use crate::model::cluster::{Cluster, ClusterPhase, ControlPlaneFirewall, Exposure, SubStatus};
use crate::model::elastic_ip::{ElasticIp, ElasticIpStatus};
use crate::model::firewall::{FirewallRule, FirewallRuleStatus};
use crate::model::node::{Node, NodeStatus};
use crate::model::node_pool::{NodePool, PoolStatus};
use crate::names::{DnsLabel, NODE_NAME_PATTERN, NodeName};

/// Everything stored about one cluster that reconciliation looks at.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterState {
    /// The cluster with its pools.
    pub cluster: Cluster,
    pub nodes: Vec<Node>,
    pub elastic_ips: Vec<ElasticIp>,
    pub firewall_rules: Vec<FirewallRule>,
}

/// One piece of work: at most one provider step, with the commits around it.
#[derive(Debug, Clone, PartialEq)]
pub enum Work {
    /// `Pending → Provisioning` (a commit only).
    StartProvisioning,
    /// `Step::CreateControlPlane`, then the endpoint, the credentials and `ControlPlaneReady`.
    CreateControlPlane,
    /// `Step::RegisterHub`; its outcome goes to `hub_registration`.
    RegisterHub,
    /// `Step::InstallDefaultEnvironment`; its outcome goes to `default_environment`.
    InstallDefaultEnvironment,
    /// `Step::SetExposure` for the exposure change in flight.
    SetExposure { to: Exposure },
    /// `Step::SetControlPlaneFirewall` for the firewall change in flight, then the cluster
    /// enforces it.
    SetControlPlaneFirewall { to: ControlPlaneFirewall },
    /// A rule in `Deleting`: `Step::RemoveFirewallRule`, then the rule is gone.
    RemoveFirewallRule { rule: FirewallRule },
    /// A rule `Pending`: `Step::ApplyFirewallRule`, then `Active`.
    ApplyFirewallRule { rule: FirewallRule },
    /// An Elastic IP in `Deleting`: `Step::DetachAddress`, then it is gone and its address free.
    DetachAddress { elastic_ip: ElasticIp },
    /// An Elastic IP `Pending → Provisioning` (a commit only).
    StartElasticIp { elastic_ip: ElasticIp },
    /// An Elastic IP `Provisioning`: `Step::AttachAddress`, then `Ready`.
    AttachAddress { elastic_ip: ElasticIp },
    /// Removes a node: marked `Deleting` first unless it already is, then `Step::DeleteNode`,
    /// then the node is gone.
    DeleteNode { node: Node },
    /// Brings a node up in `pool`: `node` is one left `Provisioning` (created again, the step
    /// being idempotent), or `None` for a new one, inserted as `Provisioning` first.
    CreateNode { pool: NodePool, node: Option<Node> },
    /// A `Ready` node whose labels or taints are not its pool's: `Step::ConfigureNode` sets
    /// the pool's on it in place, then the node records them. Never a replacement.
    ConfigureNode { pool: NodePool, node: Node },
    /// A pool in `Deleting` without nodes left: the pool is gone.
    DeletePool { pool: DnsLabel },
    /// A pool whose nodes match its count: `Provisioning | Scaling → Ready`.
    SettlePool { pool: NodePool },
    /// Every pool settled: `ControlPlaneReady → Provisioned`.
    FinishProvisioning,
    /// The upgrade in flight moves the control plane: `Step::UpgradeControlPlane`, then the
    /// cluster's `version` is the new one.
    UpgradeControlPlane { to: String },
    /// The control plane runs the new version and `pool` is the next one still on the old:
    /// it takes the new version and goes `Upgrading` (a commit only).
    StartPoolUpgrade { pool: NodePool },
    /// Every pool runs the new version: the upgrade is over (a commit only).
    FinishUpgrade,
    /// The cluster is `Deleting`: `Step::DestroyCluster`, then the cluster is gone.
    DestroyCluster,
}

impl Work {
    /// A short name for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Work::StartProvisioning => "start_provisioning",
            Work::CreateControlPlane => "create_control_plane",
            Work::RegisterHub => "register_hub",
            Work::InstallDefaultEnvironment => "install_default_environment",
            Work::SetExposure { .. } => "set_exposure",
            Work::SetControlPlaneFirewall { .. } => "set_control_plane_firewall",
            Work::RemoveFirewallRule { .. } => "remove_firewall_rule",
            Work::ApplyFirewallRule { .. } => "apply_firewall_rule",
            Work::DetachAddress { .. } => "detach_address",
            Work::StartElasticIp { .. } => "start_elastic_ip",
            Work::AttachAddress { .. } => "attach_address",
            Work::DeleteNode { .. } => "delete_node",
            Work::CreateNode { .. } => "create_node",
            Work::ConfigureNode { .. } => "configure_node",
            Work::DeletePool { .. } => "delete_pool",
            Work::SettlePool { .. } => "settle_pool",
            Work::FinishProvisioning => "finish_provisioning",
            Work::UpgradeControlPlane { .. } => "upgrade_control_plane",
            Work::StartPoolUpgrade { .. } => "start_pool_upgrade",
            Work::FinishUpgrade => "finish_upgrade",
            Work::DestroyCluster => "destroy_cluster",
        }
    }
}

/// The next piece of work on a cluster, or `None` when it matches what was asked.
///
/// Order: the cluster's own phase first (deletion wins over everything); then, once the
/// control plane is up, the hub registration and the default environment; then the quick,
/// user-visible changes (exposure, firewall rules, Elastic IPs) before node work, which may
/// take many steps; the cluster is `Provisioned` once every pool has settled. An upgrade moves
/// the control plane before any node (a node is never newer than its control plane), then one
/// pool at a time.
/// user-visible changes (exposure, control-plane firewall, firewall rules, Elastic IPs) before node work, which may
/// take many steps; the cluster is `Provisioned` once every pool has settled.
pub fn next_work(state: &ClusterState) -> Option<Work> {
    let cluster = &state.cluster;
    if cluster.is_gone() {
        return None;
    }
    match cluster.phase {
        ClusterPhase::Deleting => return Some(Work::DestroyCluster),
        ClusterPhase::Failed => return None,
        ClusterPhase::Pending => return Some(Work::StartProvisioning),
        ClusterPhase::Provisioning => return Some(Work::CreateControlPlane),
        ClusterPhase::ControlPlaneReady | ClusterPhase::Provisioned => {}
    }
    if cluster.hub_registration.status == SubStatus::Pending {
        return Some(Work::RegisterHub);
    }
    if cluster.default_environment.status == SubStatus::Pending {
        return Some(Work::InstallDefaultEnvironment);
    }
    if cluster.phase == ClusterPhase::Provisioned
        && let Some(change) = cluster.exposure_change
    {
        return Some(Work::SetExposure { to: change.to });
    }
    if cluster.phase == ClusterPhase::Provisioned
        && let Some(to) = &cluster.control_plane_firewall_change
    {
        return Some(Work::SetControlPlaneFirewall { to: to.clone() });
    }
    if let Some(work) = firewall_work(&state.firewall_rules) {
        return Some(work);
    }
    if let Some(work) = elastic_ip_work(&state.elastic_ips) {
        return Some(work);
    }
    let upgrade = cluster
        .upgrade
        .as_ref()
        .filter(|_| cluster.phase == ClusterPhase::Provisioned);
    if let Some(up) = upgrade
        && cluster.version != up.to
    {
        return Some(Work::UpgradeControlPlane { to: up.to.clone() });
    }
    if let Some(work) = node_work(cluster, &state.nodes) {
        return Some(work);
    }
    if let Some(up) = upgrade {
        // Every pool has settled: the next one still on the old version, else done.
        return Some(match cluster.live_pools().find(|p| p.version != up.to) {
            Some(pool) => Work::StartPoolUpgrade { pool: pool.clone() },
            None => Work::FinishUpgrade,
        });
    }
    let settled = cluster.live_pools().all(|p| p.status == PoolStatus::Ready);
    (cluster.phase == ClusterPhase::ControlPlaneReady && settled)
        .then_some(Work::FinishProvisioning)
}

fn firewall_work(rules: &[FirewallRule]) -> Option<Work> {
    let with = |status| rules.iter().find(|r| r.status == status).cloned();
    if let Some(rule) = with(FirewallRuleStatus::Deleting) {
        return Some(Work::RemoveFirewallRule { rule });
    }
    with(FirewallRuleStatus::Pending).map(|rule| Work::ApplyFirewallRule { rule })
}

fn elastic_ip_work(eips: &[ElasticIp]) -> Option<Work> {
    let with = |status| eips.iter().find(|e| e.status == status).cloned();
    if let Some(elastic_ip) = with(ElasticIpStatus::Deleting) {
        return Some(Work::DetachAddress { elastic_ip });
    }
    if let Some(elastic_ip) = with(ElasticIpStatus::Provisioning) {
        return Some(Work::AttachAddress { elastic_ip });
    }
    with(ElasticIpStatus::Pending).map(|elastic_ip| Work::StartElasticIp { elastic_ip })
}

fn node_work(cluster: &Cluster, nodes: &[Node]) -> Option<Work> {
    // A deletion under way is finished first, so a node never stays half removed.
    if let Some(node) = nodes.iter().find(|n| n.status == NodeStatus::Deleting) {
        return Some(Work::DeleteNode { node: node.clone() });
    }
    if let Some(pool) = cluster.node_pools.iter().find(|p| p.status.is_deleting()) {
        return Some(match nodes_of(nodes, pool).next() {
            Some(node) => Work::DeleteNode { node: node.clone() },
            None => Work::DeletePool {
                pool: pool.name.clone(),
            },
        });
    }
    // Nodes whose pool is unknown cannot be matched to a target: remove them.
    if let Some(node) = nodes
        .iter()
        .find(|n| cluster.pool(n.pool.as_str()).is_none())
    {
        return Some(Work::DeleteNode { node: node.clone() });
    }
    for pool in cluster.live_pools() {
        let mine: Vec<&Node> = nodes_of(nodes, pool).collect();
        if pool.status == PoolStatus::Upgrading {
            return Some(upgrade_work(pool, &mine));
        }
        let target = usize::try_from(pool.count).unwrap_or(usize::MAX);
        if mine.len() > target
            && let Some(node) = surplus_node(&mine)
        {
            return Some(Work::DeleteNode { node: node.clone() });
        }
        if let Some(node) = mine.iter().find(|n| n.status == NodeStatus::Provisioning) {
            return Some(Work::CreateNode {
                pool: pool.clone(),
                node: Some((*node).clone()),
            });
        }
        if mine.len() < target {
            return Some(Work::CreateNode {
                pool: pool.clone(),
                node: None,
            });
        }
        if let Some(node) = mine
            .iter()
            .find(|n| n.status == NodeStatus::Ready && !n.matches_pool(pool))
        {
            return Some(Work::ConfigureNode {
                pool: pool.clone(),
                node: (*node).clone(),
            });
        }
        if pool.status != PoolStatus::Ready {
            return Some(Work::SettlePool { pool: pool.clone() });
        }
    }
    None
}

/// The next step of a pool replacing its nodes by nodes of `pool.version`. A node of the new
/// version being created is brought up first; an old node not up yet serves nothing and goes
/// next; then an old node is removed while the pool keeps `count - max_unavailable` nodes
/// `Ready`, else a new node is added while the pool stays within `count + max_surge`. With the
/// default settings (surge 1, unavailable 0) a new node is `Ready` before an old one is
/// drained and removed, and the pool never has fewer than its count `Ready`.
fn upgrade_work(pool: &NodePool, mine: &[&Node]) -> Work {
    let count = usize::try_from(pool.count).unwrap_or(usize::MAX);
    let surge = usize::try_from(pool.surge.max_surge.max(1)).unwrap_or(1);
    let unavailable = usize::try_from(pool.surge.max_unavailable).unwrap_or(0);
    let create = |node: Option<&Node>| Work::CreateNode {
        pool: pool.clone(),
        node: node.cloned(),
    };
    let is_old = |n: &Node| n.version != pool.version;
    if let Some(n) = mine
        .iter()
        .find(|n| !is_old(n) && n.status == NodeStatus::Provisioning)
    {
        return create(Some(n));
    }
    let old: Vec<&Node> = mine.iter().copied().filter(|n| is_old(n)).collect();
    if let Some(n) = old.iter().find(|n| n.status == NodeStatus::Provisioning) {
        return Work::DeleteNode { node: (*n).clone() };
    }
    let total = mine.len();
    // The oldest goes first, as node pools age out their longest-running machines.
    let Some(victim) = old.iter().min_by_key(|n| (n.created_at, n.name.clone())) else {
        return if total < count {
            create(None)
        } else if let Some(n) = (total > count).then(|| surplus_node(mine)).flatten() {
            Work::DeleteNode { node: n.clone() }
        } else {
            Work::SettlePool { pool: pool.clone() }
        };
    };
    let ready = mine
        .iter()
        .filter(|n| n.status == NodeStatus::Ready)
        .count();
    let may_remove = ready > count.saturating_sub(unavailable);
    if may_remove || total >= count + surge {
        Work::DeleteNode {
            node: (*victim).clone(),
        }
    } else {
        create(None)
    }
}

fn nodes_of<'n>(nodes: &'n [Node], pool: &'n NodePool) -> impl Iterator<Item = &'n Node> {
    nodes.iter().filter(move |n| n.pool == pool.name)
}

/// Which node a pool gives up when it shrinks: one not up yet, else the newest.
fn surplus_node<'n>(nodes: &[&'n Node]) -> Option<&'n Node> {
    nodes.iter().copied().max_by_key(|n| {
        (
            n.status == NodeStatus::Provisioning,
            n.created_at,
            n.name.clone(),
        )
    })
}

/// Longest node name the node-name rule allows.
const NODE_NAME_MAX: usize = 254;
const SUFFIX_LEN: usize = 5;

/// A node name `<cluster>-<pool>-<5 lowercase base36 characters>`, the random part drawn from
/// `id`; the prefix is cut so the whole stays within the node-name rule.
pub fn node_name(cluster: &str, pool: &str, id: Uuid) -> Result<NodeName, String> {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut n = id.as_u128();
    let mut suffix = String::with_capacity(SUFFIX_LEN);
    for _ in 0..SUFFIX_LEN {
        suffix.push(char::from(DIGITS[(n % 36) as usize]));
        n /= 36;
    }
    let mut prefix = format!("{cluster}-{pool}");
    if prefix.len() + 1 + SUFFIX_LEN > NODE_NAME_MAX {
        // Cluster and pool names are ASCII, so byte positions are character positions.
        prefix.truncate(NODE_NAME_MAX - 1 - SUFFIX_LEN);
    }
    let prefix = prefix.trim_end_matches(['-', '.']);
    NodeName::parse(&format!("{prefix}-{suffix}"))
        .map_err(|_| format!("generated node name breaks {NODE_NAME_PATTERN}"))
}
