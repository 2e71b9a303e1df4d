//! Clusters, their node pools and nodes as answered, and the answers around them: list
//! pages, the state long-poll and the kubeconfig.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use domain::model::cluster as model;
use domain::model::maintenance_window as window;
use domain::model::node::{Node as DomainNode, NodeStatus};
use domain::model::node_pool::{NodePool as DomainPool, PoolStatus, Taint as DomainTaint};
use domain::model::upgrade::UpgradeInFlight;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::enums;

/// A cluster and its node pools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Cluster {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub organization_slug: String,
    pub name: String,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub zone: String,
    /// The Kubernetes version id, e.g. `v1.32.4`.
    pub version: String,
    /// The control-plane option assigned to the organization in this zone.
    pub control_plane_option_id: String,
    #[schema(value_type = enums::Exposure)]
    pub exposure: model::Exposure,
    #[schema(value_type = enums::NetworkMode)]
    pub network_mode: model::NetworkMode,
    #[schema(value_type = enums::ClusterPhase)]
    pub phase: model::ClusterPhase,
    /// Why the cluster is `Failed`; null otherwise.
    pub failure_reason: Option<String>,
    /// The public API hostname (ends in the configured public suffix); null unless public.
    pub public_hostname: Option<String>,
    /// The API server URL the kubeconfig points at; null until the control plane is up.
    pub api_endpoint: Option<String>,
    pub node_pools: Vec<NodePool>,
    pub hub_registration: Registration,
    pub default_environment: Registration,
    pub exposure_change: Option<ExposureChange>,
    /// The Kubernetes upgrade in flight, null otherwise. Meanwhile `version` is the control
    /// plane's, each pool's `version` the one its nodes move to, each node's its own.
    pub upgrade: Option<Upgrade>,
    pub maintenance_window: MaintenanceWindow,
    /// Whether the newest patch of the cluster's minor version is applied by itself inside the
    /// maintenance window.
    pub auto_upgrade: bool,
    /// Who may call the cluster's API server: the firewall it enforces now.
    #[serde(default)]
    #[schema(required = true)]
    pub control_plane_firewall: ControlPlaneFirewall,
    /// The firewall being applied (a `PATCH` started it; its operation says how it goes);
    /// null when none is. `control_plane_firewall` is enforced until it is applied. Only one
    /// change is in flight at a time (a second is 409 `change_in_flight`); it needs the
    /// cluster `Provisioned` (400 before).
    #[serde(default)]
    #[schema(required = true)]
    pub control_plane_firewall_change: Option<ControlPlaneFirewall>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// An upgrade in flight.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Upgrade {
    /// The version the cluster ran when it started.
    pub from: String,
    pub to: String,
    /// Whether the maintenance policy started it (`auto_upgrade`), rather than a person.
    pub automatic: bool,
}

impl From<&UpgradeInFlight> for Upgrade {
    fn from(u: &UpgradeInFlight) -> Self {
        Upgrade {
            from: u.from.clone(),
            to: u.to.clone(),
            automatic: u.automatic,
        }
    }
}

/// Four hours from `start_time` (UTC) on `day`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MaintenanceWindow {
    #[schema(value_type = enums::MaintenanceDay)]
    pub day: String,
    /// `HH:MM`, UTC.
    pub start_time: String,
}

impl From<window::MaintenanceWindow> for MaintenanceWindow {
    fn from(w: window::MaintenanceWindow) -> Self {
        MaintenanceWindow {
            day: w.day.as_str().to_owned(),
            start_time: window::format_start_time(w.start_time),
        }
    }
}

/// Who may call a cluster's API server. Disabled, anyone holding a credential; enabled, only
/// callers from one of `allowed_addresses` (never empty then), others refused with 403.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ControlPlaneFirewall {
    pub enabled: bool,
    /// IPv4 and IPv6 networks in CIDR notation, as the service normalised them (IPv6
    /// lowercase and compressed). Kept while disabled.
    pub allowed_addresses: Vec<String>,
}

