//! Worker nodes and their status machine. A deleted node is replaced: the pool keeps its count.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::model::node_pool::{NodePool, Taint};
use crate::names::{DnsLabel, NodeName};

/// `Provisioning`, `Ready`, `Deleting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum NodeStatus {
    Provisioning,
    Ready,
    Deleting,
}

impl NodeStatus {
    /// Every value, in declaration order.
    pub const ALL: [NodeStatus; 3] = [
        NodeStatus::Provisioning,
        NodeStatus::Ready,
        NodeStatus::Deleting,
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeEvent {
    Up,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a node in status {from:?} cannot take {event:?}")]
pub struct NodeTransitionError {
    pub from: NodeStatus,
    pub event: NodeEvent,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Provisioning => "Provisioning",
            NodeStatus::Ready => "Ready",
            NodeStatus::Deleting => "Deleting",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Provisioning" => NodeStatus::Provisioning,
            "Ready" => NodeStatus::Ready,
            "Deleting" => NodeStatus::Deleting,
            _ => return None,
        })
    }

    pub fn apply(self, event: NodeEvent) -> Result<NodeStatus, NodeTransitionError> {
        match (self, event) {
            (NodeStatus::Provisioning, NodeEvent::Up) => Ok(NodeStatus::Ready),
            (NodeStatus::Provisioning | NodeStatus::Ready, NodeEvent::Delete) => {
                Ok(NodeStatus::Deleting)
            }
            (from, event) => Err(NodeTransitionError { from, event }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub name: NodeName,
    /// The pool's name.
    pub pool: DnsLabel,
    pub status: NodeStatus,
    /// The Kubernetes version it runs (its kubelet's).
    pub version: String,
    pub created_at: DateTime<Utc>,
    /// The Kubernetes labels the node carries: its pool's, once provisioning applied them.
    pub labels: BTreeMap<String, String>,
    /// The Kubernetes taints the node carries: its pool's, once provisioning applied them.
    pub taints: Vec<Taint>,
}

impl Node {
    /// Whether the node carries the labels and taints its pool asks for now.
    pub fn matches_pool(&self, pool: &NodePool) -> bool {
        self.labels == pool.labels && self.taints == pool.taints
    }
}

#[cfg(test)]
mod tests {
    use super::NodeEvent::*;
    use super::NodeStatus::*;

    #[test]
    fn node_status_comes_up_then_deletes_once() {
        assert_eq!(Provisioning.apply(Up), Ok(Ready));
        assert_eq!(Ready.apply(Delete), Ok(Deleting));
        assert_eq!(Provisioning.apply(Delete), Ok(Deleting));
        assert!(Deleting.apply(Delete).is_err());
        assert!(Ready.apply(Up).is_err());
        assert!(Deleting.apply(Up).is_err());
    }
}
