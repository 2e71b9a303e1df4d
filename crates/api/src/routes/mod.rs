//! The route table: every route declared once (the `routes!` invocation below) with its method,
//! path, handler, who may call it and where its organization comes from. The router, the OpenAPI
//! document (its operations, error responses and descriptions) and the role-matrix tests are
//! all made from it.

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
    /// Query `organization`, then `X-Platform-Organization`, then the preferred organization.
    Collection,
    /// The body's `organization` field only.
    Body,
    /// The object named in the path.
    Object,
}

#[derive(Debug, Clone, Copy)]
pub struct RouteSpec {
    pub method: &'static str,
    pub path: &'static str,
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
}

const fn spec(
    method: &'static str,
    path: &'static str,
    role: RequiredRole,
    org: OrgSource,
    traits: &[Trait],
) -> RouteSpec {
    let mut s = RouteSpec {
        method,
        path,
        role,
        org,
        idempotent: false,
        body: false,
        capacity: false,
        assistant_restricted: false,
        tagged: false,
        if_match: false,
        starts_work: false,
    };
    let mut i = 0;
    while i < traits.len() {
        match traits[i] {
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
        }
        i += 1;
    }
    s
}

/// The one declaration of every route: method, path, handler, who may call it, where its
/// organization comes from, and its traits. It makes the route table ([`ROUTES`], read by the
/// OpenAPI document's error responses and by the role-matrix tests), the router
/// ([`configure`]) and the document's list of operations ([`RoutePaths`]).
macro_rules! routes {
    ($( $method:ident $path:literal => $handler:path, $role:ident, $org:ident $(, $trait:ident)* ; )*) => {
        /// Every route of the service.
        pub const ROUTES: &[RouteSpec] = &[
            $( spec(stringify!($method), $path, RequiredRole::$role, OrgSource::$org, &[$(Trait::$trait),*]), )*
        ];

        /// Registers every route: one resource per method and path, so a method a path does
        /// not answer falls through to [`not_found`], which answers 405 with `Allow`.
        pub fn configure(cfg: &mut ServiceConfig) {
            $(
                cfg.service(
                    web::resource($path)
                        .guard(guard::Method(Method::$method))
                        .to($handler),
                );
            )*
            docs::configure(cfg);
        }

        /// The operations of the OpenAPI document, in the table's order.
        #[derive(utoipa::OpenApi)]
        #[openapi(paths($($handler),*))]
        pub struct RoutePaths;
    };
}