impl From<&model::ControlPlaneFirewall> for ControlPlaneFirewall {
    fn from(f: &model::ControlPlaneFirewall) -> Self {
        ControlPlaneFirewall {
            enabled: f.enabled,
            allowed_addresses: f
                .allowed_addresses
                .iter()
                .map(ToString::to_string)
                .collect(),
        }
    }
}

impl From<&model::Cluster> for Cluster {
    fn from(c: &model::Cluster) -> Self {
        Cluster {
            id: c.id,
            organization_id: c.organization_id,
            organization_slug: c.organization_slug.clone(),
            name: c.name.to_string(),
            description: c.description.clone(),
            tags: c.tags.iter().map(ToString::to_string).collect(),
            zone: c.zone.clone(),
            version: c.version.clone(),
            control_plane_option_id: c.control_plane_option_id.clone(),
            exposure: c.exposure,
            network_mode: c.network_mode,
            phase: c.phase,
            failure_reason: c.failure_reason.clone(),
            public_hostname: c.public_hostname.clone(),
            api_endpoint: c.api_endpoint.clone(),
            node_pools: c.node_pools.iter().map(NodePool::from).collect(),
            hub_registration: c.hub_registration.into(),
            default_environment: c.default_environment.into(),
            exposure_change: c.exposure_change.map(Into::into),
            upgrade: c.upgrade.as_ref().map(Into::into),
            maintenance_window: c.maintenance_window.into(),
            auto_upgrade: c.auto_upgrade,
            control_plane_firewall: (&c.control_plane_firewall).into(),
            control_plane_firewall_change: c.control_plane_firewall_change.as_ref().map(Into::into),
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

/// `hub_registration` and `default_environment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Registration {
    #[schema(value_type = enums::SubStatus)]
    pub status: model::SubStatus,
    #[schema(value_type = Option<enums::RegistrationReason>)]
    pub reason: Option<model::RegistrationReason>,
}

impl From<model::Registration> for Registration {
    fn from(r: model::Registration) -> Self {
        Registration {
            status: r.status,
            reason: r.reason,
        }
    }
}

/// An exposure change in flight: `exposure` still shows the current value, `to` the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExposureChange {
    #[schema(value_type = enums::Exposure)]
    pub to: model::Exposure,
    #[schema(value_type = enums::ExposureChangeStatus)]
    pub status: model::ExposureChangeStatus,
}

impl From<model::ExposureChange> for ExposureChange {
    fn from(e: model::ExposureChange) -> Self {
        ExposureChange {
            to: e.to,
            status: e.status,
        }
    }
}

/// A node pool as stored and as answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct NodePool {
    pub name: String,
    /// The machine tier id; immutable.
    pub size: String,
    /// The target node count.
    pub count: u32,
    pub auto_scale: bool,
    pub min_nodes: u32,
    /// Null when never given (only needed with auto_scale).
    pub max_nodes: Option<u32>,
    /// Kubernetes labels on each of the pool's nodes.
    pub labels: BTreeMap<String, String>,
    /// Kubernetes taints on each of the pool's nodes.
    #[serde(default)]
    #[schema(required = true)]
    pub taints: Vec<Taint>,
    pub tags: BTreeMap<String, String>,
    /// The tier's disk size.
    pub root_volume_size_gib: u32,
    /// The Kubernetes version its nodes run, or move to while `Upgrading`.
    pub version: String,
    /// How many nodes above its count the pool may go while an upgrade replaces its nodes.
    pub max_surge: u32,
    /// How many nodes below its count the pool may go while an upgrade replaces its nodes.
    pub max_unavailable: u32,
    #[schema(value_type = enums::PoolStatus)]
    pub status: PoolStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&DomainPool> for NodePool {
    fn from(p: &DomainPool) -> Self {
        NodePool {
            name: p.name.to_string(),
            size: p.size.clone(),
            count: p.count,
            auto_scale: p.auto_scale,
            min_nodes: p.min_nodes,
            max_nodes: p.max_nodes,
            labels: p.labels.clone(),
            taints: p.taints.iter().map(Taint::from).collect(),
            tags: p.tags.clone(),
            root_volume_size_gib: p.root_volume_size_gib,
            version: p.version.clone(),
            max_surge: p.surge.max_surge,
            max_unavailable: p.surge.max_unavailable,
            status: p.status,
            created_at: p.created_at,
            updated_at: p.updated_at,
        }
    }
}

/// A Kubernetes taint on a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Taint {
    pub key: String,
    /// Empty when the taint has no value.
    pub value: String,
    #[schema(value_type = enums::TaintEffect)]
    pub effect: String,
}

