//! Reading a cluster's operations. They are written with the changes that start them
//! (`change_cluster`, `create_cluster`) and settled by provisioning
//! (`reconcile::settle_operations`).

use uuid::Uuid;

use crate::access::{self, Access};
use crate::error::{DomainError, Resource};
use crate::model::identity::Caller;
use crate::model::operation::{ClusterOperation, OperationStatus};
use crate::ports::storage::{Page, PageRequest};
use crate::service::{Services, store_error};

/// A page of a cluster's operations, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct OperationPage {
    pub items: Vec<ClusterOperation>,
    pub page: u32,
    pub size: u32,
    pub total: u64,
}

impl Services {
    /// A cluster's operations, newest first, optionally only those in one status. They stay
    /// readable once the cluster is deleted, so a client can see its deletion succeed.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn list_operations(
        &self,
        caller: &Caller,
        cluster_id: Uuid,
        status: Option<OperationStatus>,
        page: PageRequest,
    ) -> Result<OperationPage, DomainError> {
        let cluster = self.any_cluster(cluster_id).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        let Page { items, total } = self
            .ports
            .operations
            .cluster_operations(cluster.id, status, page)
            .await
            .map_err(store_error)?;
        Ok(OperationPage {
            items,
            page: page.page,
            size: page.size,
            total,
        })
    }

    /// One operation of a cluster.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn get_operation(
        &self,
        caller: &Caller,
        cluster_id: Uuid,
        id: Uuid,
    ) -> Result<ClusterOperation, DomainError> {
        let cluster = self.any_cluster(cluster_id).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        self.ports
            .operations
            .cluster_operation(cluster.id, id)
            .await
            .map_err(store_error)?
            .ok_or(DomainError::NotFound(Resource::Operation))
    }
}
