//! The **Node pools** and **Nodes** tabs: add a pool, scale one (a count, or autoscale between
//! a minimum and a maximum), change its taints (its nodes get them in place), delete one
//! (never the last), and delete a node.

use actix_web::HttpRequest;
use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::web::{Bytes, Path};
use api::extract::Id;
use domain::DomainError;
use domain::input::node_pool::{NodePoolPatch, NodePoolRequest, TaintRequest};
use domain::model::catalog::MachineTier;
use domain::model::cluster::Cluster;
use domain::model::node::{Node, NodeStatus};
use domain::model::node_pool::{NodePool, PoolStatus, Taint};
use domain::ports::storage::Freshness;
use maud::{Markup, html};

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::pages::cluster::{Tab, frame};
use crate::pages::forms::{Change, Submitted, in_form_words, new_key, refusal};
use crate::pages::live::Around;
use crate::session::Signed;
use domain::service::Command;

/// The advice shown where a machine tier is: it cannot change in place.
const REPLACE_POOL: &str = "A pool's machine tier cannot change: add a pool with the new tier, \
     move the workloads, then delete the old pool.";

pub async fn pools_tab(signed: Signed, id: Path<Id>) -> Result<HttpResponse, ConsoleError> {
    draw_pools(&signed, id.0, StatusCode::OK, None).await
}

/// A pool form sent back: which one, what was typed in it, and why it was refused.
struct Refused<'a> {
    form: PoolForm,
    typed: &'a Submitted,
    error: &'a DomainError,
}

#[derive(PartialEq, Eq)]
enum PoolForm {
    Add,
    Scale(String),
    Taints(String),
    Delete,
}

impl Refused<'_> {
    /// The refusal's words beside `field` of `form`, in the form's own words.
    fn at(&self, form: &PoolForm, field: &str) -> Option<String> {
        if &self.form != form {
            return None;
        }
        field_errors(self.error)
            .into_iter()
            .find(|(f, _)| f == field)
            .map(|(_, m)| m)
    }

    /// The refusals of the taints typed in `form`, one line each, in the form's own words
    /// (the API names them `taints[i].key`: here, the line).
    fn taints(&self, form: &PoolForm) -> Option<String> {
        if &self.form != form {
            return None;
        }
        let lines: Vec<String> = field_errors(self.error)
            .into_iter()
            .filter_map(|(f, m)| {
                let rest = f.strip_prefix("taints")?;
                Some(
                    match rest.strip_prefix('[').and_then(|r| r.split_once(']')) {
                        Some((i, part)) => {
                            let line = i.parse::<usize>().map_or(0, |i| i + 1);
                            format!("Line {line}{}: {m}", part.replace('.', ", "))
                        }
                        None => m,
                    },
                )
            })
            .collect();
        (!lines.is_empty()).then(|| lines.join("; "))
    }

    /// What was typed in `form`'s `field`, when that form is the one refused.
    fn typed(&self, form: &PoolForm, field: &str) -> Option<&str> {
        (&self.form == form).then(|| self.typed.get(field))
    }
}

