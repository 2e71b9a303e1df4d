//! The **Node pools** and **Nodes** tabs: add a pool, scale one (a count, or autoscale between
//! a minimum and a maximum), delete one (never the last), and delete a node.

use actix_web::HttpRequest;
use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::web::{Bytes, Path};
use api::extract::Id;
use domain::DomainError;
use domain::input::node_pool::{NodePoolPatch, NodePoolRequest};
use domain::model::cluster::Cluster;
use domain::model::node_pool::NodePool;
use domain::ports::storage::Freshness;
use maud::{Markup, html};

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::pages::cluster::{Tab, frame};
use crate::pages::forms::{Change, Submitted, new_key, or_redraw, refusal};
use crate::session::Signed;
use domain::service::Command;

/// The advice shown where a machine tier is: it cannot change in place.
const REPLACE_POOL: &str = "A pool's machine tier cannot change: add a pool with the new tier, \
     move the workloads, then delete the old pool.";

pub async fn pools_tab(signed: Signed, id: Path<Id>) -> Result<HttpResponse, ConsoleError> {
    draw_pools(&signed, id.0, StatusCode::OK, None).await
}

async fn draw_pools(
    signed: &Signed,
    id: uuid::Uuid,
    status: StatusCode,
    problem: Option<&str>,
) -> Result<HttpResponse, ConsoleError> {
    let c = signed
        .services
        .get_cluster(&signed.caller, id, Freshness::Recent)
        .await?;
    let tiers = signed
        .services
        .catalog_data()
        .zone(&c.zone)
        .map(|z| z.machine_tiers.clone())
        .unwrap_or_default();
    let csrf = signed.session.csrf.clone();
    Ok(frame(
        signed,
        &c,
        Tab::NodePools,
        status,
        problem,
        |may_change| {
            html! {
                h2.visually-hidden { "Node pools" }
                p.hint { (REPLACE_POOL) }
                @for p in &c.node_pools {
                    (pool_card(&c, p, may_change, &csrf))
                }
                @if may_change {
                    section.card aria-labelledby="add-pool" {
                        h3 #add-pool { "Add node pool" }
                        form method="post" action={ (PREFIX) "/clusters/" (c.id) "/node-pools" } {
                            input type="hidden" name="csrf" value=(csrf);
                            input type="hidden" name="key" value=(new_key());
                            label for="new-pool-name" { "Pool name" }
                            input #new-pool-name type="text" name="name" required;
                            label for="new-pool-size" { "Machine tier" }
                            select #new-pool-size name="size" {
                                @for t in &tiers {
                                    option value=(t.id) selected[t.recommended] {
                                        (t.display_name) " — " (t.vcpu) " vCPU, " (t.memory_gib) " GiB memory"
                                    }
                                }
                            }
                            label for="new-pool-count" { "Nodes" }
                            input #new-pool-count type="number" name="count" min="1" max="200" value="1";
                            button type="submit" { "Add node pool" }
                        }
                    }
                }
            }
        },
    ))
}

fn pool_card(c: &Cluster, p: &NodePool, may_change: bool, csrf: &str) -> Markup {
    let base = format!("{PREFIX}/clusters/{}/node-pools/{}", c.id, p.name.as_str());
    let id = |f: &str| format!("{}-{f}", p.name.as_str());
    let last = c.node_pools.len() == 1;
    html! {
        section.card aria-labelledby=(id("title")) {
            h3 id=(id("title")) { "Pool " (p.name.as_str()) " " span.badge.muted { (p.status.as_str()) } }
            dl.facts {
                dt { "Machine tier" } dd { (p.size) " (fixed)" }
                dt { "Nodes" } dd { (p.count) }
                dt { "Autoscale" } dd {
                    @if p.auto_scale {
                        (p.min_nodes) " to " (p.max_nodes.map(|m| m.to_string()).unwrap_or_default())
                    } @else { "off" }
                }
            }
            @if may_change {
                form.inline-form method="post" action={ (base) "/scale" } {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="key" value=(new_key());
                    label for=(id("count")) { "Nodes" }
                    input id=(id("count")) type="number" name="count" min="0" max="200" value=(p.count);
                    label.inline {
                        input type="checkbox" name="auto_scale" checked[p.auto_scale];
                        " Autoscale"
                    }
                    label for=(id("min")) { "Minimum" }
                    input id=(id("min")) type="number" name="min_nodes" min="0" max="200" value=(p.min_nodes);
                    label for=(id("max")) { "Maximum" }
                    input id=(id("max")) type="number" name="max_nodes" min="1" max="200"
                        value=[p.max_nodes];
                    button type="submit" { "Scale pool " (p.name.as_str()) }
                }
                @if last {
                    p.hint { "The last pool of a cluster cannot be deleted." }
                } @else {
                    form method="post" action={ (base) "/delete" } {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="hidden" name="key" value=(new_key());
                        button.destructive type="submit" { "Delete pool " (p.name.as_str()) }
                    }
                }
            }
        }
    }
}

/// A number field: absent when empty; a text that is no whole number is refused at its field.
fn number(form: &Submitted, field: &str) -> Result<Option<i64>, DomainError> {
    match form.text(field) {
        None => Ok(None),
        Some(t) => t
            .parse::<i64>()
            .map(Some)
            .map_err(|_| DomainError::validation(field, "must be a whole number")),
    }
}

