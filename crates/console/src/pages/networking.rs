//! The **Networking** tab: the control-plane firewall (who may call the API server, changed
//! through the same use case as the API's PATCH), Elastic IPs (allocate, release once `Ready`
//! or `Failed`, and the annotation a workload uses to claim one) and the firewall rules, read
//! only: rules are managed through the API.

use actix_web::http::StatusCode;
use actix_web::web::{Bytes, Path};
use actix_web::{HttpRequest, HttpResponse};
use api::extract::Id;
use domain::DomainError;
use domain::input::cluster::{ClusterPatch, ControlPlaneFirewallRequest};
use domain::input::elastic_ip::CreateElasticIpRequest;
use domain::model::cluster::{Cluster, ControlPlaneFirewall, Exposure};
use domain::model::elastic_ip::{ElasticIpStatus, ElasticIpView};
use domain::model::firewall::FirewallRule;
use domain::ports::storage::Freshness;
use maud::{Markup, html};

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::pages::cluster::{Tab, frame, network_mode_words};
use crate::pages::forms::{Change, new_key, or_redraw};
use crate::pages::live::Around;
use crate::pages::see_other;
use crate::session::Signed;
use domain::service::Command;

pub async fn tab(signed: Signed, id: Path<Id>) -> Result<HttpResponse, ConsoleError> {
    draw(&signed, id.0, StatusCode::OK, None).await
}

async fn draw(
    signed: &Signed,
    id: uuid::Uuid,
    status: StatusCode,
    problem: Option<&str>,
) -> Result<HttpResponse, ConsoleError> {
    let services = &signed.services;
    let c = services
        .get_cluster(&signed.caller, id, Freshness::Recent)
        .await?;
    let around = Around::of(signed, &c).await?;
    let rules = services.list_firewall_rules(&signed.caller, id).await?;
    let csrf = signed.session.csrf.clone();
    let allowed = c.network_mode.elastic_ip_exposure();
    Ok(frame(
        signed,
        &c,
        &around,
        Tab::Networking,
        status,
        problem,
        |may_change| {
            html! {
                (firewall_section(&c, may_change, &csrf))
                h2 { "Elastic IPs" }
                (eip_table(&c, &around.eips, may_change, &csrf, false))
                @if may_change {
                    section.card aria-labelledby="allocate" {
                        h3 #allocate { "Allocate Elastic IP" }
                        form method="post" action={ (PREFIX) "/clusters/" (c.id) "/elastic-ips" } {
                            input type="hidden" name="csrf" value=(csrf);
                            input type="hidden" name="key" value=(new_key());
                            label for="eip-name" { "Name (optional)" }
                            input #eip-name type="text" name="name";
                            p.hint {
                                "The address will be " strong { (allowed.as_str()) } ": this cluster's network mode, "
                                (c.network_mode.as_str()) ", means " (network_mode_words(c.network_mode))
                                ". The network mode is chosen when a cluster is created and cannot change."
                            }
                            button type="submit" { "Allocate " (allowed.as_str()) " Elastic IP" }
                        }
                    }
                }
                h2 { "Firewall rules" }
                p.hint { "Firewall rules are managed through the API; the console lists them." }
                (rule_table(&rules, false))
            }
        },
    ))
}

/// A control-plane firewall in words.
fn firewall_words(f: &ControlPlaneFirewall) -> Markup {
    html! {
        @if f.enabled {
            "Only callers from "
            @for (i, c) in f.allowed_addresses.iter().enumerate() {
                @if i > 0 { ", " } code { (c.to_string()) }
            }
        } @else {
            "Open: anyone holding a credential"
            @if !f.allowed_addresses.is_empty() {
                " (networks kept for later: "
                @for (i, c) in f.allowed_addresses.iter().enumerate() {
                    @if i > 0 { ", " } code { (c.to_string()) }
                }
                ")"
            }
        }
    }
}

/// Who may call the cluster's API server, and the form that changes it.
fn firewall_section(c: &Cluster, may_change: bool, csrf: &str) -> Markup {
    let f = &c.control_plane_firewall;
    let shown = c.control_plane_firewall_change.as_ref().unwrap_or(f);
    let networks: Vec<String> = shown
        .allowed_addresses
        .iter()
        .map(ToString::to_string)
        .collect();
    html! {
        h2 { "Control-plane firewall" }
        dl.facts #control-plane-firewall {
            dt { "In force" } dd { (firewall_words(f)) }
            @if let Some(to) = &c.control_plane_firewall_change {
                dt { "Being applied" } dd { (firewall_words(to)) }
            }
        }
        @if may_change {
            section.card aria-labelledby="cpf-title" {
                h3 #cpf-title { "Change who may call the API server" }
                form method="post" action={ (PREFIX) "/clusters/" (c.id) "/control-plane-firewall" } {
                    input type="hidden" name="csrf" value=(csrf);
                    label.inline {
                        input type="checkbox" name="enabled" checked[shown.enabled];
                        " Only let callers from these networks reach the API server"
                    }
                    label for="cpf-networks" { "Networks" }
                    p.hint #cpf-hint {
                        "IPv4 or IPv6 networks in CIDR notation, one per line (" code { "203.0.113.0/24" }
                        ", " code { "2001:db8::/32" } "; " code { "/32" } " or " code { "/128" }
                        " for one address), at most " (domain::rules::MAX_CONTROL_PLANE_ALLOWED)
                        ". A change is applied in a few moments; until then the firewall in force stays."
                    }
                    textarea #cpf-networks name="allowed_addresses" rows="4" aria-describedby="cpf-hint" {
                        (networks.join("\n"))
                    }
                    button type="submit" { "Save control-plane firewall" }
                }
            }
        }
    }
}

