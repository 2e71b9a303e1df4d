//! Node pool bodies: a pool in a create body or `POST …/node-pools`, and a pool's PATCH.

use std::collections::BTreeMap;

use domain::input::node_pool as draft;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::enums;
use crate::request::{nullable, nullable_integer, opt_integer};

/// A pool in a create body, or the body of `POST …/node-pools`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodePoolRequest {
    /// DNS label; `default` when omitted.
    #[schema(
        pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        min_length = 1,
        max_length = 63
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A machine tier id from the catalog, e.g. `kube.c5.xlarge`.
    #[schema(required = true, nullable = false, min_length = 1)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<String>,
    /// 0-200; 0 only with auto_scale; required unless auto_scale (then it starts at min_nodes).
    #[schema(minimum = 0, maximum = 200)]
    #[serde(default, deserialize_with = "opt_integer")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_scale: Option<bool>,
    /// >= 0, default 1, <= max_nodes.
    #[schema(minimum = 0, maximum = 200)]
    #[serde(default, deserialize_with = "opt_integer")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_nodes: Option<i64>,
    /// 1-200; required with auto_scale.
    #[schema(minimum = 1, maximum = 200)]
    #[serde(default, deserialize_with = "opt_integer")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<i64>,
    /// Kubernetes labels put on each node of the pool: keys are qualified names (an optional
    /// DNS-subdomain prefix and `/`, then 1-63 letters, digits, `-`, `_`, `.`), values empty or
    /// 1-63 of the same characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Kubernetes taints put on each node of the pool, at most 50, one per key and effect.
    #[schema(max_items = 50)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taints: Option<Vec<TaintRequest>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<BTreeMap<String, String>>,
    /// 1-10, default 1: how many nodes above its count the pool may go while an upgrade
    /// replaces its nodes.
    #[schema(minimum = 1, maximum = 10)]
    #[serde(default, deserialize_with = "opt_integer")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<i64>,
    /// 0-10, default 0: how many nodes below its count the pool may go while an upgrade
    /// replaces its nodes.
    #[schema(minimum = 0, maximum = 10)]
    #[serde(default, deserialize_with = "opt_integer")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<i64>,
}

/// A Kubernetes taint: pods that do not tolerate it are kept off the pool's nodes
/// (`NoSchedule`), kept off when possible (`PreferNoSchedule`), or also evicted (`NoExecute`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaintRequest {
    /// A qualified name, as a label key: e.g. `dedicated` or `nvidia.com/gpu`.
    #[schema(required = true, nullable = false, min_length = 1, max_length = 317)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A label value: empty (the default) or 1-63 letters, digits, `-`, `_`, `.`.
    #[schema(max_length = 63)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[schema(required = true, nullable = false, value_type = enums::TaintEffect)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
}

impl From<TaintRequest> for draft::TaintRequest {
    fn from(b: TaintRequest) -> Self {
        draft::TaintRequest {
            key: b.key,
            value: b.value,
            effect: b.effect,
        }
    }
}

impl From<draft::TaintRequest> for TaintRequest {
    fn from(t: draft::TaintRequest) -> Self {
        TaintRequest {
            key: t.key,
            value: t.value,
            effect: t.effect,
        }
    }
}

fn taints(list: Vec<TaintRequest>) -> Vec<draft::TaintRequest> {
    list.into_iter().map(Into::into).collect()
}

impl From<NodePoolRequest> for draft::NodePoolRequest {
    fn from(b: NodePoolRequest) -> Self {
        draft::NodePoolRequest {
            name: b.name,
            size: b.size,
            count: b.count,
            auto_scale: b.auto_scale,
            min_nodes: b.min_nodes,
            max_nodes: b.max_nodes,
            labels: b.labels,
            taints: b.taints.map(taints),
            tags: b.tags,
            max_surge: b.max_surge,
            max_unavailable: b.max_unavailable,
        }
    }
}

/// `PATCH …/node-pools/{pool}`: any of count, auto_scale, min_nodes, max_nodes, labels,
/// taints, tags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NodePoolPatch {
    #[serde(default, deserialize_with = "nullable_integer")]
    #[schema(required = false, value_type = i64, minimum = 0, maximum = 200)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<Option<i64>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(required = false, value_type = bool)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_scale: Option<Option<bool>>,
    #[serde(default, deserialize_with = "nullable_integer")]
    #[schema(required = false, value_type = i64, minimum = 0, maximum = 200)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_nodes: Option<Option<i64>>,
    #[serde(default, deserialize_with = "nullable_integer")]
    #[schema(required = false, value_type = i64, minimum = 1, maximum = 200)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<Option<i64>>,
    /// Replaces the labels whole; null is refused.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(required = false, value_type = BTreeMap<String, String>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<Option<BTreeMap<String, String>>>,
    /// Replaces the taints whole (`[]` removes them); null is refused. Labels and taints
    /// reach the pool's running nodes in place: no node is replaced for them.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(required = false, value_type = Vec<TaintRequest>, max_items = 50)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taints: Option<Option<Vec<TaintRequest>>>,
    /// Replaces the tags whole; null is refused.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(required = false, value_type = BTreeMap<String, String>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Option<BTreeMap<String, String>>>,
    #[serde(default, deserialize_with = "nullable_integer")]
    #[schema(required = false, value_type = i64, minimum = 1, maximum = 10)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<Option<i64>>,
    #[serde(default, deserialize_with = "nullable_integer")]
    #[schema(required = false, value_type = i64, minimum = 0, maximum = 10)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<Option<i64>>,
}

