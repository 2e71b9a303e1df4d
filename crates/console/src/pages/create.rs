//! **Create cluster**: a form built from the zone's catalog, with a node-pool editor that works
//! without JavaScript ("Add node pool" and "Remove" are submit buttons that redraw the form with
//! what was typed). The domain's rules judge the form; their field paths come back beside the
//! fields. Each drawing of the form carries its own idempotency key, so a double submit creates
//! one cluster.

use std::collections::BTreeMap;

use actix_web::http::StatusCode;
use actix_web::web::{Bytes, Query};
use actix_web::{HttpRequest, HttpResponse};
use domain::DomainError;
use domain::input::cluster::CreateClusterRequest;
use domain::input::node_pool::NodePoolRequest;
use domain::model::catalog::ZoneOffer;
use domain::model::cluster::{Cluster, Exposure, NetworkMode};
use domain::model::idempotency::Fingerprint;
use domain::names::IdempotencyKey;
use domain::rules::MAX_POOLS;
use domain::service::{Command, Keyed, Scheduled};
use domain::validation::Violations;
use maud::{Markup, html};
use serde::Deserialize;

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::pages::cluster::network_mode_words;
use crate::pages::forms::{Redirect, in_form_words, settled};
use crate::pages::layout::{self, Nav};
use crate::pages::pools::tier_label;
use crate::pages::{Acting, check_form, html_page};
use crate::session::Signed;

const ACTION: &str = "/console/clusters/new";

/// What was typed into one pool's fieldset.
#[derive(Debug, Clone, Default, PartialEq)]
struct PoolFields {
    name: String,
    size: String,
    count: String,
    autoscale: bool,
    min: String,
    max: String,
}

/// The form as typed: every value a text, as the browser sent it.
#[derive(Debug, Clone, Default)]
struct Fields {
    csrf: String,
    key: String,
    organization: String,
    zone: String,
    name: String,
    version: String,
    description: String,
    tags: String,
    exposure: String,
    network_mode: String,
    pools: Vec<PoolFields>,
}

/// Which submit button was pressed.
enum Intent {
    Create,
    AddPool,
    RemovePool(usize),
}

impl Fields {
    /// Reads the urlencoded form. Pool fields are `pool.N.field` with N below the pool limit;
    /// any other index or name is ignored, so a hostile form cannot make the page allocate.
    fn read(body: &[u8]) -> Result<(Fields, Intent), ConsoleError> {
        let pairs: Vec<(String, String)> =
            serde_urlencoded::from_bytes(body).map_err(|e| ConsoleError::BadForm(e.to_string()))?;
        let mut f = Fields::default();
        let mut pools: BTreeMap<usize, PoolFields> = BTreeMap::new();
        let mut intent = Intent::Create;
        for (k, v) in pairs {
            match k.as_str() {
                "csrf" => f.csrf = v,
                "key" => f.key = v,
                "organization" => f.organization = v,
                "zone" => f.zone = v,
                "name" => f.name = v,
                "version" => f.version = v,
                "description" => f.description = v,
                "tags" => f.tags = v,
                "exposure" => f.exposure = v,
                "network_mode" => f.network_mode = v,
                "add_pool" => intent = Intent::AddPool,
                "remove_pool" => {
                    if let Ok(i) = v.parse::<usize>() {
                        intent = Intent::RemovePool(i);
                    }
                }
                other => {
                    let mut parts = other.splitn(3, '.');
                    let (Some("pool"), Some(i), Some(field)) =
                        (parts.next(), parts.next(), parts.next())
                    else {
                        continue;
                    };
                    let Some(i) = i.parse::<usize>().ok().filter(|i| *i < MAX_POOLS) else {
                        continue;
                    };
                    let p = pools.entry(i).or_default();
                    match field {
                        "name" => p.name = v,
                        "size" => p.size = v,
                        "count" => p.count = v,
                        "autoscale" => p.autoscale = true,
                        "min" => p.min = v,
                        "max" => p.max = v,
                        _ => {}
                    }
                }
            }
        }
        f.pools = pools.into_values().collect();
        Ok((f, intent))
    }

