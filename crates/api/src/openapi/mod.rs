//! The OpenAPI 3.1 document, generated from the handlers' annotations and the same Rust types
//! they use; error responses, headers and security are added from the route table so that
//! every route documents every status it can answer.

use std::sync::OnceLock;

use utoipa::OpenApi;
use utoipa::openapi::path::{Operation, ParameterBuilder, ParameterIn};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, ObjectBuilder, Ref, RefOr, Required, ResponseBuilder, Type};

mod shape;

use crate::routes::{self, OrgSource, ROUTES, RequiredRole, RouteSpec};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Managed Kubernetes cluster service",
        version = "1.0.0",
        description = "Clusters, node pools, nodes, Elastic IPs, firewall rules, kubeconfigs and the gateway's auth servers. Errors are RFC 9457 problem details with a stable `code`."
    ),
    components(schemas(
        wire::problem::Problem,
        wire::problem::FieldError,
        wire::request::auth_server::OidcConfigRequest,
        wire::request::auth_server::BasicConfigRequest,
        wire::request::auth_server::TokenConfigRequest,
        wire::request::auth_server::BasicCredentialRequest,
        wire::request::auth_server::TokenCredentialRequest,
        wire::request::auth_server::OidcConfigPatch,
        wire::request::auth_server::BasicConfigPatch,
    ))
)]
struct ApiDoc;

/// The statuses a route can answer besides its successes.
pub fn error_statuses(r: &RouteSpec) -> Vec<u16> {
    let mut s = Vec::new();
    if r.role == RequiredRole::Public {
        if r.readiness {
            s.push(503);
        }
        return s;
    }
    // Every authenticated route is under the per-token limits (`ratelimit`).
    s.extend([401, 403, 429, 500, 502, 503]);
    match r.org {
        OrgSource::Collection => s.extend([400, 404]),
        OrgSource::Object => s.push(404),
        OrgSource::Body => s.push(404),
        OrgSource::Own => s.push(404),
        OrgSource::None => {}
    }
    // A malformed Idempotency-Key is a 400, like a query parameter out of range.
    if r.query || r.idempotent || r.state_rules {
        s.push(400);
    }
    if r.role == RequiredRole::SuperAdmin || r.state_rules {
        s.push(409);
    }
    if r.body {
        s.extend([413, 415, 422]);
    }
    if r.capacity {
        s.push(402);
    }
    if r.if_match {
        s.push(412);
    }
    s.sort_unstable();
    s.dedup();
    s
}

fn operation_mut<'a>(
    doc: &'a mut utoipa::openapi::OpenApi,
    r: &RouteSpec,
) -> Option<&'a mut Operation> {
    let item = doc.paths.paths.get_mut(r.path)?;
    match r.method {
        "GET" => item.get.as_mut(),
        "POST" => item.post.as_mut(),
        "PATCH" => item.patch.as_mut(),
        "DELETE" => item.delete.as_mut(),
        "PUT" => item.put.as_mut(),
        _ => None,
    }
}

fn reason(status: u16) -> &'static str {
    actix_web::http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Error")
}

/// OpenAPI links from each create to the operations on the object it made, so clients (and the
/// schema fuzzer's stateful phase) know where a created id goes. Written on the JSON: utoipa 5's
/// `Link` serializes its fields in snake_case, which no validator accepts.
fn add_links(doc: &mut serde_json::Value) {
    for create in ROUTES.iter().filter(|r| r.creates) {
        let prefix = format!("{}/{{id}}", create.path);
        let mut targets = Vec::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            if !path.starts_with(&prefix) {
                continue;
            }
            for method in ["get", "patch", "delete", "post"] {
                if let Some(id) = item[method]["operationId"].as_str() {
                    targets.push(id.to_owned());
                }
            }
        }
        let links: serde_json::Map<String, serde_json::Value> = targets
            .into_iter()
            .map(|t| (t.clone(), serde_json::json!({"operationId": t, "parameters": {"id": "$response.body#/id"}})))
            .collect();
        let method = create.method.to_ascii_lowercase();
        if let Some(response) =
            doc["paths"][create.path][method.as_str()]["responses"]["201"].as_object_mut()
        {
            response.insert("links".into(), serde_json::Value::Object(links));
        }
    }
}