/// The tab after a change: where the change sent the browser, or the tab with the refusal.
async fn after_pool_change(
    signed: &Signed,
    id: uuid::Uuid,
    done: Result<HttpResponse, DomainError>,
) -> Result<HttpResponse, ConsoleError> {
    or_redraw(done, async |status, words| {
        draw_pools(signed, id, status, Some(&words)).await
    })
    .await
}

pub async fn add_pool(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let form = &change.form;
    let done = match number(form, "count") {
        Err(e) => Err(e),
        Ok(count) => {
            let draft = NodePoolRequest {
                name: form.text("name"),
                size: form.text("size"),
                count,
                ..NodePoolRequest::default()
            };
            let back = format!("{PREFIX}/clusters/{}/node-pools", id.0);
            change
                .run(back, async |request| {
                    signed
                        .services
                        .create_node_pool(
                            Command::keyed(&signed.caller, Some(request)),
                            id.0,
                            draft,
                        )
                        .await
                })
                .await?
        }
    };
    after_pool_change(&signed, id.0, done).await
}

/// A pool's new sizing as the scale form says it: a count, or autoscale with its bounds.
fn sizing(form: &Submitted) -> Result<NodePoolPatch, DomainError> {
    let auto_scale = form.checked("auto_scale");
    let bound = |field: &str| -> Result<Option<Option<i64>>, DomainError> {
        Ok(if auto_scale {
            number(form, field)?.map(Some)
        } else {
            None
        })
    };
    Ok(NodePoolPatch {
        count: number(form, "count")?.map(Some),
        auto_scale: Some(Some(auto_scale)),
        min_nodes: bound("min_nodes")?,
        max_nodes: bound("max_nodes")?,
        ..NodePoolPatch::default()
    })
}

pub async fn scale_pool(
    req: HttpRequest,
    signed: Signed,
    path: Path<(Id, String)>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let (id, pool) = path.into_inner();
    let done = match sizing(&change.form) {
        Err(e) => Err(e),
        Ok(patch) => {
            let back = format!("{PREFIX}/clusters/{}/node-pools", id.0);
            change
                .run(back, async |request| {
                    signed
                        .services
                        .patch_node_pool(
                            Command::keyed(&signed.caller, Some(request)),
                            id.0,
                            &pool,
                            patch,
                            None,
                        )
                        .await
                })
                .await?
        }
    };
    after_pool_change(&signed, id.0, done).await
}

pub async fn delete_pool(
    req: HttpRequest,
    signed: Signed,
    path: Path<(Id, String)>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let (id, pool) = path.into_inner();
    let back = format!("{PREFIX}/clusters/{}/node-pools", id.0);
    let done = change
        .run(back, async |request| {
            signed
                .services
                .delete_node_pool(
                    Command::keyed(&signed.caller, Some(request)),
                    id.0,
                    &pool,
                    None,
                )
                .await
        })
        .await?;
    after_pool_change(&signed, id.0, done).await
}

pub async fn nodes_tab(signed: Signed, id: Path<Id>) -> Result<HttpResponse, ConsoleError> {
    draw_nodes(&signed, id.0, StatusCode::OK, None).await
}

async fn draw_nodes(
    signed: &Signed,
    id: uuid::Uuid,
    status: StatusCode,
    problem: Option<&str>,
) -> Result<HttpResponse, ConsoleError> {
    let services = &signed.services;
    let c = services
        .get_cluster(&signed.caller, id, Freshness::Recent)
        .await?;
    let nodes = services.list_nodes(&signed.caller, id, None).await?;
    let csrf = signed.session.csrf.clone();
    Ok(frame(
        signed,
        &c,
        Tab::Nodes,
        status,
        problem,
        |may_change| {
            html! {
                h2.visually-hidden { "Nodes" }
                @for p in &c.node_pools {
                    h3 { "Pool " (p.name.as_str()) }
                    table.nodes {
                        thead { tr {
                            th scope="col" { "Node" } th scope="col" { "Status" } th scope="col" { "Created" }
                            @if may_change { th scope="col" { span.visually-hidden { "Actions" } } }
                        } }
                        tbody {
                            @for n in nodes.iter().filter(|n| n.pool == p.name) {
                                tr {
                                    th scope="row" { (n.name.as_str()) }
                                    td { (n.status.as_str()) }
                                    td { (crate::pages::clusters::when(n.created_at)) }
                                    @if may_change { td {
                                        form method="post" action={ (PREFIX) "/clusters/" (c.id) "/nodes/" (n.name.as_str()) "/delete" } {
                                            input type="hidden" name="csrf" value=(csrf);
                                            input type="hidden" name="key" value=(new_key());
                                            button.destructive type="submit" { "Delete node " (n.name.as_str()) }
                                        }
                                    } }
                                }
                            }
                        }
                    }
                }
            }
        },
    ))
}

pub async fn delete_node(
    req: HttpRequest,
    signed: Signed,
    path: Path<(Id, String)>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let (id, node) = path.into_inner();
    let back = format!("{PREFIX}/clusters/{}/nodes", id.0);
    let done = change
        .run(back, async |request| {
            signed
                .services
                .delete_node(Command::keyed(&signed.caller, Some(request)), id.0, &node)
                .await
        })
        .await?;
    match done {
        Ok(response) => Ok(response),
        Err(e) => {
            draw_nodes(
                &signed,
                id.0,
                api::problem::status_of(&e),
                Some(&refusal(&e)),
            )
            .await
        }
    }
}
