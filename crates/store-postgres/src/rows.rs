//! Row types of the tables and their conversion to and from the domain's models. Values read
//! back are checked against the domain's enums; a value the schema should have refused is
//! `Internal`, never a panic.
//!
//! Every insertable row says `treat_none_as_default_value = false`: a `None` is bound as NULL
//! (no column of these tables has another default) instead of written as `DEFAULT`, so the
//! INSERT's text is the same for every row and diesel prepares it once per connection rather
//! than having PostgreSQL parse and plan it on every call.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use chrono::{DateTime, Utc};
use diesel::prelude::*;
use domain::model::cluster::{
    Cluster, ClusterPhase, ControlPlaneFirewall, Exposure, ExposureChange, ExposureChangeStatus,
    NetworkMode, Registration, RegistrationReason, SubStatus,
};
use domain::model::elastic_ip::{ElasticIp, ElasticIpStatus};
use domain::model::firewall::{
    Direction, FirewallRule, FirewallRuleStatus, IpCidr, Ipv4Cidr, PortRange, Protocol,
};
use domain::model::maintenance_window::{
    MaintenanceDay, MaintenanceWindow, format_start_time, parse_start_time,
};
use domain::model::node::{Node, NodeStatus};
use domain::model::node_pool::{NodePool, PoolStatus, Taint, TaintEffect};
use domain::model::upgrade::{SurgeSettings, UpgradeInFlight};
use domain::names::{DnsLabel, NodeName};
use domain::ports::storage::StoreError;
use serde_json::Value;
use uuid::Uuid;

use crate::error::corrupt;
use crate::schema::{clusters, elastic_ips, firewall_rules, node_pools, nodes};

pub(crate) fn to_i32(v: u32, what: &str) -> Result<i32, StoreError> {
    i32::try_from(v).map_err(|_| StoreError::Internal(format!("{what} {v} is out of range")))
}

fn to_u32(v: i32, what: &str) -> Result<u32, StoreError> {
    u32::try_from(v).map_err(|_| corrupt(what, &v.to_string()))
}

fn parsed<T>(value: Option<T>, what: &str, raw: &str) -> Result<T, StoreError> {
    value.ok_or_else(|| corrupt(what, raw))
}

pub(crate) fn direction_str(d: Direction) -> &'static str {
    match d {
        Direction::Ingress => "ingress",
    }
}

fn registration(
    status: &str,
    reason: Option<&str>,
    what: &str,
) -> Result<Registration, StoreError> {
    Ok(Registration {
        status: parsed(SubStatus::parse(status), what, status)?,
        reason: match reason {
            Some(r) => Some(parsed(RegistrationReason::parse(r), what, r)?),
            None => None,
        },
    })
}

/// Also serialized as JSON of the table's columns, for `kubesvc_create_cluster_replayed` (`create`).
#[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset, serde::Serialize)]
#[diesel(
    table_name = clusters,
    check_for_backend(diesel::pg::Pg),
    treat_none_as_default_value = false,
    treat_none_as_null = true
)]
pub(crate) struct ClusterRow {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub organization_slug: String,
    pub name: String,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub zone: String,
    pub version: String,
    pub control_plane_option_id: String,
    pub exposure: String,
    pub network_mode: String,
    pub phase: String,
    pub failure_reason: Option<String>,
    pub public_hostname: Option<String>,
    pub api_endpoint: Option<String>,
    pub hub_registration_status: String,
    pub hub_registration_reason: Option<String>,
    pub default_environment_status: String,
    pub default_environment_reason: Option<String>,
    pub exposure_change_to: Option<String>,
    pub control_plane_firewall_enabled: bool,
    pub control_plane_firewall_allowed: Vec<String>,
    pub control_plane_firewall_change_enabled: Option<bool>,
    pub control_plane_firewall_change_allowed: Option<Vec<String>>,
    pub revision: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub deleted_at: Option<DateTime<Utc>>,
    pub upgrade_from: Option<String>,
    pub upgrade_to: Option<String>,
    pub upgrade_automatic: bool,
    pub maintenance_day: String,
    pub maintenance_start_time: String,
    pub auto_upgrade: bool,
    pub last_auto_upgrade_window: Option<DateTime<Utc>>,
}

