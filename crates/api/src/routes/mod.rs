//! The route table: every route declared once. A handler's `#[utoipa::path]` says its method
//! and path (and its successes); its line in the `routes!` invocation below says who may call
//! it, where its organization comes from and its traits. The router, the OpenAPI document (its
//! operations, error responses, headers, links and descriptions) and the role-matrix tests are
//! all made from the two.

pub mod approvals;
pub mod audit;
pub mod auth_servers;
pub mod catalog;
pub mod clusters;
pub mod credentials;
pub mod docs;
pub mod networking;
pub mod node_pools;
pub mod operations;
pub mod system;
pub mod upgrades;

use actix_web::http::Method;
use actix_web::web::{self, ServiceConfig};
use actix_web::{HttpRequest, HttpResponse, guard};

use actix_web::http::StatusCode;

use crate::extract::request_id;
use crate::problem;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequiredRole {
    /// No authentication (health, readiness, metrics, the OpenAPI document).
    Public,
    /// member, project_admin or super_admin of the organization.
    Member,
    /// super_admin of the organization.
    SuperAdmin,
}

/// Where a route's organization comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrgSource {
    None,
    /// No organization: an object of the caller's own (an approval), named in the path; one
    /// that is not theirs is not found.
    Own,
    /// Query `organization`, then `X-Platform-Organization`, then the preferred organization.
    Collection,
    /// The body's `organization` field only.
    Body,
    /// The object named in the path.
    Object,
}

#[derive(Debug, Clone, Copy)]
pub struct RouteSpec {
    /// From the handler's `#[utoipa::path]`.
    pub method: &'static str,
    /// From the handler's `#[utoipa::path]`.
    pub path: &'static str,
    /// The handler's name, the document's `operationId`.
    pub operation: &'static str,
    pub role: RequiredRole,
    pub org: OrgSource,
    /// Honours `Idempotency-Key`.
    pub idempotent: bool,
    /// Reads a JSON body.
    pub body: bool,
    /// May answer 402 (adds nodes) or 503 `capacity_exhausted`.
    pub capacity: bool,
    /// Refused to the assistant.
    pub assistant_restricted: bool,
    /// Answers one object with its `ETag`; a GET also honours `If-None-Match` (304).
    pub tagged: bool,
    /// Honours `If-Match` (412 when the object changed); answers with the new `ETag`.
    pub if_match: bool,
    /// May start an operation, which its 201/202 points at (`Operation-Location`, and
    /// `Location` on a 202).
    pub starts_work: bool,
    /// Reads query parameters (400 `invalid_query` when one is out of range).
    pub query: bool,
    /// Refuses a change the object's state does not allow with 400 (an exposure change before
    /// `Provisioned`) or 409.
    pub state_rules: bool,
    /// Makes an object whose own routes are under this path and `/{id}`: its 201 links to them.
    pub creates: bool,
    /// Answers 503 when the service cannot serve (readiness).
    pub readiness: bool,
    /// Served to the operator's tools (Prometheus), not listed in the API's document.
    pub unlisted: bool,
}

/// What a route does beyond its role and organization source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trait {
    /// Honours `Idempotency-Key`.
    Idempotent,
    /// Reads a JSON body.
    Body,
    /// May answer 402 (adds nodes) or 503 `capacity_exhausted`.
    Capacity,
    /// Refused to the AI assistant.
    NoAssistant,
    /// Answers one object with its `ETag` (a GET: `If-None-Match` gives 304).
    Tagged,
    /// Honours `If-Match`: 412 when the object is no longer as the caller saw it.
    IfMatch,
    /// May hand work to provisioning: the answer points at the operation that follows it.
    StartsWork,
    /// Reads query parameters.
    Query,
    /// Refuses what the object's state does not allow (400 or 409).
    StateRules,
    /// Makes an object whose routes are under this path and `/{id}`.
    Creates,
    /// Answers 503 while the service cannot serve.
    Readiness,
    /// For the operator's tools, not in the API's document.
    Unlisted,
}

