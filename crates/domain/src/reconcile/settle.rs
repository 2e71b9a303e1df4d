//! Settling the operations of a cluster once provisioning finished its work on it: each open
//! operation ends by the state its object settled in.

use uuid::Uuid;

use crate::model::cluster::ClusterPhase;
use crate::model::elastic_ip::ElasticIpStatus;
use crate::model::firewall::FirewallRuleStatus;
use crate::model::operation::{ClusterOperation, OperationKind, OperationStatus, Settled};
use crate::ports::storage::StoreError;
use crate::reconcile::{ClusterState, load_state};
use crate::service::Ports;

/// Settles the open operations of `generation` and before, now that the reconcile of that
/// generation finished: the cluster is as asked (or failed). Once the cluster is gone nothing
/// more will happen to it, so every open operation ends, whatever its generation (the
/// deletion removed the cluster's work queue row with it). Returns how many were settled.
pub async fn settle_operations(
    ports: &Ports,
    cluster_id: Uuid,
    generation: i64,
) -> Result<usize, StoreError> {
    let state = load_state(ports, cluster_id).await?;
    let up_to = if state.is_some() {
        generation
    } else {
        i64::MAX
    };
    let open = ports.operations.open_operations(cluster_id, up_to).await?;
    if open.is_empty() {
        return Ok(0);
    }
    let settled: Vec<Settled> = open
        .iter()
        .filter_map(|op| settle(op, state.as_ref()))
        .collect();
    let n = settled.len();
    if n > 0 {
        ports
            .operations
            .settle_operations(cluster_id, settled, ports.clock.now())
            .await?;
    }
    Ok(n)
}

/// How an open operation ended, now that provisioning finished its work on the cluster
/// (`state` is `None` once the cluster is gone). `None` while its object has not settled.
pub fn settle(op: &ClusterOperation, state: Option<&ClusterState>) -> Option<Settled> {
    use OperationStatus::{Cancelled, Failed, Succeeded};
    let Some(state) = state else {
        return Some(match op.kind {
            OperationKind::Delete => Settled::of(op, Succeeded, None),
            _ => Settled::of(
                op,
                Cancelled,
                Some("the cluster was deleted before this change was carried out".into()),
            ),
        });
    };
    let cluster = &state.cluster;
    if cluster.phase == ClusterPhase::Failed {
        let why = cluster
            .failure_reason
            .clone()
            .unwrap_or_else(|| "provisioning failed".into());
        let reason = match op.kind {
            OperationKind::Create => why,
            _ => format!("the cluster failed: {why}"),
        };
        return Some(Settled::of(op, Failed, Some(reason)));
    }
    let id = op.resource_id.as_str();
    match op.kind {
        OperationKind::ElasticIpAllocate => {
            match state.elastic_ips.iter().find(|e| e.id.to_string() == id) {
                Some(e) if e.status == ElasticIpStatus::Failed => Some(Settled::of(
                    op,
                    Failed,
                    e.failure_reason
                        .clone()
                        .or(Some("allocation failed".into())),
                )),
                Some(e) if e.status != ElasticIpStatus::Ready => None,
                // Ready, or released meanwhile.
                _ => Some(Settled::of(op, Succeeded, None)),
            }
        }
        OperationKind::FirewallRuleCreate => {
            match state.firewall_rules.iter().find(|r| r.id.to_string() == id) {
                Some(r) if r.status == FirewallRuleStatus::Failed => Some(Settled::of(
                    op,
                    Failed,
                    r.failure_reason
                        .clone()
                        .or(Some("the rule could not be applied".into())),
                )),
                Some(r) if r.status != FirewallRuleStatus::Active => None,
                _ => Some(Settled::of(op, Succeeded, None)),
            }
        }
        OperationKind::Create if cluster.phase != ClusterPhase::Provisioned => None,
        OperationKind::Upgrade if cluster.upgrade.is_some() => None,
        _ => Some(Settled::of(op, Succeeded, None)),
    }
}
