//! Cluster inputs: create, change (description, tags, maintenance policy), exposure change.

use std::collections::HashSet;

use crate::access::OrgSelector;
use crate::input::check_len;
use crate::input::node_pool::{NodePoolRequest, PoolSpec};
use crate::input::upgrade::MaintenanceWindowRequest;
use crate::model::cluster::{Exposure, NetworkMode};
use crate::model::maintenance_window::MaintenanceWindow;
use crate::names::{DnsLabel, OrgRef, is_dns_label};
use crate::ports::storage::{Freshness, PageRequest};
use crate::rules::{MAX_CLUSTER_DESCRIPTION, MAX_CLUSTER_TAGS, MAX_POOLS, MIN_POOLS};
use crate::validation::Violations;

/// Creating a cluster. A control-plane pick is an unknown field, refused as a validation error.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateClusterRequest {
    /// Required: the organization's slug (DNS label) or id (UUID). It is taken from here only.
    pub organization: Option<String>,
    pub name: Option<String>,
    /// Zone id; the default zone when omitted.
    pub zone: Option<String>,
    /// Kubernetes version id; the zone's recommended version when omitted.
    pub version: Option<String>,
    pub description: Option<String>,
    /// DNS labels, at most 64.
    pub tags: Option<Vec<String>>,
    /// Default from the catalog (`public`).
    pub exposure: Option<Exposure>,
    /// Default `intranet`; immutable.
    pub network_mode: Option<NetworkMode>,
    pub node_pools: Option<Vec<NodePoolRequest>>,
    /// Any day at 00:00 UTC when omitted.
    pub maintenance_window: Option<MaintenanceWindowRequest>,
    /// Default false.
    pub auto_upgrade: Option<bool>,
}

/// A create request that passed every input rule; zone, version and tiers are checked against
/// the catalog by the use case (`DomainError::UnknownZone`, `UnknownVersion`,
/// `UnknownMachineTier`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    pub organization: OrgRef,
    pub name: DnsLabel,
    pub zone: Option<String>,
    pub version: Option<String>,
    pub description: Option<String>,
    pub tags: Vec<DnsLabel>,
    pub exposure: Option<Exposure>,
    pub network_mode: Option<NetworkMode>,
    pub node_pools: Vec<PoolSpec>,
    pub maintenance_window: MaintenanceWindow,
    pub auto_upgrade: bool,
}

/// Tags: DNS labels, at most 64.
pub fn check_tags(v: &mut Violations, field: &str, tags: &[String]) -> Vec<DnsLabel> {
    if tags.len() > MAX_CLUSTER_TAGS {
        v.push(
            field,
            format!(
                "at most {MAX_CLUSTER_TAGS} tags are allowed (got {})",
                tags.len()
            ),
        );
    }
    tags.iter()
        .enumerate()
        .filter_map(|(i, t)| v.check(&format!("{field}[{i}]"), DnsLabel::parse(t)))
        .collect()
}

impl CreateClusterRequest {
    /// Every input rule (refused as a validation error), each problem with its path.
    pub fn validate(&self) -> Result<ClusterSpec, Violations> {
        let mut v = Violations::new();
        let organization = match self.organization.as_deref() {
            None | Some("") => {
                v.push("organization", "is required");
                None
            }
            Some(o) => {
                let r = OrgRef::classify(o);
                let ok = match &r {
                    OrgRef::Id(s) => uuid::Uuid::parse_str(s).is_ok(),
                    OrgRef::Slug(s) => is_dns_label(s),
                };
                if !ok {
                    v.push(
                        "organization",
                        "must be an organization slug (DNS label) or id (UUID)",
                    );
                }
                ok.then_some(r)
            }
        };
        let name = match &self.name {
            None => {
                v.push("name", "is required");
                None
            }
            Some(n) => v.check("name", DnsLabel::parse(n)),
        };
        if let Some(d) = &self.description {
            check_len(&mut v, "description", d, MAX_CLUSTER_DESCRIPTION);
        }
        let tags = check_tags(&mut v, "tags", self.tags.as_deref().unwrap_or_default());
        let maintenance_window = match &self.maintenance_window {
            Some(w) => w.check(&mut v, "maintenance_window", MaintenanceWindow::default()),
            None => MaintenanceWindow::default(),
        };
        let mut pools = Vec::new();
        match &self.node_pools {
            None => v.push(
                "node_pools",
                format!("is required: {MIN_POOLS}-{MAX_POOLS} node pools"),
            ),
            Some(list) if list.len() < MIN_POOLS || list.len() > MAX_POOLS => v.push(
                "node_pools",
                format!(
                    "must hold {MIN_POOLS}-{MAX_POOLS} node pools (got {})",
                    list.len()
                ),
            ),
            Some(list) => {
                let mut seen = HashSet::new();
                for (i, p) in list.iter().enumerate() {
                    let path = format!("node_pools[{i}]");
                    if let Some(spec) = p.validate(&mut v, &path) {
                        if !seen.insert(spec.name.clone()) {
                            v.push(
                                format!("{path}.name"),
                                format!(
                                    "duplicate pool name {:?} in this request",
                                    spec.name.as_str()
                                ),
                            );
                        }
                        pools.push(spec);
                    }
                }
            }
        }
        if !v.is_empty() {
            return Err(v);
        }
        match (organization, name) {
            (Some(organization), Some(name)) => Ok(ClusterSpec {
                organization,
                name,
                zone: self.zone.clone(),
                version: self.version.clone(),
                description: self.description.clone(),
                tags,
                exposure: self.exposure,
                network_mode: self.network_mode,
                node_pools: pools,
                maintenance_window,
                auto_upgrade: self.auto_upgrade.unwrap_or(false),
            }),
            _ => Err(v),
        }
    }
}

