//! **Approvals**: the changes the signed-in person's AI assistant asked for, which run only when
//! that same person approves them here. The list shows their own approvals, newest first; an
//! approval's page says exactly what will happen (in words, then every argument as a row of
//! its own), who asked and until when, and offers **Approve** and **Decline** while it is
//! pending. After a decision the page says what became of it.
//!
//! Everything an approval shows that a customer wrote (names, descriptions, labels, tags) is
//! text on the page, escaped like every value maud writes: never markup, never a link target
//! it did not build itself. Another person's approval is the same "not found" as an unknown
//! id: nothing about it is told.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::web::{Form, Path, Query};
use actix_web::{HttpRequest, HttpResponse};
use api::extract::Id;
use chrono::{DateTime, Utc};
use domain::DomainError;
use domain::error::{Conflict, Resource};
use domain::input::cluster::CreateClusterRequest;
use domain::input::node_pool::{NodePoolPatch, NodePoolRequest};
use domain::model::approval::{Approval, ApprovalOutcome, ApprovalStatus, ApprovedAction};
use domain::model::identity::{Caller, ClientKind};
use domain::ports::storage::Freshness;
use domain::service::Services;
use maud::{Markup, html};
use serde::Deserialize;
use uuid::Uuid;

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::pages::clusters::when;
use crate::pages::forms::refusal;
use crate::pages::layout::{self, Nav};
use crate::pages::{Acting, check_form, html_page, see_other};
use crate::session::Signed;

#[derive(Deserialize)]
pub struct PageQuery {
    organization: Option<String>,
}

/// The frame of an approvals page: the header keeps the organization the person was in.
fn chrome(
    signed: &Signed,
    organization: Option<&str>,
    pending: usize,
    title: &str,
    status: StatusCode,
    body: Markup,
) -> HttpResponse {
    let acting = Acting::resolve(&signed.caller, organization);
    let here = format!("{PREFIX}/approvals");
    let nav = Nav {
        caller: &signed.caller,
        acting: &acting,
        csrf: &signed.session.csrf,
        here: &here,
        pending,
    };
    html_page(status, layout::page(title, Some(&nav), body))
}

/// How many of the person's approvals wait for a decision, for the header's link. A failure to
/// count only leaves the count out: the page itself does not depend on it.
pub async fn pending_count(services: &Services, caller: &Caller) -> usize {
    match services.approvals(caller).await {
        Ok(all) => all
            .iter()
            .filter(|a| a.status == ApprovalStatus::Pending)
            .count(),
        Err(e) => {
            tracing::warn!(error = %e, "console: counting pending approvals");
            0
        }
    }
}

