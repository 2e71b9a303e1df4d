//! Node pools: a group of same-tier worker nodes and their status machine.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::upgrade::SurgeSettings;
use crate::names::DnsLabel;

/// `Provisioning`, `Ready`, `Scaling`, `Upgrading`, `Deleting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PoolStatus {
    Provisioning,
    Ready,
    Scaling,
    /// Its nodes are being replaced by nodes of a new Kubernetes version.
    Upgrading,
    Deleting,
}

impl PoolStatus {
    /// Every value, in declaration order.
    pub const ALL: [PoolStatus; 5] = [
        PoolStatus::Provisioning,
        PoolStatus::Ready,
        PoolStatus::Scaling,
        PoolStatus::Upgrading,
        PoolStatus::Deleting,
    ];
}

words! {
    /// What a taint does to pods that do not tolerate it: `NoSchedule` (not scheduled there),
    /// `PreferNoSchedule` (avoided when possible), `NoExecute` (also evicted when running).
    TaintEffect {
        NoSchedule => "NoSchedule",
        PreferNoSchedule => "PreferNoSchedule",
        NoExecute => "NoExecute",
    }
}

/// A Kubernetes taint a pool puts on each of its nodes. A pool holds at most one taint per key
/// and effect, as Kubernetes does on a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Taint {
    /// A qualified name (`names::qualified_name_problem`).
    pub key: String,
    /// A label value, possibly empty (`names::label_value_problem`).
    pub value: String,
    pub effect: TaintEffect,
}

/// As `kubectl taint` writes one: `KEY=VALUE:EFFECT`, or `KEY:EFFECT` without a value.
impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect.as_str())
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect.as_str())
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolEvent {
    /// The pool's nodes match its target.
    Settled,
    /// A new target (count, autoscaling bounds).
    Resize,
    /// Its nodes start moving to a new Kubernetes version.
    StartUpgrade,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a node pool in status {from:?} cannot take {event:?}")]
pub struct PoolTransitionError {
    pub from: PoolStatus,
    pub event: PoolEvent,
}

impl PoolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PoolStatus::Provisioning => "Provisioning",
            PoolStatus::Ready => "Ready",
            PoolStatus::Scaling => "Scaling",
            PoolStatus::Upgrading => "Upgrading",
            PoolStatus::Deleting => "Deleting",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Provisioning" => PoolStatus::Provisioning,
            "Ready" => PoolStatus::Ready,
            "Scaling" => PoolStatus::Scaling,
            "Upgrading" => PoolStatus::Upgrading,
            "Deleting" => PoolStatus::Deleting,
            _ => return None,
        })
    }

    pub fn is_deleting(self) -> bool {
        self == PoolStatus::Deleting
    }

    /// A resize while `Scaling` is accepted and replaces the target; a pool still being
    /// provisioned keeps `Provisioning` with the new target; a deleting pool takes no change;
    /// an upgrading pool is not resized (the upgrade keeps its count while it replaces nodes).
    pub fn apply(self, event: PoolEvent) -> Result<PoolStatus, PoolTransitionError> {
        use PoolEvent::*;
        use PoolStatus::*;
        match (self, event) {
            (Provisioning | Scaling | Upgrading, Settled) => Ok(Ready),
            (Ready, StartUpgrade) => Ok(Upgrading),
            (Ready, Settled) => Ok(Ready),
            (Ready | Scaling, Resize) => Ok(Scaling),
            (Provisioning, Resize) => Ok(Provisioning),
            (Provisioning | Ready | Scaling | Upgrading, Delete) => Ok(Deleting),
            (from, event) => Err(PoolTransitionError { from, event }),
        }
    }
}

/// A node pool as stored and as answered.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePool {
    pub name: DnsLabel,
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
    /// Kubernetes taints on each of the pool's nodes, in the order given.
    pub taints: Vec<Taint>,
    pub tags: BTreeMap<String, String>,
    /// The tier's disk size.
    pub root_volume_size_gib: u32,
    /// The Kubernetes version its nodes run, or move to while `Upgrading`.
    pub version: String,
    /// How far above and below its count the pool may go while an upgrade replaces nodes.
    pub surge: SurgeSettings,
    pub status: PoolStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::PoolEvent::*;
    use super::PoolStatus::*;

    #[test]
    fn pool_status_resize_while_scaling_is_accepted() {
        assert_eq!(Ready.apply(Resize), Ok(Scaling));
        assert_eq!(Scaling.apply(Resize), Ok(Scaling));
        assert_eq!(Provisioning.apply(Resize), Ok(Provisioning));
    }

    #[test]
    fn pool_status_deleting_takes_no_change() {
        assert!(Deleting.apply(Resize).is_err());
        assert!(Deleting.apply(Delete).is_err());
        assert!(Deleting.apply(Settled).is_err());
    }

    #[test]
    fn pool_status_only_a_ready_pool_starts_an_upgrade_and_is_not_resized_meanwhile() {
        assert_eq!(Ready.apply(StartUpgrade), Ok(Upgrading));
        for s in [Provisioning, Scaling, Upgrading, Deleting] {
            assert!(s.apply(StartUpgrade).is_err(), "{s:?}");
        }
        assert!(Upgrading.apply(Resize).is_err());
        assert_eq!(Upgrading.apply(Settled), Ok(Ready));
        assert_eq!(Upgrading.apply(Delete), Ok(Deleting));
    }

    #[test]
    fn pool_status_settles_to_ready() {
        assert_eq!(Provisioning.apply(Settled), Ok(Ready));
        assert_eq!(Scaling.apply(Settled), Ok(Ready));
        for s in [Provisioning, Ready, Scaling] {
            assert_eq!(s.apply(Delete), Ok(Deleting));
        }
    }
}
