//! Gateway auth server routes.

use actix_web::http::StatusCode;
use actix_web::web::Path;
use actix_web::{HttpRequest, HttpResponse};
use wire::request::auth_server::{AuthServerPatch, CreateAuthServerRequest, CredentialRequest};

use crate::conditional::{Conditional, tagged};
use crate::extract::{Body, Ctx, Id, Idempotency, Query};
use crate::problem::ApiError;
use crate::query;
use crate::render::{EmptyRender, JsonRender, answer, fresh, json};
use domain::service::Command;
use wire::auth_server::{AuthServerList, AuthServerView, CredentialView};

/// The organization's auth servers, optionally of one environment.
#[utoipa::path(get, path = "/v1/public/gateway/auth-servers", tag = "gateway auth servers",
    params(("organization" = Option<String>, Query, description = "Organization slug or id; wins over the header"),
           ("environment" = Option<String>, Query, description = "Only servers of this environment (a DNS label)",
            pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63)),
    responses((status = 200, description = "The auth servers", body = AuthServerList)))]
pub async fn list_auth_servers(ctx: Ctx, q: Query) -> Result<HttpResponse, ApiError> {
    let environment = query::environment(q.get("environment"))?;
    let items = ctx
        .services
        .list_auth_servers(&ctx.caller, &ctx.organization(&q), environment)
        .await?;
    Ok(json(
        StatusCode::OK,
        &AuthServerList {
            items: items.iter().map(AuthServerView::from).collect(),
        },
    ))
}

/// Creates an auth server. Secrets are write-only.
#[utoipa::path(post, path = "/v1/public/gateway/auth-servers", tag = "gateway auth servers", request_body(content = CreateAuthServerRequest, example = json!({"organization": "acme", "name": "partners", "environment": "production", "type": "token", "config": {"tokens": ["partner-token-7f3c9a1e2b4d"]}})),
    responses((status = 201, description = "Created", body = AuthServerView,
               headers(("Location" = String, description = "The auth server's URL")))))]
pub async fn create_auth_server(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    body: Body<CreateAuthServerRequest>,
) -> Result<HttpResponse, ApiError> {
    let render = JsonRender::new(StatusCode::CREATED, &ctx.request_id).with_location(
        |s: &domain::service::Scheduled<domain::model::auth_server::AuthServerView>| {
            format!("/v1/public/gateway/auth-servers/{}", s.id)
        },
    );
    let a = ctx
        .services
        .create_auth_server(
            Command::keyed(&ctx.caller, idem.keyed(&req, Some(&body.json), &render)),
            body.value.into(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// One auth server.
#[utoipa::path(get, path = "/v1/public/gateway/auth-servers/{id}", tag = "gateway auth servers",
    params(("id" = String, Path, description = "Auth server id")),
    responses((status = 200, description = "The auth server", body = AuthServerView)))]
pub async fn get_auth_server(
    ctx: Ctx,
    id: Path<Id>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let v = ctx.services.get_auth_server(&ctx.caller, id.0).await?;
    Ok(cond.read(&AuthServerView::from(&v)))
}

/// Changes name, environment, non-secret config fields, or sets a new client secret.
#[utoipa::path(patch, path = "/v1/public/gateway/auth-servers/{id}", tag = "gateway auth servers", request_body(content = AuthServerPatch, example = json!({"name": "partners-eu"})),
    params(("id" = String, Path, description = "Auth server id")),
    responses((status = 200, description = "The changed auth server", body = AuthServerView)))]
pub async fn patch_auth_server(
    ctx: Ctx,
    id: Path<Id>,
    body: Body<AuthServerPatch>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let a = ctx
        .services
        .patch_auth_server(
            Command::new(&ctx.caller),
            id.0,
            body.value.into(),
            cond.expect(),
        )
        .await?;
    let v = fresh(a)?;
    Ok(tagged(StatusCode::OK, &AuthServerView::from(&v.value)))
}

/// Deletes an auth server.
#[utoipa::path(delete, path = "/v1/public/gateway/auth-servers/{id}", tag = "gateway auth servers",
    params(("id" = String, Path, description = "Auth server id")),
    responses((status = 204, description = "Deleted")))]
pub async fn delete_auth_server(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    id: Path<Id>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let render = EmptyRender::new(&ctx.request_id);
    let a = ctx
        .services
        .delete_auth_server(
            Command::keyed(&ctx.caller, idem.keyed(&req, None, &render)),
            id.0,
            cond.expect(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// Adds a credential: `{"username", "password"}` to a basic server, `{"token"}` to a token server.
#[utoipa::path(post, path = "/v1/public/gateway/auth-servers/{id}/credentials", tag = "gateway auth servers", request_body(content = CredentialRequest, example = json!({"token": "second-partner-token-4d8e91"})),
    params(("id" = String, Path, description = "Auth server id")),
    responses((status = 201, description = "The new entry", body = CredentialView)))]
pub async fn add_credential(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    id: Path<Id>,
    body: Body<CredentialRequest>,
) -> Result<HttpResponse, ApiError> {
    let render = JsonRender::new(StatusCode::CREATED, &ctx.request_id);
    let a = ctx
        .services
        .add_credential(
            Command::keyed(&ctx.caller, idem.keyed(&req, Some(&body.json), &render)),
            id.0,
            body.value.into(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// Removes a credential; never the last one.
#[utoipa::path(delete, path = "/v1/public/gateway/auth-servers/{id}/credentials/{credential_id}", tag = "gateway auth servers",
    params(("id" = String, Path, description = "Auth server id"), ("credential_id" = String, Path, description = "Credential id")),
    responses((status = 204, description = "Removed")))]
pub async fn remove_credential(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    path: Path<(Id, Id)>,
) -> Result<HttpResponse, ApiError> {
    let (id, cred) = path.into_inner();
    let render = EmptyRender::new(&ctx.request_id);
    let a = ctx
        .services
        .remove_credential(
            Command::keyed(&ctx.caller, idem.keyed(&req, None, &render)),
            id.0,
            cred.0,
        )
        .await?;
    Ok(answer(&render, a))
}