/// A refusal's field errors, their messages in the words of the form's labels.
fn field_errors(e: &DomainError) -> Vec<(String, String)> {
    match e {
        DomainError::Validation(v) => v
            .errors()
            .iter()
            .filter(|f| !f.field.is_empty())
            .map(|f| (f.field.clone(), in_form_words(&f.message)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The banner above the tab: what has no field to stand beside.
fn banner(refused: Option<&Refused>) -> Option<String> {
    let r = refused?;
    Some(match r.error {
        DomainError::Validation(v) if v.errors().iter().all(|f| !f.field.is_empty()) => {
            match r.form {
                PoolForm::Add => "The node pool was not added: see the fields marked below.".into(),
                _ => "The pool was not changed: see the fields marked below.".into(),
            }
        }
        other => in_form_words(&refusal(other)),
    })
}

async fn draw_pools(
    signed: &Signed,
    id: uuid::Uuid,
    status: StatusCode,
    refused: Option<&Refused<'_>>,
) -> Result<HttpResponse, ConsoleError> {
    let c = signed
        .services
        .get_cluster(&signed.caller, id, Freshness::Recent)
        .await?;
    let around = Around::of(signed, &c).await?;
    let tiers = signed
        .services
        .catalog_data()
        .zone(&c.zone)
        .map(|z| z.machine_tiers.clone())
        .unwrap_or_default();
    let csrf = signed.session.csrf.clone();
    let problem = banner(refused);
    let add = PoolForm::Add;
    let typed = |field: &str, otherwise: &str| -> String {
        refused
            .and_then(|r| r.typed(&add, field))
            .unwrap_or(otherwise)
            .to_owned()
    };
    let error = |field: &str| refused.and_then(|r| r.at(&add, field));
    let chosen = typed(
        "size",
        &tiers
            .iter()
            .find(|t| t.recommended)
            .map(|t| t.id.clone())
            .unwrap_or_default(),
    );
    let autoscale = refused.is_some_and(|r| r.form == add && r.typed.checked("auto_scale"));
    Ok(frame(
        signed,
        &c,
        &around,
        Tab::NodePools,
        status,
        problem.as_deref(),
        |may_change| {
            html! {
                h2.visually-hidden { "Node pools" }
                p.hint { (REPLACE_POOL) }
                @for p in &c.node_pools {
                    (pool_card(&c, p, may_change, &csrf, refused))
                }
                @if may_change {
                    section.card aria-labelledby="add-pool" {
                        h3 #add-pool { "Add node pool" }
                        form.sizing method="post" action={ (PREFIX) "/clusters/" (c.id) "/node-pools" } {
                            input type="hidden" name="csrf" value=(csrf);
                            input type="hidden" name="key" value=(new_key());
                            (field("new-pool-name", "name", "Pool name", "text", &typed("name", ""), error("name"), None))
                            label for="new-pool-size" { "Machine tier" }
                            select #new-pool-size name="size" aria-invalid=[error("size").map(|_| "true")] {
                                @for t in &tiers {
                                    option value=(t.id) selected[t.id == chosen] { (tier_label(t)) }
                                }
                            }
                            @if let Some(m) = error("size") { p.field-error { (m) } }
                            (sizing_fields("new-pool", &typed("count", "1"), autoscale,
                                &typed("min_nodes", ""), &typed("max_nodes", ""), &error))
                            (taints_field("new-pool-taints", &typed("taints", ""),
                                refused.and_then(|r| r.taints(&add))))
                            button type="submit" { "Add node pool" }
                        }
                    }
                }
            }
        },
    ))
}

/// One labelled input with its error beside it (`aria-describedby` names the error).
fn field(
    id: &str,
    name: &str,
    label: &str,
    kind: &str,
    value: &str,
    error: Option<String>,
    limits: Option<(u32, u32)>,
) -> Markup {
    let error_id = format!("{id}-error");
    html! {
        label for=(id) { (label) }
        input id=(id) name=(name) type=(kind) value=(value)
            min=[limits.map(|l| l.0)] max=[limits.map(|l| l.1)]
            aria-invalid=[error.as_ref().map(|_| "true")]
            aria-describedby=[error.as_ref().map(|_| error_id.as_str())];
        @if let Some(m) = error { p.field-error id=(error_id) { (m) } }
    }
}

/// The taints of a pool as text, one per line, as `kubectl taint` writes them.
fn taints_text(taints: &[Taint]) -> String {
    taints
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The taints typed in a form, one per line (blank lines skipped), split by the domain's
/// reading of `KEY=VALUE:EFFECT`; the rules are the use case's.
fn typed_taints(form: &Submitted) -> Vec<TaintRequest> {
    form.get("taints")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(TaintRequest::from_text)
        .collect()
}

/// The taints text area with its refusal beside it.
fn taints_field(id: &str, value: &str, error: Option<String>) -> Markup {
    let error_id = format!("{id}-error");
    let hint_id = format!("{id}-hint");
    let described = match &error {
        Some(_) => format!("{hint_id} {error_id}"),
        None => hint_id.clone(),
    };
    html! {
        label for=(id) { "Taints" }
        p.hint id=(hint_id) {
            "One per line, as " code { "KEY=VALUE:EFFECT" } " or " code { "KEY:EFFECT" }
            "; the effect is NoSchedule, PreferNoSchedule or NoExecute. At most "
            (domain::rules::MAX_TAINTS_PER_POOL) "."
        }
        textarea id=(id) name="taints" rows="3"
            aria-invalid=[error.as_ref().map(|_| "true")]
            aria-describedby=(described) { (value) }
        @if let Some(m) = error { p.field-error id=(error_id) { (m) } }
    }
}

/// The node count, the autoscale switch and its bounds; the bounds show only while autoscale
/// is on (the stylesheet hides them otherwise) and start empty.
fn sizing_fields(
    prefix: &str,
    count: &str,
    autoscale: bool,
    min: &str,
    max: &str,
    error: &dyn Fn(&str) -> Option<String>,
) -> Markup {
    let id = |f: &str| format!("{prefix}-{f}");
    let max_nodes = domain::rules::MAX_NODES_PER_POOL;
    html! {
        (field(&id("count"), "count", "Nodes", "number", count, error("count"), Some((0, max_nodes))))
        label.inline {
            input.autoscale type="checkbox" name="auto_scale" checked[autoscale];
            " Autoscale between a minimum and a maximum"
        }
        div.bounds {
            (field(&id("min"), "min_nodes", "Minimum nodes", "number", min, error("min_nodes"), Some((0, max_nodes))))
            (field(&id("max"), "max_nodes", "Maximum nodes", "number", max, error("max_nodes"), Some((1, max_nodes))))
        }
    }
}

/// A machine tier as every form lists it: its size, and the recommended one marked.
pub fn tier_label(t: &MachineTier) -> String {
    format!(
        "{} — {} vCPU, {} GiB memory, {} GiB disk{}",
        t.display_name,
        t.vcpu,
        t.memory_gib,
        t.disk_gib,
        if t.recommended { " (recommended)" } else { "" }
    )
}

/// A pool's status and facts; `oob`: as part of a live answer, swapped in place by its id.
pub fn pool_facts(p: &NodePool, oob: bool) -> Markup {
    html! {
        div id={ "pool-" (p.name.as_str()) "-facts" } hx-swap-oob=[oob.then_some("true")] {
            p { "Status " span.badge.muted { (p.status.as_str()) } }
            dl.facts {
                dt { "Machine tier" } dd { (p.size) " (fixed)" }
                dt { "Nodes" } dd { (p.count) }
                dt { "Kubernetes version" } dd { (p.version) }
                dt { "During upgrades" } dd {
                    "up to " (p.surge.max_surge) " extra, "
                    (p.surge.max_unavailable) " unavailable"
                }
                dt { "Autoscale" } dd {
                    @if p.auto_scale {
                        (p.min_nodes) " to " (p.max_nodes.map(|m| m.to_string()).unwrap_or_default())
                    } @else { "off" }
                }
                dt { "Labels" } dd {
                    @if p.labels.is_empty() { "none" }
                    @for (k, v) in &p.labels { code { (k) "=" (v) } " " }
                }
                dt { "Taints" } dd {
                    @if p.taints.is_empty() { "none" }
                    @for t in &p.taints { code { (t.to_string()) } " " }
                }
            }
        }
    }
}

fn pool_card(
    c: &Cluster,
    p: &NodePool,
    may_change: bool,
    csrf: &str,
    refused: Option<&Refused<'_>>,
) -> Markup {
    let base = format!("{PREFIX}/clusters/{}/node-pools/{}", c.id, p.name.as_str());
    let name = p.name.as_str();
    let mine = PoolForm::Scale(name.to_owned());
    let typed = |field: &str, otherwise: String| -> String {
        refused
            .and_then(|r| r.typed(&mine, field))
            .map_or(otherwise, str::to_owned)
    };
    let error = |field: &str| refused.and_then(|r| r.at(&mine, field));
    let autoscale = match refused {
        Some(r) if r.form == mine => r.typed.checked("auto_scale"),
        _ => p.auto_scale,
    };
    let bound = |v: Option<u32>| {
        if p.auto_scale {
            v.map(|n| n.to_string()).unwrap_or_default()
        } else {
            String::new()
        }
    };
    let last = c.node_pools.len() == 1;
    let deleting = p.status == PoolStatus::Deleting;
    html! {
        section.card aria-labelledby={ (name) "-title" } {
            h3 id={ (name) "-title" } { "Pool " (name) }
            (pool_facts(p, false))
            @if may_change && !deleting {
                form.inline-form.sizing method="post" action={ (base) "/scale" } {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="key" value=(new_key());
                    (sizing_fields(name, &typed("count", p.count.to_string()), autoscale,
                        &typed("min_nodes", bound(Some(p.min_nodes))), &typed("max_nodes", bound(p.max_nodes)), &error))
                    button type="submit" { "Scale pool " (name) }
                }
                @let taints_form = PoolForm::Taints(name.to_owned());
                form.inline-form method="post" action={ (base) "/taints" } {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="key" value=(new_key());
                    (taints_field(&format!("{name}-taints"),
                        &refused.and_then(|r| r.typed(&taints_form, "taints")).map_or_else(|| taints_text(&p.taints), str::to_owned),
                        refused.and_then(|r| r.taints(&taints_form))))
                    p.hint { "Saved taints reach the pool's running nodes in place: no node is replaced." }
                    button type="submit" { "Save taints of pool " (name) }
                }
                @if last {
                    p.hint { "The last pool of a cluster cannot be deleted: delete the cluster instead." }
                } @else {
                    details.confirm {
                        summary { "Delete pool " (name) "…" }
                        form method="post" action={ (base) "/delete" } {
                            input type="hidden" name="csrf" value=(csrf);
                            input type="hidden" name="key" value=(new_key());
                            p { "Its " (p.count) " node" @if p.count != 1 { "s" } " are drained and deleted with it; workloads scheduled only there have nowhere to run." }
                            button.destructive type="submit" { "Delete pool " (name) " and its nodes" }
                        }
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

/// The tab after a change: where the change sent the browser, or the tab drawn again with
/// what was typed and the refusal beside its fields.
async fn after_pool_change(
    signed: &Signed,
    id: uuid::Uuid,
    form: PoolForm,
    typed: &Submitted,
    done: Result<HttpResponse, DomainError>,
) -> Result<HttpResponse, ConsoleError> {
    match done {
        Ok(response) => Ok(response),
        Err(error) => {
            let refused = Refused {
                form,
                typed,
                error: &error,
            };
            draw_pools(signed, id, api::problem::status_of(&error), Some(&refused)).await
        }
    }
}

pub async fn add_pool(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let form = &change.form;
    let done = match sizing(form) {
        Err(e) => Err(e),
        Ok(s) => {
            let taints = typed_taints(form);
            let draft = NodePoolRequest {
                name: form.text("name"),
                size: form.text("size"),
                count: s.count.flatten(),
                auto_scale: s.auto_scale.flatten(),
                min_nodes: s.min_nodes.flatten(),
                max_nodes: s.max_nodes.flatten(),
                taints: (!taints.is_empty()).then_some(taints),
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
    after_pool_change(&signed, id.0, PoolForm::Add, &change.form, done).await
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
        Ok(patch) => patch_pool(&signed, &change, id.0, &pool, patch).await?,
    };
    after_pool_change(&signed, id.0, PoolForm::Scale(pool), &change.form, done).await
}

/// A pool's PATCH from a form, under the form's idempotency key, back to the Node pools tab.
async fn patch_pool(
    signed: &Signed,
    change: &Change,
    cluster: uuid::Uuid,
    pool: &str,
    patch: NodePoolPatch,
) -> Result<Result<HttpResponse, DomainError>, ConsoleError> {
    let back = format!("{PREFIX}/clusters/{cluster}/node-pools");
    change
        .run(back, async |request| {
            signed
                .services
                .patch_node_pool(
                    Command::keyed(&signed.caller, Some(request)),
                    cluster,
                    pool,
                    patch,
                    None,
                )
                .await
        })
        .await
}

/// Replaces a pool's taints with the ones typed (none: every taint removed).
pub async fn taints_pool(
    req: HttpRequest,
    signed: Signed,
    path: Path<(Id, String)>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let (id, pool) = path.into_inner();
    let patch = NodePoolPatch {
        taints: Some(Some(typed_taints(&change.form))),
        ..NodePoolPatch::default()
    };
    let done = patch_pool(&signed, &change, id.0, &pool, patch).await?;
    after_pool_change(&signed, id.0, PoolForm::Taints(pool), &change.form, done).await
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
    after_pool_change(&signed, id.0, PoolForm::Delete, &change.form, done).await
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
    let around = Around::of(signed, &c).await?;
    let csrf = signed.session.csrf.clone();
    Ok(frame(
        signed,
        &c,
        &around,
        Tab::Nodes,
        status,
        problem,
        |may_change| {
            html! {
                h2.visually-hidden { "Nodes" }
                (node_tables(&c, &around.nodes, may_change, &csrf, false))
            }
        },
    ))
}

/// The nodes of each pool; a node can be deleted (it is replaced) unless it already is being
/// deleted, after a question that says so. `oob`: as part of a live answer.
pub fn node_tables(c: &Cluster, nodes: &[Node], may_change: bool, csrf: &str, oob: bool) -> Markup {
    html! {
        div #nodes-list hx-swap-oob=[oob.then_some("true")] {
            @for p in &c.node_pools {
                h3 { "Pool " (p.name.as_str()) }
                table.nodes {
                    thead { tr {
                        th scope="col" { "Node" } th scope="col" { "Status" } th scope="col" { "Version" } th scope="col" { "Created" }
                        th scope="col" { "Node" } th scope="col" { "Status" } th scope="col" { "Taints" } th scope="col" { "Created" }
                        @if may_change { th scope="col" { span.visually-hidden { "Actions" } } }
                    } }
                    tbody {
                        @for n in nodes.iter().filter(|n| n.pool == p.name) {
                            tr {
                                th scope="row" { (n.name.as_str()) }
                                td { (n.status.as_str()) }
                                td { (n.version) }
                                td {
                                    @if n.taints.is_empty() { "none" }
                                    @for t in &n.taints { code { (t.to_string()) } " " }
                                    @if n.status == NodeStatus::Ready && !n.matches_pool(p) {
                                        span.hint { "(the pool's labels and taints are being applied)" }
                                    }
                                }
                                td { (crate::pages::clusters::when(n.created_at)) }
                                @if may_change { td {
                                    @if n.status == NodeStatus::Deleting {
                                        span.hint { "Being replaced" }
                                    } @else {
                                        details.confirm {
                                            summary { "Delete node " (n.name.as_str()) "…" }
                                            form method="post" action={ (PREFIX) "/clusters/" (c.id) "/nodes/" (n.name.as_str()) "/delete" } {
                                                input type="hidden" name="csrf" value=(csrf);
                                                input type="hidden" name="key" value=(new_key());
                                                p { "The node is drained and replaced by a new one: pool " (p.name.as_str()) " keeps its " (p.count) " node" @if p.count != 1 { "s" } "." }
                                                button.destructive type="submit" { "Delete and replace " (n.name.as_str()) }
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
