//! The audit trail of an organization.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use domain::input::audit::ListAuditEvents;
use domain::model::audit::AuditFilter;
use wire::audit::{AuditEvent, AuditEventList};

use crate::extract::{Ctx, Query};
use crate::problem::ApiError;
use crate::query::audit as q;
use crate::render::json;

/// The organization's audit trail, newest first: every change that took effect, by any face
/// of the service. Any member may read it.
#[utoipa::path(get, path = "/v1/public/audit-events", tag = "audit",
    params(("organization" = Option<String>, Query, description = "Organization slug or id; wins over the header"),
           ("resource" = Option<String>, Query, description = "Only events about this kind of object",
            example = "cluster"),
           ("resource_id" = Option<String>, Query, description = "Only events about this object (its `resource_id`)", max_length = 256),
           ("cluster_id" = Option<uuid::Uuid>, Query, description = "Only events of this cluster and everything under it"),
           ("actor" = Option<String>, Query, description = "Only changes made by this user id", max_length = 256),
           ("since" = Option<String>, Query, description = "From this RFC 3339 instant on (inclusive)", format = DateTime),
           ("until" = Option<String>, Query, description = "Before this RFC 3339 instant (exclusive)", format = DateTime),
           ("limit" = Option<u32>, Query, description = "1-100; default 50", minimum = 1, maximum = 100),
           ("cursor" = Option<String>, Query, description = "The `next_cursor` of the previous page; the other filters must stay the same")),
    responses((status = 200, description = "A page of events", body = AuditEventList)))]
pub async fn list_audit_events(ctx: Ctx, query: Query) -> Result<HttpResponse, ApiError> {
    let request = (|| {
        Ok::<_, crate::problem::RequestError>(ListAuditEvents {
            org: ctx.organization(&query),
            filter: AuditFilter {
                resource: q::resource(query.get("resource"))?,
                resource_id: q::text("resource_id", query.get("resource_id"))?,
                cluster_id: q::cluster_id(query.get("cluster_id"))?,
                actor: q::text("actor", query.get("actor"))?,
                since: q::instant("since", query.get("since"))?,
                until: q::instant("until", query.get("until"))?,
            },
            after: q::cursor(query.get("cursor"))?,
            limit: q::limit(query.get("limit"))?,
        })
    })()?;
    let page = ctx.services.audit_events(&ctx.caller, request).await?;
    let next_cursor = page.next.as_ref().map(q::encode_cursor);
    Ok(json(
        StatusCode::OK,
        &AuditEventList {
            items: page.items.into_iter().map(AuditEvent::from).collect(),
            next_cursor,
        },
    ))
}