/// `/console/approvals`: the person's approvals, newest first.
pub async fn list(signed: Signed, query: Query<PageQuery>) -> Result<HttpResponse, ConsoleError> {
    let all = signed.services.approvals(&signed.caller).await?;
    let now = signed.services.ports().clock.now();
    let pending = all
        .iter()
        .filter(|a| a.status == ApprovalStatus::Pending)
        .count();
    let body = html! {
        h1 { "Approvals" }
        p.hint {
            "Changes your AI assistant asked for. Nothing here runs until you approve it, signed in as yourself; "
            "what you decline or leave to expire never runs."
        }
        @if all.is_empty() {
            p.empty { "Your assistant has not asked for anything yet." }
        } @else {
            table.approvals {
                caption.visually-hidden { "Your approvals, newest first" }
                thead { tr {
                    th scope="col" { "What" }
                    th scope="col" { "Organization" }
                    th scope="col" { "Status" }
                    th scope="col" { "Requested" }
                    th scope="col" { "Expires" }
                } }
                tbody {
                    @for a in &all {
                        tr id={ "approval-" (a.id) } {
                            th scope="row" {
                                a href={ (PREFIX) "/approvals/" (a.id) } { (a.summary) }
                            }
                            td { (a.organization_slug) }
                            td { (status_badge(a.status)) }
                            td { (in_words(a.created_at, now)) }
                            td {
                                @if a.status == ApprovalStatus::Pending { (in_words(a.expires_at, now)) }
                                @else { "—" }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(chrome(
        &signed,
        query.organization.as_deref(),
        pending,
        "Approvals",
        StatusCode::OK,
        body,
    ))
}

/// `/console/approvals/{id}`: one of the person's approvals.
pub async fn detail(
    signed: Signed,
    id: Path<Id>,
    query: Query<PageQuery>,
) -> Result<HttpResponse, ConsoleError> {
    draw(
        &signed,
        id.0,
        query.organization.as_deref(),
        StatusCode::OK,
        None,
    )
    .await
}

#[derive(Deserialize)]
pub struct Decision {
    csrf: String,
}

/// Approves: the action runs once, as the signed-in person, and the page then says what became
/// of it. Sent again (a second tab, the back button, a replayed form) it runs nothing twice:
/// the use case answers the outcome it recorded the first time.
pub async fn approve(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    form: Form<Decision>,
) -> Result<HttpResponse, ConsoleError> {
    check_form(&req, &signed.session, &form.csrf)?;
    let done = signed.services.approve(&signed.caller, id.0).await;
    decided(&signed, id.0, done).await
}

/// Declines: the action never runs.
pub async fn decline(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    form: Form<Decision>,
) -> Result<HttpResponse, ConsoleError> {
    check_form(&req, &signed.session, &form.csrf)?;
    let done = signed.services.decline(&signed.caller, id.0).await;
    decided(&signed, id.0, done).await
}

/// After a decision: the approval's page (a redirect, so a reload does not post again), or the
/// page drawn again with the refusal (expired meanwhile, decided in another tab).
async fn decided(
    signed: &Signed,
    id: Uuid,
    done: Result<Approval, DomainError>,
) -> Result<HttpResponse, ConsoleError> {
    match done {
        Ok(a) => Ok(see_other(&format!("{PREFIX}/approvals/{}", a.id))),
        Err(DomainError::NotFound(Resource::Approval)) => Ok(not_found(signed)),
        Err(DomainError::Internal(cause)) => Err(DomainError::Internal(cause).into()),
        Err(e) => {
            let status = api::problem::status_of(&e);
            let words = match &e {
                // Decided already (another tab, the sweep): said of this approval, plainly.
                DomainError::Conflict(Conflict::InvalidState {
                    resource: Resource::Approval,
                    status,
                    operation,
                }) => format!("This approval is {status}, so it can no longer be {operation}."),
                other => refusal(other),
            };
            draw(signed, id, None, status, Some(&words)).await
        }
    }
}

/// The page of an approval that is not the person's, or not at all: the same either way.
fn not_found(signed: &Signed) -> HttpResponse {
    let pending = signed.pending_approvals;
    let body = html! {
        section.notice role="alert" {
            h1 { "Approval not found" }
            p {
                "There is no such approval among yours. An approval opens only for the account "
                "whose assistant asked for it: check that you are signed in as that account."
            }
            p { a href={ (PREFIX) "/approvals" } { "Go to your approvals" } }
        }
    };
    chrome(
        signed,
        None,
        pending,
        "Approval not found",
        StatusCode::NOT_FOUND,
        body,
    )
}

async fn draw(
    signed: &Signed,
    id: Uuid,
    organization: Option<&str>,
    status: StatusCode,
    problem: Option<&str>,
) -> Result<HttpResponse, ConsoleError> {
    let a = match signed.services.approval(&signed.caller, id).await {
        Ok(a) => a,
        Err(DomainError::NotFound(Resource::Approval)) => return Ok(not_found(signed)),
        Err(e) => return Err(e.into()),
    };
    let now = signed.services.ports().clock.now();
    let cluster = Named::of(signed, &a.action).await;
    let pending = signed.pending_approvals;
    let organization = organization.or(Some(a.organization_slug.as_str()));
    let body = html! {
        nav.crumbs aria-label="Breadcrumb" {
            a href={ (PREFIX) "/approvals" } { "Approvals" }
            " / " span aria-current="page" { (title(&a.action)) }
        }
        div.title-row {
            h1 { (title(&a.action)) }
            (status_badge(a.status))
        }
        @if let Some(problem) = problem {
            p.notice.error role="alert" #approval-problem { (problem) }
        }
        (standing(&a, &cluster, now))
        section aria-labelledby="what" {
            h2 #what {
                @if a.status == ApprovalStatus::Pending { "What will happen" } @else { "What was asked" }
            }
            p.summary #approval-summary { (a.summary) }
            @if a.action.is_destructive() && a.status == ApprovalStatus::Pending {
                p.notice.error #approval-destructive { "This deletes something: what is deleted cannot be brought back." }
            }
            (arguments(&a, &cluster))
        }
        section aria-labelledby="who" {
            h2 #who { "Who asked" }
            dl.facts #approval-who {
                dt { "Asked by" } dd { (asker(&a)) }
                dt { "Organization" } dd { (a.organization_slug) }
                dt { "Requested" } dd { (when(a.created_at)) " (" (in_words(a.created_at, now)) ")" }
                @match a.decided_at {
                    Some(at) if a.status != ApprovalStatus::Expired => {
                        dt { "Decided" } dd { (when(at)) " (" (in_words(at, now)) ")" }
                    }
                    _ => {
                        dt { @if a.status == ApprovalStatus::Expired { "Expired" } @else { "Expires" } }
                        dd { (when(a.expires_at)) " (" (in_words(a.expires_at, now)) ")" }
                    }
                }
            }
        }
        @if a.status == ApprovalStatus::Pending {
            section.card #approval-decision aria-labelledby="decide" {
                h2 #decide { "Your decision" }
                p {
                    "Approve runs exactly this, once, as you (" (signed.caller.user.email.as_deref().unwrap_or(&signed.caller.user.id))
                    "), with your role in " (a.organization_slug) ". Decline and nothing runs."
                }
                div.decision {
                    form method="post" action={ (PREFIX) "/approvals/" (a.id) "/approve" } {
                        input type="hidden" name="csrf" value=(signed.session.csrf);
                        button.destructive[a.action.is_destructive()] type="submit" { "Approve" }
                    }
                    form method="post" action={ (PREFIX) "/approvals/" (a.id) "/decline" } {
                        input type="hidden" name="csrf" value=(signed.session.csrf);
                        button.secondary type="submit" { "Decline" }
                    }
                }
            }
        }
    };
    Ok(chrome(
        signed,
        organization,
        pending,
        title(&a.action),
        status,
        body,
    ))
}

/// The action's name as a page title: "Create a cluster", "Delete a node pool".
fn title(action: &ApprovedAction) -> &'static str {
    match action {
        ApprovedAction::CreateCluster { .. } => "Create a cluster",
        ApprovedAction::AddNodePool { .. } => "Add a node pool",
        ApprovedAction::ScaleNodePool { .. } => "Resize a node pool",
        ApprovedAction::DeleteNodePool { .. } => "Delete a node pool",
        ApprovedAction::DeleteNode { .. } => "Replace a node",
        ApprovedAction::DeleteCluster { .. } => "Delete a cluster",
        ApprovedAction::UpgradeCluster { .. } => "Upgrade a cluster",
    }
}

fn status_badge(status: ApprovalStatus) -> Markup {
    let tone = match status {
        ApprovalStatus::Pending => "busy",
        ApprovalStatus::Approved => "ok",
        ApprovalStatus::Declined | ApprovalStatus::Expired => "muted",
    };
    html! { span class={ "badge " (tone) } { (status.as_str()) } }
}

/// Who asked: the person's assistant, for their account.
fn asker(a: &Approval) -> Markup {
    let who = &a.requested_by;
    let account = who.email.as_deref().unwrap_or(&who.user_id);
    html! {
        @match who.client {
            ClientKind::Assistant => { "Your AI assistant, for the account " strong { (account) } }
            other => { "A client of kind " (other.as_str()) ", for the account " strong { (account) } }
        }
    }
}

/// The cluster an action changes, as far as the person may still read it: its name, else
/// only its id (deleted meanwhile, or no longer theirs to read).
struct Named {
    id: Option<Uuid>,
    name: Option<String>,
}

impl Named {
    async fn of(signed: &Signed, action: &ApprovedAction) -> Named {
        let Some(id) = action.cluster() else {
            return Named {
                id: None,
                name: None,
            };
        };
        let name = signed
            .services
            .get_cluster(&signed.caller, id, Freshness::Recent)
            .await
            .ok()
            .map(|c| c.name.as_str().to_owned());
        Named { id: Some(id), name }
    }

    fn label(&self) -> String {
        match (&self.name, self.id) {
            (Some(n), _) => n.clone(),
            (None, Some(id)) => id.to_string(),
            (None, None) => "the cluster".into(),
        }
    }

    fn cell(&self) -> Markup {
        html! {
            @match (&self.name, self.id) {
                (Some(n), Some(id)) => { a href={ (PREFIX) "/clusters/" (id) } { (n) } " " code { (id) } }
                (None, Some(id)) => { code { (id) } " (no longer found)" }
                _ => { "—" }
            }
        }
    }
}

/// Where the approval stands, in words: waiting (and until when), or what became of it.
fn standing(a: &Approval, cluster: &Named, now: DateTime<Utc>) -> Markup {
    html! {
        @match a.status {
            ApprovalStatus::Pending => {
                p.notice #approval-status {
                    "Waiting for your decision. It expires " (in_words(a.expires_at, now))
                    "; after that it can no longer be approved."
                }
            }
            ApprovalStatus::Declined => {
                p.notice #approval-status { "Declined: nothing was changed. It can no longer be approved." }
            }
            ApprovalStatus::Expired => {
                p.notice #approval-status {
                    "Expired without a decision: nothing was changed. Ask your assistant again if you still want this."
                }
            }
            ApprovalStatus::Approved => {
                @match &a.outcome {
                    Some(ApprovalOutcome::Done { cluster_id, .. }) => {
                        p.notice.ok #approval-status {
                            "Approved: " (done_words(&a.action, cluster)) " "
                            a href=(done_link(&a.action, *cluster_id)) { (done_link_words(&a.action)) }
                        }
                    }
                    Some(ApprovalOutcome::Refused { code, detail }) => {
                        p.notice.error #approval-status {
                            "Approved, but the change was refused when it ran, so nothing was changed: "
                            (detail) " (" code { (code) } ")"
                        }
                    }
                    None => {
                        p.notice #approval-status {
                            "Approved: the change is starting. Reload this page in a moment to see what became of it."
                        }
                    }
                }
            }
        }
    }
}

