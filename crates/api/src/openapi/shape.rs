//! Passes over the rendered document for what utoipa's derives cannot say: a request or answer
//! whose shape depends on a sibling field (`type` picks an auth server's `config`), a route
//! that answers two media types, and the document-level parts (tags, servers, contact).
//! Each pass names the schemas it reshapes; a test below fails if one of them disappears, so a
//! renamed type cannot silently leave the document unshaped.

use serde_json::{Map, Value, json};

/// The three auth-server types and the Rust names of their `config` schemas.
const AUTH_SERVER_TYPES: [(&str, &str, &str); 3] = [
    ("oidc", "Oidc", "OidcConfigRequest"),
    ("basic", "Basic", "BasicConfigRequest"),
    ("token", "Token", "TokenConfigRequest"),
];

/// The tags operations use, in the order a reader meets them, with what each covers.
const TAGS: [(&str, &str); 11] = [
    (
        "system",
        "Health, readiness, metrics and this document: no authentication.",
    ),
    (
        "catalog",
        "What a zone offers: Kubernetes versions, machine tiers, defaults and limits.",
    ),
    (
        "clusters",
        "Clusters, their state long-poll, exposure, kubeconfig and its credentials.",
    ),
    (
        "node pools",
        "A cluster's groups of identical worker nodes.",
    ),
    ("nodes", "The worker nodes of a cluster or of one pool."),
    (
        "operations",
        "Each change that hands work to provisioning, followed from the request to its end.",
    ),
    ("elastic ips", "Addresses allocated to a cluster."),
    ("firewall rules", "Ingress rules of a cluster."),
    (
        "gateway auth servers",
        "How the API gateway authenticates callers of a route: OIDC, Basic or static tokens.",
    ),
    (
        "audit",
        "Who changed what and when: every change that took effect, kept for the retention the operator set.",
    ),
    (
        "approvals",
        "The changes a person's AI assistant asked for, which run only once that person approves them.",
    ),
];

/// Path parameters that are UUIDs (node pools and nodes are named, not numbered).
const UUID_PARAMETERS: [&str; 6] = [
    "id",
    "eip",
    "rule",
    "credential_id",
    "operation",
    "credential",
];

pub fn apply(doc: &mut Value) {
    document_parts(doc);
    uuid_parameters(doc);
    kubeconfig_media_types(doc);
    auth_server_variants(doc);
    non_empty_patches(doc);
    prune(doc, &["AuthServerType"]);
}

/// A PATCH must change something (`{}` is 422). Said here rather than with utoipa's
/// `min_properties`, which 5.5 renders as `maxProperties`.
fn non_empty_patches(doc: &mut Value) {
    let Some(schemas) = schemas(doc) else {
        return;
    };
    for name in ["ClusterPatch", "NodePoolPatch", "AuthServerPatch"] {
        if let Some(patch) = schemas.get_mut(name) {
            patch["minProperties"] = json!(1);
        }
    }
}

/// Drops these component schemas when nothing refers to them.
fn prune(doc: &mut Value, names: &[&str]) {
    let text = doc.to_string();
    for name in names {
        if !text.contains(&format!("\"#/components/schemas/{name}\""))
            && let Some(schemas) = schemas(doc)
        {
            schemas.remove(*name);
        }
    }
}

/// The document as JSON text. Keys come sorted (serde_json's maps are ordered that way), except
/// in a `content` map, where the server's default media type comes first and its plain-text
/// form second: a generated client picks the first media type it supports, and the one route
/// with several, the kubeconfig, answers YAML unless asked otherwise; a generator that does not
/// know `application/yaml` reads it as the text it is.
pub fn render(doc: &Value) -> String {
    let mut out = String::with_capacity(128 * 1024);
    write(doc, false, &mut out);
    out
}

const DEFAULT_MEDIA_TYPE_FIRST: &str = "application/yaml";
const PLAIN_TEXT_SECOND: &str = "text/plain";

