//! `GET /v1/catalog` as answered: one zone's offer and the constraints every create is
//! checked against.

use domain::model::catalog as model;
use domain::model::cluster::{Exposure, NetworkMode};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::enums;

/// One zone's offer plus the constraints. Spelled out rather than flattened so its schema is
/// exact.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CatalogView {
    pub zone: Zone,
    pub kubernetes_versions: Vec<KubernetesVersion>,
    pub machine_tiers: Vec<MachineTier>,
    pub defaults: Defaults,
    /// Listed for display only: the organization's assigned option is applied on create.
    pub control_plane_options: Vec<ControlPlaneOption>,
    pub active_control_plane_option_id: String,
    pub constraints: Constraints,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Zone {
    pub id: String,
    pub display_name: String,
    pub public_exposure_enabled: bool,
    pub public_elastic_ip_pool_enabled: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KubernetesVersion {
    /// `v<major>.<minor>.<patch>`.
    pub id: String,
    pub label: String,
    pub recommended: bool,
    /// `stable` or `rapid` in the built-in catalog; an operator's catalog may name others.
    pub channel: String,
    /// The last day the service supports the version; null when not announced.
    pub end_of_support: Option<chrono::NaiveDate>,
}

impl From<&model::KubernetesVersion> for KubernetesVersion {
    fn from(k: &model::KubernetesVersion) -> Self {
        KubernetesVersion {
            id: k.id.clone(),
            label: k.label.clone(),
            recommended: k.recommended,
            channel: k.channel.clone(),
            end_of_support: k.end_of_support,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct MachineTier {
    pub id: String,
    pub display_name: String,
    pub vcpu: u32,
    pub memory_gib: u32,
    pub disk_gib: u32,
    pub recommended: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Defaults {
    #[schema(value_type = enums::Exposure)]
    pub exposure_mode: Exposure,
    #[schema(value_type = enums::NetworkMode)]
    pub network_mode: NetworkMode,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ControlPlaneOption {
    pub id: String,
    pub display_name: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Constraints {
    pub cluster_name: NameConstraint,
    pub node_pools: NodePoolConstraint,
}

/// `constraints.cluster_name`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NameConstraint {
    pub pattern: String,
    pub min_length: usize,
    pub max_length: usize,
}

/// `constraints.node_pools`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodePoolConstraint {
    pub min_pools: usize,
    pub max_pools: usize,
    pub min_nodes_per_pool: u32,
    pub max_nodes_per_pool: u32,
}

impl From<&model::CatalogView> for CatalogView {
    fn from(v: &model::CatalogView) -> Self {
        let z = &v.zone;
        let c = &v.constraints;
        CatalogView {
            zone: Zone {
                id: z.id.clone(),
                display_name: z.display_name.clone(),
                public_exposure_enabled: z.public_exposure_enabled,
                public_elastic_ip_pool_enabled: z.public_elastic_ip_pool_enabled,
            },
            kubernetes_versions: v
                .kubernetes_versions
                .iter()
                .map(KubernetesVersion::from)
                .collect(),
            machine_tiers: v
                .machine_tiers
                .iter()
                .map(|t| MachineTier {
                    id: t.id.clone(),
                    display_name: t.display_name.clone(),
                    vcpu: t.vcpu,
                    memory_gib: t.memory_gib,
                    disk_gib: t.disk_gib,
                    recommended: t.recommended,
                })
                .collect(),
            defaults: Defaults {
                exposure_mode: v.defaults.exposure_mode,
                network_mode: v.defaults.network_mode,
            },
            control_plane_options: v
                .control_plane_options
                .iter()
                .map(|o| ControlPlaneOption {
                    id: o.id.clone(),
                    display_name: o.display_name.clone(),
                })
                .collect(),
            active_control_plane_option_id: v.active_control_plane_option_id.clone(),
            constraints: Constraints {
                cluster_name: NameConstraint {
                    pattern: c.cluster_name.pattern.to_owned(),
                    min_length: c.cluster_name.min_length,
                    max_length: c.cluster_name.max_length,
                },
                node_pools: NodePoolConstraint {
                    min_pools: c.node_pools.min_pools,
                    max_pools: c.node_pools.max_pools,
                    min_nodes_per_pool: c.node_pools.min_nodes_per_pool,
                    max_nodes_per_pool: c.node_pools.max_nodes_per_pool,
                },
            },
        }
    }
}
