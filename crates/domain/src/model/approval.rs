//! Approvals: a change a person's AI assistant asked for, which runs only once that same person
//! approves it, in the console or the CLI, signed in as themselves. The service asks, not the
//! assistant: the assistant cannot approve its own request, fill in a `confirm` flag, or run
//! the change any other way, because the change runs only from the approval, as the person who
//! approved it.
//!
//! What an approval runs is kept exactly as it was asked (the input drafts, before defaults),
//! so the person approves what will run, not a description of it.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::input::cluster::{ControlPlaneFirewallRequest, CreateClusterRequest};
use crate::input::node_pool::{NodePoolPatch, NodePoolRequest, TaintRequest};
use crate::input::upgrade::{MaintenanceWindowRequest, UpgradeRequest};
use crate::model::audit::Actor;
use crate::model::cluster::{Exposure, NetworkMode};

/// How long an approval waits for its person unless the operator says otherwise.
pub const DEFAULT_TTL_MINUTES: i64 = 10;
/// The most approvals a read answers.
pub const LIST_MAX: u32 = 100;

words! {
    /// Where an approval stands.
    ApprovalStatus {
        Pending => "pending",
        Approved => "approved",
        Declined => "declined",
        Expired => "expired",
    }
}

/// A change an assistant may ask for. None allocates or releases an Elastic IP or changes a
/// firewall rule: the assistant is refused those, approved or not.
#[derive(Debug, Clone, PartialEq)]
pub enum ApprovedAction {
    CreateCluster {
        body: CreateClusterRequest,
    },
    AddNodePool {
        cluster: Uuid,
        body: NodePoolRequest,
    },
    ScaleNodePool {
        cluster: Uuid,
        pool: String,
        patch: NodePoolPatch,
    },
    DeleteNodePool {
        cluster: Uuid,
        pool: String,
    },
    DeleteNode {
        cluster: Uuid,
        node: String,
    },
    DeleteCluster {
        cluster: Uuid,
    },
    UpgradeCluster {
        cluster: Uuid,
        body: UpgradeRequest,
    },
}

impl ApprovedAction {
    /// Its name, as the assistant's tools and the audit trail call it.
    pub fn kind(&self) -> &'static str {
        match self {
            ApprovedAction::CreateCluster { .. } => "create_cluster",
            ApprovedAction::AddNodePool { .. } => "add_node_pool",
            ApprovedAction::ScaleNodePool { .. } => "scale_node_pool",
            ApprovedAction::DeleteNodePool { .. } => "delete_node_pool",
            ApprovedAction::DeleteNode { .. } => "delete_node",
            ApprovedAction::DeleteCluster { .. } => "delete_cluster",
            ApprovedAction::UpgradeCluster { .. } => "upgrade_cluster",
        }
    }

    /// The cluster it changes, when it changes one that exists.
    pub fn cluster(&self) -> Option<Uuid> {
        match self {
            ApprovedAction::CreateCluster { .. } => None,
            ApprovedAction::AddNodePool { cluster, .. }
            | ApprovedAction::ScaleNodePool { cluster, .. }
            | ApprovedAction::DeleteNodePool { cluster, .. }
            | ApprovedAction::DeleteNode { cluster, .. }
            | ApprovedAction::DeleteCluster { cluster }
            | ApprovedAction::UpgradeCluster { cluster, .. } => Some(*cluster),
        }
    }

    /// Whether it destroys something (the assistant's tools say so, and so does the page).
    pub fn is_destructive(&self) -> bool {
        matches!(
            self,
            ApprovedAction::DeleteCluster { .. }
                | ApprovedAction::DeleteNodePool { .. }
                | ApprovedAction::DeleteNode { .. }
        )
    }

    /// The arguments as stored: written by hand so that what is kept is exactly what was
    /// asked (an absent field stays absent, a `null` stays `null`).
    pub fn arguments(&self) -> Value {
        match self {
            ApprovedAction::CreateCluster { body } => create_json(body),
            ApprovedAction::AddNodePool { cluster, body } => {
                json!({"cluster": cluster, "node_pool": pool_json(body)})
            }
            ApprovedAction::ScaleNodePool {
                cluster,
                pool,
                patch,
            } => json!({"cluster": cluster, "pool": pool, "patch": patch_json(patch)}),
            ApprovedAction::DeleteNodePool { cluster, pool } => {
                json!({"cluster": cluster, "pool": pool})
            }
            ApprovedAction::DeleteNode { cluster, node } => {
                json!({"cluster": cluster, "node": node})
            }
            ApprovedAction::DeleteCluster { cluster } => json!({"cluster": cluster}),
            ApprovedAction::UpgradeCluster { cluster, body } => {
                json!({"cluster": cluster, "upgrade": upgrade_json(body)})
            }
        }
    }

    /// The action `kind` with these stored `arguments`; `None` when they are not what
    /// [`ApprovedAction::arguments`] writes.
    pub fn from_stored(kind: &str, arguments: &Value) -> Option<ApprovedAction> {
        let cluster = || arguments["cluster"].as_str()?.parse::<Uuid>().ok();
        let text = |name: &str| arguments[name].as_str().map(str::to_owned);
        Some(match kind {
            "create_cluster" => ApprovedAction::CreateCluster {
                body: create_from(arguments)?,
            },
            "add_node_pool" => ApprovedAction::AddNodePool {
                cluster: cluster()?,
                body: pool_from(&arguments["node_pool"])?,
            },
            "scale_node_pool" => ApprovedAction::ScaleNodePool {
                cluster: cluster()?,
                pool: text("pool")?,
                patch: patch_from(&arguments["patch"])?,
            },
            "delete_node_pool" => ApprovedAction::DeleteNodePool {
                cluster: cluster()?,
                pool: text("pool")?,
            },
            "delete_node" => ApprovedAction::DeleteNode {
                cluster: cluster()?,
                node: text("node")?,
            },
            "delete_cluster" => ApprovedAction::DeleteCluster {
                cluster: cluster()?,
            },
            "upgrade_cluster" => ApprovedAction::UpgradeCluster {
                cluster: cluster()?,
                body: upgrade_from(&arguments["upgrade"])?,
            },
            _ => return None,
        })
    }
}

