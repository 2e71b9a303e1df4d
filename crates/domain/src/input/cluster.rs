//! Cluster inputs: create, change (description, tags, maintenance policy), exposure change.

use std::collections::HashSet;

use crate::access::OrgSelector;
use crate::input::check_len;
use crate::input::node_pool::{NodePoolRequest, PoolSpec};
use crate::input::upgrade::MaintenanceWindowRequest;
use crate::model::cluster::{ControlPlaneFirewall, Exposure, NetworkMode};
use crate::model::firewall::IpCidr;
use crate::model::maintenance_window::MaintenanceWindow;
use crate::names::{DnsLabel, OrgRef, is_dns_label};
use crate::ports::storage::{Freshness, PageRequest};
use crate::rules::{
    MAX_CLUSTER_DESCRIPTION, MAX_CLUSTER_TAGS, MAX_CONTROL_PLANE_ALLOWED, MAX_POOLS, MIN_POOLS,
};
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
    /// Default: disabled, no networks.
    pub control_plane_firewall: Option<ControlPlaneFirewallRequest>,
}

/// The control-plane firewall as a client wrote it. On create an absent field takes its
/// default (disabled, no networks); in a change it keeps the cluster's current value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ControlPlaneFirewallRequest {
    pub enabled: Option<bool>,
    /// IPv4 and IPv6 CIDRs, at most 100.
    pub allowed_addresses: Option<Vec<String>>,
}

/// A control-plane firewall change whose networks passed their rules; absent fields keep
/// what the cluster has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirewallChange {
    pub enabled: Option<bool>,
    pub allowed_addresses: Option<Vec<IpCidr>>,
}

impl FirewallChange {
    /// The firewall `current` becomes with this change, refused when it would be enabled with
    /// no network (it would refuse every client, the service's own tools included; disabling
    /// it is the way to open the control plane). `field` is the object's path.
    pub fn applied_to(
        &self,
        current: &ControlPlaneFirewall,
        field: &str,
    ) -> Result<ControlPlaneFirewall, Violations> {
        let next = ControlPlaneFirewall {
            enabled: self.enabled.unwrap_or(current.enabled),
            allowed_addresses: self
                .allowed_addresses
                .clone()
                .unwrap_or_else(|| current.allowed_addresses.clone()),
        };
        if next.enabled && next.allowed_addresses.is_empty() {
            return Err(Violations::one(
                format!("{field}.allowed_addresses"),
                "must hold at least one network while the firewall is enabled (an empty list would refuse every client); set enabled to false to open the control plane",
            ));
        }
        Ok(next)
    }
}

impl ControlPlaneFirewallRequest {
    /// The networks' rules: each an IPv4 or IPv6 CIDR without host bits, at most
    /// [`MAX_CONTROL_PLANE_ALLOWED`], none twice. `field` is the object's path.
    pub fn check(&self, v: &mut Violations, field: &str) -> FirewallChange {
        let allowed_addresses = self.allowed_addresses.as_ref().map(|list| {
            let path = format!("{field}.allowed_addresses");
            if list.len() > MAX_CONTROL_PLANE_ALLOWED {
                v.push(
                    &path,
                    format!(
                        "at most {MAX_CONTROL_PLANE_ALLOWED} networks are allowed (got {})",
                        list.len()
                    ),
                );
                return Vec::new();
            }
            let mut out: Vec<IpCidr> = Vec::with_capacity(list.len());
            for (i, text) in list.iter().enumerate() {
                let at = format!("{path}[{i}]");
                let Some(cidr) = v.check(&at, IpCidr::parse(text)) else {
                    continue;
                };
                match out.iter().position(|c| *c == cidr) {
                    Some(first) => v.push(at, format!("repeats {path}[{first}] ({cidr})")),
                    None => out.push(cidr),
                }
            }
            out
        });
        FirewallChange {
            enabled: self.enabled,
            allowed_addresses,
        }
    }
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
    pub control_plane_firewall: ControlPlaneFirewall,
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
        let firewall = self
            .control_plane_firewall
            .as_ref()
            .map(|f| f.check(&mut v, "control_plane_firewall"));
        if !v.is_empty() {
            return Err(v);
        }
        let control_plane_firewall = match firewall {
            None => ControlPlaneFirewall::default(),
            Some(change) => {
                change.applied_to(&ControlPlaneFirewall::default(), "control_plane_firewall")?
            }
        };
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
                control_plane_firewall,
            }),
            _ => Err(v),
        }
    }
}

/// Changing a cluster: its description, tags, maintenance policy and control-plane firewall.
/// What the cluster is (name, zone, version, network mode) is not changed here.
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
    /// A new control-plane firewall (its absent fields stay as they are); null is refused.
    pub control_plane_firewall: Option<Option<ControlPlaneFirewallRequest>>,
}

/// A validated cluster change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterChanges {
    pub description: Option<Option<String>>,
    pub tags: Option<Vec<DnsLabel>>,
    /// Checked against the current window by [`ClusterChanges::window`].
    pub maintenance_window: Option<MaintenanceWindowRequest>,
    pub auto_upgrade: Option<bool>,
    pub control_plane_firewall: Option<FirewallChange>,
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
            && self.control_plane_firewall.is_none()
        {
            v.push(
                "",
                "the body must change at least one field: description, tags, maintenance_window, auto_upgrade or control_plane_firewall",
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
        let control_plane_firewall = match &self.control_plane_firewall {
            None => None,
            Some(None) => {
                v.push("control_plane_firewall", "must not be null");
                None
            }
            Some(Some(f)) => Some(f.check(&mut v, "control_plane_firewall")),
        };
        v.into_result(ClusterChanges {
            description: self.description.clone(),
            tags,
            maintenance_window,
            auto_upgrade: self.auto_upgrade.flatten(),
            control_plane_firewall,
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
