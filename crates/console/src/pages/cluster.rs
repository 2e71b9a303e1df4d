//! **Cluster detail**: the Overview of one cluster (its phase, endpoint, pools, tags), the
//! kubeconfig download, and deleting it (confirmed by typing its name).

use actix_web::http::{StatusCode, header};
use actix_web::web::{Form, Path};
use actix_web::{HttpRequest, HttpResponse};
use api::extract::Id;
use domain::DomainError;
use domain::input::cluster::{ClusterPatch, ExposurePatch};
use domain::model::cluster::{Cluster, Exposure, NetworkMode};
use domain::model::maintenance_window::format_start_time;
use domain::ports::storage::Freshness;
use domain::service::KubeconfigAnswer;
use maud::{Markup, html};
use serde::Deserialize;

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::pages::clusters::{phase_badge, when};
use crate::pages::layout::{self, Nav};
use crate::pages::live::{self, Around};
use crate::pages::upgrade;
use crate::pages::{Acting, check_form, html_page, see_other};
use crate::session::Signed;
use domain::service::Command;

pub async fn overview(signed: Signed, id: Path<Id>) -> Result<HttpResponse, ConsoleError> {
    let cluster = signed
        .services
        .get_cluster(&signed.caller, id.0, Freshness::Recent)
        .await?;
    page(&signed, &cluster, StatusCode::OK, None).await
}

/// The tabs of a cluster's page.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    Overview,
    NodePools,
    Nodes,
    Networking,
}

impl Tab {
    const ALL: [Tab; 4] = [Tab::Overview, Tab::NodePools, Tab::Nodes, Tab::Networking];

    fn label(self) -> &'static str {
        match self {
            Tab::Overview => "Overview",
            Tab::NodePools => "Node pools",
            Tab::Nodes => "Nodes",
            Tab::Networking => "Networking",
        }
    }

    pub fn path(self, c: &Cluster) -> String {
        let tail = match self {
            Tab::Overview => "",
            Tab::NodePools => "/node-pools",
            Tab::Nodes => "/nodes",
            Tab::Networking => "/networking",
        };
        format!("{PREFIX}/clusters/{}{tail}", c.id)
    }

    /// The tab's name in a live request's path.
    pub fn slug(self) -> &'static str {
        match self {
            Tab::Overview => "overview",
            Tab::NodePools => "node-pools",
            Tab::Nodes => "nodes",
            Tab::Networking => "networking",
        }
    }

    pub fn from_slug(slug: &str) -> Option<Tab> {
        Tab::ALL.into_iter().find(|t| t.slug() == slug)
    }

    /// The tab's read-only parts, each to be swapped in place by its id: never a form a person
    /// may be typing in.
    pub async fn live_parts(
        self,
        signed: &Signed,
        c: &Cluster,
        around: &Around,
    ) -> Result<Markup, ConsoleError> {
        let acting = Acting::resolve(&signed.caller, Some(&c.organization_slug));
        let (may_change, csrf) = (acting.may_change(), signed.session.csrf.as_str());
        Ok(match self {
            Tab::Overview => facts(c, true),
            Tab::NodePools => html! {
                @for p in &c.node_pools { (super::pools::pool_facts(p, true)) }
            },
            Tab::Nodes => super::pools::node_tables(c, &around.nodes, may_change, csrf, true),
            Tab::Networking => {
                let rules = signed
                    .services
                    .list_firewall_rules(&signed.caller, c.id)
                    .await?;
                html! {
                    (super::networking::eip_table(c, &around.eips, may_change, csrf, true))
                    (super::networking::rule_table(&rules, true))
                }
            }
        })
    }
}

/// A cluster's page: its name and phase, the tabs, a problem if a change was refused, and the
/// tab's content (given whether the caller may change this cluster).
pub fn frame(
    signed: &Signed,
    c: &Cluster,
    around: &Around,
    tab: Tab,
    status: StatusCode,
    problem: Option<&str>,
    content: impl FnOnce(bool) -> Markup,
) -> HttpResponse {
    let acting = Acting::resolve(&signed.caller, Some(&c.organization_slug));
    let here = format!("{PREFIX}/clusters");
    let nav = Nav {
        caller: &signed.caller,
        acting: &acting,
        csrf: &signed.session.csrf,
        here: &here,
        pending: signed.pending_approvals,
    };
    let body = html! {
        nav.crumbs aria-label="Breadcrumb" {
            a href={ (PREFIX) "/clusters" (acting.query()) } { "Clusters" }
            " / " span aria-current="page" { (c.name.as_str()) }
        }
        div.title-row {
            h1 { (c.name.as_str()) }
            span #cluster-phase { (phase_badge(c.phase)) }
        }
        (live::poller(c, tab, &live::progress(c, around), false, &live::shown_pools(c)))
        nav.tabs aria-label="Cluster" {
            @for t in Tab::ALL {
                a href=(t.path(c)) aria-current=[(t == tab).then_some("page")] { (t.label()) }
            }
        }
        @if let Some(problem) = problem {
            p.notice.error role="alert" { (problem) }
        }
        (content(acting.may_change()))
    };
    let title = format!("{} · {}", c.name.as_str(), tab.label());
    html_page(status, layout::page(&title, Some(&nav), body))
}