/// What became of an approved action once it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalOutcome {
    /// It was made: the object it made or changed (`resource` as the audit trail names kinds,
    /// `id` its id there) in the cluster `cluster_id`.
    Done {
        resource: String,
        id: String,
        cluster_id: Uuid,
    },
    /// The service refused it when it ran (the cluster changed meanwhile, say): the refusal's
    /// stable code and its words.
    Refused { code: String, detail: String },
}

impl ApprovalOutcome {
    pub fn to_json(&self) -> Value {
        match self {
            ApprovalOutcome::Done {
                resource,
                id,
                cluster_id,
            } => json!({"done": {"resource": resource, "id": id, "cluster_id": cluster_id}}),
            ApprovalOutcome::Refused { code, detail } => {
                json!({"refused": {"code": code, "detail": detail}})
            }
        }
    }

    pub fn from_json(v: &Value) -> Option<ApprovalOutcome> {
        if let Some(d) = v.get("done") {
            return Some(ApprovalOutcome::Done {
                resource: d["resource"].as_str()?.to_owned(),
                id: d["id"].as_str()?.to_owned(),
                cluster_id: d["cluster_id"].as_str()?.parse().ok()?,
            });
        }
        let r = v.get("refused")?;
        Some(ApprovalOutcome::Refused {
            code: r["code"].as_str()?.to_owned(),
            detail: r["detail"].as_str()?.to_owned(),
        })
    }
}

/// One request for approval.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub organization_slug: String,
    /// The person whose assistant asked, and who alone may approve or decline.
    pub requested_by: Actor,
    pub action: ApprovedAction,
    /// What will happen, in the words the person reads before deciding. Customer-written
    /// names appear in it; faces show it as text, never as markup or instructions.
    pub summary: String,
    /// As stored: a pending approval past `expires_at` reads as expired ([`Approval::status_at`]).
    pub status: ApprovalStatus,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub decided_at: Option<DateTime<Utc>>,
    pub outcome: Option<ApprovalOutcome>,
}

impl Approval {
    /// Where it stands at `now`: a pending approval whose time ran out is expired, whether or
    /// not the sweep has recorded it yet.
    pub fn status_at(&self, now: DateTime<Utc>) -> ApprovalStatus {
        match self.status {
            ApprovalStatus::Pending if now >= self.expires_at => ApprovalStatus::Expired,
            s => s,
        }
    }

    /// The idempotency key its action runs under: one per approval, so the action runs once
    /// however often it is approved, retried or replayed.
    pub fn key(&self) -> String {
        format!("approval-{}", self.id.simple())
    }
}

