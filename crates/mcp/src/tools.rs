//! The assistant's tools: each a thin call of one of the domain's use cases, with the caller
//! acting as the assistant. Reads answer at once; a change is asked of the person first
//! (an approval the service records and enforces), and runs only once they approve it.
//!
//! Tool names, descriptions and schemas are fixed text: nothing a customer wrote (a cluster's
//! name, a description, tags or labels) ever reaches them. Such text travels only inside the
//! structured answers, as data.

use std::sync::OnceLock;

use domain::DomainError;
use domain::access::{OrgSelector, collection_org_ref};
use domain::error::Resource;
use domain::input::cluster::ListClusters;
use domain::model::approval::{Approval, ApprovalOutcome, ApprovedAction};
use domain::model::identity::Caller;
use domain::names::OrgRef;
use domain::ports::storage::{Freshness, PageRequest};
use domain::service::{Asked, Services};
use domain::validation::{Violations, redact_serde_message};
use rmcp::model::{
    CallToolResult, ContentBlock, InputRequest, InputRequiredResult, Tool, ToolAnnotations,
};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use crate::schema::{self, Builder};

/// Who is calling, through which use cases: set by the HTTP handler once the bearer token
/// is accepted, read by each tool call.
#[derive(Clone)]
pub struct Acting {
    pub services: Services,
    /// The token's caller, as the assistant whatever its platform said.
    pub caller: Caller,
    /// The server's public address, for the approval page's URL; `None` where no answer can
    /// link an approval (a read answered on the direct path), the link then being relative.
    pub base: Option<String>,
    pub request_id: String,
    /// The `X-Platform-Organization` header: the organization when a call names none, as
    /// the API reads it (after the argument, before the preferred organization).
    pub org_header: Option<String>,
}

/// The tools, in the order they are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Name {
    GetCatalog,
    ListClusters,
    GetCluster,
    ListNodePools,
    ListNodes,
    ListElasticIps,
    ListFirewallRules,
    ListOperations,
    ListUpgrades,
    CreateCluster,
    AddNodePool,
    ScaleNodePool,
    DeleteNodePool,
    DeleteNode,
    DeleteCluster,
    UpgradeCluster,
}

const ALL: [Name; 16] = [
    Name::GetCatalog,
    Name::ListClusters,
    Name::GetCluster,
    Name::ListNodePools,
    Name::ListNodes,
    Name::ListElasticIps,
    Name::ListFirewallRules,
    Name::ListOperations,
    Name::ListUpgrades,
    Name::CreateCluster,
    Name::AddNodePool,
    Name::ScaleNodePool,
    Name::DeleteNodePool,
    Name::DeleteNode,
    Name::DeleteCluster,
    Name::UpgradeCluster,
];

impl Name {
    fn as_str(self) -> &'static str {
        match self {
            Name::GetCatalog => "get_catalog",
            Name::ListClusters => "list_clusters",
            Name::GetCluster => "get_cluster",
            Name::ListNodePools => "list_node_pools",
            Name::ListNodes => "list_nodes",
            Name::ListElasticIps => "list_elastic_ips",
            Name::ListFirewallRules => "list_firewall_rules",
            Name::ListOperations => "list_operations",
            Name::ListUpgrades => "list_upgrades",
            Name::CreateCluster => "create_cluster",
            Name::AddNodePool => "add_node_pool",
            Name::ScaleNodePool => "scale_node_pool",
            Name::DeleteNodePool => "delete_node_pool",
            Name::DeleteNode => "delete_node",
            Name::DeleteCluster => "delete_cluster",
            Name::UpgradeCluster => "upgrade_cluster",
        }
    }

    fn parse(name: &str) -> Option<Name> {
        ALL.into_iter().find(|n| n.as_str() == name)
    }
}

const APPROVAL_NOTE: &str = " The service asks the account's person to approve it first, in \
the console: the call answers with the approval page's URL (as a URL elicitation, or in a tool \
error for a client that cannot open one). Once approved it runs once; calling again with the \
same arguments answers what it did. Needs the super_admin role in the organization.";

