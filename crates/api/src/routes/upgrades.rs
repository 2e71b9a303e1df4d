//! Upgrade routes: the versions a cluster may move to, and starting an upgrade.

use actix_web::http::StatusCode;
use actix_web::web::Path;
use actix_web::{HttpRequest, HttpResponse};
use domain::service::Command;
use wire::cluster::{self as w, ClusterUpgrades};
use wire::request::upgrade::UpgradeRequest;

use crate::conditional::Conditional;
use crate::extract::{Body, Ctx, Id, Idempotency, ReadFreshness};
use crate::problem::ApiError;
use crate::render::{JsonRender, answer, json};

/// The versions the cluster may be upgraded to, its upgrade in flight and its maintenance
/// policy with the next window's start.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/upgrades", tag = "clusters",
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 200, description = "Where the cluster stands and where it may go", body = ClusterUpgrades)))]
pub async fn list_upgrades(
    ctx: Ctx,
    id: Path<Id>,
    fresh: ReadFreshness,
) -> Result<HttpResponse, ApiError> {
    let o = ctx
        .services
        .list_upgrades(&ctx.caller, id.0, fresh.0)
        .await?;
    Ok(json(StatusCode::OK, &ClusterUpgrades::from(&o)))
}

/// Starts an upgrade (202): the control plane first, then each node pool in turn, node by
/// node within the pool's `max_surge` and `max_unavailable`. The cluster must be Provisioned
/// with nothing else in flight; the version newer, at most one minor version ahead.
#[utoipa::path(post, path = "/v1/public/clusters/{id}/upgrade", tag = "clusters",
    request_body(content = UpgradeRequest, example = json!({"version": "v1.32.6"})),
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 202, description = "The upgrade started; `upgrade` shows it, the operation follows it", body = w::Cluster)))]
pub async fn upgrade_cluster(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    id: Path<Id>,
    body: Body<UpgradeRequest>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let render = JsonRender::new(StatusCode::ACCEPTED, &ctx.request_id);
    let a = ctx
        .services
        .upgrade_cluster(
            Command::keyed(&ctx.caller, idem.keyed(&req, Some(&body.json), &render)),
            id.0,
            body.value.into(),
            cond.expect(),
        )
        .await?;
    Ok(answer(&render, a))
}