fn create_json(b: &CreateClusterRequest) -> Value {
    let mut m = serde_json::Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    put("organization", b.organization.clone().map(Value::String));
    put("name", b.name.clone().map(Value::String));
    put("zone", b.zone.clone().map(Value::String));
    put("version", b.version.clone().map(Value::String));
    put("description", b.description.clone().map(Value::String));
    put("tags", b.tags.as_ref().map(|t| json!(t)));
    put("exposure", b.exposure.map(|e| json!(e.as_str())));
    put("network_mode", b.network_mode.map(|n| json!(n.as_str())));
    put(
        "node_pools",
        b.node_pools
            .as_ref()
            .map(|p| Value::Array(p.iter().map(pool_json).collect())),
    );
    put(
        "maintenance_window",
        b.maintenance_window.as_ref().map(window_json),
    );
    put("auto_upgrade", b.auto_upgrade.map(Value::Bool));
    put(
        "control_plane_firewall",
        b.control_plane_firewall.as_ref().map(|f| {
            let mut o = serde_json::Map::new();
            if let Some(e) = f.enabled {
                o.insert("enabled".into(), Value::Bool(e));
            }
            if let Some(a) = &f.allowed_addresses {
                o.insert("allowed_addresses".into(), json!(a));
            }
            Value::Object(o)
        }),
    );
    Value::Object(m)
}

fn window_json(w: &MaintenanceWindowRequest) -> Value {
    let mut m = serde_json::Map::new();
    if let Some(d) = &w.day {
        m.insert("day".into(), json!(d));
    }
    if let Some(t) = &w.start_time {
        m.insert("start_time".into(), json!(t));
    }
    Value::Object(m)
}

fn window_from(v: &Value) -> Option<MaintenanceWindowRequest> {
    let text = |k: &str| -> Option<Option<String>> {
        match v.get(k) {
            None => Some(None),
            Some(t) => Some(Some(t.as_str()?.to_owned())),
        }
    };
    Some(MaintenanceWindowRequest {
        day: text("day")?,
        start_time: text("start_time")?,
    })
}

fn upgrade_json(b: &UpgradeRequest) -> Value {
    let mut m = serde_json::Map::new();
    if let Some(v) = &b.version {
        m.insert("version".into(), json!(v));
    }
    if let Some(s) = b.max_surge {
        m.insert("max_surge".into(), json!(s));
    }
    if let Some(u) = b.max_unavailable {
        m.insert("max_unavailable".into(), json!(u));
    }
    Value::Object(m)
}

fn upgrade_from(v: &Value) -> Option<UpgradeRequest> {
    Some(UpgradeRequest {
        version: v.get("version").and_then(Value::as_str).map(str::to_owned),
        max_surge: v.get("max_surge").and_then(Value::as_i64),
        max_unavailable: v.get("max_unavailable").and_then(Value::as_i64),
    })
}

fn create_from(v: &Value) -> Option<CreateClusterRequest> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    Some(CreateClusterRequest {
        organization: text("organization"),
        name: text("name"),
        zone: text("zone"),
        version: text("version"),
        description: text("description"),
        tags: match v.get("tags") {
            None => None,
            Some(t) => Some(serde_json::from_value(t.clone()).ok()?),
        },
        exposure: match v.get("exposure") {
            None => None,
            Some(e) => Some(Exposure::parse(e.as_str()?)?),
        },
        network_mode: match v.get("network_mode") {
            None => None,
            Some(n) => Some(NetworkMode::parse(n.as_str()?)?),
        },
        node_pools: match v.get("node_pools") {
            None => None,
            Some(p) => Some(
                p.as_array()?
                    .iter()
                    .map(pool_from)
                    .collect::<Option<Vec<_>>>()?,
            ),
        },
        maintenance_window: match v.get("maintenance_window") {
            None => None,
            Some(w) => Some(window_from(w)?),
        },
        auto_upgrade: v.get("auto_upgrade").and_then(Value::as_bool),
        control_plane_firewall: match v.get("control_plane_firewall") {
            None => None,
            Some(f) => Some(ControlPlaneFirewallRequest {
                enabled: match f.get("enabled") {
                    None => None,
                    Some(e) => Some(e.as_bool()?),
                },
                allowed_addresses: match f.get("allowed_addresses") {
                    None => None,
                    Some(a) => Some(serde_json::from_value(a.clone()).ok()?),
                },
            }),
        },
    })
}

