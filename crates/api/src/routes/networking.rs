//! Elastic IP and firewall rule routes.

use actix_web::http::StatusCode;
use actix_web::web::Path;
use actix_web::{HttpRequest, HttpResponse};
use wire::request::networking::CreateElasticIpRequest;
use wire::request::networking::CreateFirewallRuleRequest;

use crate::conditional::Conditional;
use crate::extract::{Body, Ctx, Id, Idempotency};
use crate::problem::ApiError;
use crate::render::{JsonRender, answer, json};
use domain::service::Command;
use wire::networking::{ElasticIpList, ElasticIpView, FirewallRule, FirewallRuleList};

/// The cluster's Elastic IPs.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/elastic-ips", tag = "elastic ips",
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 200, description = "The Elastic IPs", body = ElasticIpList)))]
pub async fn list_elastic_ips(ctx: Ctx, id: Path<Id>) -> Result<HttpResponse, ApiError> {
    let items = ctx.services.list_elastic_ips(&ctx.caller, id.0).await?;
    Ok(json(
        StatusCode::OK,
        &ElasticIpList {
            items: items.iter().map(ElasticIpView::from).collect(),
        },
    ))
}

/// One Elastic IP.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/elastic-ips/{eip}", tag = "elastic ips",
    params(("id" = String, Path, description = "Cluster id"), ("eip" = String, Path, description = "Elastic IP id")),
    responses((status = 200, description = "The Elastic IP", body = ElasticIpView)))]
pub async fn get_elastic_ip(
    ctx: Ctx,
    path: Path<(Id, Id)>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let (id, eip) = path.into_inner();
    let v = ctx
        .services
        .get_elastic_ip(&ctx.caller, id.0, eip.0)
        .await?;
    Ok(cond.read(&ElasticIpView::from(&v)))
}

/// Allocates an Elastic IP: 202 with it `Pending`.
#[utoipa::path(post, path = "/v1/public/clusters/{id}/elastic-ips", tag = "elastic ips", request_body(content = CreateElasticIpRequest, example = json!({"name": "ingress", "exposure": "private"})),
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 202, description = "Accepted", body = ElasticIpView)))]
pub async fn create_elastic_ip(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    id: Path<Id>,
    body: Body<CreateElasticIpRequest>,
) -> Result<HttpResponse, ApiError> {
    let render = JsonRender::new(StatusCode::ACCEPTED, &ctx.request_id);
    let a = ctx
        .services
        .create_elastic_ip(
            Command::keyed(&ctx.caller, idem.keyed(&req, Some(&body.json), &render)),
            id.0,
            body.value.into(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// Releases an Elastic IP (only from Ready or Failed): 202 with it `Deleting`.
#[utoipa::path(delete, path = "/v1/public/clusters/{id}/elastic-ips/{eip}", tag = "elastic ips",
    params(("id" = String, Path, description = "Cluster id"), ("eip" = String, Path, description = "Elastic IP id")),
    responses((status = 202, description = "Accepted", body = ElasticIpView)))]
pub async fn release_elastic_ip(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    path: Path<(Id, Id)>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let (id, eip) = path.into_inner();
    let render = JsonRender::new(StatusCode::ACCEPTED, &ctx.request_id);
    let a = ctx
        .services
        .release_elastic_ip(
            Command::keyed(&ctx.caller, idem.keyed(&req, None, &render)),
            id.0,
            eip.0,
            cond.expect(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// The cluster's firewall rules.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/firewall-rules", tag = "firewall rules",
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 200, description = "The rules", body = FirewallRuleList)))]
pub async fn list_firewall_rules(ctx: Ctx, id: Path<Id>) -> Result<HttpResponse, ApiError> {
    let items = ctx.services.list_firewall_rules(&ctx.caller, id.0).await?;
    Ok(json(
        StatusCode::OK,
        &FirewallRuleList {
            items: items.iter().map(FirewallRule::from).collect(),
        },
    ))
}

/// One firewall rule.
#[utoipa::path(get, path = "/v1/public/clusters/{id}/firewall-rules/{rule}", tag = "firewall rules",
    params(("id" = String, Path, description = "Cluster id"), ("rule" = String, Path, description = "Rule id")),
    responses((status = 200, description = "The rule", body = FirewallRule)))]
pub async fn get_firewall_rule(
    ctx: Ctx,
    path: Path<(Id, Id)>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let (id, rule) = path.into_inner();
    let r = ctx
        .services
        .get_firewall_rule(&ctx.caller, id.0, rule.0)
        .await?;
    Ok(cond.read(&FirewallRule::from(&r)))
}

/// Creates an ingress rule (the cluster must be Provisioned): 202 with it `Pending`.
#[utoipa::path(post, path = "/v1/public/clusters/{id}/firewall-rules", tag = "firewall rules", request_body(content = CreateFirewallRuleRequest, example = json!({"name": "https", "description": "HTTPS from the office", "direction": "ingress", "protocol": "tcp", "source_cidrs": ["203.0.113.0/24"], "port_range": {"from": 443, "to": 443}})),
    params(("id" = String, Path, description = "Cluster id")),
    responses((status = 202, description = "Accepted", body = FirewallRule)))]
pub async fn create_firewall_rule(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    id: Path<Id>,
    body: Body<CreateFirewallRuleRequest>,
) -> Result<HttpResponse, ApiError> {
    let render = JsonRender::new(StatusCode::ACCEPTED, &ctx.request_id);
    let a = ctx
        .services
        .create_firewall_rule(
            Command::keyed(&ctx.caller, idem.keyed(&req, Some(&body.json), &render)),
            id.0,
            body.value.into(),
        )
        .await?;
    Ok(answer(&render, a))
}

/// Deletes a rule: 202 with it `Deleting`.
#[utoipa::path(delete, path = "/v1/public/clusters/{id}/firewall-rules/{rule}", tag = "firewall rules",
    params(("id" = String, Path, description = "Cluster id"), ("rule" = String, Path, description = "Rule id")),
    responses((status = 202, description = "Accepted", body = FirewallRule)))]
pub async fn delete_firewall_rule(
    ctx: Ctx,
    idem: Idempotency,
    req: HttpRequest,
    path: Path<(Id, Id)>,
    cond: Conditional,
) -> Result<HttpResponse, ApiError> {
    let (id, rule) = path.into_inner();
    let render = JsonRender::new(StatusCode::ACCEPTED, &ctx.request_id);
    let a = ctx
        .services
        .delete_firewall_rule(
            Command::keyed(&ctx.caller, idem.keyed(&req, None, &render)),
            id.0,
            rule.0,
            cond.expect(),
        )
        .await?;
    Ok(answer(&render, a))
}