impl From<NodePoolPatch> for draft::NodePoolPatch {
    fn from(b: NodePoolPatch) -> Self {
        draft::NodePoolPatch {
            count: b.count,
            auto_scale: b.auto_scale,
            min_nodes: b.min_nodes,
            max_nodes: b.max_nodes,
            labels: b.labels,
            taints: b.taints.map(|t| t.map(taints)),
            tags: b.tags,
            max_surge: b.max_surge,
            max_unavailable: b.max_unavailable,
        }
    }
}

/// The pool rules as a client meets them: JSON in, through this shape and the domain's rules.
#[cfg(test)]
mod tests {
    use domain::input::node_pool::PoolSpec;
    use domain::validation::Violations;

    use super::*;

    fn check(json: &str) -> Result<PoolSpec, Violations> {
        let pool: draft::NodePoolRequest = serde_json::from_str::<NodePoolRequest>(json)
            .unwrap_or_else(|e| panic!("{e}"))
            .into();
        let mut v = Violations::new();
        match pool.validate(&mut v, "node_pools[3]") {
            Some(s) if v.is_empty() => Ok(s),
            _ => Err(v),
        }
    }

    fn patch(json: &str) -> draft::NodePoolPatch {
        serde_json::from_str::<NodePoolPatch>(json)
            .unwrap_or_else(|e| panic!("{e}"))
            .into()
    }