/// Who may call the route and where its organization comes from, in words: the part of an
/// operation's description the route table knows.
fn description(r: &RouteSpec) -> String {
    let who = match r.role {
        RequiredRole::Public => "No authentication.",
        // A person's own objects (their approvals) belong to no organization.
        RequiredRole::Member if matches!(r.org, OrgSource::None | OrgSource::Own) => {
            "Any authenticated account, for its own objects only."
        }
        RequiredRole::Member => {
            "Any member of the organization (member, project_admin or super_admin)."
        }
        RequiredRole::SuperAdmin => "A super_admin of the organization.",
    };
    let org = match r.org {
        OrgSource::None => "",
        OrgSource::Own => " Another person's is not found (404): nothing about it is told.",
        OrgSource::Collection => {
            " The organization is the `organization` query parameter, else the `X-Platform-Organization` header, else the caller's preferred organization."
        }
        OrgSource::Body => {
            " The organization is the body's `organization` field; query and header are not read."
        }
        OrgSource::Object => " The organization is the one that owns the object in the path.",
    };
    let retry = if r.idempotent {
        " With an `Idempotency-Key`, a retry of the same request answers what the first one did (with `Idempotency-Replay: true`)."
    } else {
        ""
    };
    let assistant = if r.assistant_restricted {
        " Refused to the AI assistant client."
    } else {
        ""
    };
    format!("{who}{org}{retry}{assistant}")
}

/// `Idempotency-Replay: true` on every success an idempotent route can replay.
fn replay_header(op: &mut Operation) {
    for (status, response) in op.responses.responses.iter_mut() {
        let (false, RefOr::T(response)) = (status.starts_with(['4', '5']), response) else {
            continue;
        };
        response.headers.insert(
            "Idempotency-Replay".into(),
            utoipa::openapi::HeaderBuilder::new()
                .schema(ObjectBuilder::new().schema_type(Type::Boolean))
                .description(Some(
                    "`true` when this answer is the stored answer to an earlier request with the same `Idempotency-Key`",
                ))
                .build(),
        );
    }
}

/// `RateLimit-Policy` and `RateLimit` on every answer of a limited route, `Retry-After` on its 429.
fn rate_limit_headers(op: &mut Operation) {
    let header = |description: &str| {
        utoipa::openapi::HeaderBuilder::new()
            .schema(ObjectBuilder::new().schema_type(Type::String))
            .description(Some(description))
            .build()
    };
    for (status, response) in op.responses.responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        response.headers.insert(
            "RateLimit-Policy".into(),
            header("The limits this process applies to the token, e.g. `\"token\";q=600;w=60` (and `\"token-writes\";q=120;w=60` on writes): q requests per w seconds"),
        );
        response.headers.insert(
            "RateLimit".into(),
            header("Where the token stands in each policy, e.g. `\"token\";r=599;t=1`: r requests left, t seconds until the quota is whole again"),
        );
        if status == "429" {
            response.headers.insert(
                "Retry-After".into(),
                header("Seconds until a request is allowed again"),
            );
        }
    }
}

/// `ETag` on every success that answers an object; on a GET, the 304 for `If-None-Match`.
fn etag_header(op: &mut Operation, read: bool) {
    let etag = || {
        utoipa::openapi::HeaderBuilder::new()
            .schema(ObjectBuilder::new().schema_type(Type::String))
            .description(Some(
                "The object's entity tag (a hash of this representation): send it back in \
                 `If-Match` to change the object only as you saw it, or `If-None-Match` to read it \
                 only when it changed",
            ))
            .build()
    };
    for (status, response) in op.responses.responses.iter_mut() {
        let (true, RefOr::T(response)) = (status.starts_with('2') && status != "204", response)
        else {
            continue;
        };
        response.headers.insert("ETag".into(), etag());
    }
    if read {
        let mut not_modified = ResponseBuilder::new()
            .description("Not modified: the object still has an `ETag` sent in `If-None-Match`")
            .build();
        not_modified.headers.insert("ETag".into(), etag());
        op.responses
            .responses
            .insert("304".into(), RefOr::T(not_modified));
    }
}

/// `Operation-Location` on the 201/202 of a route that may start an operation, and
/// `Location` on its 202: where the operation is followed.
fn operation_location_headers(op: &mut Operation) {
    let header = |text: &str| {
        utoipa::openapi::HeaderBuilder::new()
            .schema(ObjectBuilder::new().schema_type(Type::String))
            .description(Some(text))
            .build()
    };
    for (status, response) in op.responses.responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        if status == "201" || status == "202" {
            response.headers.insert(
                "Operation-Location".into(),
                header(
                    "When the change handed work to provisioning: the operation that follows it, \
                     `/v1/public/clusters/{id}/operations/{operation}`",
                ),
            );
        }
        if status == "202" {
            response.headers.insert(
                "Location".into(),
                header("The same operation, as the status monitor of this accepted change"),
            );
        }
    }
}

