//! What the write pipeline commits changes on: a cluster (with its pools, nodes, Elastic IPs
//! and firewall rules, in one `ClusterWrite` under the cluster's revision) and an auth server
//! (with its credentials, in one `AuthServerWrite` under its `updated_at`).

use async_trait::async_trait;
use uuid::Uuid;

use super::pipeline::{Aggregate, Commit, Refused};
use super::{Services, name_taken, store_error};
use crate::error::{Conflict, DomainError, Resource};
use crate::model::audit::Parent;
use crate::model::auth_server::AuthServer;
use crate::model::cluster::Cluster;
use crate::ports::storage::{
    AuthServerChange, AuthServerWrite, Change, ClusterWrite, Freshness, StoreError, UniqueRule,
};

#[async_trait]
impl Aggregate for Cluster {
    type Changes = Vec<Change>;
    const RESOURCE: Resource = Resource::Cluster;
    const PROVISIONED: bool = true;

    fn organization_id(&self) -> Uuid {
        self.organization_id
    }

    fn is_gone(&self) -> bool {
        Cluster::is_gone(self)
    }

    fn parent(id: Uuid) -> Parent {
        Parent::Cluster(id)
    }

    async fn load(s: &Services, id: Uuid) -> Result<Option<Cluster>, DomainError> {
        s.ports
            .clusters
            .cluster(id, Freshness::Latest)
            .await
            .map_err(store_error)
    }

    fn subject(current: Option<&Cluster>, changes: &Vec<Change>) -> Uuid {
        current.map(|c| c.id).unwrap_or_else(|| {
            changes
                .iter()
                .find_map(|c| match c {
                    Change::InsertCluster(new) => Some(new.id),
                    _ => None,
                })
                .unwrap_or_default()
        })
    }

    async fn commit(s: &Services, c: Commit<'_, Cluster>) -> Result<(), Refused> {
        let write = ClusterWrite {
            cluster_id: Self::subject(c.current, &c.changes),
            expected_revision: c.current.map(|cl| cl.revision),
            changes: c.changes,
            reconcile: c.reconcile,
            zone_capacity: c.zone_capacity,
            idempotency: c.completion,
            cause: s.cause(),
            audit: c.audit,
            operation: c.operation,
            at: s.ports.clock.now(),
        };
        match s.ports.clusters.commit(write).await {
            Ok(_) => Ok(()),
            // A lost race, or an address another allocation took meanwhile: decide again on
            // what won it.
            Err(
                StoreError::RevisionMismatch | StoreError::Duplicate(UniqueRule::ElasticIpAddress),
            ) if c.current.is_some() => Err(Refused::Raced),
            Err(e) => Err(Refused::Failed(match c.naming {
                Some((resource, name)) => name_taken(e, *resource, name),
                None => store_error(e),
            })),
        }
    }
}

/// What a decision on an auth server changes.
pub(crate) enum ServerChange {
    Insert(AuthServer),
    /// The server as it will be stored (credentials included).
    Replace(AuthServer),
    Delete,
}

#[async_trait]
impl Aggregate for AuthServer {
    type Changes = ServerChange;
    const RESOURCE: Resource = Resource::AuthServer;
    const PROVISIONED: bool = false;

    fn organization_id(&self) -> Uuid {
        self.organization_id
    }

    fn parent(id: Uuid) -> Parent {
        Parent::AuthServer(id)
    }

    async fn load(s: &Services, id: Uuid) -> Result<Option<AuthServer>, DomainError> {
        s.ports
            .auth_servers
            .auth_server(id)
            .await
            .map_err(store_error)
    }

    /// Stamped with the time the change will carry (never the same as the stored one), so the
    /// answer built from it shows the `updated_at` a read shows next.
    fn for_decision(&self, s: &Services) -> AuthServer {
        let mut stamped = self.clone();
        stamped.updated_at = s
            .ports
            .clock
            .now()
            .max(self.updated_at + chrono::Duration::microseconds(1));
        stamped
    }

    fn subject(current: Option<&AuthServer>, changes: &ServerChange) -> Uuid {
        match (current, changes) {
            (Some(a), _) => a.id,
            (None, ServerChange::Insert(a) | ServerChange::Replace(a)) => a.id,
            (None, ServerChange::Delete) => Uuid::nil(),
        }
    }

    async fn commit(s: &Services, c: Commit<'_, AuthServer>) -> Result<(), Refused> {
        let Some(audit) = c.audit else {
            return Err(Refused::Failed(DomainError::Internal(
                "an auth server change without its audit event".into(),
            )));
        };
        let (change, name) = match (c.changes, c.current) {
            (ServerChange::Insert(server), _) => {
                let name = server.name.as_str().to_owned();
                (AuthServerChange::Insert(server), name)
            }
            // Decided on the stamped copy (`for_decision`), so it carries its new `updated_at`.
            (ServerChange::Replace(server), Some(current)) => {
                let name = server.name.as_str().to_owned();
                (
                    AuthServerChange::Update {
                        server,
                        expected_updated_at: current.updated_at,
                    },
                    name,
                )
            }
            // Only the version the change was decided on is deleted.
            (ServerChange::Delete, Some(current)) => (
                AuthServerChange::DeleteIfUnchanged {
                    id: current.id,
                    expected_updated_at: current.updated_at,
                },
                current.name.as_str().to_owned(),
            ),
            (_, None) => {
                return Err(Refused::Failed(DomainError::Internal(
                    "an auth server change needs the server it changes".into(),
                )));
            }
        };
        let write = AuthServerWrite {
            change,
            audit,
            idempotency: c.completion,
        };
        match s.ports.auth_servers.write_auth_server(write).await {
            Ok(()) => Ok(()),
            Err(StoreError::RevisionMismatch) if c.current.is_some() => Err(Refused::Raced),
            Err(StoreError::Duplicate(UniqueRule::CredentialName)) => Err(Refused::Failed(
                DomainError::Conflict(Conflict::NameTaken {
                    resource: Resource::Credential,
                    name: String::new(),
                }),
            )),
            Err(e) => Err(Refused::Failed(name_taken(e, Resource::AuthServer, &name))),
        }
    }
}