impl ClusterRow {
    /// The row of a cluster; `revision` and `deleted_at` are the store's, not the caller's.
    pub fn from_domain(c: &Cluster, revision: i64) -> Self {
        ClusterRow {
            id: c.id,
            organization_id: c.organization_id,
            organization_slug: c.organization_slug.clone(),
            name: c.name.as_str().to_owned(),
            description: c.description.clone(),
            tags: c.tags.iter().map(|t| t.as_str().to_owned()).collect(),
            zone: c.zone.clone(),
            version: c.version.clone(),
            control_plane_option_id: c.control_plane_option_id.clone(),
            exposure: c.exposure.as_str().to_owned(),
            network_mode: c.network_mode.as_str().to_owned(),
            phase: c.phase.as_str().to_owned(),
            failure_reason: c.failure_reason.clone(),
            public_hostname: c.public_hostname.clone(),
            api_endpoint: c.api_endpoint.clone(),
            hub_registration_status: c.hub_registration.status.as_str().to_owned(),
            hub_registration_reason: c.hub_registration.reason.map(|r| r.as_str().to_owned()),
            default_environment_status: c.default_environment.status.as_str().to_owned(),
            default_environment_reason: c.default_environment.reason.map(|r| r.as_str().to_owned()),
            exposure_change_to: c.exposure_change.map(|x| x.to.as_str().to_owned()),
            control_plane_firewall_enabled: c.control_plane_firewall.enabled,
            control_plane_firewall_allowed: cidr_texts(&c.control_plane_firewall),
            control_plane_firewall_change_enabled: c
                .control_plane_firewall_change
                .as_ref()
                .map(|f| f.enabled),
            control_plane_firewall_change_allowed: c
                .control_plane_firewall_change
                .as_ref()
                .map(cidr_texts),
            revision,
            created_at: c.created_at,
            updated_at: c.updated_at,
            deleted_at: c.deleted_at,
            upgrade_from: c.upgrade.as_ref().map(|u| u.from.clone()),
            upgrade_to: c.upgrade.as_ref().map(|u| u.to.clone()),
            upgrade_automatic: c.upgrade.as_ref().is_some_and(|u| u.automatic),
            maintenance_day: c.maintenance_window.day.as_str().to_owned(),
            maintenance_start_time: format_start_time(c.maintenance_window.start_time),
            auto_upgrade: c.auto_upgrade,
            last_auto_upgrade_window: c.last_auto_upgrade_window,
        }
    }

    pub fn into_domain(self, node_pools: Vec<NodePool>) -> Result<Cluster, StoreError> {
        Ok(Cluster {
            id: self.id,
            organization_id: self.organization_id,
            organization_slug: self.organization_slug,
            name: DnsLabel::from_trusted(self.name),
            description: self.description,
            tags: self.tags.into_iter().map(DnsLabel::from_trusted).collect(),
            zone: self.zone,
            version: self.version,
            control_plane_option_id: self.control_plane_option_id,
            exposure: parsed(Exposure::parse(&self.exposure), "exposure", &self.exposure)?,
            network_mode: parsed(
                NetworkMode::parse(&self.network_mode),
                "network mode",
                &self.network_mode,
            )?,
            phase: parsed(ClusterPhase::parse(&self.phase), "phase", &self.phase)?,
            failure_reason: self.failure_reason,
            public_hostname: self.public_hostname,
            api_endpoint: self.api_endpoint,
            node_pools,
            hub_registration: registration(
                &self.hub_registration_status,
                self.hub_registration_reason.as_deref(),
                "hub registration",
            )?,
            default_environment: registration(
                &self.default_environment_status,
                self.default_environment_reason.as_deref(),
                "default environment",
            )?,
            exposure_change: match self.exposure_change_to {
                Some(to) => Some(ExposureChange {
                    to: parsed(Exposure::parse(&to), "exposure change", &to)?,
                    status: ExposureChangeStatus::InProgress,
                }),
                None => None,
            },
            upgrade: match (self.upgrade_from, self.upgrade_to) {
                (Some(from), Some(to)) => Some(UpgradeInFlight {
                    from,
                    to,
                    automatic: self.upgrade_automatic,
                }),
                _ => None,
            },
            maintenance_window: MaintenanceWindow {
                day: parsed(
                    MaintenanceDay::parse(&self.maintenance_day),
                    "maintenance day",
                    &self.maintenance_day,
                )?,
                start_time: parsed(
                    parse_start_time(&self.maintenance_start_time),
                    "maintenance start time",
                    &self.maintenance_start_time,
                )?,
            },
            auto_upgrade: self.auto_upgrade,
            last_auto_upgrade_window: self.last_auto_upgrade_window,
            control_plane_firewall: firewall(
                self.control_plane_firewall_enabled,
                &self.control_plane_firewall_allowed,
            )?,
            control_plane_firewall_change: match (
                self.control_plane_firewall_change_enabled,
                &self.control_plane_firewall_change_allowed,
            ) {
                (Some(enabled), Some(allowed)) => Some(firewall(enabled, allowed)?),
                _ => None,
            },
            created_at: self.created_at,
            updated_at: self.updated_at,
            revision: self.revision,
            deleted_at: self.deleted_at,
        })
    }
}

