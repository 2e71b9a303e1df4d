//! The route table: every route with its method, path, who may call it and where its
//! organization comes from. Registration, the OpenAPI document's error responses and the
//! role-matrix tests are all driven from [`ROUTES`].

pub mod auth_servers;
pub mod catalog;
pub mod clusters;
pub mod networking;
pub mod node_pools;
pub mod system;

use actix_web::http::Method;
use actix_web::web::{self, ServiceConfig};
use actix_web::{HttpRequest, HttpResponse, Route};

use crate::extract::request_id;

/// Who may call a route (spec §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No authentication (health, readiness, metrics, the OpenAPI document).
    Public,
    /// member, project_admin or super_admin of the organization.
    Member,
    /// super_admin of the organization.
    SuperAdmin,
}

/// Where a route's organization comes from (spec §5 and §4 behaviours 1 and 3).
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
    pub access: Access,
    pub org: OrgSource,
    /// Honours `Idempotency-Key` (CONTRACT §8).
    pub idempotent: bool,
    /// Reads a JSON body.
    pub body: bool,
    /// May answer 402 (adds nodes) or 503 `capacity_exhausted`.
    pub capacity: bool,
    /// Refused to the assistant (spec §1).
    pub assistant_restricted: bool,
}

const fn r(method: &'static str, path: &'static str, access: Access, org: OrgSource) -> RouteSpec {
    RouteSpec {
        method,
        path,
        access,
        org,
        idempotent: false,
        body: false,
        capacity: false,
        assistant_restricted: false,
    }
}

const fn idem(mut s: RouteSpec) -> RouteSpec {
    s.idempotent = true;
    s
}

const fn body(mut s: RouteSpec) -> RouteSpec {
    s.body = true;
    s
}

const fn capacity(mut s: RouteSpec) -> RouteSpec {
    s.capacity = true;
    s
}

const fn no_assistant(mut s: RouteSpec) -> RouteSpec {
    s.assistant_restricted = true;
    s
}

use Access::{Member, Public, SuperAdmin};
use OrgSource::{Body, Collection, Object};

const C: &str = "/v1/public/clusters";

/// Every route of the service.
pub const ROUTES: &[RouteSpec] = &[
    r("GET", "/healthz", Public, OrgSource::None),
    r("GET", "/readyz", Public, OrgSource::None),
    r("GET", "/metrics", Public, OrgSource::None),
    r("GET", "/v1/openapi.json", Public, OrgSource::None),
    r("GET", "/v1/catalog", Member, Collection),
    r("GET", C, Member, Collection),
    capacity(body(idem(r("POST", C, SuperAdmin, Body)))),
    r("GET", "/v1/public/clusters/{id}", Member, Object),
    body(r("PATCH", "/v1/public/clusters/{id}", SuperAdmin, Object)),
    body(r(
        "PATCH",
        "/v1/public/clusters/{id}/exposure",
        SuperAdmin,
        Object,
    )),
    idem(r("DELETE", "/v1/public/clusters/{id}", SuperAdmin, Object)),
    r("GET", "/v1/public/clusters/{id}/state", Member, Object),
    r("GET", "/v1/public/clusters/{id}/kubeconfig", Member, Object),
    r("GET", "/v1/public/clusters/{id}/node-pools", Member, Object),
    capacity(body(idem(r(
        "POST",
        "/v1/public/clusters/{id}/node-pools",
        SuperAdmin,
        Object,
    )))),
    capacity(body(idem(r(
        "PATCH",
        "/v1/public/clusters/{id}/node-pools/{pool}",
        SuperAdmin,
        Object,
    )))),
    idem(r(
        "DELETE",
        "/v1/public/clusters/{id}/node-pools/{pool}",
        SuperAdmin,
        Object,
    )),
    r("GET", "/v1/public/clusters/{id}/nodes", Member, Object),
    r(
        "GET",
        "/v1/public/clusters/{id}/node-pools/{pool}/nodes",
        Member,
        Object,
    ),
    idem(r(
        "DELETE",
        "/v1/public/clusters/{id}/nodes/{node}",
        SuperAdmin,
        Object,
    )),
    r(
        "GET",
        "/v1/public/clusters/{id}/elastic-ips",
        Member,
        Object,
    ),
    r(
        "GET",
        "/v1/public/clusters/{id}/elastic-ips/{eip}",
        Member,
        Object,
    ),
    no_assistant(capacity(body(idem(r(
        "POST",
        "/v1/public/clusters/{id}/elastic-ips",
        SuperAdmin,
        Object,
    ))))),
    no_assistant(idem(r(
        "DELETE",
        "/v1/public/clusters/{id}/elastic-ips/{eip}",
        SuperAdmin,
        Object,
    ))),
    r(
        "GET",
        "/v1/public/clusters/{id}/firewall-rules",
        Member,
        Object,
    ),
    r(
        "GET",
        "/v1/public/clusters/{id}/firewall-rules/{rule}",
        Member,
        Object,
    ),
    no_assistant(body(idem(r(
        "POST",
        "/v1/public/clusters/{id}/firewall-rules",
        SuperAdmin,
        Object,
    )))),
    no_assistant(idem(r(
        "DELETE",
        "/v1/public/clusters/{id}/firewall-rules/{rule}",
        SuperAdmin,
        Object,
    ))),
    r("GET", "/v1/public/gateway/auth-servers", Member, Collection),
    body(idem(r(
        "POST",
        "/v1/public/gateway/auth-servers",
        SuperAdmin,
        Body,
    ))),
    r(
        "GET",
        "/v1/public/gateway/auth-servers/{id}",
        Member,
        Object,
    ),
    body(r(
        "PATCH",
        "/v1/public/gateway/auth-servers/{id}",
        SuperAdmin,
        Object,
    )),
    idem(r(
        "DELETE",
        "/v1/public/gateway/auth-servers/{id}",
        SuperAdmin,
        Object,
    )),
    body(idem(r(
        "POST",
        "/v1/public/gateway/auth-servers/{id}/credentials",
        SuperAdmin,
        Object,
    ))),
    idem(r(
        "DELETE",
        "/v1/public/gateway/auth-servers/{id}/credentials/{credential_id}",
        SuperAdmin,
        Object,
    )),
];