fn write(value: &Value, is_content: bool, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            if is_content {
                keys.sort_by_key(|k| {
                    (
                        k.as_str() != DEFAULT_MEDIA_TYPE_FIRST,
                        k.as_str() != PLAIN_TEXT_SECOND,
                        k.as_str(),
                    )
                });
            }
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write(&map[key], key == "content", out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, false, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn schemas(doc: &mut Value) -> Option<&mut Map<String, Value>> {
    doc["components"]["schemas"].as_object_mut()
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn document_parts(doc: &mut Value) {
    let used: Vec<String> = operations(doc)
        .flat_map(|op| op["tags"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    doc["tags"] = TAGS
        .iter()
        .filter(|(name, _)| used.iter().any(|u| u == name))
        .map(|(name, description)| json!({"name": name, "description": description}))
        .collect();
    doc["servers"] = json!([{"url": "/", "description": "The server that served this document"}]);
    doc["info"]["contact"] = json!({"name": "The operators of this service"});
}

fn operations(doc: &Value) -> impl Iterator<Item = &Value> {
    doc["paths"]
        .as_object()
        .into_iter()
        .flat_map(|paths| paths.values())
        .flat_map(|item| {
            ["get", "post", "patch", "put", "delete"]
                .into_iter()
                .filter_map(move |m| item.get(m))
        })
}

fn uuid_parameters(doc: &mut Value) {
    let Some(paths) = doc["paths"].as_object_mut() else {
        return;
    };
    for item in paths.values_mut() {
        for op in item
            .as_object_mut()
            .into_iter()
            .flat_map(|o| o.values_mut())
        {
            for p in op["parameters"].as_array_mut().into_iter().flatten() {
                let name = p["name"].as_str().unwrap_or_default();
                if p["in"] == "path" && UUID_PARAMETERS.contains(&name) {
                    p["schema"] = json!({"type": "string", "format": "uuid"});
                }
            }
        }
    }
}

/// The kubeconfig answers YAML by default and JSON for `format=json`; `format` is one of two
/// words, so it is an enum, not a pattern.
fn kubeconfig_media_types(doc: &mut Value) {
    let op = &mut doc["paths"]["/v1/public/clusters/{id}/kubeconfig"]["get"];
    for p in op["parameters"].as_array_mut().into_iter().flatten() {
        if p["name"] == "format" {
            p["schema"] = json!({"type": "string", "enum": ["plain", "json"], "default": "plain"});
        }
    }
    let ok = &mut op["responses"]["200"];
    ok["description"] = json!(
        "The kubeconfig: YAML (`application/yaml`, or `text/plain` to a client that accepts only \
         that) unless `format=json` asks for the JSON wrapper"
    );
    // As YAML the document is a mapping (a reader that parses YAML gets an object); as plain
    // text it is the same bytes, a string.
    ok["content"]["application/yaml"] = json!({
        "schema": {"type": "object", "description": "A kubeconfig file (apiVersion v1, kind Config)"}
    });
    ok["content"]["text/plain"] = json!({
        "schema": {"type": "string", "description": "A kubeconfig file (apiVersion v1, kind Config), as YAML"}
    });
}

/// `POST …/auth-servers` takes one of three bodies and `GET` answers one of three views, told
/// apart by `type`: each becomes a `oneOf` of named variants with a discriminator, so a
/// generated client gets a typed `config` for each type.
fn auth_server_variants(doc: &mut Value) {
    let Some(schemas) = schemas(doc) else {
        return;
    };
    // Requests: one variant per type, `type` fixed and `config` its own schema.
    let Some(base) = schemas.get("CreateAuthServerRequest").cloned() else {
        return;
    };
    let mut mapping = Map::new();
    let mut one_of = Vec::new();
    for (tag, rust, config) in AUTH_SERVER_TYPES {
        let name = format!("Create{rust}AuthServerRequest");
        let mut variant = base.clone();
        variant["description"] = json!(format!("Creates a `{tag}` auth server."));
        variant["properties"]["type"] = json!({"type": "string", "enum": [tag]});
        variant["properties"]["config"] = reference(config);
        mapping.insert(tag.into(), json!(format!("#/components/schemas/{name}")));
        one_of.push(reference(&name));
        schemas.insert(name, variant);
    }
    schemas.insert(
        "CreateAuthServerRequest".into(),
        json!({
            "description": base["description"],
            "oneOf": one_of,
            "discriminator": {"propertyName": "type", "mapping": mapping},
        }),
    );

    // Views: the config view's three inline shapes become named schemas, and the server view a
    // oneOf over `type` like the request.
    let config_views: Vec<Value> = schemas
        .get("AuthServerConfigView")
        .and_then(|v| v["oneOf"].as_array().cloned())
        .unwrap_or_default();
    let Some(view) = schemas.get("AuthServerView").cloned() else {
        return;
    };
    if config_views.len() != AUTH_SERVER_TYPES.len() {
        return;
    }
    let mut mapping = Map::new();
    let mut one_of = Vec::new();
    for ((tag, rust, _), shape) in AUTH_SERVER_TYPES.into_iter().zip(config_views) {
        let config_name = format!("{rust}ConfigView");
        schemas.insert(config_name.clone(), shape);
        let name = format!("{rust}AuthServerView");
        let mut variant = view.clone();
        variant["description"] = json!(format!("A `{tag}` auth server."));
        variant["properties"]["type"] = json!({"type": "string", "enum": [tag]});
        variant["properties"]["config"] = reference(&config_name);
        mapping.insert(tag.into(), json!(format!("#/components/schemas/{name}")));
        one_of.push(reference(&name));
        schemas.insert(name, variant);
    }
    if let Some(patch) = schemas.get_mut("AuthServerPatch") {
        patch["properties"]["config"] = json!({
            "description": "The config fields to replace, merged with the stored ones: those of the server's type.",
            "anyOf": [reference("OidcConfigPatch"), reference("BasicConfigPatch")],
        });
    }
    // Nothing refers to the union of the config views or to the type enum any more: each
    // variant names its own.
    schemas.remove("AuthServerConfigView");
    schemas.insert(
        "AuthServerView".into(),
        json!({
            "description": "An auth server; `config` has the shape of its `type`.",
            "oneOf": one_of,
            "discriminator": {"propertyName": "type", "mapping": mapping},
        }),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> Value {
        serde_json::from_str(&crate::openapi::document_json()).unwrap_or_default()
    }

    #[test]
    fn the_auth_server_request_and_view_are_discriminated_by_type() {
        let doc = doc();
        let s = &doc["components"]["schemas"];
        for name in ["CreateAuthServerRequest", "AuthServerView"] {
            assert_eq!(s[name]["discriminator"]["propertyName"], "type", "{name}");
            assert_eq!(s[name]["oneOf"].as_array().map(Vec::len), Some(3), "{name}");
        }
        assert_eq!(
            s["CreateBasicAuthServerRequest"]["properties"]["config"]["$ref"],
            "#/components/schemas/BasicConfigRequest"
        );
        assert_eq!(
            s["TokenAuthServerView"]["properties"]["config"]["$ref"],
            "#/components/schemas/TokenConfigView"
        );
        assert!(s["OidcConfigView"]["properties"]["client_secret_set"].is_object());
    }

    #[test]
    fn the_kubeconfig_declares_yaml_and_json_and_format_is_an_enum() {
        let doc = doc();
        let op = &doc["paths"]["/v1/public/clusters/{id}/kubeconfig"]["get"];
        let content = &op["responses"]["200"]["content"];
        assert!(content["application/yaml"].is_object());
        assert!(content["application/json"].is_object());
        let format = op["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "format")
            .cloned()
            .unwrap_or_default();
        assert_eq!(format["schema"]["enum"], json!(["plain", "json"]));
    }

    #[test]
    fn the_rendered_document_is_the_same_json_with_yaml_then_text_listed_first() {
        let mut doc = json!({"b": 1, "a": [true, null, "x\"y"], "content": {
            "application/json": {}, "application/yaml": {}, "text/plain": {}}});
        let text = render(&doc);
        assert!(
            text.find("application/yaml") < text.find("text/plain")
                && text.find("text/plain") < text.find("application/json"),
            "{text}"
        );
        let parsed: Value = serde_json::from_str(&text).unwrap_or_default();
        doc["a"][2] = json!("x\"y");
        assert_eq!(parsed, doc);
    }

    #[test]
    fn every_used_tag_is_described_and_ids_are_uuids() {
        let doc = doc();
        let described: Vec<&str> = doc["tags"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str())
            .collect();
        for op in operations(&doc) {
            for tag in op["tags"].as_array().into_iter().flatten() {
                assert!(
                    described.contains(&tag.as_str().unwrap_or_default()),
                    "{tag}"
                );
            }
            for p in op["parameters"].as_array().into_iter().flatten() {
                if p["in"] == "path" && p["name"] != "pool" && p["name"] != "node" {
                    assert_eq!(p["schema"]["format"], "uuid", "{}", p["name"]);
                }
            }
        }
    }
}
