//! A cluster's operations: each change that handed work to provisioning, followed to its end.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::web::Path;
use domain::model::operation::OperationStatus;
use wire::operation::{Operation, OperationList};

use crate::extract::{Ctx, Id, Query};
use crate::problem::{ApiError, RequestError};
use crate::query;
use crate::render::json;

/// The cluster's operations, newest first: what is in flight and what finished. They stay
/// readable after the cluster is deleted.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/operations", tag = "operations",
    params(("id" = String, Path, description = "Cluster id"),
           ("status" = Option<String>, Query, description = "Only operations in this status (`running`, `succeeded`, `failed`, `cancelled`)"),
           ("page" = Option<u32>, Query, description = "From 1; default 1", minimum = 1, maximum = 2147483647),
           ("size" = Option<u32>, Query, description = "1-100; default 20", minimum = 1, maximum = 100)),
    responses((status = 200, description = "A page of operations", body = OperationList)))]
pub async fn list_operations(ctx: Ctx, id: Path<Id>, q: Query) -> Result<HttpResponse, ApiError> {
    let page = query::page(q.get("page"), q.get("size"))?;
    let status = q
        .get("status")
        .map(|s| {
            OperationStatus::parse(s).ok_or_else(|| RequestError::InvalidQuery {
                parameter: "status",
                message: "must be running, succeeded, failed or cancelled".into(),
            })
        })
        .transpose()?;
    let found = ctx
        .services
        .list_operations(&ctx.caller, id.0, status, page)
        .await?;
    Ok(json(
        StatusCode::OK,
        &OperationList {
            items: found.items.iter().map(Operation::from).collect(),
            page: found.page,
            size: found.size,
            total: found.total,
        },
    ))
}

/// One operation: the `Location` (and `Operation-Location`) of the answer that started it.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/operations/{operation}", tag = "operations",
    params(("id" = String, Path, description = "Cluster id"),
           ("operation" = String, Path, description = "Operation id")),
    responses((status = 200, description = "The operation", body = Operation)))]
pub async fn get_operation(ctx: Ctx, path: Path<(Id, Id)>) -> Result<HttpResponse, ApiError> {
    let (id, operation) = path.into_inner();
    let op = ctx
        .services
        .get_operation(&ctx.caller, id.0, operation.0)
        .await?;
    Ok(json(StatusCode::OK, &Operation::from(&op)))
}