routes! {
    GET    "/healthz" => system::healthz, Public, None;
    GET    "/readyz" => system::readyz, Public, None;
    GET    "/metrics" => system::metrics, Public, None;
    GET    "/v1/openapi.json" => system::openapi, Public, None;
    GET    "/v1/catalog" => catalog::get_catalog, Member, Collection;
    GET    "/v1/public/clusters" => clusters::list_clusters, Member, Collection;
    POST   "/v1/public/clusters" => clusters::create_cluster, SuperAdmin, Body, Idempotent, Body, Capacity, Tagged, StartsWork;
    GET    "/v1/public/clusters/{id}" => clusters::get_cluster, Member, Object, Tagged;
    PATCH  "/v1/public/clusters/{id}" => clusters::patch_cluster, SuperAdmin, Object, Body, IfMatch;
    DELETE "/v1/public/clusters/{id}" => clusters::delete_cluster, SuperAdmin, Object, Idempotent, IfMatch, StartsWork;
    PATCH  "/v1/public/clusters/{id}/exposure" => clusters::change_exposure, SuperAdmin, Object, Body, IfMatch, StartsWork;
    GET    "/v1/public/clusters/{id}/state" => clusters::cluster_state, Member, Object;
    GET    "/v1/public/clusters/{id}/kubeconfig" => clusters::kubeconfig, Member, Object;
    GET    "/v1/public/clusters/{id}/credentials" => credentials::list_credentials, Member, Object;
    DELETE "/v1/public/clusters/{id}/credentials" => credentials::rotate_credentials, SuperAdmin, Object;
    DELETE "/v1/public/clusters/{id}/credentials/{credential}" => credentials::revoke_credential, Member, Object;
    GET    "/v1/public/clusters/{id}/operations" => operations::list_operations, Member, Object;
    GET    "/v1/public/clusters/{id}/operations/{operation}" => operations::get_operation, Member, Object;
    GET    "/v1/public/clusters/{id}/node-pools" => node_pools::list_node_pools, Member, Object;
    POST   "/v1/public/clusters/{id}/node-pools" => node_pools::create_node_pool, SuperAdmin, Object, Idempotent, Body, Capacity, Tagged, StartsWork;
    PATCH  "/v1/public/clusters/{id}/node-pools/{pool}" => node_pools::patch_node_pool, SuperAdmin, Object, Idempotent, Body, Capacity, IfMatch, StartsWork;
    DELETE "/v1/public/clusters/{id}/node-pools/{pool}" => node_pools::delete_node_pool, SuperAdmin, Object, Idempotent, IfMatch, StartsWork;
    GET    "/v1/public/clusters/{id}/node-pools/{pool}/nodes" => node_pools::list_pool_nodes, Member, Object;
    GET    "/v1/public/clusters/{id}/nodes" => node_pools::list_nodes, Member, Object;
    DELETE "/v1/public/clusters/{id}/nodes/{node}" => node_pools::delete_node, SuperAdmin, Object, Idempotent, Tagged, StartsWork;
    GET    "/v1/public/clusters/{id}/elastic-ips" => networking::list_elastic_ips, Member, Object;
    POST   "/v1/public/clusters/{id}/elastic-ips" => networking::create_elastic_ip, SuperAdmin, Object, Idempotent, Body, Capacity, NoAssistant, Tagged, StartsWork;
    GET    "/v1/public/clusters/{id}/elastic-ips/{eip}" => networking::get_elastic_ip, Member, Object, Tagged;
    DELETE "/v1/public/clusters/{id}/elastic-ips/{eip}" => networking::release_elastic_ip, SuperAdmin, Object, Idempotent, NoAssistant, IfMatch, StartsWork;
    GET    "/v1/public/clusters/{id}/firewall-rules" => networking::list_firewall_rules, Member, Object;
    POST   "/v1/public/clusters/{id}/firewall-rules" => networking::create_firewall_rule, SuperAdmin, Object, Idempotent, Body, NoAssistant, Tagged, StartsWork;
    GET    "/v1/public/clusters/{id}/firewall-rules/{rule}" => networking::get_firewall_rule, Member, Object, Tagged;
    DELETE "/v1/public/clusters/{id}/firewall-rules/{rule}" => networking::delete_firewall_rule, SuperAdmin, Object, Idempotent, NoAssistant, IfMatch, StartsWork;
    GET    "/v1/public/gateway/auth-servers" => auth_servers::list_auth_servers, Member, Collection;
    POST   "/v1/public/gateway/auth-servers" => auth_servers::create_auth_server, SuperAdmin, Body, Idempotent, Body, Tagged;
    GET    "/v1/public/gateway/auth-servers/{id}" => auth_servers::get_auth_server, Member, Object, Tagged;
    PATCH  "/v1/public/gateway/auth-servers/{id}" => auth_servers::patch_auth_server, SuperAdmin, Object, Body, IfMatch;
    DELETE "/v1/public/gateway/auth-servers/{id}" => auth_servers::delete_auth_server, SuperAdmin, Object, Idempotent, IfMatch;
    POST   "/v1/public/gateway/auth-servers/{id}/credentials" => auth_servers::add_credential, SuperAdmin, Object, Idempotent, Body, Tagged;
    DELETE "/v1/public/gateway/auth-servers/{id}/credentials/{credential_id}" => auth_servers::remove_credential, SuperAdmin, Object, Idempotent;
    GET    "/v1/public/audit-events" => audit::list_audit_events, Member, Collection;
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