/// What a tool is: its listing, made once.
fn define(name: Name) -> Tool {
    // Input and output each stand alone, with their own `$defs`.
    let mut ib = Builder::default();
    let mut ob = Builder::default();
    let org = || ("organization", schema::organization());
    let cluster = || ("cluster", schema::cluster());
    let (description, input, output, annotations): (&str, Value, Value, ToolAnnotations) =
        match name {
            Name::GetCatalog => (
                "The offer of a zone: Kubernetes versions, machine tiers with their prices, \
                 defaults and the limits a cluster must keep.",
                schema::object(
                    vec![
                        org(),
                        (
                            "zone",
                            schema::text("A zone id; the default zone when omitted."),
                        ),
                    ],
                    &[],
                ),
                ob.inline::<wire::catalog::CatalogView>(),
                read(),
            ),
            Name::ListClusters => (
                "The organization's clusters, one page, oldest first.",
                schema::object(
                    vec![
                        org(),
                        ("zone", schema::text("Only the clusters of this zone.")),
                        (
                            "page",
                            json!({"type": "integer", "minimum": 1, "description": "From 1; default 1."}),
                        ),
                        (
                            "size",
                            json!({"type": "integer", "minimum": 1, "maximum": 100, "description": "1-100; default 20."}),
                        ),
                    ],
                    &[],
                ),
                ob.inline::<wire::cluster::ClusterList>(),
                read(),
            ),
            Name::GetCluster => (
                "One cluster: its phase, version, exposure, endpoint and node pools.",
                schema::object(vec![org(), cluster()], &["cluster"]),
                ob.inline::<wire::cluster::Cluster>(),
                read(),
            ),
            Name::ListNodePools => (
                "A cluster's node pools.",
                schema::object(vec![org(), cluster()], &["cluster"]),
                ob.inline::<wire::cluster::NodePoolList>(),
                read(),
            ),
            Name::ListNodes => (
                "A cluster's nodes, every pool's.",
                schema::object(vec![org(), cluster()], &["cluster"]),
                ob.inline::<wire::cluster::NodeList>(),
                read(),
            ),
            Name::ListElasticIps => (
                "A cluster's Elastic IPs. The assistant may read them; allocating or \
                 releasing one is left to a person, in the console or the API.",
                schema::object(vec![org(), cluster()], &["cluster"]),
                ob.inline::<wire::networking::ElasticIpList>(),
                read(),
            ),
            Name::ListFirewallRules => (
                "A cluster's firewall rules. The assistant may read them; changing one is left \
                 to a person, in the console or the API.",
                schema::object(vec![org(), cluster()], &["cluster"]),
                ob.inline::<wire::networking::FirewallRuleList>(),
                read(),
            ),
            Name::ListOperations => (
                "A cluster's operations (provisioning, scaling, deletion), newest first, one \
                 page of 20.",
                schema::object(vec![org(), cluster()], &["cluster"]),
                ob.inline::<wire::operation::OperationList>(),
                read(),
            ),
            Name::ListUpgrades => (
                "The Kubernetes versions a cluster can be upgraded to (newer, at most one minor \
                 version ahead), its upgrade in flight, and its maintenance window and the \
                 next one's start.",
                schema::object(vec![org(), cluster()], &["cluster"]),
                ob.inline::<wire::cluster::ClusterUpgrades>(),
                read(),
            ),
            Name::CreateCluster => {
                let mut body = ib.inline::<wire::request::cluster::CreateClusterRequest>();
                // The organization may be left out here: the account's preferred one then.
                if let Some(o) = body.as_object_mut() {
                    if let Some(Value::Array(req)) = o.get_mut("required") {
                        req.retain(|r| r != "organization");
                    }
                    if let Some(p) = o.get_mut("properties").and_then(Value::as_object_mut) {
                        p.insert("organization".into(), schema::organization());
                    }
                    o.insert("additionalProperties".into(), Value::Bool(false));
                }
                (
                    "Creates a cluster with its node pools: the API's create body.",
                    body,
                    write_output::<wire::cluster::Cluster>(&mut ob, "cluster"),
                    write(false, false),
                )
            }
            Name::AddNodePool => {
                let pool = ib.reference::<wire::request::node_pool::NodePoolRequest>();
                (
                    "Adds a node pool to a cluster.",
                    schema::object(
                        vec![org(), cluster(), ("node_pool", pool)],
                        &["cluster", "node_pool"],
                    ),
                    write_output::<wire::cluster::NodePool>(&mut ob, "node_pool"),
                    write(false, false),
                )
            }
            Name::ScaleNodePool => {
                let patch = ib.inline::<wire::request::node_pool::NodePoolPatch>();
                let mut props = vec![
                    org(),
                    cluster(),
                    ("pool", schema::text("The node pool's name.")),
                ];
                for field in SCALING {
                    props.push((field, patch["properties"][field].clone()));
                }
                (
                    "Changes a node pool's size: a fixed count, or autoscaling between \
                     min_nodes and max_nodes.",
                    schema::object(props, &["cluster", "pool"]),
                    write_output::<wire::cluster::NodePool>(&mut ob, "node_pool"),
                    write(false, true),
                )
            }
            Name::DeleteNodePool => (
                "Deletes a node pool and its nodes (never a cluster's last pool).",
                schema::object(
                    vec![
                        org(),
                        cluster(),
                        ("pool", schema::text("The node pool's name.")),
                    ],
                    &["cluster", "pool"],
                ),
                write_output::<wire::cluster::NodePool>(&mut ob, "node_pool"),
                write(true, true),
            ),
            Name::DeleteNode => (
                "Deletes one node; its pool replaces it with a new one.",
                schema::object(
                    vec![org(), cluster(), ("node", schema::text("The node's name."))],
                    &["cluster", "node"],
                ),
                write_output::<wire::cluster::Node>(&mut ob, "node"),
                write(true, true),
            ),
            Name::DeleteCluster => (
                "Deletes a cluster and everything in it: node pools, nodes, Elastic IPs and \
                 firewall rules.",
                schema::object(vec![org(), cluster()], &["cluster"]),
                write_output::<wire::cluster::Cluster>(&mut ob, "cluster"),
                write(true, true),
            ),
            Name::UpgradeCluster => {
                let body = ib.inline::<wire::request::upgrade::UpgradeRequest>();
                let mut props = vec![org(), cluster()];
                for field in ["version", "max_surge", "max_unavailable"] {
                    props.push((field, body["properties"][field].clone()));
                }
                (
                    "Upgrades a cluster's Kubernetes version (one list_upgrades lists): the \
                     control plane first, then every node pool, each node replaced by a new \
                     one of the new version before the old one is removed.",
                    schema::object(props, &["cluster", "version"]),
                    write_output::<wire::cluster::Cluster>(&mut ob, "cluster"),
                    write(false, true),
                )
            }
        };
    let writes = !annotations.read_only_hint.unwrap_or(false);
    let description = if writes {
        format!("{description}{APPROVAL_NOTE}")
    } else {
        description.to_owned()
    };
    let input = ib.finish(input);
    let output = ob.finish(output);
    Tool::new(name.as_str(), description, input)
        .with_raw_output_schema(std::sync::Arc::new(output))
        .with_annotations(annotations)
}