/// The methods a path answers, for `Allow`.
pub fn allowed_methods(path: &str) -> Vec<&'static str> {
    ROUTES
        .iter()
        .filter(|r| r.path == path)
        .map(|r| r.method)
        .collect()
}

/// 405 with `Allow` and a problem body, for a method a path does not answer.
fn method_not_allowed(path: &'static str) -> Route {
    web::to(move |req: HttpRequest| {
        let allow = allowed_methods(path).join(", ");
        async move {
            let status = actix_web::http::StatusCode::METHOD_NOT_ALLOWED;
            let body = serde_json::json!({
                "type": "about:blank", "title": "Method Not Allowed", "status": 405,
                "code": "method_not_allowed", "detail": format!("this path answers {allow}"),
                "request_id": request_id(&req),
            });
            HttpResponse::build(status)
                .insert_header(("Allow", allow))
                .content_type(crate::problem::PROBLEM_JSON)
                .body(body.to_string())
        }
    })
}

/// The answer for a path no route matches.
pub async fn not_found(req: HttpRequest) -> HttpResponse {
    let body = serde_json::json!({
        "type": "about:blank", "title": "Not Found", "status": 404, "code": "not_found",
        "detail": "no such route", "request_id": request_id(&req),
    });
    HttpResponse::NotFound()
        .content_type(crate::problem::PROBLEM_JSON)
        .body(body.to_string())
}

macro_rules! resource {
    ($cfg:expr, $path:expr, $( $method:ident => $handler:path ),+ $(,)?) => {{
        let mut res = web::resource($path);
        $( res = res.route(web::method(Method::$method).to($handler)); )+
        $cfg.service(res.default_service(method_not_allowed($path)));
    }};
}

/// Registers every route.
pub fn configure(cfg: &mut ServiceConfig) {
    resource!(cfg, "/healthz", GET => system::healthz);
    resource!(cfg, "/readyz", GET => system::readyz);
    resource!(cfg, "/metrics", GET => system::metrics);
    resource!(cfg, "/v1/openapi.json", GET => system::openapi);
    resource!(cfg, "/v1/catalog", GET => catalog::get_catalog);
    resource!(cfg, "/v1/public/clusters", GET => clusters::list_clusters, POST => clusters::create_cluster);
    resource!(cfg, "/v1/public/clusters/{id}",
        GET => clusters::get_cluster, PATCH => clusters::patch_cluster, DELETE => clusters::delete_cluster);
    resource!(cfg, "/v1/public/clusters/{id}/exposure", PATCH => clusters::change_exposure);
    resource!(cfg, "/v1/public/clusters/{id}/state", GET => clusters::cluster_state);
    resource!(cfg, "/v1/public/clusters/{id}/kubeconfig", GET => clusters::kubeconfig);
    resource!(cfg, "/v1/public/clusters/{id}/node-pools",
        GET => node_pools::list_node_pools, POST => node_pools::create_node_pool);
    resource!(cfg, "/v1/public/clusters/{id}/node-pools/{pool}",
        PATCH => node_pools::patch_node_pool, DELETE => node_pools::delete_node_pool);
    resource!(cfg, "/v1/public/clusters/{id}/node-pools/{pool}/nodes", GET => node_pools::list_pool_nodes);
    resource!(cfg, "/v1/public/clusters/{id}/nodes", GET => node_pools::list_nodes);
    resource!(cfg, "/v1/public/clusters/{id}/nodes/{node}", DELETE => node_pools::delete_node);
    resource!(cfg, "/v1/public/clusters/{id}/elastic-ips",
        GET => networking::list_elastic_ips, POST => networking::create_elastic_ip);
    resource!(cfg, "/v1/public/clusters/{id}/elastic-ips/{eip}",
        GET => networking::get_elastic_ip, DELETE => networking::release_elastic_ip);
    resource!(cfg, "/v1/public/clusters/{id}/firewall-rules",
        GET => networking::list_firewall_rules, POST => networking::create_firewall_rule);
    resource!(cfg, "/v1/public/clusters/{id}/firewall-rules/{rule}",
        GET => networking::get_firewall_rule, DELETE => networking::delete_firewall_rule);
    resource!(cfg, "/v1/public/gateway/auth-servers",
        GET => auth_servers::list_auth_servers, POST => auth_servers::create_auth_server);
    resource!(cfg, "/v1/public/gateway/auth-servers/{id}",
        GET => auth_servers::get_auth_server, PATCH => auth_servers::patch_auth_server, DELETE => auth_servers::delete_auth_server);
    resource!(cfg, "/v1/public/gateway/auth-servers/{id}/credentials", POST => auth_servers::add_credential);
    resource!(cfg, "/v1/public/gateway/auth-servers/{id}/credentials/{credential_id}", DELETE => auth_servers::remove_credential);
}