/// The columns an `UpdateCluster` may change: the cluster's own, never its identity, its
/// creation, its revision (the store raises it) or its tombstone.
#[derive(Debug, Clone, AsChangeset)]
#[diesel(table_name = clusters, treat_none_as_null = true)]
pub(crate) struct ClusterUpdate {
    pub organization_slug: String,
    pub name: String,
    pub description: Option<String>,
    pub tags: Vec<String>,
    pub zone: String,
    pub version: String,
    pub control_plane_option_id: String,
    pub exposure: String,
    pub network_mode: String,
    pub phase: String,
    pub failure_reason: Option<String>,
    pub public_hostname: Option<String>,
    pub api_endpoint: Option<String>,
    pub hub_registration_status: String,
    pub hub_registration_reason: Option<String>,
    pub default_environment_status: String,
    pub default_environment_reason: Option<String>,
    pub exposure_change_to: Option<String>,
    pub control_plane_firewall_enabled: bool,
    pub control_plane_firewall_allowed: Vec<String>,
    pub control_plane_firewall_change_enabled: Option<bool>,
    pub control_plane_firewall_change_allowed: Option<Vec<String>>,
    pub updated_at: DateTime<Utc>,
    pub upgrade_from: Option<String>,
    pub upgrade_to: Option<String>,
    pub upgrade_automatic: bool,
    pub maintenance_day: String,
    pub maintenance_start_time: String,
    pub auto_upgrade: bool,
    pub last_auto_upgrade_window: Option<DateTime<Utc>>,
}

impl From<ClusterRow> for ClusterUpdate {
    fn from(r: ClusterRow) -> Self {
        ClusterUpdate {
            organization_slug: r.organization_slug,
            name: r.name,
            description: r.description,
            tags: r.tags,
            zone: r.zone,
            version: r.version,
            control_plane_option_id: r.control_plane_option_id,
            exposure: r.exposure,
            network_mode: r.network_mode,
            phase: r.phase,
            failure_reason: r.failure_reason,
            public_hostname: r.public_hostname,
            api_endpoint: r.api_endpoint,
            hub_registration_status: r.hub_registration_status,
            hub_registration_reason: r.hub_registration_reason,
            default_environment_status: r.default_environment_status,
            default_environment_reason: r.default_environment_reason,
            exposure_change_to: r.exposure_change_to,
            control_plane_firewall_enabled: r.control_plane_firewall_enabled,
            control_plane_firewall_allowed: r.control_plane_firewall_allowed,
            control_plane_firewall_change_enabled: r.control_plane_firewall_change_enabled,
            control_plane_firewall_change_allowed: r.control_plane_firewall_change_allowed,
            updated_at: r.updated_at,
            upgrade_from: r.upgrade_from,
            upgrade_to: r.upgrade_to,
            upgrade_automatic: r.upgrade_automatic,
            maintenance_day: r.maintenance_day,
            maintenance_start_time: r.maintenance_start_time,
            auto_upgrade: r.auto_upgrade,
            last_auto_upgrade_window: r.last_auto_upgrade_window,
        }
    }
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset, serde::Serialize)]
#[diesel(
    table_name = node_pools,
    check_for_backend(diesel::pg::Pg),
    treat_none_as_default_value = false,
    treat_none_as_null = true
)]
pub(crate) struct PoolRow {
    pub cluster_id: Uuid,
    pub name: String,
    pub size: String,
    pub count: i32,
    pub auto_scale: bool,
    pub min_nodes: i32,
    pub max_nodes: Option<i32>,
    pub labels: Value,
    pub tags: Value,
    pub root_volume_size_gib: i32,
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub version: String,
    pub max_surge: i32,
    pub max_unavailable: i32,
    pub taints: Value,
}

