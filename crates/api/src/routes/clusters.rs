//! Cluster routes.

use crate::query::{self, KubeconfigFormat, kubeconfig_format};
use actix_web::http::StatusCode;
use actix_web::web::Path;
use actix_web::{HttpRequest, HttpResponse};
use domain::input::cluster::ListClusters;
use domain::model::cluster::Cluster;
use domain::service::{KubeconfigAnswer, KubeconfigRequest, Scheduled};
use wire::request::cluster::{ClusterPatch, CreateClusterRequest, ExposurePatch};

use crate::conditional::{Conditional, tagged};
use crate::extract::{Body, Ctx, Id, Idempotency, Query, ReadFreshness};
use crate::problem::ApiError;
use crate::render::{JsonRender, answer, fresh, json, with_operation};
use domain::service::Command;
use wire::cluster::{self as w, ClusterList, ClusterState, KubeconfigJson, KubeconfigPending};

/// The `Cache-Control` request header of the cluster reads, as the OpenAPI document says it.
const CACHE_CONTROL: &str = "`no-cache` reads the database. Without it the answer may come \
from the server's watch cache: it always shows the writes made through this server process, \
and a write made through another process once the database's change notification reached \
this one (normally within milliseconds). docs/api.md, \"Consistency of reads\", says the whole model.";

fn location(c: &Cluster) -> String {
    format!("/v1/public/clusters/{}", c.id)
}

/// The media type the kubeconfig's YAML is sent as: `application/yaml`, or `text/plain` to a
/// client whose `Accept` takes plain text and not YAML.
fn yaml_media_type(req: &HttpRequest) -> &'static str {
    let accepted: Vec<String> = req
        .headers()
        .get_all(actix_web::http::header::ACCEPT)
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|m| {
            m.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .collect();
    let takes = |m: &str| accepted.iter().any(|a| a == m);
    if takes("text/plain") && !takes("application/yaml") && !takes("*/*") {
        "text/plain; charset=utf-8"
    } else {
        "application/yaml"
    }
}

/// The resolved organization's clusters, one page.
#[utoipa::path(get, path = "/v1/public/clusters", tag = "clusters",
    params(("organization" = Option<String>, Query, description = "Organization slug or id; wins over the header"),
           ("zone" = Option<String>, Query, description = "Only clusters of this zone"),
           ("page" = Option<u32>, Query, description = "From 1; default 1", minimum = 1, maximum = 2147483647),
           ("size" = Option<u32>, Query, description = "1-100; default 20", minimum = 1, maximum = 100),
           ("Cache-Control" = Option<String>, Header, description = CACHE_CONTROL)),
    responses((status = 200, description = "A page of clusters", body = ClusterList)))]
pub async fn list_clusters(
    ctx: Ctx,
    q: Query,
    fresh: ReadFreshness,
) -> Result<HttpResponse, ApiError> {
    let request = query::page(q.get("page"), q.get("size"))?;
    let page = ctx
        .services
        .list_clusters(
            &ctx.caller,
            ListClusters {
                org: ctx.organization(&q),
                zone: q.get("zone").map(str::to_owned),
                page: request,
                freshness: fresh.0,
            },
        )
        .await?;
    Ok(json(
        StatusCode::OK,
        &ClusterList {
            items: page.items.iter().map(w::Cluster::from).collect(),
            page: page.page,
            size: page.size,
            total: page.total,
        },
    ))
}

/// Creates a cluster in the organization named in the body.
#[utoipa::path(post, path = "/v1/public/clusters", tag = "clusters", request_body(content = CreateClusterRequest, example = json!({"organization": "acme", "name": "web-1", "zone": "zone-1", "version": "v1.32.4", "description": "The storefront and its workers", "tags": ["shop"], "node_pools": [{"name": "default", "size": "kube.c5.large", "count": 2}]})),
    responses((status = 201, description = "Created; provisioning starts", body = w::Cluster,
               headers(("Location" = String, description = "The cluster's URL")))))]
pub async fn create_cluster(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    body: Body<CreateClusterRequest>,
) -> Result<HttpResponse, ApiError> {
    let render = JsonRender::new(StatusCode::CREATED, &ctx.request_id)
        .with_location(|c: &Scheduled<Cluster>| location(c));
    let a = ctx
        .services
        .create_cluster(
            Command::keyed(&ctx.caller, idem.keyed(&req, Some(&body.json), &render)),
            body.value.into(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// One cluster.
#[utoipa::path(get, path = "/v1/public/clusters/{id}", tag = "clusters",
    params(("id" = String, Path, description = "Cluster id"),
           ("Cache-Control" = Option<String>, Header, description = CACHE_CONTROL)),
    responses((status = 200, description = "The cluster", body = w::Cluster)))]
pub async fn get_cluster(
    ctx: Ctx,
    id: Path<Id>,
    fresh: ReadFreshness,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let c = ctx.services.get_cluster(&ctx.caller, id.0, fresh.0).await?;
    Ok(cond.read(&w::Cluster::from(&c)))
}

/// Changes the description and tags (200), or the control-plane firewall (202, an operation).
#[utoipa::path(patch, path = "/v1/public/clusters/{id}", tag = "clusters", request_body(content = ClusterPatch, example = json!({"description": "The storefront, its workers and the nightly batch", "tags": ["shop", "batch"], "control_plane_firewall": {"enabled": true, "allowed_addresses": ["203.0.113.0/24", "2001:db8::/32"]}})),
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 200, description = "The changed cluster (nothing handed to provisioning)", body = w::Cluster),
              (status = 202, description = "A control-plane firewall change started; `control_plane_firewall_change` shows it", body = w::Cluster)))]
