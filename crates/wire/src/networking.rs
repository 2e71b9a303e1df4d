//! Elastic IPs and firewall rules as answered.

use chrono::{DateTime, Utc};
use domain::model::cluster::Exposure;
use domain::model::elastic_ip::{self as eip, ElasticIpStatus};
use domain::model::firewall::{self as fw, Direction, FirewallRuleStatus, Protocol};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::enums;

/// The Service annotation that binds a workload to an Elastic IP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Annotation {
    pub key: String,
    pub value: String,
}

/// An Elastic IP as answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ElasticIpView {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub name: Option<String>,
    #[schema(value_type = enums::Exposure)]
    pub exposure: Exposure,
    #[schema(value_type = enums::ElasticIpStatus)]
    pub status: ElasticIpStatus,
    /// Null until `Ready`.
    pub address: Option<String>,
    pub annotation: Annotation,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&eip::ElasticIpView> for ElasticIpView {
    fn from(v: &eip::ElasticIpView) -> Self {
        ElasticIpView {
            id: v.id,
            cluster_id: v.cluster_id,
            name: v.name.clone(),
            exposure: v.exposure,
            status: v.status,
            address: v.address.clone(),
            annotation: Annotation {
                key: v.annotation.key.clone(),
                value: v.annotation.value.clone(),
            },
            failure_reason: v.failure_reason.clone(),
            created_at: v.created_at,
            updated_at: v.updated_at,
        }
    }
}

/// Ports `from..=to`, 1-65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PortRange {
    pub from: u16,
    pub to: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FirewallRule {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub name: Option<String>,
    pub description: Option<String>,
    #[schema(value_type = enums::Direction)]
    pub direction: Direction,
    #[schema(value_type = enums::Protocol)]
    pub protocol: Protocol,
    pub source_cidrs: Vec<String>,
    /// Null for icmp.
    pub port_range: Option<PortRange>,
    #[schema(value_type = enums::FirewallRuleStatus)]
    pub status: FirewallRuleStatus,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&fw::FirewallRule> for FirewallRule {
    fn from(r: &fw::FirewallRule) -> Self {
        FirewallRule {
            id: r.id,
            cluster_id: r.cluster_id,
            name: r.name.as_ref().map(ToString::to_string),
            description: r.description.clone(),
            direction: r.direction,
            protocol: r.protocol,
            source_cidrs: r.source_cidrs.iter().map(ToString::to_string).collect(),
            port_range: r.port_range.map(|p| PortRange {
                from: p.from,
                to: p.to,
            }),
            status: r.status,
            failure_reason: r.failure_reason.clone(),
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ElasticIpList {
    pub items: Vec<ElasticIpView>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FirewallRuleList {
    pub items: Vec<FirewallRule>,
}