impl From<&DomainTaint> for Taint {
    fn from(t: &DomainTaint) -> Self {
        Taint {
            key: t.key.clone(),
            value: t.value.clone(),
            effect: t.effect.as_str().to_owned(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Node {
    pub name: String,
    /// The pool's name.
    pub pool: String,
    #[schema(value_type = enums::NodeStatus)]
    pub status: NodeStatus,
    /// The Kubernetes version it runs.
    pub version: String,
    pub created_at: DateTime<Utc>,
    /// The Kubernetes labels the node carries. A pool's change reaches its running nodes in
    /// place (no node is replaced): until it has, they differ from the pool's.
    #[serde(default)]
    #[schema(required = true)]
    pub labels: BTreeMap<String, String>,
    /// The Kubernetes taints the node carries, reaching it as the labels do.
    #[serde(default)]
    #[schema(required = true)]
    pub taints: Vec<Taint>,
}

impl From<&DomainNode> for Node {
    fn from(n: &DomainNode) -> Self {
        Node {
            name: n.name.to_string(),
            pool: n.pool.to_string(),
            status: n.status,
            version: n.version.clone(),
            created_at: n.created_at,
            labels: n.labels.clone(),
            taints: n.taints.iter().map(Taint::from).collect(),
        }
    }
}

/// `GET /v1/public/clusters`: ordered by `created_at`, then `id`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterList {
    pub items: Vec<Cluster>,
    pub page: u32,
    pub size: u32,
    pub total: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodePoolList {
    pub items: Vec<NodePool>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodeList {
    pub items: Vec<Node>,
}

/// `GET /v1/public/clusters/{id}/upgrades`: where the cluster stands and where it may go.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterUpgrades {
    pub cluster_id: Uuid,
    /// The control plane's version.
    pub current_version: String,
    /// Versions `POST …/upgrade` accepts: newer, at most one minor version ahead, oldest first.
    /// Empty while the cluster runs the newest one.
    pub available_versions: Vec<crate::catalog::KubernetesVersion>,
    /// The upgrade in flight, null otherwise.
    pub upgrade: Option<Upgrade>,
    pub maintenance_window: MaintenanceWindow,
    pub auto_upgrade: bool,
    /// When the maintenance window that is open, or the next one, starts.
    pub next_maintenance_window_start: DateTime<Utc>,
}

impl From<&domain::service::UpgradeOptions> for ClusterUpgrades {
    fn from(o: &domain::service::UpgradeOptions) -> Self {
        ClusterUpgrades {
            cluster_id: o.cluster_id,
            current_version: o.current_version.clone(),
            available_versions: o.available.iter().map(Into::into).collect(),
            upgrade: o.upgrade.as_ref().map(Into::into),
            maintenance_window: o.maintenance_window.into(),
            auto_upgrade: o.auto_upgrade,
            next_maintenance_window_start: o.next_window_start,
        }
    }
}

/// The state long-poll's answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ClusterState {
    pub cluster_id: Uuid,
    /// Raised by every change of the cluster or anything under it; >= 1.
    pub version: i64,
    #[schema(value_type = enums::ClusterPhase)]
    pub phase: model::ClusterPhase,
    /// Whether `version` is past the request's `since`.
    pub changed: bool,
}

/// `format=json` kubeconfig.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KubeconfigJson {
    pub cluster_id: Uuid,
    /// The same YAML `format=plain` answers.
    pub kubeconfig: String,
    /// The download's own credential, when it asked for a lifetime (absent: the cluster's
    /// standing credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<crate::credential::IssuedCredential>,
}

/// 202 while the control plane is not up.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KubeconfigPending {
    #[schema(value_type = enums::ClusterPhase)]
    pub phase: model::ClusterPhase,
    pub retry_after_seconds: u32,
}