    /// The domain's draft of the create: empty texts are absent, numbers that do not read as
    /// whole numbers are reported here (a browser with JavaScript off may send anything).
    fn draft(&self) -> Result<CreateClusterRequest, Violations> {
        let mut v = Violations::new();
        let text = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
        let mut number = |field: String, s: &str| -> Option<i64> {
            let s = s.trim();
            if s.is_empty() {
                return None;
            }
            s.parse::<i64>()
                .map_err(|_| v.push(field, "must be a whole number"))
                .ok()
        };
        let pools: Vec<NodePoolRequest> = self
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| NodePoolRequest {
                name: text(&p.name),
                size: text(&p.size),
                count: number(format!("node_pools[{i}].count"), &p.count),
                auto_scale: Some(p.autoscale),
                min_nodes: number(format!("node_pools[{i}].min_nodes"), &p.min),
                max_nodes: number(format!("node_pools[{i}].max_nodes"), &p.max),
                labels: None,
                taints: None,
                tags: None,
                ..NodePoolRequest::default()
            })
            .collect();
        let tags: Vec<String> = self
            .tags
            .split([',', ' ', '\n'])
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        let draft = CreateClusterRequest {
            organization: text(&self.organization),
            name: text(&self.name),
            zone: text(&self.zone),
            version: text(&self.version),
            description: text(&self.description),
            tags: (!tags.is_empty()).then_some(tags),
            exposure: Exposure::ALL
                .into_iter()
                .find(|e| e.as_str() == self.exposure),
            network_mode: NetworkMode::ALL
                .into_iter()
                .find(|m| m.as_str() == self.network_mode),
            node_pools: Some(pools),
            control_plane_firewall: None,
            ..CreateClusterRequest::default()
        };
        v.into_result(draft)
    }

    /// The fingerprint of what this submission asks for (the CSRF token and the key aside), so
    /// the same form sent twice is the same request and a changed one is not.
    fn fingerprint(&self) -> Fingerprint {
        let pools: Vec<serde_json::Value> = self
            .pools
            .iter()
            .map(|p| serde_json::json!([p.name, p.size, p.count, p.autoscale, p.min, p.max]))
            .collect();
        let body = serde_json::json!({
            "organization": self.organization, "zone": self.zone, "name": self.name,
            "version": self.version, "description": self.description, "tags": self.tags,
            "exposure": self.exposure, "network_mode": self.network_mode, "pools": pools,
        });
        crate::pages::forms::fingerprint(ACTION, &body)
    }
}

#[derive(Deserialize)]
pub struct NewQuery {
    organization: Option<String>,
    zone: Option<String>,
}

/// The empty form, for the acting organization and the chosen zone (the default zone first).
pub async fn form(signed: Signed, query: Query<NewQuery>) -> Result<HttpResponse, ConsoleError> {
    let acting = Acting::resolve(&signed.caller, query.organization.as_deref());
    // The catalog read resolves and checks the organization as every read does.
    let offer = signed
        .services
        .catalog(&signed.caller, &acting.selector, query.zone.as_deref())
        .await?;
    let zone = offer.zone.id.clone();
    let fields = Fields {
        organization: acting
            .membership
            .map(|m| m.organization.slug.clone())
            .unwrap_or_default(),
        zone: zone.clone(),
        version: recommended(&offer.kubernetes_versions, |v| v.recommended, |v| &v.id),
        exposure: offer.defaults.exposure_mode.as_str().to_owned(),
        network_mode: offer.defaults.network_mode.as_str().to_owned(),
        pools: vec![PoolFields {
            size: recommended(&offer.machine_tiers, |t| t.recommended, |t| &t.id),
            count: "3".into(),
            ..PoolFields::default()
        }],
        ..Fields::default()
    };
    Ok(draw(&signed, &fields, None, StatusCode::OK))
}

fn recommended<T>(items: &[T], is: impl Fn(&T) -> bool, id: impl Fn(&T) -> &String) -> String {
    items
        .iter()
        .find(|i| is(i))
        .or(items.first())
        .map(|i| id(i).clone())
        .unwrap_or_default()
}