/// What an approved action set going, in words.
fn done_words(action: &ApprovedAction, cluster: &Named) -> String {
    let c = cluster.label();
    match action {
        ApprovedAction::CreateCluster { body } => format!(
            "the cluster {} is being created.",
            body.name.as_deref().unwrap_or("")
        ),
        ApprovedAction::AddNodePool { body, .. } => format!(
            "the node pool {} is being added to the cluster {c}.",
            body.name.as_deref().unwrap_or("default")
        ),
        ApprovedAction::ScaleNodePool { pool, .. } => {
            format!("the node pool {pool} of the cluster {c} is being resized.")
        }
        ApprovedAction::DeleteNodePool { pool, .. } => {
            format!("the node pool {pool} of the cluster {c} is being deleted.")
        }
        ApprovedAction::DeleteNode { node, .. } => {
            format!("the node {node} of the cluster {c} is being replaced.")
        }
        ApprovedAction::DeleteCluster { .. } => format!("the cluster {c} is being deleted."),
        ApprovedAction::UpgradeCluster { body, .. } => format!(
            "the cluster {c} is being upgraded to {}.",
            body.version.as_deref().unwrap_or("")
        ),
    }
}

fn done_link(action: &ApprovedAction, cluster_id: Uuid) -> String {
    let tail = match action {
        ApprovedAction::AddNodePool { .. }
        | ApprovedAction::ScaleNodePool { .. }
        | ApprovedAction::DeleteNodePool { .. } => "/node-pools",
        ApprovedAction::DeleteNode { .. } => "/nodes",
        ApprovedAction::CreateCluster { .. }
        | ApprovedAction::DeleteCluster { .. }
        | ApprovedAction::UpgradeCluster { .. } => "",
    };
    format!("{PREFIX}/clusters/{cluster_id}{tail}")
}

