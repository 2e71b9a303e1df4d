//! **Clusters**: the organization's clusters, a page at a time, each row following its
//! cluster's phase through the state long-poll while the phase is still moving.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::web::{Path, Query};
use api::extract::Id;
use chrono::{DateTime, Utc};
use domain::DomainError;
use domain::error::Resource;
use domain::input::cluster::ListClusters;
use domain::model::cluster::{Cluster, ClusterPhase};
use domain::ports::storage::Freshness;
use domain::ports::storage::PageRequest;
use maud::{Markup, html};
use serde::Deserialize;

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::pages::layout::{self, Nav};
use crate::pages::{Acting, html_page};
use crate::session::Signed;

/// Rows per page.
pub const PAGE_SIZE: u32 = 20;
/// How long a live row waits for a change before it asks again.
const LIVE_WAIT_SECONDS: u32 = 25;

#[derive(Deserialize)]
pub struct ListQuery {
    organization: Option<String>,
    page: Option<String>,
}

pub async fn list(signed: Signed, query: Query<ListQuery>) -> Result<HttpResponse, ConsoleError> {
    let acting = Acting::resolve(&signed.caller, query.organization.as_deref());
    // A page number that does not read as one is the first page, as a person would expect.
    let page = query
        .page
        .as_deref()
        .and_then(|p| p.parse::<u32>().ok())
        .filter(|p| (1..=i32::MAX as u32).contains(p))
        .unwrap_or(1);
    let found = signed
        .services
        .list_clusters(
            &signed.caller,
            ListClusters {
                org: acting.selector.clone(),
                zone: None,
                page: PageRequest {
                    page,
                    size: PAGE_SIZE,
                },
                freshness: Freshness::Recent,
            },
        )
        .await?;
    let here = format!("{PREFIX}/clusters");
    let nav = Nav {
        caller: &signed.caller,
        acting: &acting,
        csrf: &signed.session.csrf,
        here: &here,
        pending: signed.pending_approvals,
    };
    let pages = found.total.div_ceil(u64::from(PAGE_SIZE)).max(1);
    let link = |p: u64| {
        let sep = if acting.query().is_empty() { '?' } else { '&' };
        format!("{here}{}{sep}page={p}", acting.query())
    };
    let body = html! {
        div.title-row {
            h1 { "Clusters" }
            @if acting.may_change() {
                a.button href={ (PREFIX) "/clusters/new" (acting.query()) } { "Create cluster" }
            }
        }
        @if found.items.is_empty() {
            p.empty { "No clusters in this organization yet." }
        } @else {
            table.clusters {
                caption.visually-hidden { "Clusters, page " (page) " of " (pages) }
                thead {
                    tr {
                        th scope="col" { "Name" }
                        th scope="col" { "Phase" }
                        th scope="col" { "Zone" }
                        th scope="col" { "Version" }
                        th scope="col" { "Pools" }
                        th scope="col" { "Nodes" }
                        th scope="col" { "Created" }
                    }
                }
                tbody {
                    @for c in &found.items { (row(c)) }
                }
            }
            nav.pager aria-label="Pages" {
                @if u64::from(page) > 1 {
                    a rel="prev" href=(link(u64::from(page) - 1)) { "Previous" }
                }
                span { "Page " (page) " of " (pages) " · " (found.total) " clusters" }
                @if u64::from(page) < pages {
                    a rel="next" href=(link(u64::from(page) + 1)) { "Next" }
                }
            }
        }
    };
    Ok(html_page(
        StatusCode::OK,
        layout::page("Clusters", Some(&nav), body),
    ))
}

/// Whether a phase may still change by itself (provisioning or deletion in progress).
fn moving(phase: ClusterPhase) -> bool {
    !matches!(phase, ClusterPhase::Provisioned | ClusterPhase::Failed)
}

pub fn phase_badge(phase: ClusterPhase) -> Markup {
    let tone = match phase {
        ClusterPhase::Provisioned => "ok",
        ClusterPhase::Failed => "bad",
        ClusterPhase::Deleting => "muted",
        _ => "busy",
    };
    html! { span class={ "badge " (tone) } { (phase.as_str()) } }
}

pub fn when(at: DateTime<Utc>) -> Markup {
    html! { time datetime=(at.to_rfc3339()) { (at.format("%Y-%m-%d %H:%M UTC")) } }
}

/// One cluster's row. While its phase is moving, htmx asks for the row again through the
/// state long-poll, which answers once the cluster changed.
fn row(c: &Cluster) -> Markup {
    let nodes: u32 = c.node_pools.iter().map(|p| p.count).sum();
    let live =
        moving(c.phase).then(|| format!("{PREFIX}/clusters/{}/row?since={}", c.id, c.revision));
    html! {
        tr id={ "cluster-" (c.id) }
            hx-get=[live.as_deref()] hx-trigger=[live.as_ref().map(|_| "load")]
            hx-swap=[live.as_ref().map(|_| "outerHTML")] {
            th scope="row" { a href={ (PREFIX) "/clusters/" (c.id) } { (c.name.as_str()) } }
            td { (phase_badge(c.phase)) }
            td { (c.zone) }
            td { (c.version) }
            td { (c.node_pools.len()) }
            td { (nodes) }
            td { (when(c.created_at)) }
        }
    }
}

#[derive(Deserialize)]
pub struct LiveQuery {
    since: Option<i64>,
}

/// The row again, once the cluster changed after `since` (or the wait ran out).
pub async fn live_row(
    signed: Signed,
    id: Path<Id>,
    query: Query<LiveQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let id = id.0;
    let services = &signed.services;
    let since = query.since.unwrap_or(0);
    let found = match services
        .cluster_state(&signed.caller, id, since, LIVE_WAIT_SECONDS)
        .await
    {
        Ok(_) => {
            services
                .get_cluster(&signed.caller, id, Freshness::Recent)
                .await
        }
        Err(e) => Err(e),
    };
    match found {
        Ok(cluster) => Ok(html_page(StatusCode::OK, row(&cluster))),
        // Deleted while the page was open: the row goes (an empty answer replaces it).
        Err(DomainError::NotFound(Resource::Cluster)) => Ok(html_page(StatusCode::OK, html! {})),
        Err(e) => Err(e.into()),
    }
}
