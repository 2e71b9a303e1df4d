//! A person's approvals: what their AI assistant asked for, approved or declined by them (the
//! console's Approvals page and `kubesvc approvals` call the same use cases).

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::web::Path;
use wire::approval::{Approval, ApprovalList};

use crate::extract::{Ctx, Id};
use crate::problem::ApiError;
use crate::render::json;

/// The approvals the caller's assistant asked for, newest first (only the caller's own).
#[utoipa::path(get, path = "/v1/public/approvals", tag = "approvals",
    responses((status = 200, description = "The caller's approvals", body = ApprovalList)))]
pub async fn list_approvals(ctx: Ctx) -> Result<HttpResponse, ApiError> {
    let items = ctx.services.approvals(&ctx.caller).await?;
    Ok(json(
        StatusCode::OK,
        &ApprovalList {
            items: items.iter().map(Approval::from).collect(),
        },
    ))
}

/// One of the caller's approvals (anybody else's is 404).
#[utoipa::path(get, path = "/v1/public/approvals/{id}", tag = "approvals",
    params(("id" = String, Path, description = "Approval id")),
    responses((status = 200, description = "The approval", body = Approval)))]
pub async fn get_approval(ctx: Ctx, id: Path<Id>) -> Result<HttpResponse, ApiError> {
    let a = ctx.services.approval(&ctx.caller, id.0).await?;
    Ok(json(StatusCode::OK, &Approval::from(&a)))
}

/// Approves one of the caller's pending approvals: its action runs once, as the caller, and
/// the answer says what became of it. Approving it again answers the same and runs nothing.
/// An assistant's own token cannot approve (403 `assistant_not_allowed`).
#[utoipa::path(post, path = "/v1/public/approvals/{id}/approve", tag = "approvals",
    params(("id" = String, Path, description = "Approval id")),
    responses((status = 200, description = "Approved; `outcome` says what became of the action", body = Approval)))]
pub async fn approve(ctx: Ctx, id: Path<Id>) -> Result<HttpResponse, ApiError> {
    let a = ctx.services.approve(&ctx.caller, id.0).await?;
    Ok(json(StatusCode::OK, &Approval::from(&a)))
}

/// Declines one of the caller's pending approvals: its action never runs.
#[utoipa::path(post, path = "/v1/public/approvals/{id}/decline", tag = "approvals",
    params(("id" = String, Path, description = "Approval id")),
    responses((status = 200, description = "Declined", body = Approval)))]
pub async fn decline(ctx: Ctx, id: Path<Id>) -> Result<HttpResponse, ApiError> {
    let a = ctx.services.decline(&ctx.caller, id.0).await?;
    Ok(json(StatusCode::OK, &Approval::from(&a)))
}
