//! The provisioning port: what a cloud does for a cluster. The reconciler decides the next
//! [`Step`] with pure rules; a provider carries it out. Steps are idempotent, so a step
//! repeated after a crash does no harm.

use async_trait::async_trait;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use uuid::Uuid;

use crate::model::cluster::{ControlPlaneFirewall, Exposure, Registration};
use crate::model::elastic_ip::AddressPool;
use crate::model::firewall::FirewallRule;
use crate::model::kubeconfig::ClusterCredentials;
use crate::model::node_pool::Taint;

/// One piece of provisioning work.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    CreateControlPlane {
        cluster_id: Uuid,
        cluster_name: String,
        zone: String,
        version: String,
        exposure: Exposure,
        /// Who may call the API server from the start.
        control_plane_firewall: ControlPlaneFirewall,
    },
    RegisterHub {
        cluster_id: Uuid,
    },
    InstallDefaultEnvironment {
        cluster_id: Uuid,
    },
    /// Creates a node with its pool's labels and taints.
    CreateNode {
        cluster_id: Uuid,
        pool: String,
        node: String,
        size: String,
        /// The Kubernetes version its kubelet runs.
        version: String,
        labels: BTreeMap<String, String>,
        taints: Vec<Taint>,
    },
    /// Sets a running node's labels and taints to exactly these (the ones it had and the pool
    /// no longer has are removed), in place: the node is not replaced.
    ConfigureNode {
        cluster_id: Uuid,
        node: String,
        labels: BTreeMap<String, String>,
        taints: Vec<Taint>,
    },
    DeleteNode {
        cluster_id: Uuid,
        node: String,
    },
    AttachAddress {
        cluster_id: Uuid,
        elastic_ip_id: Uuid,
        address: Ipv4Addr,
        exposure: Exposure,
    },
    DetachAddress {
        cluster_id: Uuid,
        elastic_ip_id: Uuid,
        address: Ipv4Addr,
    },
    ApplyFirewallRule {
        rule: FirewallRule,
    },
    RemoveFirewallRule {
        cluster_id: Uuid,
        rule_id: Uuid,
    },
    SetExposure {
        cluster_id: Uuid,
        cluster_name: String,
        to: Exposure,
    },
    /// Moves the control plane to `version`; the nodes follow one by one (`CreateNode` of the
    /// new version, `DeleteNode` of an old one, which drains it first).
    UpgradeControlPlane {
        cluster_id: Uuid,
        version: String,
    },

    /// Makes the API server admit only what this firewall lets in, from now on.
    SetControlPlaneFirewall {
        cluster_id: Uuid,
        firewall: ControlPlaneFirewall,
    },
    DestroyCluster {
        cluster_id: Uuid,
    },
}

impl Step {
    /// The step's name, as fault injection settings name it.
    pub fn name(&self) -> &'static str {
        match self {
            Step::CreateControlPlane { .. } => "create_control_plane",
            Step::RegisterHub { .. } => "register_hub",
            Step::InstallDefaultEnvironment { .. } => "install_default_environment",
            Step::CreateNode { .. } => "create_node",
            Step::ConfigureNode { .. } => "configure_node",
            Step::DeleteNode { .. } => "delete_node",
            Step::AttachAddress { .. } => "attach_address",
            Step::DetachAddress { .. } => "detach_address",
            Step::ApplyFirewallRule { .. } => "apply_firewall_rule",
            Step::RemoveFirewallRule { .. } => "remove_firewall_rule",
            Step::SetExposure { .. } => "set_exposure",
            Step::UpgradeControlPlane { .. } => "upgrade_control_plane",
            Step::SetControlPlaneFirewall { .. } => "set_control_plane_firewall",
            Step::DestroyCluster { .. } => "destroy_cluster",
        }
    }
}

/// The API endpoint of a control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address the kubeconfig points at (port 6443).
    pub host: String,
    /// Set when the endpoint is public (ends in the public hostname suffix).
    pub public_hostname: Option<String>,
}

/// What a step produced.
#[derive(Debug, Clone, PartialEq)]
pub enum StepOutcome {
    Done,
    ControlPlane {
        endpoint: Endpoint,
        credentials: ClusterCredentials,
    },
    Registration(Registration),
    Exposure(Endpoint),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Worth retrying with backoff.
    #[error("transient provider failure: {0}")]
    Transient(String),
    /// Will not succeed: the object goes to `Failed` with this reason.
    #[error("provider failure: {0}")]
    Permanent(String),
}

#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait CloudProvider: Send + Sync {
    /// Nodes the zone can run in all.
    fn zone_capacity(&self, zone: &str) -> u64;
    /// The pool Elastic IPs of this exposure come from; `None` when disabled.
    fn address_pool(&self, exposure: Exposure) -> Option<AddressPool>;
    async fn execute(&self, step: Step) -> Result<StepOutcome, ProviderError>;
}

/// The check a cluster's API server asks of the control plane before it accepts a bearer
/// token (webhook token authentication, the way managed clusters defer to their provider):
/// so a revoked or expired credential is refused by the cluster at once, and so is any call
/// from an address the cluster's control-plane firewall does not let in (`from`, the caller's
/// address as the API server sees it).
#[async_trait]
pub trait TokenReviewer: Send + Sync {
    async fn review(
        &self,
        cluster_id: uuid::Uuid,
        token: &crate::model::secret::Secret,
        from: std::net::IpAddr,
    ) -> Result<crate::service::Reviewed, crate::DomainError>;
}