pub async fn submit(
    req: HttpRequest,
    signed: Signed,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let (mut fields, intent) = Fields::read(&body)?;
    check_form(&req, &signed.session, &fields.csrf)?;
    match intent {
        Intent::AddPool => {
            if fields.pools.len() < MAX_POOLS {
                fields.pools.push(PoolFields {
                    count: "1".into(),
                    ..PoolFields::default()
                });
            }
            return Ok(draw(&signed, &fields, None, StatusCode::OK));
        }
        Intent::RemovePool(i) => {
            if i < fields.pools.len() && fields.pools.len() > 1 {
                fields.pools.remove(i);
            }
            return Ok(draw(&signed, &fields, None, StatusCode::OK));
        }
        Intent::Create => {}
    }
    let draft = match fields.draft() {
        Ok(d) => d,
        Err(v) => {
            return Ok(refused(&signed, &fields, &DomainError::Validation(v)));
        }
    };
    let Some(key) = IdempotencyKey::parse(&fields.key) else {
        return Err(ConsoleError::Forged);
    };
    // The first answer is recorded as the new cluster's page, where a replay goes too.
    let redirect = Redirect(|c: &Scheduled<Cluster>| format!("{PREFIX}/clusters/{}", c.id));
    let keyed = Keyed {
        key,
        fingerprint: fields.fingerprint(),
        record: &redirect,
    };
    match signed
        .services
        .create_cluster(Command::keyed(&signed.caller, Some(keyed)), draft)
        .await
    {
        Ok(answer) => match settled(answer, &redirect) {
            Err(ConsoleError::Replayed(text)) => Ok(draw(
                &signed,
                &fields,
                Some(&Problem::Text(text)),
                StatusCode::CONFLICT,
            )),
            other => other,
        },
        Err(e) => Ok(refused(&signed, &fields, &e)),
    }
}

/// What went wrong, as the form shows it.
enum Problem {
    Fields(Violations),
    Text(String),
}

fn refused(signed: &Signed, fields: &Fields, e: &DomainError) -> HttpResponse {
    let status = api::problem::status_of(e);
    let problem = match e {
        DomainError::Validation(v) => Problem::Fields(v.clone()),
        other => Problem::Text(api::problem::detail_of(other)),
    };
    draw(signed, fields, Some(&problem), status)
}

/// Draws the form with `fields` and a fresh idempotency key (a form drawn again after a
/// refusal is a new request).
fn draw(
    signed: &Signed,
    fields: &Fields,
    problem: Option<&Problem>,
    status: StatusCode,
) -> HttpResponse {
    let acting = Acting::resolve(&signed.caller, Some(&fields.organization));
    let catalog = signed.services.catalog_data();
    let offer = catalog
        .zone(&fields.zone)
        .unwrap_or_else(|| catalog.default_zone());
    let here = format!("{PREFIX}/clusters");
    let nav = Nav {
        caller: &signed.caller,
        acting: &acting,
        csrf: &signed.session.csrf,
        here: &here,
        pending: signed.pending_approvals,
    };
    let errors = match problem {
        Some(Problem::Fields(v)) => v
            .errors()
            .iter()
            .map(|e| (e.field.clone(), in_form_words(&e.message)))
            .collect(),
        _ => Vec::new(),
    };
    let error_of = |field: &str| {
        errors
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, m)| m.clone())
    };
    let key = uuid::Uuid::new_v4().to_string();
    let body = html! {
        nav.crumbs aria-label="Breadcrumb" {
            a href={ (PREFIX) "/clusters" (acting.query()) } { "Clusters" } " / "
            span aria-current="page" { "Create cluster" }
        }
        h1 { "Create cluster" }
        @match problem {
            Some(Problem::Text(text)) => p.notice.error role="alert" { (text) },
            Some(Problem::Fields(_)) => div.notice.error role="alert" {
                p { "The cluster was not created. Fix these and send the form again:" }
                ul { @for (field, message) in &errors { li { (field_label(field)) ": " (message) } } }
            },
            None => {},
        }
        (zone_picker(catalog.zones.iter().map(|z| &z.zone.id), &fields.zone, &fields.organization))
        form.create method="post" action=(ACTION) novalidate {
            input type="hidden" name="csrf" value=(signed.session.csrf);
            input type="hidden" name="key" value=(key);
            input type="hidden" name="organization" value=(fields.organization);
            input type="hidden" name="zone" value=(offer.zone.id);
            (text_field("name", "Name", &fields.name, "A DNS label: lowercase letters, digits and '-'", error_of("name")))
            (version_field(offer, &fields.version, error_of("version")))
            (radio_group("exposure", "Exposure of the Kubernetes API", &Exposure::ALL.map(|e| (e.as_str(), exposure_words(e))), &fields.exposure,
                "Can be changed later."))
            (radio_group("network_mode", "Network mode", &NetworkMode::ALL.map(|m| (m.as_str(), network_mode_words(m))), &fields.network_mode,
                "Chosen once: the network mode cannot change after the cluster is created."))
            label for="description" { "Description" }
            textarea #description name="description" rows="2" { (fields.description) }
            (text_field("tags", "Tags", &fields.tags, "DNS labels, separated by commas", error_of("tags")))
            h2 { "Node pools" }
            @for (i, pool) in fields.pools.iter().enumerate() {
                (pool_fieldset(offer, i, pool, fields.pools.len() > 1, &error_of))
            }
            @if let Some(m) = error_of("node_pools") { p.field-error #node_pools-error { (m) } }
            @if fields.pools.len() < MAX_POOLS {
                button.secondary type="submit" name="add_pool" value="1" formnovalidate { "Add node pool" }
            }
            p { button type="submit" { "Create cluster" } }
        }
    };
    html_page(status, layout::page("Create cluster", Some(&nav), body))
}