fn cidr_texts(f: &ControlPlaneFirewall) -> Vec<String> {
    f.allowed_addresses
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn firewall(enabled: bool, allowed: &[String]) -> Result<ControlPlaneFirewall, StoreError> {
    Ok(ControlPlaneFirewall {
        enabled,
        allowed_addresses: allowed
            .iter()
            .map(|c| IpCidr::parse(c).map_err(|_| corrupt("control-plane firewall network", c)))
            .collect::<Result<_, _>>()?,
    })
}

fn taints_to_json(taints: &[Taint]) -> Value {
    Value::Array(
        taints
            .iter()
            .map(|t| serde_json::json!({"key": t.key, "value": t.value, "effect": t.effect.as_str()}))
            .collect(),
    )
}

fn json_to_taints(v: Value, what: &str) -> Result<Vec<Taint>, StoreError> {
    #[derive(serde::Deserialize)]
    struct Stored {
        key: String,
        value: String,
        effect: String,
    }
    let stored: Vec<Stored> =
        serde_json::from_value(v).map_err(|e| corrupt(what, &e.to_string()))?;
    stored
        .into_iter()
        .map(|t| {
            Ok(Taint {
                effect: parsed(TaintEffect::parse(&t.effect), what, &t.effect)?,
                key: t.key,
                value: t.value,
            })
        })
        .collect()
}

fn map_to_json(m: &BTreeMap<String, String>) -> Value {
    Value::Object(
        m.iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
    )
}

fn json_to_map(v: Value, what: &str) -> Result<BTreeMap<String, String>, StoreError> {
    serde_json::from_value(v).map_err(|e| corrupt(what, &e.to_string()))
}

impl PoolRow {
    pub fn from_domain(cluster_id: Uuid, p: &NodePool) -> Result<Self, StoreError> {
        Ok(PoolRow {
            cluster_id,
            name: p.name.as_str().to_owned(),
            size: p.size.clone(),
            count: to_i32(p.count, "count")?,
            auto_scale: p.auto_scale,
            min_nodes: to_i32(p.min_nodes, "min_nodes")?,
            max_nodes: p.max_nodes.map(|m| to_i32(m, "max_nodes")).transpose()?,
            labels: map_to_json(&p.labels),
            tags: map_to_json(&p.tags),
            root_volume_size_gib: to_i32(p.root_volume_size_gib, "root_volume_size_gib")?,
            status: p.status.as_str().to_owned(),
            created_at: p.created_at,
            updated_at: p.updated_at,
            version: p.version.clone(),
            max_surge: to_i32(p.surge.max_surge, "max_surge")?,
            max_unavailable: to_i32(p.surge.max_unavailable, "max_unavailable")?,
            taints: taints_to_json(&p.taints),
        })
    }

    pub fn into_domain(self) -> Result<NodePool, StoreError> {
        Ok(NodePool {
            name: DnsLabel::from_trusted(self.name),
            size: self.size,
            count: to_u32(self.count, "pool count")?,
            auto_scale: self.auto_scale,
            min_nodes: to_u32(self.min_nodes, "min_nodes")?,
            max_nodes: self.max_nodes.map(|m| to_u32(m, "max_nodes")).transpose()?,
            labels: json_to_map(self.labels, "pool labels")?,
            taints: json_to_taints(self.taints, "pool taints")?,
            tags: json_to_map(self.tags, "pool tags")?,
            root_volume_size_gib: to_u32(self.root_volume_size_gib, "root volume size")?,
            version: self.version,
            surge: SurgeSettings {
                max_surge: to_u32(self.max_surge, "max_surge")?,
                max_unavailable: to_u32(self.max_unavailable, "max_unavailable")?,
            },
            status: parsed(PoolStatus::parse(&self.status), "pool status", &self.status)?,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(
    table_name = nodes,
    check_for_backend(diesel::pg::Pg),
    treat_none_as_default_value = false
)]
pub(crate) struct NodeRow {
    pub cluster_id: Uuid,
    pub name: String,
    pub pool: String,
    pub status: String,
    pub created_at: DateTime<Utc>,
    pub version: String,
    pub labels: Value,
    pub taints: Value,
}

impl NodeRow {
    pub fn from_domain(cluster_id: Uuid, n: &Node) -> Self {
        NodeRow {
            cluster_id,
            name: n.name.as_str().to_owned(),
            pool: n.pool.as_str().to_owned(),
            status: n.status.as_str().to_owned(),
            created_at: n.created_at,
            version: n.version.clone(),
            labels: map_to_json(&n.labels),
            taints: taints_to_json(&n.taints),
        }
    }

    pub fn into_domain(self) -> Result<Node, StoreError> {
        Ok(Node {
            name: NodeName::parse(&self.name).map_err(|_| corrupt("node name", &self.name))?,
            pool: DnsLabel::from_trusted(self.pool),
            status: parsed(NodeStatus::parse(&self.status), "node status", &self.status)?,
            version: self.version,
            created_at: self.created_at,
            labels: json_to_map(self.labels, "node labels")?,
            taints: json_to_taints(self.taints, "node taints")?,
        })
    }
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(
    table_name = elastic_ips,
    check_for_backend(diesel::pg::Pg),
    treat_none_as_default_value = false,
    treat_none_as_null = true
)]
pub(crate) struct ElasticIpRow {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub name: Option<String>,
    pub exposure: String,
    pub status: String,
    pub address: String,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl ElasticIpRow {
    pub fn from_domain(cluster_id: Uuid, e: &ElasticIp) -> Self {
        ElasticIpRow {
            id: e.id,
            cluster_id,
            name: e.name.as_ref().map(|n| n.as_str().to_owned()),
            exposure: e.exposure.as_str().to_owned(),
            status: e.status.as_str().to_owned(),
            address: e.address.to_string(),
            failure_reason: e.failure_reason.clone(),
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }

    pub fn into_domain(self) -> Result<ElasticIp, StoreError> {
        Ok(ElasticIp {
            id: self.id,
            cluster_id: self.cluster_id,
            name: self.name.map(DnsLabel::from_trusted),
            exposure: parsed(Exposure::parse(&self.exposure), "exposure", &self.exposure)?,
            status: parsed(
                ElasticIpStatus::parse(&self.status),
                "Elastic IP status",
                &self.status,
            )?,
            address: parse_address(&self.address)?,
            failure_reason: self.failure_reason,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

pub(crate) fn parse_address(s: &str) -> Result<Ipv4Addr, StoreError> {
    s.parse().map_err(|_| corrupt("address", s))
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(
    table_name = firewall_rules,
    check_for_backend(diesel::pg::Pg),
    treat_none_as_default_value = false,
    treat_none_as_null = true
)]
pub(crate) struct FirewallRuleRow {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub name: Option<String>,
    pub description: Option<String>,
    pub direction: String,
    pub protocol: String,
    pub source_cidrs: Vec<String>,
    pub port_from: Option<i32>,
    pub port_to: Option<i32>,
    pub status: String,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl FirewallRuleRow {
    pub fn from_domain(cluster_id: Uuid, r: &FirewallRule) -> Self {
        FirewallRuleRow {
            id: r.id,
            cluster_id,
            name: r.name.as_ref().map(|n| n.as_str().to_owned()),
            description: r.description.clone(),
            direction: direction_str(r.direction).to_owned(),
            protocol: r.protocol.as_str().to_owned(),
            source_cidrs: r.source_cidrs.iter().map(ToString::to_string).collect(),
            port_from: r.port_range.map(|p| i32::from(p.from)),
            port_to: r.port_range.map(|p| i32::from(p.to)),
            status: r.status.as_str().to_owned(),
            failure_reason: r.failure_reason.clone(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }

    pub fn into_domain(self) -> Result<FirewallRule, StoreError> {
        let port = |p: i32| u16::try_from(p).map_err(|_| corrupt("port", &p.to_string()));
        let port_range = match (self.port_from, self.port_to) {
            (Some(from), Some(to)) => Some(PortRange {
                from: port(from)?,
                to: port(to)?,
            }),
            (None, None) => None,
            (from, to) => return Err(corrupt("port range", &format!("{from:?}-{to:?}"))),
        };
        let direction = match self.direction.as_str() {
            "ingress" => Direction::Ingress,
            other => return Err(corrupt("direction", other)),
        };
        Ok(FirewallRule {
            id: self.id,
            cluster_id: self.cluster_id,
            name: self.name.map(DnsLabel::from_trusted),
            description: self.description,
            direction,
            protocol: parsed(Protocol::parse(&self.protocol), "protocol", &self.protocol)?,
            source_cidrs: self
                .source_cidrs
                .iter()
                .map(|c| Ipv4Cidr::parse(c).map_err(|_| corrupt("CIDR", c)))
                .collect::<Result<_, _>>()?,
            port_range,
            status: parsed(
                FirewallRuleStatus::parse(&self.status),
                "firewall rule status",
                &self.status,
            )?,
            failure_reason: self.failure_reason,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}