    #[test]
    fn pool_name_defaults_to_default() {
        let s = check(r#"{"size":"kube.c5.large","count":1}"#);
        assert_eq!(
            s.map(|s| s.name.as_str().to_owned()),
            Ok("default".to_owned())
        );
    }

    #[test]
    fn pool_count_zero_without_auto_scale_is_refused_with_its_path_and_reason() {
        let e = check(r#"{"size":"s","count":0}"#).err().unwrap_or_default();
        assert_eq!(e.errors()[0].field, "node_pools[3].count");
        assert_eq!(
            e.errors()[0].message,
            "must be at least 1 unless auto_scale is true"
        );
    }

    /// The bound said is the bound that applies: 1 without autoscale, 0 under it.
    #[test]
    fn pool_count_out_of_range_names_the_range_that_applies() {
        let message = |json: &str| {
            check(json).err().unwrap_or_default().errors()[0]
                .message
                .clone()
        };
        assert_eq!(
            message(r#"{"size":"s","count":201}"#),
            "must be between 1 and 200"
        );
        assert_eq!(
            message(r#"{"size":"s","count":201,"auto_scale":true,"max_nodes":200}"#),
            "must be between 0 and 200"
        );
    }

    /// Each body and the field it is refused at (`None`: accepted).
    #[test]
    fn pool_sizing_rules() {
        let cases = [
            (r#"{"name":"Bad_Name","size":"s","count":1}"#, Some("name")),
            (
                r#"{"size":"s","count":0,"auto_scale":true,"min_nodes":0,"max_nodes":3}"#,
                None,
            ),
            (r#"{"size":"s","count":200}"#, None),
            (r#"{"size":"s","count":201}"#, Some("count")),
            (r#"{"size":"s","count":-1}"#, Some("count")),
            (r#"{"size":"s"}"#, Some("count")),
            (
                r#"{"size":"s","auto_scale":true,"count":1}"#,
                Some("max_nodes"),
            ),
            (
                r#"{"size":"s","auto_scale":true,"count":6,"min_nodes":1,"max_nodes":5}"#,
                Some("count"),
            ),
            (
                r#"{"size":"s","auto_scale":true,"count":1,"min_nodes":2,"max_nodes":5}"#,
                Some("count"),
            ),
            (
                r#"{"size":"s","auto_scale":true,"count":5,"min_nodes":2,"max_nodes":5}"#,
                None,
            ),
            (
                r#"{"size":"s","count":3,"min_nodes":4,"max_nodes":3}"#,
                Some("min_nodes"),
            ),
            (
                r#"{"size":"s","count":1,"min_nodes":-1}"#,
                Some("min_nodes"),
            ),
            (r#"{"size":"s","count":1,"max_nodes":200}"#, None),
            (
                r#"{"size":"s","count":1,"max_nodes":201}"#,
                Some("max_nodes"),
            ),
            (
                r#"{"size":"s","count":1,"min_nodes":0,"max_nodes":0}"#,
                Some("max_nodes"),
            ),
            (r#"{"count":1}"#, Some("size")),
            (
                r#"{"size":"s","count":1,"labels":{"example.com/Role_1":"a.b-C"},"tags":{"k":""}}"#,
                None,
            ),
            (
                r#"{"size":"s","count":1,"labels":{"Any Key/!":"v"}}"#,
                Some("labels.Any Key/!"),
            ),
            (
                r#"{"size":"s","count":1,"labels":{"app":"-bad"}}"#,
                Some("labels.app"),
            ),
            (
                r#"{"size":"s","count":1,"taints":[{"key":"nvidia.com/gpu","effect":"NoSchedule"},{"key":"nvidia.com/gpu","value":"a","effect":"NoExecute"}]}"#,
                None,
            ),
            (
                r#"{"size":"s","count":1,"taints":[{"key":"k","effect":"NoSchedule"},{"key":"k","value":"other","effect":"NoSchedule"}]}"#,
                Some("taints[1].key"),
            ),
            (
                r#"{"size":"s","count":1,"taints":[{"key":"k","effect":"NoSchedul"}]}"#,
                Some("taints[0].effect"),
            ),
            (
                r#"{"size":"s","count":1,"taints":[{"key":"k"}]}"#,
                Some("taints[0].effect"),
            ),
            (
                r#"{"size":"s","count":1,"taints":[{"effect":"NoSchedule"}]}"#,
                Some("taints[0].key"),
            ),
            (
                r#"{"size":"s","count":1,"taints":[{"key":"Bad Key","effect":"NoSchedule"}]}"#,
                Some("taints[0].key"),
            ),
            (
                r#"{"size":"s","count":1,"taints":[{"key":"k","value":"a b","effect":"NoSchedule"}]}"#,
                Some("taints[0].value"),
            ),
        ];
        for (json, refused_at) in cases {
            match (check(json), refused_at) {
                (Ok(_), None) => {}
                (Err(v), Some(field)) => {
                    assert!(v.has(&format!("node_pools[3].{field}")), "{json}: {v:?}")
                }
                (got, want) => panic!("{json}: got {got:?}, want refusal at {want:?}"),
            }
        }
    }

    #[test]
    fn pool_auto_scale_without_count_starts_at_min_nodes_and_min_defaults_to_one() {
        let s = check(r#"{"size":"s","auto_scale":true,"min_nodes":2,"max_nodes":5}"#);
        assert_eq!(s.map(|s| s.sizing.count), Ok(2));
        let s = check(r#"{"size":"s","count":1}"#);
        assert_eq!(s.map(|s| s.sizing.min_nodes), Ok(1));
    }

    #[test]
    fn pool_unknown_fields_and_string_numbers_are_refused_by_the_shape() {
        for json in [
            r#"{"size":"s","count":1,"flavor":"x"}"#,
            r#"{"size":"s","count":"1"}"#,
        ] {
            assert!(
                serde_json::from_str::<NodePoolRequest>(json).is_err(),
                "{json}"
            );
        }
    }

    #[test]
    fn pool_patch_empty_and_null_are_refused() {
        assert!(patch("{}").check_shape().is_err());
        assert!(
            patch(r#"{"labels":null}"#)
                .check_shape()
                .is_err_and(|v| v.has("labels"))
        );
        assert!(patch(r#"{"count":3}"#).check_shape().is_ok());
        for json in [r#"{"size":"kube.c5.large"}"#, r#"{"name":"x"}"#] {
            assert!(
                serde_json::from_str::<NodePoolPatch>(json).is_err(),
                "{json}"
            );
        }
    }

    #[test]
    fn pool_taints_are_at_most_fifty() {
        let body = |n: usize| {
            let list: Vec<String> = (0..n)
                .map(|i| format!(r#"{{"key":"k{i}","effect":"NoSchedule"}}"#))
                .collect();
            format!(r#"{{"size":"s","count":1,"taints":[{}]}}"#, list.join(","))
        };
        assert_eq!(check(&body(50)).map(|s| s.taints.len()), Ok(50));
        let refused = check(&body(51)).err().unwrap_or_default();
        assert!(refused.has("node_pools[3].taints"), "{refused:?}");
        assert_eq!(refused.len(), 1, "one problem, not one per taint");
    }

    #[test]
    fn pool_patch_taints_are_checked_and_null_is_refused() {
        assert!(
            patch(r#"{"taints":null}"#)
                .check_shape()
                .is_err_and(|v| v.has("taints"))
        );
        assert!(patch(r#"{"taints":[]}"#).check_shape().is_ok());
        assert!(
            patch(
                r#"{"taints":[{"key":"a","effect":"NoSchedule"},{"key":"/x","effect":"Bogus"}]}"#
            )
            .check_shape()
            .is_err_and(|v| v.has("taints[1].key") && v.has("taints[1].effect"))
        );
        assert!(
            patch(r#"{"labels":{"ok":"v","":"v"}}"#)
                .check_shape()
                .is_err_and(|v| v.has("labels."))
        );
        assert!(
            serde_json::from_str::<NodePoolPatch>(
                r#"{"taints":[{"key":"a","effect":"NoSchedule","operator":"Equal"}]}"#
            )
            .is_err()
        );
    }
}