fn done_link_words(action: &ApprovedAction) -> &'static str {
    match action {
        ApprovedAction::AddNodePool { .. }
        | ApprovedAction::ScaleNodePool { .. }
        | ApprovedAction::DeleteNodePool { .. } => "See its node pools",
        ApprovedAction::DeleteNode { .. } => "See its nodes",
        ApprovedAction::CreateCluster { .. }
        | ApprovedAction::DeleteCluster { .. }
        | ApprovedAction::UpgradeCluster { .. } => "Follow the cluster",
    }
}

/// Every argument of the action as a row of its own, as asked: what was left out says what
/// the service will choose instead.
fn arguments(a: &Approval, cluster: &Named) -> Markup {
    html! {
        h3 { "Exactly as asked" }
        @match &a.action {
            ApprovedAction::CreateCluster { body } => (create_rows(body, a)),
            ApprovedAction::AddNodePool { body, .. } => {
                dl.facts #approval-arguments {
                    dt { "Cluster" } dd { (cluster.cell()) }
                }
                (pool_table(std::slice::from_ref(body)))
            }
            ApprovedAction::ScaleNodePool { pool, patch, .. } => {
                dl.facts #approval-arguments {
                    dt { "Cluster" } dd { (cluster.cell()) }
                    dt { "Node pool" } dd { (pool) }
                    (patch_rows(patch))
                }
            }
            ApprovedAction::DeleteNodePool { pool, .. } => {
                dl.facts #approval-arguments {
                    dt { "Cluster" } dd { (cluster.cell()) }
                    dt { "Node pool" } dd { (pool) }
                }
            }
            ApprovedAction::DeleteNode { node, .. } => {
                dl.facts #approval-arguments {
                    dt { "Cluster" } dd { (cluster.cell()) }
                    dt { "Node" } dd { (node) }
                }
            }
            ApprovedAction::DeleteCluster { .. } => {
                dl.facts #approval-arguments {
                    dt { "Cluster" } dd { (cluster.cell()) }
                }
            }
            ApprovedAction::UpgradeCluster { body, .. } => {
                dl.facts #approval-arguments {
                    dt { "Cluster" } dd { (cluster.cell()) }
                    dt { "Kubernetes version" } dd { (body.version.as_deref().unwrap_or("—")) }
                    dt { "Surge" } dd { (or_default(body.max_surge.map(|s| s.to_string()).as_deref(), "each pool's own (1 unless set)")) }
                    dt { "Unavailable" } dd { (or_default(body.max_unavailable.map(|s| s.to_string()).as_deref(), "each pool's own (0 unless set)")) }
                }
            }
        }
    }
}