/// Builds the document once.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.merge(routes::RoutePaths::openapi());
    // The operator's endpoints are served but not part of the API a client is generated from.
    for r in ROUTES.iter().filter(|r| r.unlisted) {
        doc.paths.paths.remove(r.path);
    }
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        "bearer",
        SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some("An account-platform access token"))
                .build(),
        ),
    );
    for r in ROUTES.iter() {
        let statuses = error_statuses(r);
        let Some(op) = operation_mut(&mut doc, r) else {
            continue;
        };
        for status in statuses {
            let response = ResponseBuilder::new()
                .description(reason(status))
                .content(
                    "application/problem+json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("Problem")))
                        .build(),
                )
                .build();
            op.responses
                .responses
                .entry(status.to_string())
                .or_insert(RefOr::T(response));
        }
        if op.description.is_none() {
            op.description = Some(description(r));
        }
        if r.idempotent {
            replay_header(op);
        }
        if r.tagged {
            etag_header(op, r.method == "GET");
        }
        if r.starts_work {
            operation_location_headers(op);
        }
        if r.role != RequiredRole::Public {
            rate_limit_headers(op);
        }
        if r.role != RequiredRole::Public {
            op.security = Some(vec![SecurityRequirement::new(
                "bearer",
                Vec::<String>::new(),
            )]);
        }
        let params = op.parameters.get_or_insert_with(Vec::new);
        let header = |name: &str, description: &str| {
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Header)
                .required(Required::False)
                .description(Some(description))
                .schema(Some(ObjectBuilder::new().schema_type(Type::String)))
                .build()
        };
        if r.org == OrgSource::Collection {
            params.push(header(
                "X-Platform-Organization",
                "Organization slug or id, when the query does not name one",
            ));
        }
        if r.if_match {
            params.push(header(
                "If-Match",
                "The `ETag` of the object as you last read it (or `*`): the change applies only if \
                 the object is still so, else 412 `precondition_failed` and nothing changes. A weak \
                 tag (`W/\"…\"`) never matches.",
            ));
        }
        if r.tagged && r.method == "GET" {
            params.push(header(
                "If-None-Match",
                "`ETag`s you hold: 304 without a body when the object still has one of them",
            ));
        }
        if r.idempotent {
            let mut p = header(
                "Idempotency-Key",
                "Makes retries safe: the same key with the same request replays the first answer",
            );
            p.schema = Some(RefOr::T(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(domain::names::IDEMPOTENCY_KEY_PATTERN))
                    .min_length(Some(8))
                    .max_length(Some(255))
                    .into(),
            ));
            params.push(p);
        }
    }
    doc
}

/// The document as JSON, rendered once.
pub fn document_json() -> String {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        let mut doc = serde_json::to_value(document()).unwrap_or_default();
        add_links(&mut doc);
        shape::apply(&mut doc);
        shape::render(&doc)
    })
    .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole document, pretty-printed: a change to the contract is a change to
    /// `snapshots/api__openapi__tests__document.snap`, seen in review. After an intended change:
    /// `cargo insta review` (or `INSTA_UPDATE=always cargo test -p api`).
    #[test]
    fn document() {
        let doc: serde_json::Value = serde_json::from_str(&document_json()).unwrap_or_default();
        insta::assert_snapshot!(serde_json::to_string_pretty(&doc).unwrap_or_default());
    }

    #[test]
    fn every_listed_route_of_the_table_is_in_the_document_and_nothing_else() {
        let doc: serde_json::Value = serde_json::from_str(&document_json()).unwrap_or_default();
        assert_eq!(doc["openapi"], "3.1.0");
        let mut documented = Vec::new();
        for (path, item) in doc["paths"].as_object().into_iter().flatten() {
            for method in ["get", "post", "patch", "delete", "put"] {
                if item.get(method).is_some() {
                    documented.push(format!("{} {path}", method.to_uppercase()));
                }
            }
        }
        let mut table: Vec<String> = ROUTES
            .iter()
            .filter(|r| !r.unlisted)
            .map(|r| format!("{} {}", r.method, r.path))
            .collect();
        documented.sort();
        table.sort();
        assert_eq!(documented, table);
        assert!(
            doc["paths"]["/metrics"].is_null(),
            "an operator's endpoint is listed"
        );
    }

    #[test]
    fn every_error_status_is_documented_as_problem_json() {
        let doc: serde_json::Value = serde_json::from_str(&document_json()).unwrap_or_default();
        for r in ROUTES.iter().filter(|r| !r.unlisted) {
            let op = &doc["paths"][r.path][r.method.to_lowercase()];
            for status in error_statuses(r) {
                let content =
                    &op["responses"][status.to_string()]["content"]["application/problem+json"];
                assert!(
                    content.is_object(),
                    "{} {} lacks {status}",
                    r.method,
                    r.path
                );
            }
            if r.idempotent {
                let names: Vec<_> = op["parameters"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|p| p["name"].clone())
                    .collect();
                assert!(
                    names.contains(&serde_json::json!("Idempotency-Key")),
                    "{} {}",
                    r.method,
                    r.path
                );
            }
        }
    }
}