/// The zone choice reloads the form with that zone's offer.
fn zone_picker<'a>(
    zones: impl Iterator<Item = &'a String>,
    current: &str,
    organization: &str,
) -> Markup {
    html! {
        form.zone method="get" action=(ACTION) {
            input type="hidden" name="organization" value=(organization);
            label for="zone" { "Zone" }
            select #zone name="zone" {
                @for z in zones { option value=(z) selected[z == current] { (z) } }
            }
            button.secondary type="submit" { "Show this zone's offer" }
        }
    }
}

fn field_label(path: &str) -> String {
    match path.split_once('.') {
        Some((pool, field)) if pool.starts_with("node_pools[") => {
            let n = pool
                .trim_start_matches("node_pools[")
                .trim_end_matches(']')
                .parse::<usize>()
                .map(|i| i + 1)
                .unwrap_or(0);
            format!("Node pool {n}, {}", field.replace('_', " "))
        }
        _ if path.is_empty() => "The form".into(),
        _ => path.replace('_', " "),
    }
}

fn error_id(path: &str) -> String {
    path.replace(['[', ']', '.'], "-") + "-error"
}

fn text_field(name: &str, label: &str, value: &str, hint: &str, error: Option<String>) -> Markup {
    let hint_id = format!("{name}-hint");
    let described = match &error {
        Some(_) => format!("{hint_id} {}", error_id(name)),
        None => hint_id.clone(),
    };
    html! {
        label for=(name) { (label) }
        input id=(name) name=(name) type="text" value=(value) aria-describedby=(described)
            aria-invalid=[error.as_ref().map(|_| "true")];
        small.hint id=(hint_id) { (hint) }
        @if let Some(m) = error { p.field-error id=(error_id(name)) { (m) } }
    }
}

fn version_field(offer: &ZoneOffer, current: &str, error: Option<String>) -> Markup {
    html! {
        label for="version" { "Kubernetes version" }
        select #version name="version" aria-invalid=[error.as_ref().map(|_| "true")] {
            @for v in &offer.kubernetes_versions {
                option value=(v.id) selected[v.id == current] {
                    (v.label) @if v.recommended { " (recommended)" }
                }
            }
        }
        @if let Some(m) = error { p.field-error id="version-error" { (m) } }
    }
}

/// A choice among a few values, each with what it means, and a note on the whole choice.
fn radio_group(
    name: &str,
    legend: &str,
    values: &[(&str, &str)],
    current: &str,
    note: &str,
) -> Markup {
    html! {
        fieldset.choice.explained aria-describedby={ (name) "-note" } {
            legend { (legend) }
            @for (v, words) in values {
                label.inline {
                    input type="radio" name=(name) value=(v) checked[*v == current];
                    " " strong { (v) } ": " (words)
                }
            }
            small.hint id={ (name) "-note" } { (note) }
        }
    }
}

