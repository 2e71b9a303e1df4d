//! Response shapes the API adds around the domain's objects: list envelopes, the state
//! long-poll answer and the kubeconfig answers.

use domain::model::auth_server::AuthServerView;
use domain::model::cluster::{Cluster, ClusterPhase};
use domain::model::elastic_ip::ElasticIpView;
use domain::model::firewall::FirewallRule;
use domain::model::node::Node;
use domain::model::node_pool::NodePool;
use serde::Serialize;
use uuid::Uuid;

/// `GET /v1/public/clusters`: ordered by `created_at`, then `id`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClusterList {
    pub items: Vec<Cluster>,
    pub page: u32,
    pub size: u32,
    pub total: u64,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NodePoolList {
    pub items: Vec<NodePool>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct NodeList {
    pub items: Vec<Node>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ElasticIpList {
    pub items: Vec<ElasticIpView>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FirewallRuleList {
    pub items: Vec<FirewallRule>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuthServerList {
    pub items: Vec<AuthServerView>,
}

/// The state long-poll's answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ClusterState {
    pub cluster_id: Uuid,
    /// Raised by every change of the cluster or anything under it; >= 1.
    pub version: i64,
    pub phase: ClusterPhase,
    /// Whether `version` is past the request's `since`.
    pub changed: bool,
}

/// `format=json` kubeconfig.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct KubeconfigJson {
    pub cluster_id: Uuid,
    /// The same YAML `format=plain` answers.
    pub kubeconfig: String,
}

/// 202 while the control plane is not up.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct KubeconfigPending {
    pub phase: ClusterPhase,
    pub retry_after_seconds: u32,
}

/// `/healthz` and `/readyz`.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Health {
    pub status: &'static str,
}
