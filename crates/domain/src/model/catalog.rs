//! The catalog: what a zone offers (versions, machine tiers, defaults) and the constraints every
//! create is checked against. Loaded from data, so operators can replace it (`CATALOG_FILE`).

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::model::cluster::{Exposure, NetworkMode};
use crate::model::upgrade::KubeVersion;
use crate::names::{DNS_LABEL_MAX, DNS_LABEL_PATTERN};
use crate::rules;

/// The catalog built into the binary: one zone, `zone-1`.
pub const BUILTIN_CATALOG_JSON: &str = include_str!("../../data/catalog.json");

/// Every zone on offer, and which one a request without `zone` means.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    pub default_zone: String,
    pub zones: Vec<ZoneOffer>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Zone {
    pub id: String,
    pub display_name: String,
    pub public_exposure_enabled: bool,
    pub public_elastic_ip_pool_enabled: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubernetesVersion {
    /// `v<major>.<minor>.<patch>`.
    pub id: String,
    pub label: String,
    pub recommended: bool,
    /// `stable`, `rapid`, or another name the operator's catalog gives.
    pub channel: String,
    /// The last day the service supports the version; none when not announced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_of_support: Option<NaiveDate>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineTier {
    pub id: String,
    pub display_name: String,
    pub vcpu: u32,
    pub memory_gib: u32,
    pub disk_gib: u32,
    pub recommended: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    pub exposure_mode: Exposure,
    pub network_mode: NetworkMode,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlPlaneOption {
    pub id: String,
    pub display_name: String,
}

/// One zone's offer, as data.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ZoneOffer {
    pub zone: Zone,
    pub kubernetes_versions: Vec<KubernetesVersion>,
    pub machine_tiers: Vec<MachineTier>,
    pub defaults: Defaults,
    /// Listed for display only: the organization's assigned option is applied on create.
    pub control_plane_options: Vec<ControlPlaneOption>,
    pub active_control_plane_option_id: String,
}

/// `constraints.cluster_name`.
#[derive(Debug, Clone)]
pub struct NameConstraint {
    pub pattern: &'static str,
    pub min_length: usize,
    pub max_length: usize,
}

/// `constraints.node_pools`.
#[derive(Debug, Clone)]
pub struct NodePoolConstraint {
    pub min_pools: usize,
    pub max_pools: usize,
    pub min_nodes_per_pool: u32,
    pub max_nodes_per_pool: u32,
}

#[derive(Debug, Clone)]
pub struct Constraints {
    pub cluster_name: NameConstraint,
    pub node_pools: NodePoolConstraint,
}

impl Constraints {
    /// The constraints are the domain's own rules, published; they cannot drift from what is
    /// enforced because both read the same constants.
    pub fn current() -> Self {
        Constraints {
            cluster_name: NameConstraint {
                pattern: DNS_LABEL_PATTERN,
                min_length: 1,
                max_length: DNS_LABEL_MAX,
            },
            node_pools: NodePoolConstraint {
                min_pools: rules::MIN_POOLS,
                max_pools: rules::MAX_POOLS,
                min_nodes_per_pool: 1,
                max_nodes_per_pool: rules::MAX_NODES_PER_POOL,
            },
        }
    }
}

/// The catalog as a client reads it: one zone's offer plus the constraints. Spelled out rather than
/// flattened so its schema is exact.
#[derive(Debug, Clone)]
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

/// Why a catalog file was refused.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("the catalog is not valid JSON of the expected shape: {0}")]
    Shape(#[from] serde_json::Error),
    #[error("the catalog is inconsistent: {0}")]
    Inconsistent(String),
}

impl Catalog {
    /// The catalog built into the binary.
    pub fn builtin() -> Self {
        #[expect(
            clippy::expect_used,
            reason = "the built-in catalog is checked by a unit test"
        )]
        Self::from_json(BUILTIN_CATALOG_JSON).expect("the built-in catalog is valid")
    }

    /// Parses and checks a catalog: the default zone exists, every zone offers at least one
    /// version and tier, every version id is `v<major>.<minor>.<patch>` (upgrades compare
    /// them) and listed once, exactly one version is recommended, and the active control-plane
    /// option is one of the listed ones.
    pub fn from_json(text: &str) -> Result<Self, CatalogError> {
        let catalog: Catalog = serde_json::from_str(text)?;
        if catalog.zone(&catalog.default_zone).is_none() {
            return Err(CatalogError::Inconsistent(format!(
                "default zone {:?} is not listed",
                catalog.default_zone
            )));
        }
        for z in &catalog.zones {
            let id = &z.zone.id;
            if z.kubernetes_versions.is_empty() || z.machine_tiers.is_empty() {
                return Err(CatalogError::Inconsistent(format!(
                    "zone {id} offers no version or no machine tier"
                )));
            }
            let mut seen = std::collections::HashSet::new();
            for v in &z.kubernetes_versions {
                if KubeVersion::parse(&v.id).is_none() {
                    return Err(CatalogError::Inconsistent(format!(
                        "zone {id}: version id {:?} is not v<major>.<minor>.<patch>",
                        v.id
                    )));
                }
                if !seen.insert(v.id.as_str()) {
                    return Err(CatalogError::Inconsistent(format!(
                        "zone {id}: version {} is listed twice",
                        v.id
                    )));
                }
            }
            if z.kubernetes_versions
                .iter()
                .filter(|v| v.recommended)
                .count()
                != 1
            {
                return Err(CatalogError::Inconsistent(format!(
                    "zone {id} must mark exactly one version recommended"
                )));
            }
            if !z
                .control_plane_options
                .iter()
                .any(|o| o.id == z.active_control_plane_option_id)
            {
                return Err(CatalogError::Inconsistent(format!(
                    "zone {id}: active control-plane option is not listed"
                )));
            }
        }
        Ok(catalog)
    }

    pub fn zone(&self, id: &str) -> Option<&ZoneOffer> {
        self.zones.iter().find(|z| z.zone.id == id)
    }

    pub fn default_zone(&self) -> &ZoneOffer {
        // from_json guarantees the default zone exists; fall back to the first zone anyway.
        self.zone(&self.default_zone)
            .unwrap_or_else(|| &self.zones[0])
    }
}

