//! `GET /v1/catalog`.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use wire::catalog::CatalogView;

use crate::extract::{Ctx, Query};
use crate::problem::ApiError;
use crate::render::json;

/// The zone's catalog: versions, machine tiers, defaults and constraints.
#[utoipa::path(get, path = "/v1/catalog", tag = "catalog",
    params(("zone" = Option<String>, Query, description = "Zone id; the default zone when omitted"),
           ("organization" = Option<String>, Query, description = "Organization slug or id; wins over the header")),
    responses((status = 200, description = "The catalog", body = CatalogView)))]
pub async fn get_catalog(ctx: Ctx, q: Query) -> Result<HttpResponse, ApiError> {
    let view = ctx
        .services
        .catalog(&ctx.caller, &ctx.organization(&q), q.get("zone"))
        .await?;
    Ok(json(StatusCode::OK, &CatalogView::from(&view)))
}
