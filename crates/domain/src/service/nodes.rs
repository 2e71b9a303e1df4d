//! Node use cases: list (per cluster or per pool) and delete (the node is replaced).

use serde_json::json;
use uuid::Uuid;

use crate::access::{self, Access};
use crate::error::{Conflict, DomainError, Resource};
use crate::model::audit::{Audit, AuditAction, AuditResource};
use crate::model::cluster::Cluster;
use crate::model::identity::Caller;
use crate::model::node::{Node, NodeEvent};
use crate::names::NodeName;
use crate::ports::storage::Change;
use crate::service::idempotency::Answer;
use crate::service::{
    Command, Decision, Scheduled, Services, Target, require_changeable, store_error,
};

impl Services {
    /// Lists a cluster's nodes, or those of one of its pools.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn list_nodes(
        &self,
        caller: &Caller,
        id: Uuid,
        pool: Option<&str>,
    ) -> Result<Vec<Node>, DomainError> {
        let cluster = self.live_cluster(id).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        if let Some(p) = pool
            && cluster.pool(p).is_none()
        {
            return Err(DomainError::NotFound(Resource::NodePool));
        }
        self.ports
            .clusters
            .nodes(cluster.id, pool.map(str::to_owned))
            .await
            .map_err(store_error)
    }

    /// Deletes a node: answers with the node `Deleting`; its pool keeps its count, so the node
    /// is replaced.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn delete_node(
        &self,
        cmd: Command<'_, Scheduled<Node>>,
        id: Uuid,
        node: &str,
    ) -> Result<Answer<Scheduled<Node>>, DomainError> {
        // A name that breaks the node regex cannot exist.
        let name = NodeName::parse(node).map_err(|_| DomainError::NotFound(Resource::Node));
        self.mutate(
            cmd,
            Target::of(id),
            None,
            async |c: &Cluster| {
                let name = name.clone()?;
                self.ports
                    .clusters
                    .nodes(c.id, None)
                    .await
                    .map_err(store_error)?
                    .into_iter()
                    .find(|n| n.name == name)
                    .ok_or(DomainError::NotFound(Resource::Node))
            },
            async |c: &Cluster, current: Node| {
                require_changeable(c)?;
                let status = current.status.apply(NodeEvent::Delete).map_err(|_| {
                    DomainError::Conflict(Conflict::InvalidState {
                        resource: Resource::Node,
                        status: current.status.as_str(),
                        operation: "deleted",
                    })
                })?;
                let mut next = current;
                next.status = status;
                let audit = Audit::new(
                    AuditResource::Node,
                    format!("{}/{}", c.id, next.name.as_str()),
                    AuditAction::ReplacementStarted,
                    json!({"node_pool": next.pool}),
                );
                Ok(Decision::schedule(
                    vec![Change::UpdateNode(next.clone())],
                    audit,
                    next,
                ))
            },
        )
        .await
    }
}