async fn page(
    signed: &Signed,
    c: &Cluster,
    status: StatusCode,
    problem: Option<&str>,
) -> Result<HttpResponse, ConsoleError> {
    let around = Around::of(signed, c).await?;
    let upgrades = signed
        .services
        .list_upgrades(&signed.caller, c.id, Freshness::Recent)
        .await?;
    Ok(frame(
        signed,
        c,
        &around,
        Tab::Overview,
        status,
        problem,
        |may_change| {
            html! {
                h2.visually-hidden { "Overview" }
                (facts(c, false))
                p { a.button href={ (PREFIX) "/clusters/" (c.id) "/kubeconfig" } { "Download kubeconfig" } }
                @if may_change {
                    (upgrade::upgrade_card(c, &upgrades, &signed.session.csrf))
                    (upgrade::maintenance_card(c, &upgrades, &signed.session.csrf))
                    (exposure_form(c, &signed.session.csrf))
                    (edit_form(c, &signed.session.csrf))
                    (delete_form(c, &signed.session.csrf))
                }
            }
        },
    ))
}

/// The cluster's facts; `oob`: as part of a live answer, swapped in place by its id.
fn facts(c: &Cluster, oob: bool) -> Markup {
    html! {
        dl.facts #cluster-facts hx-swap-oob=[oob.then_some("true")] {
            dt { "Phase" } dd { (c.phase.as_str()) @if let Some(r) = &c.failure_reason { " — " (r) } }
            dt { "Zone" } dd { (c.zone) }
            dt { "Kubernetes version" } dd {
                (c.version)
                @if let Some(progress) = upgrade::upgrade_progress(c) { " (upgrading " (progress) ")" }
            }
            dt { "Maintenance window" } dd {
                (c.maintenance_window.day.as_str()) " from " (format_start_time(c.maintenance_window.start_time)) " UTC"
                @if c.auto_upgrade { ", patch upgrades applied automatically" }
            }
            dt { "Exposure" } dd {
                (c.exposure.as_str())
                @if let Some(change) = &c.exposure_change { " (changing to " (change.to.as_str()) ")" }
            }
            dt { "Network mode" } dd { (c.network_mode.as_str()) " (" (network_mode_words(c.network_mode)) ")" }
            dt { "Public hostname" } dd { (c.public_hostname.as_deref().unwrap_or("—")) }
            dt { "API endpoint" } dd { (c.api_endpoint.as_deref().unwrap_or("not yet")) }
            dt { "Description" } dd { (c.description.as_deref().unwrap_or("—")) }
            dt { "Tags" } dd {
                @if c.tags.is_empty() { "—" }
                @for t in &c.tags { span.tag { (t.as_str()) } " " }
            }
            dt { "Created" } dd { (when(c.created_at)) }
        }
    }
}

fn exposure_form(c: &Cluster, csrf: &str) -> Markup {
    html! {
        section.card aria-labelledby="exposure-title" {
            h3 #exposure-title { "Exposure" }
            @if let Some(change) = &c.exposure_change {
                p { "Changing to " strong { (change.to.as_str()) } "; another change can start once it is done." }
            } @else {
                form.inline-form method="post" action={ (PREFIX) "/clusters/" (c.id) "/exposure" } {
                    input type="hidden" name="csrf" value=(csrf);
                    fieldset.choice {
                        legend { "Reachable from" }
                        @for x in Exposure::ALL {
                            label.inline {
                                input type="radio" name="exposure" value=(x.as_str()) checked[x == c.exposure];
                                " " (x.as_str())
                            }
                        }
                    }
                    button type="submit" { "Change exposure" }
                }
            }
        }
    }
}

fn edit_form(c: &Cluster, csrf: &str) -> Markup {
    let tags: Vec<&str> = c.tags.iter().map(|t| t.as_str()).collect();
    html! {
        section.card aria-labelledby="edit-title" {
            h3 #edit-title { "Description and tags" }
            form method="post" action={ (PREFIX) "/clusters/" (c.id) "/edit" } {
                input type="hidden" name="csrf" value=(csrf);
                label for="description" { "Description" }
                textarea #description name="description" rows="2" { (c.description.as_deref().unwrap_or("")) }
                label for="tags" { "Tags" }
                input #tags type="text" name="tags" value=(tags.join(", ")) aria-describedby="tags-hint";
                small.hint #tags-hint { "DNS labels, separated by commas; empty clears them" }
                p { button type="submit" { "Save description and tags" } }
            }
        }
    }
}

#[derive(Deserialize)]
pub struct Edit {
    csrf: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    tags: String,
}

/// Replaces the description (empty clears it) and the tags (empty clears them).
pub async fn edit(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    form: Form<Edit>,
) -> Result<HttpResponse, ConsoleError> {
    check_form(&req, &signed.session, &form.csrf)?;
    let description = Some(form.description.trim().to_owned()).filter(|d| !d.is_empty());
    let tags: Vec<String> = form
        .tags
        .split([',', ' ', '\n'])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    let patch = ClusterPatch {
        description: Some(description),
        tags: Some(Some(tags)),
        control_plane_firewall: None,
        ..ClusterPatch::default()
    };
    let outcome = signed
        .services
        .patch_cluster(Command::new(&signed.caller), id.0, patch, None)
        .await;
    refused_or_back(&signed, id.0, outcome.map(|_| ())).await
}