fn pool_json(p: &NodePoolRequest) -> Value {
    let mut m = serde_json::Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    put("name", p.name.clone().map(Value::String));
    put("size", p.size.clone().map(Value::String));
    put("count", p.count.map(|c| json!(c)));
    put("auto_scale", p.auto_scale.map(Value::Bool));
    put("min_nodes", p.min_nodes.map(|c| json!(c)));
    put("max_nodes", p.max_nodes.map(|c| json!(c)));
    put("labels", p.labels.as_ref().map(|l| json!(l)));
    put("taints", p.taints.as_deref().map(taints_json));
    put("tags", p.tags.as_ref().map(|t| json!(t)));
    put("max_surge", p.max_surge.map(|c| json!(c)));
    put("max_unavailable", p.max_unavailable.map(|c| json!(c)));
    Value::Object(m)
}

/// Taints as they were asked: absent fields stay absent.
fn taints_json(taints: &[TaintRequest]) -> Value {
    taints
        .iter()
        .map(|t| {
            let mut m = serde_json::Map::new();
            for (k, v) in [("key", &t.key), ("value", &t.value), ("effect", &t.effect)] {
                if let Some(v) = v {
                    m.insert(k.into(), Value::String(v.clone()));
                }
            }
            Value::Object(m)
        })
        .collect()
}

fn taints_from(v: &Value) -> Option<Vec<TaintRequest>> {
    v.as_array()?
        .iter()
        .map(|t| {
            let text = |k: &str| match t.get(k) {
                None => Some(None),
                Some(x) => Some(Some(x.as_str()?.to_owned())),
            };
            Some(TaintRequest {
                key: text("key")?,
                value: text("value")?,
                effect: text("effect")?,
            })
        })
        .collect()
}

fn pool_from(v: &Value) -> Option<NodePoolRequest> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let map = |k: &str| -> Option<Option<BTreeMap<String, String>>> {
        match v.get(k) {
            None => Some(None),
            Some(m) => Some(Some(serde_json::from_value(m.clone()).ok()?)),
        }
    };
    Some(NodePoolRequest {
        name: text("name"),
        size: text("size"),
        count: v.get("count").and_then(Value::as_i64),
        auto_scale: v.get("auto_scale").and_then(Value::as_bool),
        min_nodes: v.get("min_nodes").and_then(Value::as_i64),
        max_nodes: v.get("max_nodes").and_then(Value::as_i64),
        labels: map("labels")?,
        taints: match v.get("taints") {
            None => None,
            Some(t) => Some(taints_from(t)?),
        },
        tags: map("tags")?,
        max_surge: v.get("max_surge").and_then(Value::as_i64),
        max_unavailable: v.get("max_unavailable").and_then(Value::as_i64),
    })
}

/// A patch keeps "absent" and "null" apart: absent fields are left out, `null` is written.
fn patch_json(p: &NodePoolPatch) -> Value {
    let mut m = serde_json::Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    put("count", p.count.map(|c| json!(c)));
    put("auto_scale", p.auto_scale.map(|c| json!(c)));
    put("min_nodes", p.min_nodes.map(|c| json!(c)));
    put("max_nodes", p.max_nodes.map(|c| json!(c)));
    put("labels", p.labels.as_ref().map(|l| json!(l)));
    put(
        "taints",
        p.taints
            .as_ref()
            .map(|t| t.as_deref().map_or(Value::Null, taints_json)),
    );
    put("tags", p.tags.as_ref().map(|t| json!(t)));
    put("max_surge", p.max_surge.map(|c| json!(c)));
    put("max_unavailable", p.max_unavailable.map(|c| json!(c)));
    Value::Object(m)
}

