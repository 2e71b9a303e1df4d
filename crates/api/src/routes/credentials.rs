//! The kubeconfig credentials downloads asked for with a lifetime: list, revoke one, rotate
//! (revoke all and replace the standing credential).

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::web::Path;
use wire::credential::{CredentialList, IssuedCredential, Rotation};

use crate::extract::{Ctx, Id};
use crate::problem::ApiError;
use crate::render::json;

/// The cluster's credentials of their own, newest first, with where each stands. Never a
/// token.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/credentials", tag = "clusters",
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 200, description = "The credentials", body = CredentialList)))]
pub async fn list_credentials(ctx: Ctx, id: Path<Id>) -> Result<HttpResponse, ApiError> {
    let found = ctx.services.list_credentials(&ctx.caller, id.0).await?;
    let now = ctx.services.ports().clock.now();
    Ok(json(
        StatusCode::OK,
        &CredentialList {
            items: found.iter().map(|c| IssuedCredential::at(c, now)).collect(),
        },
    ))
}

/// Revokes one credential at once: the cluster's API server refuses it from now on. Its
/// holder may; anyone else must be super_admin. Revoking it again answers it as it is.
#[utoipa::path(delete, path = "/v1/public/clusters/{id}/credentials/{credential}", tag = "clusters",
    params(("id" = String, Path, description = "Cluster id"),
           ("credential" = String, Path, description = "Credential id")),
    responses((status = 200, description = "The credential, revoked", body = IssuedCredential)))]
pub async fn revoke_credential(ctx: Ctx, path: Path<(Id, Id)>) -> Result<HttpResponse, ApiError> {
    let (id, credential) = path.into_inner();
    let revoked = ctx
        .services
        .revoke_credential(&ctx.caller, id.0, credential.0)
        .await?;
    let now = ctx.services.ports().clock.now();
    Ok(json(StatusCode::OK, &IssuedCredential::at(&revoked, now)))
}

/// Rotates: revokes every credential of the cluster's own and replaces its standing
/// credential, so every kubeconfig downloaded before stops working (a laptop was lost).
#[utoipa::path(delete, path = "/v1/public/clusters/{id}/credentials", tag = "clusters",
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 200, description = "Rotated", body = Rotation)))]
pub async fn rotate_credentials(ctx: Ctx, id: Path<Id>) -> Result<HttpResponse, ApiError> {
    let revoked = ctx.services.rotate_credentials(&ctx.caller, id.0).await?;
    Ok(json(StatusCode::OK, &Rotation { revoked }))
}