/// The pool fields `scale_node_pool` takes (the rest of the pool's patch is not a scaling).
const SCALING: [&str; 4] = ["count", "auto_scale", "min_nodes", "max_nodes"];

fn read() -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

fn write(destructive: bool, idempotent: bool) -> ToolAnnotations {
    ToolAnnotations::new()
        .read_only(false)
        .destructive(destructive)
        .idempotent(idempotent)
        .open_world(false)
}

/// What a change answers: its approval and, once it ran, the object it made or changed
/// (under `field`; absent when that object is gone by then, as a deleted one soon is).
fn write_output<T: utoipa::ToSchema>(b: &mut Builder, field: &str) -> Value {
    let approval = b.reference::<wire::approval::Approval>();
    let object = b.reference::<T>();
    let mut v = schema::object(vec![("approval", approval), (field, object)], &["approval"]);
    if let Some(o) = v.as_object_mut() {
        o.remove("additionalProperties");
    }
    v
}

/// Every tool, listed.
pub fn all() -> &'static [Tool] {
    static TOOLS: OnceLock<Vec<Tool>> = OnceLock::new();
    TOOLS.get_or_init(|| ALL.into_iter().map(define).collect())
}

/// One tool by name.
pub fn get(name: &str) -> Option<Tool> {
    all().iter().find(|t| t.name == name).cloned()
}