/// Changes the control-plane firewall through the use case the API's PATCH calls.
pub async fn control_plane_firewall(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let networks: Vec<String> = change
        .form
        .get("allowed_addresses")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let patch = ClusterPatch {
        control_plane_firewall: Some(Some(ControlPlaneFirewallRequest {
            enabled: Some(change.form.checked("enabled")),
            allowed_addresses: Some(networks),
        })),
        ..ClusterPatch::default()
    };
    let done = signed
        .services
        .patch_cluster(Command::new(&signed.caller), id.0, patch, None)
        .await
        .map(|_| see_other(&format!("{PREFIX}/clusters/{}/networking", id.0)));
    after(&signed, id.0, done).await
}

/// The cluster's Elastic IPs; one can be released once `Ready` or `Failed`, after a question
/// that says what follows. `oob`: as part of a live answer.
pub fn eip_table(
    c: &Cluster,
    eips: &[ElasticIpView],
    may_change: bool,
    csrf: &str,
    oob: bool,
) -> Markup {
    html! {
        div #eips-list hx-swap-oob=[oob.then_some("true")] {
            @if eips.is_empty() {
                p.empty { "No Elastic IPs on this cluster." }
            } @else {
                table.eips {
                    thead { tr {
                        th scope="col" { "Name" } th scope="col" { "Exposure" } th scope="col" { "Status" }
                        th scope="col" { "Address" } th scope="col" { "Annotation to use" }
                        @if may_change { th scope="col" { span.visually-hidden { "Actions" } } }
                    } }
                    tbody {
                        @for e in eips {
                            @let name = e.name.as_deref().unwrap_or("Elastic IP");
                            tr {
                                th scope="row" { (e.name.as_deref().unwrap_or("—")) }
                                td { (e.exposure.as_str()) }
                                td { (e.status.as_str()) @if let Some(r) = &e.failure_reason { " — " (r) } }
                                td { (e.address.as_deref().unwrap_or("not yet")) }
                                td { code { (e.annotation.key) ": " (e.annotation.value) } }
                                @if may_change { td {
                                    @if matches!(e.status, ElasticIpStatus::Ready | ElasticIpStatus::Failed) {
                                        details.confirm {
                                            summary { "Release " (name) "…" }
                                            form method="post" action={ (PREFIX) "/clusters/" (c.id) "/elastic-ips/" (e.id) "/release" } {
                                                input type="hidden" name="csrf" value=(csrf);
                                                input type="hidden" name="key" value=(new_key());
                                                p { "The address returns to the provider's pool: whoever reaches the cluster by it stops reaching it, and the same address may not come back." }
                                                button.destructive type="submit" { "Release " (name) }
                                            }
                                        }
                                    }
                                } }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The cluster's firewall rules, read only. `oob`: as part of a live answer.
pub fn rule_table(rules: &[FirewallRule], oob: bool) -> Markup {
    html! {
        div #rules-list hx-swap-oob=[oob.then_some("true")] {
            @if rules.is_empty() {
                p.empty { "No firewall rules on this cluster." }
            } @else {
                table.rules {
                    thead { tr {
                        th scope="col" { "Name" } th scope="col" { "Protocol" } th scope="col" { "Ports" }
                        th scope="col" { "Sources" } th scope="col" { "Status" }
                    } }
                    tbody {
                        @for r in rules {
                            tr {
                                th scope="row" { (r.name.as_ref().map_or("—", |n| n.as_str())) }
                                td { (r.protocol.as_str()) }
                                td { @if let Some(p) = &r.port_range { (p.from) "–" (p.to) } @else { "—" } }
                                td { (r.source_cidrs.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")) }
                                td { (r.status.as_str()) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The tab after a change: where the change sent the browser, or the tab with the refusal.
async fn after(
    signed: &Signed,
    id: uuid::Uuid,
    done: Result<HttpResponse, DomainError>,
) -> Result<HttpResponse, ConsoleError> {
    or_redraw(done, async |status, words| {
        draw(signed, id, status, Some(&words)).await
    })
    .await
}

pub async fn allocate(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let draft = CreateElasticIpRequest {
        name: change.form.text("name"),
        exposure: Exposure::ALL
            .into_iter()
            .find(|x| x.as_str() == change.form.get("exposure")),
    };
    let back = format!("{PREFIX}/clusters/{}/networking", id.0);
    let done = change
        .run(back, async |request| {
            signed
                .services
                .create_elastic_ip(Command::keyed(&signed.caller, Some(request)), id.0, draft)
                .await
        })
        .await?;
    after(&signed, id.0, done).await
}

pub async fn release(
    req: HttpRequest,
    signed: Signed,
    path: Path<(Id, Id)>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let (id, eip) = path.into_inner();
    let back = format!("{PREFIX}/clusters/{}/networking", id.0);
    let done = change
        .run(back, async |request| {
            signed
                .services
                .release_elastic_ip(
                    Command::keyed(&signed.caller, Some(request)),
                    id.0,
                    eip.0,
                    None,
                )
                .await
        })
        .await?;
    after(&signed, id.0, done).await
}