fn patch_from(v: &Value) -> Option<NodePoolPatch> {
    fn field<T: serde::de::DeserializeOwned>(v: &Value, k: &str) -> Option<Option<Option<T>>> {
        match v.get(k) {
            None => Some(None),
            Some(Value::Null) => Some(Some(None)),
            Some(x) => Some(Some(Some(serde_json::from_value(x.clone()).ok()?))),
        }
    }
    Some(NodePoolPatch {
        count: field(v, "count")?,
        auto_scale: field(v, "auto_scale")?,
        min_nodes: field(v, "min_nodes")?,
        max_nodes: field(v, "max_nodes")?,
        labels: field(v, "labels")?,
        taints: match v.get("taints") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(t) => Some(Some(taints_from(t)?)),
        },
        tags: field(v, "tags")?,
        max_surge: field(v, "max_surge")?,
        max_unavailable: field(v, "max_unavailable")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn actions() -> Vec<ApprovedAction> {
        let cluster = Uuid::from_u128(7);
        vec![
            ApprovedAction::CreateCluster {
                body: CreateClusterRequest {
                    organization: Some("acme".into()),
                    name: Some("prod-1".into()),
                    tags: Some(vec!["team-a".into()]),
                    exposure: Some(Exposure::Private),
                    control_plane_firewall: Some(ControlPlaneFirewallRequest {
                        enabled: Some(true),
                        allowed_addresses: Some(vec!["203.0.113.0/24".into()]),
                    }),
                    node_pools: Some(vec![NodePoolRequest {
                        size: Some("kube.c5.large".into()),
                        count: Some(3),
                        labels: Some(BTreeMap::from([("k".into(), "v".into())])),
                        ..Default::default()
                    }]),
                    ..Default::default()
                },
            },
            ApprovedAction::AddNodePool {
                cluster,
                body: NodePoolRequest {
                    name: Some("gpu".into()),
                    auto_scale: Some(true),
                    min_nodes: Some(0),
                    max_nodes: Some(4),
                    taints: Some(vec![TaintRequest {
                        key: Some("nvidia.com/gpu".into()),
                        value: None,
                        effect: Some("NoSchedule".into()),
                    }]),
                    ..Default::default()
                },
            },
            ApprovedAction::ScaleNodePool {
                cluster,
                pool: "default".into(),
                patch: NodePoolPatch {
                    count: Some(Some(5)),
                    max_nodes: Some(None),
                    taints: Some(Some(vec![])),
                    ..Default::default()
                },
            },
            ApprovedAction::DeleteNodePool {
                cluster,
                pool: "gpu".into(),
            },
            ApprovedAction::DeleteNode {
                cluster,
                node: "prod-1-default-abcde".into(),
            },
            ApprovedAction::DeleteCluster { cluster },
        ]
    }

    #[test]
    fn an_action_comes_back_from_storage_exactly_as_asked() {
        for a in actions() {
            let stored = a.arguments();
            assert_eq!(
                ApprovedAction::from_stored(a.kind(), &stored),
                Some(a.clone()),
                "{stored}"
            );
        }
        // Absent and null stay apart in a patch.
        let ApprovedAction::ScaleNodePool { patch, .. } = &actions()[2] else {
            return;
        };
        let v = patch_json(patch);
        assert!(v.get("min_nodes").is_none() && v["max_nodes"].is_null());
    }

    #[test]
    fn stored_arguments_of_another_shape_are_no_action() {
        assert_eq!(
            ApprovedAction::from_stored("allocate_elastic_ip", &json!({})),
            None
        );
        assert_eq!(
            ApprovedAction::from_stored("delete_cluster", &json!({"cluster": "nope"})),
            None
        );
    }

    #[test]
    fn a_pending_approval_past_its_time_reads_as_expired() {
        let t = chrono::DateTime::<Utc>::from_timestamp(1_000, 0).unwrap_or_default();
        let a = Approval {
            id: Uuid::from_u128(1),
            organization_id: Uuid::from_u128(2),
            organization_slug: "acme".into(),
            requested_by: Actor {
                user_id: "u1".into(),
                email: None,
                client: crate::model::identity::ClientKind::Assistant,
            },
            action: ApprovedAction::DeleteCluster {
                cluster: Uuid::from_u128(3),
            },
            summary: "Delete cluster x".into(),
            status: ApprovalStatus::Pending,
            created_at: t,
            expires_at: t + chrono::Duration::minutes(10),
            decided_at: None,
            outcome: None,
        };
        assert_eq!(a.status_at(t), ApprovalStatus::Pending);
        assert_eq!(
            a.status_at(t + chrono::Duration::minutes(10)),
            ApprovalStatus::Expired
        );
        let declined = Approval {
            status: ApprovalStatus::Declined,
            ..a.clone()
        };
        assert_eq!(
            declined.status_at(t + chrono::Duration::hours(1)),
            ApprovalStatus::Declined
        );
        assert_eq!(a.key(), "approval-00000000000000000000000000000001");
    }

    #[test]
    fn outcomes_round_trip() {
        for o in [
            ApprovalOutcome::Done {
                resource: "cluster".into(),
                id: "x".into(),
                cluster_id: Uuid::from_u128(9),
            },
            ApprovalOutcome::Refused {
                code: "cluster_deleting".into(),
                detail: "the cluster is being deleted".into(),
            },
        ] {
            assert_eq!(ApprovalOutcome::from_json(&o.to_json()), Some(o));
        }
    }
}