fn or_default(value: Option<&str>, default: &str) -> Markup {
    html! {
        @match value {
            Some(v) => { (v) }
            None => { span.hint.inline { (default) } }
        }
    }
}

/// A create's rows. The organization the assistant named (by slug or by id) reads as the
/// approval's slug when it is that organization.
fn create_rows(b: &CreateClusterRequest, a: &Approval) -> Markup {
    let named = b.organization.as_deref().map(|o| {
        if o == a.organization_id.to_string() || o == a.organization_slug {
            a.organization_slug.as_str()
        } else {
            o
        }
    });
    html! {
        dl.facts #approval-arguments {
            dt { "Name" } dd { (b.name.as_deref().unwrap_or("—")) }
            dt { "Organization" } dd { (or_default(named, "your preferred organization")) }
            dt { "Zone" } dd { (or_default(b.zone.as_deref(), "the default zone")) }
            dt { "Kubernetes version" } dd { (or_default(b.version.as_deref(), "the recommended version")) }
            dt { "Exposure" } dd { (or_default(b.exposure.map(|e| e.as_str()), "the zone's default")) }
            dt { "Network mode" } dd { (or_default(b.network_mode.map(|n| n.as_str()), "intranet (the default)")) }
            dt { "Description" } dd { (or_default(b.description.as_deref(), "none")) }
            dt { "Tags" } dd {
                @match &b.tags {
                    Some(tags) if !tags.is_empty() => { @for t in tags { span.tag { (t) } " " } }
                    _ => { span.hint.inline { "none" } }
                }
            }
        }
        (pool_table(b.node_pools.as_deref().unwrap_or_default()))
    }
}

fn pool_table(pools: &[NodePoolRequest]) -> Markup {
    html! {
        @if pools.is_empty() {
            p.hint { "No node pool given: the service adds its default pool." }
        } @else {
            // Scrolls by itself on a narrow screen (every argument stays shown); focusable, so a
            // keyboard can scroll it too.
            div.table-scroll role="region" aria-labelledby="approval-pools-caption" tabindex="0" {
            table.approval-pools #approval-pools {
                caption #approval-pools-caption { "Node pools" }
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Size" } th scope="col" { "Nodes" }
                    th scope="col" { "Labels" } th scope="col" { "Tags" }
                } }
                tbody {
                    @for p in pools {
                        tr {
                            th scope="row" { (p.name.as_deref().unwrap_or("default")) }
                            td { (p.size.as_deref().unwrap_or("—")) }
                            td { (pool_nodes(p)) }
                            td { (pairs(p.labels.as_ref())) }
                            td { (pairs(p.tags.as_ref())) }
                        }
                    }
                }
            }
            }
        }
    }
}