/// What a call answers: a result, or a request that the person approve first.
pub enum Answer {
    Done(Done),
    Approve(InputRequiredResult),
}

/// A call's result: its words for the person and whether it is an error (the SDK's result,
/// without structured content), and its data, already written as JSON.
pub struct Done {
    pub(crate) result: CallToolResult,
    pub(crate) data: Box<RawValue>,
}

impl Done {
    fn success(text: String, data: Box<RawValue>) -> Done {
        Done {
            result: CallToolResult::success(vec![ContentBlock::text(text)]),
            data,
        }
    }

    /// The SDK's result, the data read into its structured content.
    pub fn into_result(self) -> CallToolResult {
        let mut r = self.result;
        r.structured_content = Some(serde_json::from_str(self.data.get()).unwrap_or(Value::Null));
        r
    }
}

/// Whether the client asked for by name is one of the tools.
pub fn exists(name: &str) -> bool {
    Name::parse(name).is_some()
}

/// Whether `name` is a tool that only reads (its listing's `readOnlyHint`): one that never
/// asks for an approval, whatever its arguments.
pub fn reads(name: &str) -> bool {
    Name::parse(name).is_some_and(|n| {
        let i = ALL.iter().position(|&m| m == n);
        i.and_then(|i| all()[i].annotations.as_ref())
            .and_then(|a| a.read_only_hint)
            == Some(true)
    })
}

/// Runs tool `name` with `arguments`. `url_elicitation`: the client can open a URL for its
/// person (else an approval's URL is told in a tool error). An unknown name is `None`.
pub async fn call(
    acting: &Acting,
    name: &str,
    arguments: Map<String, Value>,
    url_elicitation: bool,
) -> Option<Answer> {
    let name = Name::parse(name)?;
    let answer = match run(acting, name, arguments, url_elicitation).await {
        Ok(a) => a,
        Err(e) => Answer::Done(refusal(acting, &e)),
    };
    Some(answer)
}

