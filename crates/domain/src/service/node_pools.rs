//! Node pool use cases: list, add, change (resize, labels, tags) and delete.

use serde_json::json;
use uuid::Uuid;

use crate::access::{self, Access};
use crate::error::{Conflict, DomainError, Resource};
use crate::input::node_pool::{NodePoolPatch, NodePoolRequest, check_sizing, check_taints};
use crate::input::precondition::Expect;
use crate::input::upgrade::{check_surge, surge_or};
use crate::model::audit::{Audit, AuditAction, AuditResource};
use crate::model::cluster::Cluster;
use crate::model::identity::Caller;
use crate::model::node_pool::{NodePool, PoolEvent, PoolStatus, Taint};
use crate::ports::storage::Change;
use crate::rules::MAX_POOLS;
use crate::service::idempotency::Answer;
use crate::service::{Command, Decision, Scheduled, Services, Target, require_changeable};
use crate::validation::Violations;

fn pool_of<'c>(cluster: &'c Cluster, name: &str) -> Result<&'c NodePool, DomainError> {
    cluster
        .pool(name)
        .ok_or(DomainError::NotFound(Resource::NodePool))
}

fn pool_invalid_state(pool: &NodePool, operation: &'static str) -> DomainError {
    DomainError::Conflict(Conflict::InvalidState {
        resource: Resource::NodePool,
        status: pool.status.as_str(),
        operation,
    })
}

impl Services {
    /// Lists a cluster's node pools.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn list_node_pools(
        &self,
        caller: &Caller,
        id: Uuid,
    ) -> Result<Vec<NodePool>, DomainError> {
        let cluster = self.live_cluster(id).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        Ok(cluster.node_pools)
    }

    /// Adds a node pool: answers with the pool `Provisioning`.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn create_node_pool(
        &self,
        cmd: Command<'_, Scheduled<NodePool>>,
        id: Uuid,
        body: NodePoolRequest,
    ) -> Result<Answer<Scheduled<NodePool>>, DomainError> {
        let mut v = Violations::new();
        let spec = match body.validate(&mut v, "") {
            Some(s) if v.is_empty() => s,
            _ => return Err(DomainError::Validation(v)),
        };
        let name = spec.name.as_str().to_owned();
        self.mutate(
            cmd,
            Target::of(id).naming(Resource::NodePool, name),
            None,
            async |c: &Cluster| Ok(c.clone()),
            async |_, c: Cluster| {
                require_changeable(&c)?;
                if c.node_pools.len() >= MAX_POOLS {
                    return Err(DomainError::validation(
                        "",
                        format!("a cluster has at most {MAX_POOLS} node pools"),
                    ));
                }
                if c.pool(spec.name.as_str()).is_some() {
                    return Err(DomainError::Conflict(Conflict::NameTaken {
                        resource: Resource::NodePool,
                        name: spec.name.as_str().to_owned(),
                    }));
                }
                let tier = self
                    .catalog
                    .zone(&c.zone)
                    .and_then(|z| z.tier(&spec.size))
                    .ok_or_else(|| DomainError::UnknownMachineTier {
                        field: "size".into(),
                        value: spec.size.clone(),
                    })?;
                access::require_credit(self.ports.identity.as_ref(), &c.organization_id).await?;
                let capacity = self.zone_capacity(&c.zone, u64::from(spec.sizing.count));
                let now = self.ports.clock.now();
                let pool = NodePool {
                    name: spec.name.clone(),
                    size: spec.size.clone(),
                    count: spec.sizing.count,
                    auto_scale: spec.sizing.auto_scale,
                    min_nodes: spec.sizing.min_nodes,
                    max_nodes: spec.sizing.max_nodes,
                    labels: spec.labels.clone(),
                    taints: spec.taints.clone(),
                    tags: spec.tags.clone(),
                    root_volume_size_gib: tier.disk_gib,
                    // New nodes run what the control plane runs, even mid-upgrade.
                    version: c.version.clone(),
                    surge: spec.surge,
                    status: PoolStatus::Provisioning,
                    created_at: now,
                    updated_at: now,
                };
                let audit = pool_audit(
                    &c,
                    &pool,
                    AuditAction::Created,
                    json!({
                        "name": pool.name.as_str(),
                        "size": pool.size,
                        "count": pool.count,
                        "auto_scale": pool.auto_scale,
                        "min_nodes": pool.min_nodes,
                        "max_nodes": pool.max_nodes,
                        "labels": pool.labels,
                        "taints": taints_json(&pool.taints),
                        "tags": pool.tags,
                    }),
                );
                Ok(
                    Decision::schedule(vec![Change::InsertPool(pool.clone())], audit, pool)
                        .within(capacity),
                )
            },
        )
        .await
    }

    /// Changes a node pool: a new target replaces the old one, even while `Scaling`.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn patch_node_pool(
        &self,
        cmd: Command<'_, Scheduled<NodePool>>,
        id: Uuid,
        pool_name: &str,
        body: NodePoolPatch,
        expect: Expect<'_, NodePool>,
    ) -> Result<Answer<Scheduled<NodePool>>, DomainError> {
        body.check_shape()?;
        self.mutate(
            cmd,
            Target::of(id),
            expect,
            async |c: &Cluster| pool_of(c, pool_name).cloned(),
            async |c: &Cluster, current: NodePool| {
                require_changeable(c)?;
                if current.status.is_deleting() {
                    return Err(pool_invalid_state(&current, "changed"));
                }
                let next = merge_patch(&current, &body)?;
                let adds_nodes = next.count > current.count
                    || next.max_nodes.unwrap_or(0) > current.max_nodes.unwrap_or(0);
                if adds_nodes {
                    access::require_credit(self.ports.identity.as_ref(), &c.organization_id)
                        .await?;
                }
                let capacity = self
                    .zone_capacity(&c.zone, u64::from(next.count.saturating_sub(current.count)));
                let mut next = next;
                let resized = (next.count, next.auto_scale, next.min_nodes, next.max_nodes)
                    != (
                        current.count,
                        current.auto_scale,
                        current.min_nodes,
                        current.max_nodes,
                    );
                if resized {
                    next.status = current
                        .status
                        .apply(PoolEvent::Resize)
                        .map_err(|_| pool_invalid_state(&current, "changed"))?;
                }
                next.updated_at = self.ports.clock.now();
                let audit = pool_audit(
                    c,
                    &next,
                    AuditAction::Updated,
                    pool_changes(&current, &next),
                );
                Ok(
                    Decision::schedule(vec![Change::UpdatePool(next.clone())], audit, next)
                        .within(capacity),
                )
            },
        )
        .await
    }

    /// Deletes a node pool: answers with the pool `Deleting`; never the last pool
    /// (`Conflict::LastPool`).
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn delete_node_pool(
        &self,
        cmd: Command<'_, Scheduled<NodePool>>,
        id: Uuid,
        pool_name: &str,
        expect: Expect<'_, NodePool>,
    ) -> Result<Answer<Scheduled<NodePool>>, DomainError> {
        self.mutate(
            cmd,
            Target::of(id),
            expect,
            async |c: &Cluster| pool_of(c, pool_name).cloned(),
            async |c: &Cluster, current: NodePool| {
                require_changeable(c)?;
                let status = current
                    .status
                    .apply(PoolEvent::Delete)
                    .map_err(|_| pool_invalid_state(&current, "deleted"))?;
                if c.live_pools().count() <= 1 {
                    return Err(DomainError::Conflict(Conflict::LastPool));
                }
                let mut next = current;
                next.status = status;
                next.updated_at = self.ports.clock.now();
                let audit = pool_audit(c, &next, AuditAction::DeletionStarted, json!({}));
                Ok(Decision::schedule(
                    vec![Change::UpdatePool(next.clone())],
                    audit,
                    next,
                ))
            },
        )
        .await
    }
}