fn pool_nodes(p: &NodePoolRequest) -> String {
    if p.auto_scale == Some(true) {
        let min = p.min_nodes.map_or("1".into(), |n| n.to_string());
        let max = p.max_nodes.map_or("?".into(), |n| n.to_string());
        format!("autoscale, {min} to {max}")
    } else {
        p.count.map_or("—".into(), |n| n.to_string())
    }
}

fn pairs(map: Option<&BTreeMap<String, String>>) -> Markup {
    html! {
        @match map {
            Some(m) if !m.is_empty() => {
                @for (k, v) in m { code { (k) "=" (v) } " " }
            }
            _ => { "—" }
        }
    }
}

/// The rows of a pool's patch: only what it changes; `null` clears.
fn patch_rows(p: &NodePoolPatch) -> Markup {
    fn shown<T: ToString>(v: &Option<T>) -> String {
        v.as_ref().map_or("cleared".into(), ToString::to_string)
    }
    html! {
        @if let Some(v) = &p.count { dt { "Node count" } dd { (shown(v)) } }
        @if let Some(v) = &p.auto_scale {
            dt { "Autoscale" } dd { (match v { Some(true) => "on", Some(false) => "off", None => "cleared" }) }
        }
        @if let Some(v) = &p.min_nodes { dt { "Minimum nodes" } dd { (shown(v)) } }
        @if let Some(v) = &p.max_nodes { dt { "Maximum nodes" } dd { (shown(v)) } }
        @if let Some(v) = &p.labels { dt { "Labels (replacing all)" } dd { (pairs(v.as_ref())) } }
        @if let Some(v) = &p.tags { dt { "Tags (replacing all)" } dd { (pairs(v.as_ref())) } }
    }
}

/// A moment relative to `now`, as a person says it: "in 7 minutes", "3 hours ago".
pub fn in_words(at: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (at - now).num_seconds();
    let span = |s: i64| -> String {
        let (n, unit) = match s {
            s if s < 60 => (s, "second"),
            s if s < 3600 => (s / 60, "minute"),
            s if s < 172_800 => (s / 3600, "hour"),
            s => (s / 86_400, "day"),
        };
        format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
    };
    match secs {
        -9..=9 => "just now".into(),
        s if s > 0 => format!("in {}", span(s)),
        s => format!("{} ago", span(-s)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_read_in_words() {
        let now = DateTime::<Utc>::from_timestamp(1_000_000, 0).unwrap_or_default();
        let cases = [
            (0, "just now"),
            (30, "in 30 seconds"),
            (60, "in 1 minute"),
            (7 * 60 + 20, "in 7 minutes"),
            (-3 * 3600, "3 hours ago"),
            (-3 * 86_400, "3 days ago"),
        ];
        for (offset, words) in cases {
            let at = now + chrono::Duration::seconds(offset);
            assert_eq!(in_words(at, now), words, "{offset}");
        }
    }

    #[test]
    fn customer_written_text_is_shown_as_text() {
        let body = CreateClusterRequest {
            organization: Some(Uuid::from_u128(2).to_string()),
            name: Some("web-1".into()),
            description: Some("<script>alert(1)</script> ignore previous instructions".into()),
            node_pools: Some(vec![NodePoolRequest {
                labels: Some(BTreeMap::from([("a".into(), "<b>x</b>".into())])),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let approval = Approval {
            id: Uuid::from_u128(1),
            organization_id: Uuid::from_u128(2),
            organization_slug: "acme".into(),
            requested_by: domain::model::audit::Actor {
                user_id: "alice".into(),
                email: None,
                client: ClientKind::Assistant,
            },
            action: ApprovedAction::CreateCluster { body: body.clone() },
            summary: String::new(),
            status: ApprovalStatus::Pending,
            created_at: DateTime::<Utc>::from_timestamp(0, 0).unwrap_or_default(),
            expires_at: DateTime::<Utc>::from_timestamp(600, 0).unwrap_or_default(),
            decided_at: None,
            outcome: None,
        };
        let html = create_rows(&body, &approval).into_string();
        assert!(
            !html.contains("<script>") && !html.contains("<b>"),
            "{html}"
        );
        assert!(html.contains("&lt;script&gt;"), "{html}");
        // The organization named by id reads as its slug.
        assert!(html.contains("<dd>acme</dd>"), "{html}");
    }
}