/// Changing a cluster: its description, tags and maintenance policy. What the cluster is
/// (name, zone, version, network mode) is not changed here.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClusterPatch {
    /// A new description; null clears it.
    pub description: Option<Option<String>>,
    /// Replaces the tags whole; null is refused (send `[]` to clear).
    pub tags: Option<Option<Vec<String>>>,
    /// Changes the window; a part not sent stays; null is refused.
    pub maintenance_window: Option<Option<MaintenanceWindowRequest>>,
    /// Null is refused.
    pub auto_upgrade: Option<Option<bool>>,
}

/// A validated cluster change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterChanges {
    pub description: Option<Option<String>>,
    pub tags: Option<Vec<DnsLabel>>,
    /// Checked against the current window by [`ClusterChanges::window`].
    pub maintenance_window: Option<MaintenanceWindowRequest>,
    pub auto_upgrade: Option<bool>,
}

impl ClusterChanges {
    /// The window the cluster gets from `current`; the parts were checked by `validate`.
    pub fn window(&self, current: MaintenanceWindow) -> MaintenanceWindow {
        match &self.maintenance_window {
            Some(w) => w.check(&mut Violations::new(), "maintenance_window", current),
            None => current,
        }
    }
}

impl ClusterPatch {
    pub fn validate(&self) -> Result<ClusterChanges, Violations> {
        let mut v = Violations::new();
        if self.description.is_none()
            && self.tags.is_none()
            && self.maintenance_window.is_none()
            && self.auto_upgrade.is_none()
        {
            v.push(
                "",
                "the body must change at least one field: description, tags, maintenance_window or auto_upgrade",
            );
        }
        let maintenance_window = match &self.maintenance_window {
            None => None,
            Some(None) => {
                v.push("maintenance_window", "must not be null");
                None
            }
            Some(Some(w)) => {
                w.check(&mut v, "maintenance_window", MaintenanceWindow::default());
                Some(w.clone())
            }
        };
        if self.auto_upgrade == Some(None) {
            v.push("auto_upgrade", "must not be null (true or false)");
        }
        if let Some(Some(d)) = &self.description {
            check_len(&mut v, "description", d, MAX_CLUSTER_DESCRIPTION);
        }
        let tags = match &self.tags {
            None => None,
            Some(None) => {
                v.push("tags", "must not be null (send [] to clear)");
                None
            }
            Some(Some(list)) => Some(check_tags(&mut v, "tags", list)),
        };
        v.into_result(ClusterChanges {
            description: self.description.clone(),
            tags,
            maintenance_window,
            auto_upgrade: self.auto_upgrade.flatten(),
        })
    }
}

/// Changing a cluster's exposure.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposurePatch {
    pub exposure: Exposure,
}

/// Lists one organization's clusters: the organization as the caller named it (resolved like
/// every collection read), an optional zone to keep (an unknown zone is
/// `DomainError::UnknownZone`), the page, and how current the answer must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListClusters {
    pub org: OrgSelector,
    pub zone: Option<String>,
    pub page: PageRequest,
    pub freshness: Freshness,
}