/// A pool's audit record: a pool is named by its cluster and its name.
fn pool_audit(
    cluster: &Cluster,
    pool: &NodePool,
    action: AuditAction,
    changes: serde_json::Value,
) -> Audit {
    Audit::new(
        AuditResource::NodePool,
        format!("{}/{}", cluster.id, pool.name.as_str()),
        action,
        changes,
    )
}

/// The fields a change of a pool moved, each as `{"from": …, "to": …}`.
fn pool_changes(before: &NodePool, after: &NodePool) -> serde_json::Value {
    let mut changed = serde_json::Map::new();
    let mut field = |name: &str, from: serde_json::Value, to: serde_json::Value| {
        if from != to {
            changed.insert(name.into(), json!({"from": from, "to": to}));
        }
    };
    field("count", json!(before.count), json!(after.count));
    field(
        "auto_scale",
        json!(before.auto_scale),
        json!(after.auto_scale),
    );
    field("min_nodes", json!(before.min_nodes), json!(after.min_nodes));
    field("max_nodes", json!(before.max_nodes), json!(after.max_nodes));
    field("labels", json!(before.labels), json!(after.labels));
    field(
        "taints",
        taints_json(&before.taints),
        taints_json(&after.taints),
    );
    field("tags", json!(before.tags), json!(after.tags));
    changed.into()
}

/// Taints as the audit trail writes them: `{key, value, effect}` each.
pub(crate) fn taints_json(taints: &[Taint]) -> serde_json::Value {
    taints
        .iter()
        .map(|t| json!({"key": t.key, "value": t.value, "effect": t.effect.as_str()}))
        .collect()
}

/// Applies a patch to a pool and checks the merged sizing with the create rules. With
/// auto_scale on and no count given, the current count is clamped into the new bounds.
pub(crate) fn merge_patch(
    current: &NodePool,
    patch: &NodePoolPatch,
) -> Result<NodePool, DomainError> {
    let auto_scale = patch.auto_scale.flatten().unwrap_or(current.auto_scale);
    let min = patch
        .min_nodes
        .flatten()
        .unwrap_or(i64::from(current.min_nodes));
    let max = patch
        .max_nodes
        .flatten()
        .or(current.max_nodes.map(i64::from));
    let count = match patch.count.flatten() {
        Some(c) => c,
        None if auto_scale => {
            let c = i64::from(current.count).max(min);
            max.map_or(c, |m| c.min(m))
        }
        None => i64::from(current.count),
    };
    let mut v = Violations::new();
    let sizing = check_sizing(&mut v, "", Some(count), auto_scale, Some(min), max);
    let (max_surge, max_unavailable) = check_surge(
        &mut v,
        "",
        patch.max_surge.flatten(),
        patch.max_unavailable.flatten(),
    );
    let sizing = match sizing {
        Some(s) if v.is_empty() => s,
        _ => return Err(DomainError::Validation(v)),
    };
    let mut next = current.clone();
    next.count = sizing.count;
    next.auto_scale = sizing.auto_scale;
    next.min_nodes = sizing.min_nodes;
    next.max_nodes = sizing.max_nodes;
    if let Some(Some(labels)) = &patch.labels {
        next.labels = labels.clone();
    }
    if let Some(Some(taints)) = &patch.taints {
        let mut v = Violations::new();
        next.taints = check_taints(&mut v, "taints", taints);
        if !v.is_empty() {
            return Err(DomainError::Validation(v));
        }
    }
    if let Some(Some(tags)) = &patch.tags {
        next.tags = tags.clone();
    }
    next.surge = surge_or(current.surge, max_surge, max_unavailable);
    Ok(next)
}