fn spec(
    (method, path): (&'static str, &'static str),
    operation: &'static str,
    role: RequiredRole,
    org: OrgSource,
    traits: &[Trait],
) -> RouteSpec {
    let mut s = RouteSpec {
        method,
        path,
        operation,
        role,
        org,
        idempotent: false,
        body: false,
        capacity: false,
        assistant_restricted: false,
        tagged: false,
        if_match: false,
        starts_work: false,
        query: false,
        state_rules: false,
        creates: false,
        readiness: false,
        unlisted: false,
    };
    for t in traits {
        match t {
            Trait::Idempotent => s.idempotent = true,
            Trait::Body => s.body = true,
            Trait::Capacity => s.capacity = true,
            Trait::NoAssistant => s.assistant_restricted = true,
            Trait::Tagged => s.tagged = true,
            Trait::IfMatch => {
                s.if_match = true;
                s.tagged = true;
            }
            Trait::StartsWork => s.starts_work = true,
            Trait::Query => s.query = true,
            Trait::StateRules => s.state_rules = true,
            Trait::Creates => s.creates = true,
            Trait::Readiness => s.readiness = true,
            Trait::Unlisted => s.unlisted = true,
        }
    }
    s
}

/// The method and path a handler's `#[utoipa::path]` declares, by its `operationId` (the
/// handler's name), read from the document those attributes make.
fn declared(operation: &str) -> (&'static str, &'static str) {
    static DECLARED: std::sync::OnceLock<Vec<(String, &'static str, &'static str)>> =
        std::sync::OnceLock::new();
    let all = DECLARED.get_or_init(|| {
        use utoipa::OpenApi;
        let doc = RoutePaths::openapi();
        let mut out = Vec::new();
        for (path, item) in doc.paths.paths {
            // Leaked once: the table lives as long as the process, like a literal would.
            let path: &'static str = Box::leak(path.into_boxed_str());
            let ops = [
                ("GET", item.get),
                ("POST", item.post),
                ("PATCH", item.patch),
                ("PUT", item.put),
                ("DELETE", item.delete),
            ];
            for (method, op) in ops {
                if let Some(id) = op.and_then(|o| o.operation_id) {
                    out.push((id, method, path));
                }
            }
        }
        out
    });
    all.iter()
        .find(|(id, _, _)| id == operation)
        .map(|(_, method, path)| (*method, *path))
        .unwrap_or(("GET", "/"))
}

/// The one declaration of every route: its handler (whose `#[utoipa::path]` gives method and
/// path), who may call it, where its organization comes from, and its traits. It makes the
/// route table ([`ROUTES`], read by the OpenAPI document and by the role-matrix tests), the
/// router ([`configure`]) and the document's list of operations ([`RoutePaths`]).
macro_rules! routes {
    ($( $module:ident :: $handler:ident, $role:ident, $org:ident $(, $trait:ident)* ; )*) => {
        /// Every route of the service, in the table's order.
        pub static ROUTES: std::sync::LazyLock<Vec<RouteSpec>> = std::sync::LazyLock::new(|| vec![
            $( spec(
                declared(stringify!($handler)),
                stringify!($handler),
                RequiredRole::$role,
                OrgSource::$org,
                &[$(Trait::$trait),*],
            ), )*
        ]);

        /// Registers every route: one resource per method and path, so a method a path does
        /// not answer falls through to [`not_found`], which answers 405 with `Allow`.
        pub fn configure(cfg: &mut ServiceConfig) {
            $(
                let (method, path) = declared(stringify!($handler));
                cfg.service(
                    web::resource(path)
                        .guard(guard::Method(method.parse().unwrap_or(Method::GET)))
                        .to($module::$handler),
                );
            )*
            docs::configure(cfg);
        }

        /// The operations of the OpenAPI document, in the table's order.
        #[derive(utoipa::OpenApi)]
        #[openapi(paths($($module::$handler),*))]
        pub struct RoutePaths;
    };
}