pub async fn patch_cluster(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    id: Path<Id>,
    body: Body<ClusterPatch>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    // A retried firewall change answers as the first did (202 and its operation), rather than
    // 409 for the change the first one started.
    let render = JsonRender::new(StatusCode::OK, &ctx.request_id).accepted_when_scheduled();
    let a = ctx
        .services
        .patch_cluster(
            Command::keyed(&ctx.caller, idem.keyed(&req, Some(&body.json), &render)),
            id.0,
            body.value.into(),
            cond.expect(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// Starts an exposure change (202), or answers 200 when the cluster already has it.
#[utoipa::path(patch, path = "/v1/public/clusters/{id}/exposure", tag = "clusters", request_body(content = ExposurePatch, example = json!({"exposure": "private"})),
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 202, description = "The change started; `exposure_change` shows its target", body = w::Cluster),
              (status = 200, description = "Already at that exposure: nothing started", body = w::Cluster)))]
pub async fn change_exposure(
    ctx: Ctx,
    id: Path<Id>,
    body: Body<ExposurePatch>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let a = ctx
        .services
        .change_exposure(
            Command::new(&ctx.caller),
            id.0,
            body.value.into(),
            cond.expect(),
        )
        .await?;
    let o = fresh(a)?;
    let status = if o.started {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok(with_operation(
        tagged(status, &w::Cluster::from(&o.cluster)),
        o.operation.as_ref(),
    ))
}

/// Deletes a cluster: 202 with the cluster `Deleting`; gone (404) once deletion completes.
#[utoipa::path(delete, path = "/v1/public/clusters/{id}", tag = "clusters",
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 202, description = "Deletion accepted", body = w::Cluster)))]
pub async fn delete_cluster(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    id: Path<Id>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let render = JsonRender::new(StatusCode::ACCEPTED, &ctx.request_id);
    let a = ctx
        .services
        .delete_cluster(
            Command::keyed(&ctx.caller, idem.keyed(&req, None, &render)),
            id.0,
            cond.expect(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// The state long-poll: answers at once when the cluster's version is past `since`, else when
/// it changes or after `timeout_seconds`.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/state", tag = "clusters",
    params(("id" = String, Path, description = "Cluster id"),
           ("since" = Option<i64>, Query, description = "Version already seen; default 0", minimum = 0),
           ("timeout_seconds" = Option<u32>, Query, description = "0-60; default 25", minimum = 0, maximum = 60)),
    responses((status = 200, description = "The cluster's version and phase", body = ClusterState)))]
pub async fn cluster_state(ctx: Ctx, id: Path<Id>, q: Query) -> Result<HttpResponse, ApiError> {
    let since = query::since(q.get("since"))?;
    let timeout = query::timeout_seconds(q.get("timeout_seconds"))?;
    let s = ctx
        .services
        .cluster_state(&ctx.caller, id.0, since, timeout)
        .await?;
    Ok(json(
        StatusCode::OK,
        &ClusterState {
            cluster_id: s.cluster_id,
            version: s.version,
            phase: s.phase,
            changed: s.changed,
        },
    ))
}

/// The cluster's kubeconfig (200), or 202 with a retry hint until the control plane is up.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/kubeconfig", tag = "clusters",
    params(("id" = String, Path, description = "Cluster id"),
           ("format" = Option<String>, Query, description = "`plain` (default, YAML) or `json`", pattern = "^(plain|json)$"),
           ("expiry_seconds" = Option<u32>, Query, description = "A lifetime: the kubeconfig gets a credential of its own, recorded and revocable, which expires after that many seconds (at least 60, at most the operator's maximum, 30 days unless set). Without it: the cluster's standing credential, the same on every download until rotated (unless the operator set a default lifetime)", minimum = 60)),
    responses((status = 200, description = "The kubeconfig (YAML for format=plain)", body = KubeconfigJson,
               content_type = "application/json"),
              (status = 202, description = "Not ready yet: retry after `Retry-After` seconds", body = KubeconfigPending,
               headers(("Retry-After" = u32, description = "Seconds to wait")))))]
pub async fn kubeconfig(
    ctx: Ctx,
    id: Path<Id>,
    q: Query,
    req: HttpRequest,
) -> Result<HttpResponse, ApiError> {
    let format = kubeconfig_format(q.get("format"))?;
    let expiry_seconds = query::expiry_seconds(
        q.get("expiry_seconds"),
        ctx.services.settings().kubeconfig_expiry_max_seconds,
    )?;
    match ctx
        .services
        .kubeconfig(&ctx.caller, id.0, KubeconfigRequest { expiry_seconds })
        .await?
    {
        KubeconfigAnswer::NotReady {
            phase,
            retry_after_seconds,
        } => Ok(HttpResponse::Accepted()
            .insert_header(("Retry-After", retry_after_seconds.to_string()))
            .json(KubeconfigPending {
                phase,
                retry_after_seconds,
            })),
        KubeconfigAnswer::Ready {
            cluster_id,
            yaml,
            credential,
        } => Ok(match format {
            KubeconfigFormat::Plain => HttpResponse::Ok()
                .content_type(yaml_media_type(&req))
                .body(yaml),
            KubeconfigFormat::Json => json(
                StatusCode::OK,
                &KubeconfigJson {
                    cluster_id,
                    kubeconfig: yaml,
                    credential: credential.as_ref().map(|c| {
                        wire::credential::IssuedCredential::at(c, ctx.services.ports().clock.now())
                    }),
                },
            ),
        }),
    }
}