#[derive(Deserialize)]
pub struct ExposureForm {
    csrf: String,
    exposure: String,
}

/// Starts an exposure change.
pub async fn exposure(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    form: Form<ExposureForm>,
) -> Result<HttpResponse, ConsoleError> {
    check_form(&req, &signed.session, &form.csrf)?;
    let Some(exposure) = Exposure::ALL
        .into_iter()
        .find(|x| x.as_str() == form.exposure)
    else {
        return Err(ConsoleError::BadForm(
            "exposure must be public or private".into(),
        ));
    };
    let outcome = signed
        .services
        .change_exposure(
            Command::new(&signed.caller),
            id.0,
            ExposurePatch { exposure },
            None,
        )
        .await;
    refused_or_back(&signed, id.0, outcome.map(|_| ())).await
}

/// Back to the Overview after a change; a refusal shows it there with its words.
pub(super) async fn refused_or_back(
    signed: &Signed,
    id: uuid::Uuid,
    outcome: Result<(), DomainError>,
) -> Result<HttpResponse, ConsoleError> {
    match outcome {
        Ok(()) => Ok(see_other(&format!("{PREFIX}/clusters/{id}"))),
        Err(DomainError::Internal(cause)) => Err(DomainError::Internal(cause).into()),
        Err(e) => {
            let cluster = signed
                .services
                .get_cluster(&signed.caller, id, Freshness::Recent)
                .await?;
            let status = api::problem::status_of(&e);
            page(
                signed,
                &cluster,
                status,
                Some(&crate::pages::forms::refusal(&e)),
            )
            .await
        }
    }
}

fn delete_form(c: &Cluster, csrf: &str) -> Markup {
    html! {
        section.danger aria-labelledby="delete-title" {
            h2 #delete-title { "Delete cluster" }
            form method="post" action={ (PREFIX) "/clusters/" (c.id) "/delete" } {
                input type="hidden" name="csrf" value=(csrf);
                label for="confirm" { "Type the cluster's name, " strong { (c.name.as_str()) } ", to delete it and everything in it" }
                input #confirm type="text" name="confirm" autocomplete="off" required;
                button.destructive type="submit" { "Delete cluster" }
            }
        }
    }
}

/// The kubeconfig as a file; before the control plane is up, a page saying when to retry.
pub async fn kubeconfig(signed: Signed, id: Path<Id>) -> Result<HttpResponse, ConsoleError> {
    let services = &signed.services;
    match services
        .kubeconfig(&signed.caller, id.0, Default::default())
        .await?
    {
        KubeconfigAnswer::Ready { yaml, .. } => {
            let cluster = services
                .get_cluster(&signed.caller, id.0, Freshness::Recent)
                .await?;
            Ok(HttpResponse::Ok()
                .content_type("application/yaml")
                .insert_header((
                    header::CONTENT_DISPOSITION,
                    format!(
                        "attachment; filename=\"kubeconfig-{}.yaml\"",
                        cluster.name.as_str()
                    ),
                ))
                .body(yaml))
        }
        KubeconfigAnswer::NotReady {
            phase,
            retry_after_seconds,
        } => {
            let cluster = services
                .get_cluster(&signed.caller, id.0, Freshness::Recent)
                .await?;
            let message = format!(
                "The kubeconfig is not ready yet: the cluster is {}. Try again in {retry_after_seconds} seconds.",
                phase.as_str()
            );
            page(&signed, &cluster, StatusCode::OK, Some(&message)).await
        }
    }
}

#[derive(Deserialize)]
pub struct Delete {
    csrf: String,
    confirm: String,
}

/// Deletes the cluster once its name was typed; a second submission finds it deleting.
pub async fn delete(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    form: Form<Delete>,
) -> Result<HttpResponse, ConsoleError> {
    check_form(&req, &signed.session, &form.csrf)?;
    let services = &signed.services;
    let cluster = services
        .get_cluster(&signed.caller, id.0, Freshness::Recent)
        .await?;
    if form.confirm.trim() != cluster.name.as_str() {
        return page(
            &signed,
            &cluster,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("The name typed does not match the cluster's: nothing was deleted."),
        )
        .await;
    }
    services
        .delete_cluster(Command::new(&signed.caller), id.0, None)
        .await?;
    Ok(see_other(&format!(
        "{PREFIX}/clusters?organization={}",
        super::urlencode(&cluster.organization_slug)
    )))
}

/// What a network mode means for the person choosing it: which Elastic IPs the cluster takes.
pub fn network_mode_words(mode: NetworkMode) -> &'static str {
    match mode {
        NetworkMode::Intranet => {
            "its Elastic IPs are private addresses, reached inside the provider's network"
        }
        NetworkMode::Internet => "its Elastic IPs are public addresses, reached from the internet",
    }
}