impl ZoneOffer {
    pub fn version(&self, id: &str) -> Option<&KubernetesVersion> {
        self.kubernetes_versions.iter().find(|v| v.id == id)
    }

    pub fn recommended_version(&self) -> &KubernetesVersion {
        self.kubernetes_versions
            .iter()
            .find(|v| v.recommended)
            .unwrap_or(&self.kubernetes_versions[0])
    }

    pub fn tier(&self, id: &str) -> Option<&MachineTier> {
        self.machine_tiers.iter().find(|t| t.id == id)
    }

    pub fn view(&self) -> CatalogView {
        let o = self.clone();
        CatalogView {
            zone: o.zone,
            kubernetes_versions: o.kubernetes_versions,
            machine_tiers: o.machine_tiers,
            defaults: o.defaults,
            control_plane_options: o.control_plane_options,
            active_control_plane_option_id: o.active_control_plane_option_id,
            constraints: Constraints::current(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_catalog_is_the_one_documented_zone() {
        let c = Catalog::builtin();
        let z = c.default_zone();
        assert_eq!(z.zone.id, "zone-1");
        assert!(z.zone.public_exposure_enabled && z.zone.public_elastic_ip_pool_enabled);
        assert_eq!(z.recommended_version().id, "v1.32.4");
        assert_eq!(z.recommended_version().label, "1.32.4");
        assert_eq!(z.recommended_version().channel, "stable");
        // The recommended version is listed first; the others are a patch of it, the next
        // minor and the previous minor, so every upgrade path has a version to go to.
        let ids: Vec<_> = z
            .kubernetes_versions
            .iter()
            .map(|v| v.id.as_str())
            .collect();
        assert_eq!(ids, ["v1.32.4", "v1.33.2", "v1.32.6", "v1.31.9"]);
        assert!(
            z.kubernetes_versions
                .iter()
                .all(|v| v.end_of_support.is_some())
        );
        let ids: Vec<_> = z.machine_tiers.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "kube.c5.large",
                "kube.m5.large",
                "kube.c5.xlarge",
                "kube.m5.xlarge",
                "kube.c5.2xlarge"
            ]
        );
        let recommended: Vec<_> = z
            .machine_tiers
            .iter()
            .filter(|t| t.recommended)
            .map(|t| t.id.as_str())
            .collect();
        assert_eq!(recommended, ["kube.c5.xlarge"]);
        assert_eq!(
            z.tier("kube.m5.xlarge")
                .map(|t| (t.vcpu, t.memory_gib, t.disk_gib)),
            Some((4, 16, 120))
        );
        assert_eq!(z.defaults.exposure_mode, Exposure::Public);
        assert_eq!(z.defaults.network_mode, NetworkMode::Intranet);
    }

    #[test]
    fn catalog_view_publishes_the_enforced_constraints() {
        let v = Catalog::builtin().default_zone().view();
        let c = &v.constraints;
        assert_eq!(c.node_pools.min_nodes_per_pool, 1);
        assert_eq!(c.node_pools.max_nodes_per_pool, 200);
        assert_eq!(c.node_pools.max_pools, 20);
        assert_eq!(c.cluster_name.max_length, 63);
        assert_eq!(v.zone.id, "zone-1");
        assert!(!v.active_control_plane_option_id.is_empty());
    }

    #[test]
    fn catalog_with_a_version_id_upgrades_cannot_compare_is_refused() {
        for bad in ["\"id\": \"1.31.9\"", "\"id\": \"v1.32.4\""] {
            let text = BUILTIN_CATALOG_JSON.replacen("\"id\": \"v1.31.9\"", bad, 1);
            assert!(
                matches!(
                    Catalog::from_json(&text),
                    Err(CatalogError::Inconsistent(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn catalog_with_unlisted_default_zone_is_refused() {
        let text = BUILTIN_CATALOG_JSON.replace(
            "\"default_zone\": \"zone-1\"",
            "\"default_zone\": \"zone-9\"",
        );
        assert!(matches!(
            Catalog::from_json(&text),
            Err(CatalogError::Inconsistent(_))
        ));
    }
}
