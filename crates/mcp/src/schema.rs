//! JSON Schemas of the tools' inputs and outputs, made from the `wire` types' OpenAPI schemas
//! (one declaration of each shape: the API's document and the tools say the same).
//!
//! An OpenAPI 3.1 schema is a JSON Schema (2020-12) whose references point into the
//! document's `#/components/schemas`; a tool's schema stands alone, so each one carries the
//! schemas it refers to in its own `$defs`, its references rewritten to point there.

use serde_json::{Map, Value, json};
use utoipa::ToSchema;

const OPENAPI_REFS: &str = "#/components/schemas/";
const OWN_REFS: &str = "#/$defs/";

/// A schema under construction: its root and the named schemas it refers to.
#[derive(Default)]
pub struct Builder {
    defs: Map<String, Value>,
}

impl Builder {
    /// `T`'s schema, inline, its referenced schemas kept for `$defs`.
    pub fn inline<T: ToSchema>(&mut self) -> Value {
        let mut named = Vec::new();
        T::schemas(&mut named);
        for (name, schema) in named {
            self.defs
                .entry(name)
                .or_insert_with(|| serde_json::to_value(schema).unwrap_or(Value::Null));
        }
        serde_json::to_value(T::schema()).unwrap_or(Value::Null)
    }

    /// A reference to `T`'s schema (kept whole in `$defs`).
    pub fn reference<T: ToSchema>(&mut self) -> Value {
        let root = self.inline::<T>();
        let name = T::name().into_owned();
        self.defs.entry(name.clone()).or_insert(root);
        json!({ "$ref": format!("{OPENAPI_REFS}{name}") })
    }

    /// The finished schema: `root` (an object schema) with its `$defs`, every reference
    /// pointing into them.
    pub fn finish(self, mut root: Value) -> Map<String, Value> {
        if !self.defs.is_empty()
            && let Some(o) = root.as_object_mut()
        {
            o.insert("$defs".into(), Value::Object(self.defs));
        }
        rewrite_refs(&mut root);
        match root {
            Value::Object(o) => o,
            _ => Map::new(),
        }
    }
}

fn rewrite_refs(v: &mut Value) {
    match v {
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if k == "$ref"
                    && let Value::String(s) = x
                    && let Some(name) = s.strip_prefix(OPENAPI_REFS)
                {
                    *s = format!("{OWN_REFS}{name}");
                } else {
                    rewrite_refs(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(rewrite_refs),
        _ => {}
    }
}

/// An object schema of `properties`, `required` naming the ones a call must give; no other
/// property is accepted (the API refuses unknown fields too).
pub fn object(properties: Vec<(&str, Value)>, required: &[&str]) -> Value {
    let props: Map<String, Value> = properties
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

/// A string property with its description.
pub fn text(description: &str) -> Value {
    json!({ "type": "string", "minLength": 1, "description": description })
}

/// The `organization` argument every organization's tool takes.
pub fn organization() -> Value {
    text(
        "The organization: its slug or id. Omitted: the account's preferred organization, as \
         the API resolves it.",
    )
}

/// The `cluster` argument: a cluster of the organization by name or id.
pub fn cluster() -> Value {
    text("The cluster: its id, or its name within the organization.")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_point_into_the_schemas_own_defs() {
        let mut b = Builder::default();
        let list = b.inline::<wire::cluster::ClusterList>();
        let s = b.finish(list);
        let text = serde_json::to_string(&s).unwrap_or_default();
        assert!(!text.contains(OPENAPI_REFS), "{text}");
        assert!(text.contains("#/$defs/Cluster"), "{text}");
        assert!(s["$defs"].get("Cluster").is_some(), "{text}");
    }
}