/// What a cluster's exposure means for the person choosing it.
fn exposure_words(e: Exposure) -> &'static str {
    match e {
        Exposure::Public => "the Kubernetes API gets a public hostname, reached from the internet",
        Exposure::Private => "the Kubernetes API is reached only inside the provider's network",
    }
}

fn pool_fieldset(
    offer: &ZoneOffer,
    i: usize,
    p: &PoolFields,
    removable: bool,
    error_of: &dyn Fn(&str) -> Option<String>,
) -> Markup {
    let field = |f: &str| format!("pool.{i}.{f}");
    let id = |f: &str| format!("pool-{i}-{f}");
    let domain = |f: &str| format!("node_pools[{i}].{f}");
    let number = |f: &str, label: &str, value: &str, domain_name: &str| {
        let error = error_of(&domain(domain_name));
        html! {
            label for=(id(f)) { (label) }
            input id=(id(f)) name=(field(f)) type="number" min="0" max="200" value=(value)
                aria-invalid=[error.as_ref().map(|_| "true")]
                aria-describedby=[error.as_ref().map(|_| error_id(&domain(domain_name)))];
            @if let Some(m) = error { p.field-error id=(error_id(&domain(domain_name))) { (m) } }
        }
    };
    let name_error = error_of(&domain("name"));
    let size_error = error_of(&domain("size"));
    html! {
        fieldset.pool {
            legend { "Node pool " (i + 1) }
            label for=(id("name")) { "Pool name" }
            input id=(id("name")) name=(field("name")) type="text" value=(p.name) placeholder="default"
                aria-invalid=[name_error.as_ref().map(|_| "true")];
            @if let Some(m) = name_error { p.field-error { (m) } }
            label for=(id("size")) { "Machine tier" }
            select id=(id("size")) name=(field("size")) aria-invalid=[size_error.as_ref().map(|_| "true")] {
                @for t in &offer.machine_tiers {
                    option value=(t.id) selected[t.id == p.size] { (tier_label(t)) }
                }
            }
            @if let Some(m) = size_error { p.field-error { (m) } }
            (number("count", "Nodes", &p.count, "count"))
            label.inline {
                input.autoscale type="checkbox" name=(field("autoscale")) checked[p.autoscale];
                " Autoscale between a minimum and a maximum"
            }
            div.bounds {
                (number("min", "Minimum nodes", &p.min, "min_nodes"))
                (number("max", "Maximum nodes", &p.max, "max_nodes"))
            }
            @if removable {
                button.secondary type="submit" name="remove_pool" value=(i) formnovalidate { "Remove node pool " (i + 1) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: &str) -> Fields {
        match Fields::read(body.as_bytes()) {
            Ok((f, _)) => f,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn pool_fields_are_read_by_index_and_hostile_indexes_are_ignored() {
        let f = read(
            "pool.1.size=b&pool.0.size=a&pool.0.autoscale=on&pool.99999999999.size=x&pool.20.size=y&pool.x.size=z",
        );
        let sizes: Vec<&str> = f.pools.iter().map(|p| p.size.as_str()).collect();
        assert_eq!(sizes, ["a", "b"]);
        assert!(f.pools[0].autoscale && !f.pools[1].autoscale);
    }

    #[test]
    fn numbers_that_do_not_read_are_refused_at_their_field() {
        let f = read("organization=acme&name=a&pool.0.size=s&pool.0.count=three");
        let v = f.draft().err().unwrap_or_default();
        assert!(v.has("node_pools[0].count"), "{v:?}");
    }

    #[test]
    fn the_same_form_is_the_same_request_whatever_its_csrf_token_and_key() {
        let a = read("csrf=1&key=k1&name=web&pool.0.size=s");
        let b = read("csrf=2&key=k2&name=web&pool.0.size=s");
        let c = read("csrf=1&key=k1&name=web-2&pool.0.size=s");
        assert_eq!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
    }
}