routes! {
    system::healthz, Public, None;
    system::readyz, Public, None, Readiness;
    system::metrics, Public, None, Unlisted;
    system::openapi, Public, None;
    catalog::get_catalog, Member, Collection, Query;
    clusters::list_clusters, Member, Collection, Query;
    clusters::create_cluster, SuperAdmin, Body, Idempotent, Body, Capacity, Tagged, StartsWork, Creates;
    clusters::get_cluster, Member, Object, Tagged;
    clusters::patch_cluster, SuperAdmin, Object, Idempotent, Body, IfMatch, StartsWork, StateRules;
    clusters::delete_cluster, SuperAdmin, Object, Idempotent, IfMatch, StartsWork;
    clusters::change_exposure, SuperAdmin, Object, Body, IfMatch, StartsWork, StateRules;
    clusters::cluster_state, Member, Object, Query;
    clusters::kubeconfig, Member, Object, Query, StateRules;
    upgrades::list_upgrades, Member, Object;
    upgrades::upgrade_cluster, SuperAdmin, Object, Idempotent, Body, IfMatch, StartsWork, StateRules;
    credentials::list_credentials, Member, Object;
    credentials::rotate_credentials, SuperAdmin, Object;
    credentials::revoke_credential, Member, Object;
    operations::list_operations, Member, Object, Query;
    operations::get_operation, Member, Object;
    node_pools::list_node_pools, Member, Object;
    node_pools::create_node_pool, SuperAdmin, Object, Idempotent, Body, Capacity, Tagged, StartsWork;
    node_pools::patch_node_pool, SuperAdmin, Object, Idempotent, Body, Capacity, IfMatch, StartsWork;
    node_pools::delete_node_pool, SuperAdmin, Object, Idempotent, IfMatch, StartsWork;
    node_pools::list_pool_nodes, Member, Object;
    node_pools::list_nodes, Member, Object;
    node_pools::delete_node, SuperAdmin, Object, Idempotent, Tagged, StartsWork;
    networking::list_elastic_ips, Member, Object;
    networking::create_elastic_ip, SuperAdmin, Object, Idempotent, Body, Capacity, NoAssistant, Tagged, StartsWork;
    networking::get_elastic_ip, Member, Object, Tagged;
    networking::release_elastic_ip, SuperAdmin, Object, Idempotent, NoAssistant, IfMatch, StartsWork;
    networking::list_firewall_rules, Member, Object;
    networking::create_firewall_rule, SuperAdmin, Object, Idempotent, Body, NoAssistant, Tagged, StartsWork;
    networking::get_firewall_rule, Member, Object, Tagged;
    networking::delete_firewall_rule, SuperAdmin, Object, Idempotent, NoAssistant, IfMatch, StartsWork;
    auth_servers::list_auth_servers, Member, Collection, Query;
    auth_servers::create_auth_server, SuperAdmin, Body, Idempotent, Body, Tagged, Creates;
    auth_servers::get_auth_server, Member, Object, Tagged;
    auth_servers::patch_auth_server, SuperAdmin, Object, Body, IfMatch;
    auth_servers::delete_auth_server, SuperAdmin, Object, Idempotent, IfMatch;
    auth_servers::add_credential, SuperAdmin, Object, Idempotent, Body, Tagged;
    auth_servers::remove_credential, SuperAdmin, Object, Idempotent;
    audit::list_audit_events, Member, Collection, Query;
    approvals::list_approvals, Member, None;
    approvals::get_approval, Member, Own;
    approvals::approve, Member, Own, StateRules;
    approvals::decline, Member, Own, StateRules;
}

/// The methods a path answers, for `Allow`.
pub fn allowed_methods(path: &str) -> Vec<&'static str> {
    ROUTES
        .iter()
        .filter(|r| r.path == path)
        .map(|r| r.method)
        .collect()
}

/// The methods a concrete request path answers (its route templates matched), for `Allow`.
fn methods_for(path: &str) -> Vec<&'static str> {
    // Compiled once: a flood of unknown paths must not compile a pattern per route each time.
    static TEMPLATES: std::sync::OnceLock<Vec<(actix_web::dev::ResourceDef, &'static str)>> =
        std::sync::OnceLock::new();
    let templates = TEMPLATES.get_or_init(|| {
        ROUTES
            .iter()
            .map(|r| (actix_web::dev::ResourceDef::new(r.path), r.method))
            .collect()
    });
    let mut methods: Vec<&'static str> = templates
        .iter()
        .filter(|(template, _)| template.is_match(path))
        .map(|(_, method)| *method)
        .collect();
    methods.dedup();
    methods
}