async fn run(
    acting: &Acting,
    name: Name,
    arguments: Map<String, Value>,
    url_elicitation: bool,
) -> Result<Answer, DomainError> {
    let s = &acting.services;
    let caller = &acting.caller;
    let done = |text: String, data: Box<RawValue>| Ok(Answer::Done(Done::success(text, data)));
    match name {
        Name::GetCatalog => {
            let a: ZoneArgs = args(arguments)?;
            let view = s
                .catalog(
                    caller,
                    &selector(acting, &a.organization),
                    a.zone.as_deref(),
                )
                .await?;
            done(
                "The zone's catalog is in the structured content.".into(),
                raw(&wire::catalog::CatalogView::from(&view)),
            )
        }
        Name::ListClusters => {
            let a: ListArgs = args(arguments)?;
            let page = api::query::page(
                a.page.map(|p| p.to_string()).as_deref(),
                a.size.map(|p| p.to_string()).as_deref(),
            )
            .map_err(|e| match e {
                api::problem::RequestError::InvalidQuery { parameter, message } => {
                    DomainError::validation(parameter, message)
                }
                _ => DomainError::validation("", "page or size out of range"),
            })?;
            let found = s
                .list_clusters(
                    caller,
                    ListClusters {
                        org: selector(acting, &a.organization),
                        zone: a.zone,
                        page,
                        // As the API's reads by default: the watch cache, which every write of
                        // any process reaches within a moment (a change's own answer, and an
                        // approved change's retried call, read the database).
                        freshness: Freshness::Recent,
                    },
                )
                .await?;
            done(
                format!(
                    "{} of {} clusters (page {}); they are in the structured content.",
                    found.items.len(),
                    found.total,
                    found.page
                ),
                raw(&wire::cluster::ClusterList {
                    items: found
                        .items
                        .iter()
                        .map(wire::cluster::Cluster::from)
                        .collect(),
                    page: found.page,
                    size: found.size,
                    total: found.total,
                }),
            )
        }
        Name::GetCluster => {
            let a: ClusterArgs = args(arguments)?;
            let id = find_cluster(acting, &a.organization, &a.cluster).await?;
            let c = s.get_cluster(caller, id, Freshness::Recent).await?;
            done(
                format!(
                    "The cluster is {}; its fields are in the structured content.",
                    c.phase.as_str()
                ),
                raw(&wire::cluster::Cluster::from(&c)),
            )
        }
        Name::ListNodePools => {
            let a: ClusterArgs = args(arguments)?;
            let id = find_cluster(acting, &a.organization, &a.cluster).await?;
            let items = s.list_node_pools(caller, id).await?;
            done(
                format!(
                    "{} node pools; they are in the structured content.",
                    items.len()
                ),
                raw(&wire::cluster::NodePoolList {
                    items: items.iter().map(wire::cluster::NodePool::from).collect(),
                }),
            )
        }
        Name::ListNodes => {
            let a: ClusterArgs = args(arguments)?;
            let id = find_cluster(acting, &a.organization, &a.cluster).await?;
            let items = s.list_nodes(caller, id, None).await?;
            done(
                format!("{} nodes; they are in the structured content.", items.len()),
                raw(&wire::cluster::NodeList {
                    items: items.iter().map(wire::cluster::Node::from).collect(),
                }),
            )
        }
        Name::ListElasticIps => {
            let a: ClusterArgs = args(arguments)?;
            let id = find_cluster(acting, &a.organization, &a.cluster).await?;
            let items = s.list_elastic_ips(caller, id).await?;
            done(
                format!(
                    "{} Elastic IPs; they are in the structured content.",
                    items.len()
                ),
                raw(&wire::networking::ElasticIpList {
                    items: items
                        .iter()
                        .map(wire::networking::ElasticIpView::from)
                        .collect(),
                }),
            )
        }
        Name::ListFirewallRules => {
            let a: ClusterArgs = args(arguments)?;
            let id = find_cluster(acting, &a.organization, &a.cluster).await?;
            let items = s.list_firewall_rules(caller, id).await?;
            done(
                format!(
                    "{} firewall rules; they are in the structured content.",
                    items.len()
                ),
                raw(&wire::networking::FirewallRuleList {
                    items: items
                        .iter()
                        .map(wire::networking::FirewallRule::from)
                        .collect(),
                }),
            )
        }
        Name::ListOperations => {
            let a: ClusterArgs = args(arguments)?;
            let id = find_cluster(acting, &a.organization, &a.cluster).await?;
            let page = PageRequest { page: 1, size: 20 };
            let found = s.list_operations(caller, id, None, page).await?;
            done(
                format!(
                    "{} of {} operations; they are in the structured content.",
                    found.items.len(),
                    found.total
                ),
                raw(&wire::operation::OperationList {
                    items: found
                        .items
                        .iter()
                        .map(wire::operation::Operation::from)
                        .collect(),
                    page: found.page,
                    size: found.size,
                    total: found.total,
                }),
            )
        }
        Name::ListUpgrades => {
            let a: ClusterArgs = args(arguments)?;
            let id = find_cluster(acting, &a.organization, &a.cluster).await?;
            let o = s.list_upgrades(caller, id, Freshness::Recent).await?;
            let versions: Vec<&str> = o.available.iter().map(|v| v.id.as_str()).collect();
            done(
                if versions.is_empty() {
                    format!(
                        "The cluster runs {}, the newest it can move to.",
                        o.current_version
                    )
                } else {
                    format!(
                        "The cluster runs {} and can be upgraded to {}.",
                        o.current_version,
                        versions.join(", ")
                    )
                },
                raw(&wire::cluster::ClusterUpgrades::from(&o)),
            )
        }
        Name::CreateCluster => {
            let mut arguments = arguments;
            let named = arguments
                .get("organization")
                .and_then(Value::as_str)
                .is_some_and(|o| !o.trim().is_empty());
            if !named {
                // The header's organization, else the preferred one (by id): the same one on
                // every retry.
                let id = match collection_org_ref(caller, &selector(acting, &None))? {
                    OrgRef::Id(id) | OrgRef::Slug(id) => id,
                };
                arguments.insert("organization".into(), Value::String(id));
            }
            let body: wire::request::cluster::CreateClusterRequest = args(arguments)?;
            let action = ApprovedAction::CreateCluster { body: body.into() };
            ask(acting, action, url_elicitation).await
        }
        Name::AddNodePool => {
            let a: AddPoolArgs = args(arguments)?;
            let cluster = find_cluster(acting, &a.organization, &a.cluster).await?;
            let action = ApprovedAction::AddNodePool {
                cluster,
                body: a.node_pool.into(),
            };
            ask(acting, action, url_elicitation).await
        }
        Name::ScaleNodePool => {
            let mut arguments = arguments;
            let organization = take_text(&mut arguments, "organization")?;
            let cluster = take_text(&mut arguments, "cluster")?
                .ok_or_else(|| DomainError::validation("cluster", "is required"))?;
            let pool = take_text(&mut arguments, "pool")?
                .ok_or_else(|| DomainError::validation("pool", "is required"))?;
            if let Some(other) = arguments.keys().find(|k| !SCALING.contains(&k.as_str())) {
                return Err(DomainError::validation(
                    other.as_str(),
                    "unknown field: a scaling takes count, auto_scale, min_nodes and max_nodes",
                ));
            }
            let patch: wire::request::node_pool::NodePoolPatch = args(arguments)?;
            let id = find_cluster(acting, &organization, &cluster).await?;
            let action = ApprovedAction::ScaleNodePool {
                cluster: id,
                pool,
                patch: patch.into(),
            };
            ask(acting, action, url_elicitation).await
        }
        Name::DeleteNodePool => {
            let a: PoolArgs = args(arguments)?;
            let cluster = find_cluster(acting, &a.organization, &a.cluster).await?;
            let action = ApprovedAction::DeleteNodePool {
                cluster,
                pool: a.pool,
            };
            ask(acting, action, url_elicitation).await
        }
        Name::DeleteNode => {
            let a: NodeArgs = args(arguments)?;
            let cluster = find_cluster(acting, &a.organization, &a.cluster).await?;
            let action = ApprovedAction::DeleteNode {
                cluster,
                node: a.node,
            };
            ask(acting, action, url_elicitation).await
        }
        Name::DeleteCluster => {
            let a: ClusterArgs = args(arguments)?;
            let cluster = find_cluster(acting, &a.organization, &a.cluster).await?;
            ask(
                acting,
                ApprovedAction::DeleteCluster { cluster },
                url_elicitation,
            )
            .await
        }
        Name::UpgradeCluster => {
            let mut arguments = arguments;
            let organization = take_text(&mut arguments, "organization")?;
            let cluster = take_text(&mut arguments, "cluster")?
                .ok_or_else(|| DomainError::validation("cluster", "is required"))?;
            let body: wire::request::upgrade::UpgradeRequest = args(arguments)?;
            let id = find_cluster(acting, &organization, &cluster).await?;
            let action = ApprovedAction::UpgradeCluster {
                cluster: id,
                body: body.into(),
            };
            ask(acting, action, url_elicitation).await
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ZoneArgs {
    organization: Option<String>,
    zone: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListArgs {
    organization: Option<String>,
    zone: Option<String>,
    page: Option<u32>,
    size: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ClusterArgs {
    organization: Option<String>,
    cluster: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AddPoolArgs {
    organization: Option<String>,
    cluster: String,
    node_pool: wire::request::node_pool::NodePoolRequest,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PoolArgs {
    organization: Option<String>,
    cluster: String,
    pool: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeArgs {
    organization: Option<String>,
    cluster: String,
    node: String,
}

/// The arguments as `T`, refused as the API refuses a body: the field's path and the same
/// words (422 `validation_failed` there, a tool error here).
fn args<T: DeserializeOwned>(arguments: Map<String, Value>) -> Result<T, DomainError> {
    serde_path_to_error::deserialize::<_, T>(Value::Object(arguments)).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        DomainError::Validation(Violations::one(
            field,
            redact_serde_message(&e.inner().to_string()),
        ))
    })
}

fn take_text(
    arguments: &mut Map<String, Value>,
    name: &str,
) -> Result<Option<String>, DomainError> {
    match arguments.remove(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(DomainError::validation(name, "must be a string")),
    }
}

/// The organization a call names: its argument, then the header, then the preferred one.
fn selector(acting: &Acting, organization: &Option<String>) -> OrgSelector {
    OrgSelector::first_named([organization.as_deref(), acting.org_header.as_deref()])
}

/// The cluster an argument names: an id as it is; a name, within the organization (read
/// with the caller's rights, so a name of an organization not theirs finds nothing).
async fn find_cluster(
    acting: &Acting,
    organization: &Option<String>,
    cluster: &str,
) -> Result<Uuid, DomainError> {
    let cluster = cluster.trim();
    if cluster.len() == 36
        && let Ok(id) = Uuid::parse_str(cluster)
    {
        return Ok(id);
    }
    let mut page = 1;
    loop {
        let found = acting
            .services
            .list_clusters(
                &acting.caller,
                ListClusters {
                    org: selector(acting, organization),
                    zone: None,
                    page: PageRequest { page, size: 100 },
                    freshness: Freshness::Recent,
                },
            )
            .await?;
        if let Some(c) = found.items.iter().find(|c| c.name.as_str() == cluster) {
            return Ok(c.id);
        }
        if found.items.is_empty() || u64::from(page) * 100 >= found.total {
            return Err(DomainError::NotFound(Resource::Cluster));
        }
        page += 1;
    }
}

/// A change: asked of the person (or, asked before, answered as they decided).
async fn ask(
    acting: &Acting,
    action: ApprovedAction,
    url_elicitation: bool,
) -> Result<Answer, DomainError> {
    match acting.services.ask_approval(&acting.caller, action).await? {
        Asked::Requested(a) | Asked::Waiting(a) => Ok(waiting(acting, &a, url_elicitation)),
        Asked::Declined(a) => Ok(Answer::Done(error(
            "The person declined this change: it did not run. Asking again with the same \
             arguments after the approval's expiry records a new request."
                .into(),
            json!({
                "code": "approval_declined",
                "approval": approval_json(acting, &a),
            }),
        ))),
        Asked::Approved(a) => ran(acting, &a).await,
    }
}

/// The approval page's address.
fn approval_url(acting: &Acting, a: &Approval) -> String {
    format!(
        "{}/console/approvals/{}",
        acting.base.as_deref().unwrap_or_default(),
        a.id
    )
}

fn approval_json(acting: &Acting, a: &Approval) -> Value {
    let mut v = to_value(&wire::approval::Approval::from(a));
    v["approve_at"] = Value::String(approval_url(acting, a));
    v
}

/// The person has yet to decide: the client opens the page for them (URL elicitation), or
/// the tool error tells the URL.
fn waiting(acting: &Acting, a: &Approval, url_elicitation: bool) -> Answer {
    let url = approval_url(acting, a);
    if url_elicitation {
        let request = serde_json::from_value::<InputRequest>(json!({
            "method": "elicitation/create",
            "params": {
                "mode": "url",
                "message": "Your assistant asked for a change to your clusters. Open this page \
                            to see exactly what it does, then approve or decline it.",
                "url": url,
                "elicitationId": a.id.to_string(),
            }
        }));
        if let Ok(request) = request {
            let mut requests = rmcp::model::InputRequests::new();
            requests.insert(format!("approval-{}", a.id), request);
            return Answer::Approve(InputRequiredResult::from_input_requests(requests));
        }
    }
    Answer::Done(error(
        format!(
            "This change waits for the person's approval: they open {url} to approve or \
             decline it. Then call this tool again with the same arguments for its result."
        ),
        json!({
            "code": "approval_required",
            "url": url,
            "approval": approval_json(acting, a),
        }),
    ))
}

/// An approved change: what became of it.
async fn ran(acting: &Acting, a: &Approval) -> Result<Answer, DomainError> {
    let approval = approval_json(acting, a);
    let outcome = match &a.outcome {
        Some(o) => o,
        None => {
            return Err(DomainError::Internal(
                "the approved change has not run yet".into(),
            ));
        }
    };
    let (cluster_id, id) = match outcome {
        ApprovalOutcome::Refused { code, detail } => {
            return Ok(Answer::Done(error(
                format!("Approved, but the service refused the change when it ran: {detail}"),
                json!({"code": code, "detail": detail, "approval": approval}),
            )));
        }
        ApprovalOutcome::Done { cluster_id, id, .. } => (*cluster_id, id.clone()),
    };
    let s = &acting.services;
    let caller = &acting.caller;
    // The object's name within its cluster (`<cluster id>/<name>`).
    let named = id.rsplit('/').next().unwrap_or_default().to_owned();
    let (field, object) = match &a.action {
        ApprovedAction::CreateCluster { .. }
        | ApprovedAction::DeleteCluster { .. }
        | ApprovedAction::UpgradeCluster { .. } => (
            "cluster",
            s.get_cluster(caller, cluster_id, Freshness::Latest)
                .await
                .ok()
                .map(|c| to_value(&wire::cluster::Cluster::from(&c))),
        ),
        ApprovedAction::AddNodePool { .. }
        | ApprovedAction::ScaleNodePool { .. }
        | ApprovedAction::DeleteNodePool { .. } => (
            "node_pool",
            s.list_node_pools(caller, cluster_id)
                .await
                .ok()
                .and_then(|ps| {
                    ps.iter()
                        .find(|p| p.name.as_str() == named)
                        .map(|p| to_value(&wire::cluster::NodePool::from(p)))
                }),
        ),
        ApprovedAction::DeleteNode { .. } => (
            "node",
            s.list_nodes(caller, cluster_id, None)
                .await
                .ok()
                .and_then(|ns| {
                    ns.iter()
                        .find(|n| n.name.as_str() == named)
                        .map(|n| to_value(&wire::cluster::Node::from(n)))
                }),
        ),
    };
    let mut value = json!({ "approval": approval });
    if let Some(o) = object {
        value[field] = o;
    }
    Ok(Answer::Done(structured(
        format!(
            "Approved by the person and done: {}. The result is in the structured content.",
            a.action.kind()
        ),
        value,
    )))
}

/// A refusal as a tool error: the API's problem document (the same code, words and field
/// messages its error answer has) as structured content, its words as text.
fn refusal(acting: &Acting, e: &DomainError) -> Done {
    let p = api::problem::of_domain(e, &acting.request_id);
    let mut text = p.detail.clone();
    if let Ok(v) = serde_json::to_value(&p)
        && let Some(errors) = v.get("errors").and_then(Value::as_array)
    {
        for f in errors {
            let field = f["field"].as_str().unwrap_or_default();
            let message = f["message"].as_str().unwrap_or_default();
            text.push_str(&format!("\n{field}: {message}"));
        }
    }
    Done {
        result: CallToolResult::error(vec![ContentBlock::text(text)]),
        data: raw(&p),
    }
}

fn structured(text: String, value: Value) -> Done {
    Done::success(text, raw(&value))
}

fn error(text: String, value: Value) -> Done {
    Done {
        result: CallToolResult::error(vec![ContentBlock::text(text)]),
        data: raw(&value),
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The JSON of `v`, written once: a read's answer goes out as it is, never through a `Value`.
fn raw<T: serde::Serialize>(v: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).unwrap_or_else(|_| RawValue::NULL.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has_refs(v: &Value) -> bool {
        v.to_string().contains("\"$ref\"")
    }

    #[test]
    fn every_tool_is_listed_with_its_hints_and_no_network_change_among_them() {
        let tools = all();
        assert_eq!(tools.len(), ALL.len());
        for t in tools {
            let a = t.annotations.clone().unwrap_or_default();
            let reads = a.read_only_hint == Some(true);
            assert_eq!(
                reads,
                t.name.starts_with("get_") || t.name.starts_with("list_")
            );
            assert_eq!(
                a.destructive_hint == Some(true),
                t.name.starts_with("delete_"),
                "{}",
                t.name
            );
            assert!(
                !t.name.contains("elastic_ip") || reads,
                "{} changes an Elastic IP",
                t.name
            );
            assert!(!t.name.contains("firewall") || reads);
            assert_eq!(t.input_schema["type"], "object");
            let out = t.output_schema.clone().unwrap_or_default();
            assert_eq!(out["type"], "object", "{}", t.name);
            assert!(!has_refs(&Value::Object((*out).clone())) || out.contains_key("$defs"));
        }
    }
}
