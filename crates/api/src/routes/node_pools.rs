//! Node pool and node routes.

use actix_web::http::StatusCode;
use actix_web::web::Path;
use actix_web::{HttpRequest, HttpResponse};
use wire::request::node_pool::{NodePoolPatch, NodePoolRequest};

use crate::conditional::Conditional;
use crate::extract::{Body, Ctx, Id, Idempotency};
use crate::problem::ApiError;
use crate::render::{JsonRender, answer, json};
use domain::service::Command;
use wire::cluster::{self as w, NodeList, NodePoolList};

/// The cluster's node pools.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/node-pools", tag = "node pools",
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 200, description = "The pools", body = NodePoolList)))]
pub async fn list_node_pools(ctx: Ctx, id: Path<Id>) -> Result<HttpResponse, ApiError> {
    let items = ctx.services.list_node_pools(&ctx.caller, id.0).await?;
    Ok(json(
        StatusCode::OK,
        &NodePoolList {
            items: items.iter().map(w::NodePool::from).collect(),
        },
    ))
}

/// Adds a node pool: 202 with the pool `Provisioning`.
#[utoipa::path(post, path = "/v1/public/clusters/{id}/node-pools", tag = "node pools", request_body(content = NodePoolRequest, example = json!({"name": "batch", "size": "kube.c5.xlarge", "count": 1, "auto_scale": true, "min_nodes": 1, "max_nodes": 3, "labels": {"workload": "batch"}})),
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 202, description = "Accepted", body = w::NodePool)))]
pub async fn create_node_pool(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    id: Path<Id>,
    body: Body<NodePoolRequest>,
) -> Result<HttpResponse, ApiError> {
    let render = JsonRender::new(StatusCode::ACCEPTED, &ctx.request_id);
    let a = ctx
        .services
        .create_node_pool(
            Command::keyed(&ctx.caller, idem.keyed(&req, Some(&body.json), &render)),
            id.0,
            body.value.into(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// Resizes a pool or replaces its labels or tags: 202.
#[utoipa::path(patch, path = "/v1/public/clusters/{id}/node-pools/{pool}", tag = "node pools", request_body(content = NodePoolPatch, example = json!({"count": 3})),
    params(("id" = String, Path, description = "Cluster id"), ("pool" = String, Path, description = "Pool name")),
    responses((status = 202, description = "Accepted", body = w::NodePool)))]
pub async fn patch_node_pool(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    path: Path<(Id, String)>,
    body: Body<NodePoolPatch>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let (id, pool) = path.into_inner();
    let render = JsonRender::new(StatusCode::ACCEPTED, &ctx.request_id);
    let a = ctx
        .services
        .patch_node_pool(
            Command::keyed(&ctx.caller, idem.keyed(&req, Some(&body.json), &render)),
            id.0,
            &pool,
            body.value.into(),
            cond.expect(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// Deletes a pool: 202 with the pool `Deleting`. The last pool cannot be deleted.
#[utoipa::path(delete, path = "/v1/public/clusters/{id}/node-pools/{pool}", tag = "node pools",
    params(("id" = String, Path, description = "Cluster id"), ("pool" = String, Path, description = "Pool name")),
    responses((status = 202, description = "Accepted", body = w::NodePool)))]
pub async fn delete_node_pool(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    path: Path<(Id, String)>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let (id, pool) = path.into_inner();
    let render = JsonRender::new(StatusCode::ACCEPTED, &ctx.request_id);
    let a = ctx
        .services
        .delete_node_pool(
            Command::keyed(&ctx.caller, idem.keyed(&req, None, &render)),
            id.0,
            &pool,
            cond.expect(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// The cluster's worker nodes.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/nodes", tag = "nodes",
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 200, description = "The nodes", body = NodeList)))]
pub async fn list_nodes(ctx: Ctx, id: Path<Id>) -> Result<HttpResponse, ApiError> {
    let items = ctx.services.list_nodes(&ctx.caller, id.0, None).await?;
    Ok(json(
        StatusCode::OK,
        &NodeList {
            items: items.iter().map(w::Node::from).collect(),
        },
    ))
}

/// One pool's worker nodes.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/node-pools/{pool}/nodes", tag = "nodes",
    params(("id" = String, Path, description = "Cluster id"), ("pool" = String, Path, description = "Pool name")),
    responses((status = 200, description = "The pool's nodes", body = NodeList)))]
pub async fn list_pool_nodes(ctx: Ctx, path: Path<(Id, String)>) -> Result<HttpResponse, ApiError> {
    let (id, pool) = path.into_inner();
    let items = ctx
        .services
        .list_nodes(&ctx.caller, id.0, Some(&pool))
        .await?;
    Ok(json(
        StatusCode::OK,
        &NodeList {
            items: items.iter().map(w::Node::from).collect(),
        },
    ))
}

/// Deletes a node: 202 with the node `Deleting`; the pool keeps its count, so it is replaced.
#[utoipa::path(delete, path = "/v1/public/clusters/{id}/nodes/{node}", tag = "nodes",
    params(("id" = String, Path, description = "Cluster id"), ("node" = String, Path, description = "Node name")),
    responses((status = 202, description = "Accepted", body = w::Node)))]
pub async fn delete_node(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    path: Path<(Id, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, node) = path.into_inner();
    let render = JsonRender::new(StatusCode::ACCEPTED, &ctx.request_id);
    let a = ctx
        .services
        .delete_node(
            Command::keyed(&ctx.caller, idem.keyed(&req, None, &render)),
            id.0,
            &node,
        )
        .await?;
    Ok(answer(&render, a))
}