/// The answer for a request no route takes: 405 with `Allow` when the path is a route's and
/// only the method is wrong, else 404.
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    let allow = methods_for(req.path());
    if !allow.is_empty() {
        let allow = allow.join(", ");
        let problem = problem::problem(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("this path answers {allow}"),
            None,
            &request_id(&req),
        );
        return problem::start(&problem)
            .insert_header(("Allow", allow))
            .body(problem.to_json());
    }
    let problem = problem::problem(
        StatusCode::NOT_FOUND,
        "not_found",
        "no such route".into(),
        None,
        &request_id(&req),
    );
    problem::start(&problem).body(problem.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The steps of docs/architecture.md, "Adding a route", name files and items: each must be
    /// in the code as named.
    #[test]
    fn the_steps_to_add_a_route_name_what_the_code_has() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap_or_default();
        let steps = doc
            .split("## Adding a route")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .unwrap_or_default();
        assert!(
            !steps.is_empty(),
            "docs/architecture.md has no \"Adding a route\""
        );
        let read = |path: &str| std::fs::read_to_string(root.join(path)).unwrap_or_default();
        // Every file path the steps name (not a pattern with `<resource>`) exists.
        let quoted: Vec<&str> = steps.split('`').skip(1).step_by(2).collect();
        for path in quoted
            .iter()
            .filter(|q| q.starts_with("crates/") || q.starts_with("tests/"))
        {
            if !path.contains('<') {
                assert!(
                    root.join(path).exists(),
                    "the steps name {path}, which does not exist"
                );
            }
        }
        // The items the steps rely on, where they say they are.
        let items: [(&str, &str); 12] = [
            (
                "crates/domain/src/service/pipeline.rs",
                "pub(crate) async fn mutate<",
            ),
            (
                "crates/domain/src/service/pipeline.rs",
                "pub(crate) async fn create<",
            ),
            (
                "crates/domain/src/service/pipeline.rs",
                "pub struct Command<",
            ),
            ("crates/domain/src/service/pipeline.rs", "pub fn schedule("),
            ("crates/domain/src/service/pipeline.rs", "pub fn record("),
            ("crates/domain/src/service/pipeline.rs", "pub fn nothing("),
            ("crates/domain/src/error.rs", "pub fn code("),
            ("crates/api/src/problem.rs", "pub fn status_of("),
            (
                "crates/api/src/problem.rs",
                "impl From<DomainError> for ApiError",
            ),
            ("crates/api/src/render.rs", "shown_as! {"),
            ("crates/api/src/extract.rs", "pub fn keyed<"),
            ("crates/api/src/routes/mod.rs", "routes! {"),
        ];
        for (file, item) in items {
            assert!(read(file).contains(item), "{file} has no `{item}` any more");
        }
        // Every trait the table knows is one the steps list, and the other way round.
        let listed: Vec<&str> = steps
            .split("its traits (")
            .nth(1)
            .and_then(|t| t.split(')').next())
            .unwrap_or_default()
            .split(',')
            .map(|t| t.trim().trim_matches('`'))
            .collect();
        let traits = [
            Trait::Idempotent,
            Trait::Body,
            Trait::Capacity,
            Trait::NoAssistant,
            Trait::Tagged,
            Trait::IfMatch,
            Trait::StartsWork,
            Trait::Query,
            Trait::StateRules,
            Trait::Creates,
            Trait::Readiness,
            Trait::Unlisted,
        ];
        // Exhaustive: a new trait does not compile until it has its place in the list above.
        let place = |t: &Trait| match t {
            Trait::Idempotent => 0,
            Trait::Body => 1,
            Trait::Capacity => 2,
            Trait::NoAssistant => 3,
            Trait::Tagged => 4,
            Trait::IfMatch => 5,
            Trait::StartsWork => 6,
            Trait::Query => 7,
            Trait::StateRules => 8,
            Trait::Creates => 9,
            Trait::Readiness => 10,
            Trait::Unlisted => 11,
        };
        assert!(traits.iter().enumerate().all(|(i, t)| place(t) == i));
        let names: Vec<String> = traits.iter().map(|t| format!("{t:?}")).collect();
        assert_eq!(listed, names, "the traits the steps list");
    }

    /// Every handler the table names has a method and path from its `#[utoipa::path]`.
    #[test]
    fn every_route_has_the_method_and_path_its_handler_declares() {
        for r in ROUTES.iter() {
            assert!(r.path.starts_with('/'), "{r:?}");
            assert_ne!(
                (r.method, r.path),
                ("GET", "/"),
                "{} declares nothing",
                r.operation
            );
        }
        let mut seen: Vec<(&str, &str)> = ROUTES.iter().map(|r| (r.method, r.path)).collect();
        let all = seen.len();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), all, "two handlers declare one method and path");
    }
}
