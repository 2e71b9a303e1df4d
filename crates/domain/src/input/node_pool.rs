//! Node pool drafts (create and change) and the count /
//! auto_scale / min / max rules.

use std::collections::{BTreeMap, HashSet};

use crate::input::upgrade::{check_surge, surge_or};
use crate::model::node_pool::{Taint, TaintEffect};
use crate::model::upgrade::SurgeSettings;
use crate::names::{
    DNS_SUBDOMAIN_MAX, DnsLabel, KUBERNETES_NAME_MAX, label_value_problem, qualified_name_problem,
};
use crate::rules::{DEFAULT_MIN_NODES, DEFAULT_POOL_NAME, MAX_NODES_PER_POOL, MAX_TAINTS_PER_POOL};
use crate::validation::Violations;

/// A taint as a client wrote it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaintRequest {
    /// Required: a Kubernetes qualified name.
    pub key: Option<String>,
    /// A label value; empty when omitted.
    pub value: Option<String>,
    /// Required: `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: Option<String>,
}

impl TaintRequest {
    /// A taint written as `kubectl taint` writes one, `KEY=VALUE:EFFECT` or `KEY:EFFECT`, for
    /// the faces that take text (the CLI's `--taint`, the console's forms). It is only split
    /// here; the rules are [`check_taints`]'s, so a missing effect is refused as any other.
    pub fn from_text(text: &str) -> TaintRequest {
        let text = text.trim();
        let (rest, effect) = match text.rsplit_once(':') {
            Some((rest, effect)) => (rest, Some(effect.to_owned())),
            None => (text, None),
        };
        let (key, value) = match rest.split_once('=') {
            Some((key, value)) => (key, Some(value.to_owned())),
            None => (rest, None),
        };
        TaintRequest {
            key: Some(key.to_owned()),
            value,
            effect,
        }
    }
}

/// A pool of a cluster being created, or a pool added to a cluster.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePoolRequest {
    /// DNS label; `default` when omitted.
    pub name: Option<String>,
    /// A machine tier id from the catalog, e.g. `kube.c5.xlarge`.
    pub size: Option<String>,
    /// 0-200; 0 only with auto_scale; required unless auto_scale (then it starts at min_nodes).
    pub count: Option<i64>,
    pub auto_scale: Option<bool>,
    /// >= 0, default 1, <= max_nodes.
    pub min_nodes: Option<i64>,
    /// 1-200; required with auto_scale.
    pub max_nodes: Option<i64>,
    pub labels: Option<BTreeMap<String, String>>,
    /// At most 50; one per key and effect.
    pub taints: Option<Vec<TaintRequest>>,
    pub tags: Option<BTreeMap<String, String>>,
    /// 1-10, default 1: how many nodes above its count the pool may go during an upgrade.
    pub max_surge: Option<i64>,
    /// 0-10, default 0: how many nodes below its count the pool may go during an upgrade.
    pub max_unavailable: Option<i64>,
}

/// Changing a node pool: any of count, auto_scale, min_nodes, max_nodes, labels, taints, tags.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePoolPatch {
    pub count: Option<Option<i64>>,
    pub auto_scale: Option<Option<bool>>,
    pub min_nodes: Option<Option<i64>>,
    pub max_nodes: Option<Option<i64>>,
    /// Replaces the labels whole; null is refused.
    pub labels: Option<Option<BTreeMap<String, String>>>,
    /// Replaces the taints whole (`[]` removes them); null is refused.
    pub taints: Option<Option<Vec<TaintRequest>>>,
    /// Replaces the tags whole; null is refused.
    pub tags: Option<Option<BTreeMap<String, String>>>,
    pub max_surge: Option<Option<i64>>,
    pub max_unavailable: Option<Option<i64>>,
}

/// The sizing of a pool once every rule holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizing {
    pub count: u32,
    pub auto_scale: bool,
    pub min_nodes: u32,
    pub max_nodes: Option<u32>,
}

/// A validated pool request; `size` is checked against the catalog by the use case
/// (`DomainError::UnknownMachineTier`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub name: DnsLabel,
    pub size: String,
    pub sizing: Sizing,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub tags: BTreeMap<String, String>,
    pub surge: SurgeSettings,
}

/// A pool's Kubernetes labels: each key a qualified name, each value a label value (they are
/// put on the pool's nodes, where Kubernetes holds them to these rules). `field` is the
/// path of the map, e.g. `node_pools[0].labels`; a problem names the key it is about.
pub fn check_labels(v: &mut Violations, field: &str, labels: &BTreeMap<String, String>) {
    for (key, value) in labels {
        // The path names the key when it can be shown as it is; a long or unprintable key
        // (hostile, or pasted by mistake) is not repeated back.
        let shown = key.len() <= 1 + DNS_SUBDOMAIN_MAX + KUBERNETES_NAME_MAX
            && key.chars().all(|c| c.is_ascii_graphic() || c == ' ');
        let path = if shown {
            format!("{field}.{key}")
        } else {
            field.to_owned()
        };
        if let Some(problem) = qualified_name_problem(key) {
            v.push(path.clone(), format!("the key {problem}"));
        }
        if let Some(problem) = label_value_problem(value) {
            v.push(path, format!("the value {problem}"));
        }
    }
}

/// A pool's taints: at most [`MAX_TAINTS_PER_POOL`], each key a qualified name, each value a
/// label value, each effect one of [`TaintEffect`], and no two with the same key and effect
/// (Kubernetes keeps one such taint on a node). Returns the valid ones, in the order given.
pub fn check_taints(v: &mut Violations, field: &str, taints: &[TaintRequest]) -> Vec<Taint> {
    if taints.len() > MAX_TAINTS_PER_POOL {
        v.push(
            field,
            format!(
                "at most {MAX_TAINTS_PER_POOL} taints are allowed (got {})",
                taints.len()
            ),
        );
        return Vec::new();
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(taints.len());
    for (i, t) in taints.iter().enumerate() {
        let at = |name: &str| format!("{field}[{i}].{name}");
        let key = match t.key.as_deref() {
            None => {
                v.push(at("key"), "is required");
                None
            }
            Some(k) => match qualified_name_problem(k) {
                Some(problem) => {
                    v.push(at("key"), problem);
                    None
                }
                None => Some(k.to_owned()),
            },
        };
        let value = t.value.clone().unwrap_or_default();
        let value = match label_value_problem(&value) {
            Some(problem) => {
                v.push(at("value"), problem);
                None
            }
            None => Some(value),
        };
        let effect = match t.effect.as_deref() {
            None => {
                v.push(
                    at("effect"),
                    "is required: NoSchedule, PreferNoSchedule or NoExecute",
                );
                None
            }
            Some(e) => {
                let parsed = TaintEffect::parse(e);
                if parsed.is_none() {
                    v.push(
                        at("effect"),
                        "must be NoSchedule, PreferNoSchedule or NoExecute",
                    );
                }
                parsed
            }
        };
        if let (Some(key), Some(value), Some(effect)) = (key, value, effect) {
            if !seen.insert((key.clone(), effect)) {
                v.push(
                    at("key"),
                    format!(
                        "another taint of this pool has the same key and effect {}",
                        effect.as_str()
                    ),
                );
            }
            out.push(Taint { key, value, effect });
        }
    }
    out
}

fn in_range(v: &mut Violations, field: &str, value: i64, min: i64, max: i64) -> Option<u32> {
    if value < min || value > max {
        v.push(field, format!("must be between {min} and {max}"));
        None
    } else {
        u32::try_from(value).ok()
    }
}

/// The sizing rules (count, auto_scale, min_nodes, max_nodes and their bounds), on raw values (`prefix` is the pool's
/// path, e.g. `node_pools[3]`).
pub fn check_sizing(
    v: &mut Violations,
    prefix: &str,
    count: Option<i64>,
    auto_scale: bool,
    min_nodes: Option<i64>,
    max_nodes: Option<i64>,
) -> Option<Sizing> {
    let f = |name: &str| {
        if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}.{name}")
        }
    };
    let before = v.len();
    let max_total = i64::from(MAX_NODES_PER_POOL);
    let min = match min_nodes {
        None => Some(DEFAULT_MIN_NODES),
        Some(m) => in_range(v, &f("min_nodes"), m, 0, max_total),
    };
    let max = match max_nodes {
        None => None,
        Some(m) => in_range(v, &f("max_nodes"), m, 1, max_total)
            .map(Some)
            .unwrap_or(None),
    };
    if auto_scale && max_nodes.is_none() {
        v.push(f("max_nodes"), "is required when auto_scale is true");
    }
    if let (Some(lo), Some(hi)) = (min, max)
        && lo > hi
    {
        v.push(f("min_nodes"), format!("must not exceed max_nodes ({hi})"));
    }
    let count = match count {
        // Zero nodes is a pool's resting size only under autoscale; the range said is the one
        // that applies, so a person is never told a bound that is then refused.
        Some(c) if !auto_scale && c == 0 => {
            v.push(f("count"), "must be at least 1 unless auto_scale is true");
            None
        }
        Some(c) if !auto_scale => in_range(v, &f("count"), c, 1, max_total),
        Some(c) => in_range(v, &f("count"), c, 0, max_total),
        None if auto_scale => min,
        None => {
            v.push(f("count"), "is required unless auto_scale is true");
            None
        }
    };
    if auto_scale
        && let (Some(c), Some(lo), Some(hi)) = (count, min, max)
        && lo <= hi
        && (c < lo || c > hi)
    {
        v.push(
            f("count"),
            format!("must lie within min_nodes..max_nodes ({lo}..{hi}) when auto_scale is true"),
        );
    }
    if v.len() > before {
        return None;
    }
    Some(Sizing {
        count: count?,
        auto_scale,
        min_nodes: min?,
        max_nodes: max,
    })
}

impl NodePoolRequest {
    /// Validates one pool; problems go to `v` under `prefix`.
    pub fn validate(&self, v: &mut Violations, prefix: &str) -> Option<PoolSpec> {
        let f = |name: &str| {
            if prefix.is_empty() {
                name.to_owned()
            } else {
                format!("{prefix}.{name}")
            }
        };
        let before = v.len();
        let name = match &self.name {
            None => Some(DnsLabel::from_trusted(DEFAULT_POOL_NAME.to_owned())),
            Some(n) => v.check(&f("name"), DnsLabel::parse(n)),
        };
        let size = match &self.size {
            Some(s) if !s.is_empty() => Some(s.clone()),
            Some(_) => {
                v.push(f("size"), "must not be empty");
                None
            }
            None => {
                v.push(f("size"), "is required");
                None
            }
        };
        let sizing = check_sizing(
            v,
            prefix,
            self.count,
            self.auto_scale.unwrap_or(false),
            self.min_nodes,
            self.max_nodes,
        );
        let (max_surge, max_unavailable) =
            check_surge(v, prefix, self.max_surge, self.max_unavailable);
        let labels = self.labels.clone().unwrap_or_default();
        check_labels(v, &f("labels"), &labels);
        let taints = check_taints(v, &f("taints"), self.taints.as_deref().unwrap_or_default());
        if v.len() > before {
            return None;
        }
        Some(PoolSpec {
            name: name?,
            size: size?,
            sizing: sizing?,
            labels,
            taints,
            tags: self.tags.clone().unwrap_or_default(),
            surge: surge_or(SurgeSettings::DEFAULT, max_surge, max_unavailable),
        })
    }
}

impl NodePoolPatch {
    pub fn is_empty(&self) -> bool {
        self == &NodePoolPatch::default()
    }

    /// Refuses `null` for every field and a change of nothing, and checks the labels and
    /// taints by the create rules.
    pub fn check_shape(&self) -> Result<(), Violations> {
        let mut v = Violations::new();
        if self.is_empty() {
            v.push("", "the body must change at least one field");
        }
        let nulls = [
            ("count", matches!(self.count, Some(None))),
            ("auto_scale", matches!(self.auto_scale, Some(None))),
            ("min_nodes", matches!(self.min_nodes, Some(None))),
            ("max_nodes", matches!(self.max_nodes, Some(None))),
            ("labels", matches!(self.labels, Some(None))),
            ("taints", matches!(self.taints, Some(None))),
            ("tags", matches!(self.tags, Some(None))),
            ("max_surge", matches!(self.max_surge, Some(None))),
            (
                "max_unavailable",
                matches!(self.max_unavailable, Some(None)),
            ),
        ];
        for (field, is_null) in nulls {
            if is_null {
                v.push(field, "must not be null");
            }
        }
        if let Some(Some(labels)) = &self.labels {
            check_labels(&mut v, "labels", labels);
        }
        if let Some(Some(taints)) = &self.taints {
            check_taints(&mut v, "taints", taints);
        }
        v.into_result(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taint_is_written_key_value_effect_as_kubectl_writes_it() {
        let t = |key: &str, value: Option<&str>, effect: Option<&str>| TaintRequest {
            key: Some(key.into()),
            value: value.map(Into::into),
            effect: effect.map(Into::into),
        };
        for (text, want) in [
            (
                "dedicated=ml:NoSchedule",
                t("dedicated", Some("ml"), Some("NoSchedule")),
            ),
            (
                "nvidia.com/gpu:NoExecute",
                t("nvidia.com/gpu", None, Some("NoExecute")),
            ),
            (
                "a=:PreferNoSchedule",
                t("a", Some(""), Some("PreferNoSchedule")),
            ),
            (" a=b ", t("a", Some("b"), None)),
        ] {
            assert_eq!(TaintRequest::from_text(text), want, "{text}");
        }
        let mut v = Violations::new();
        check_taints(&mut v, "taints", &[TaintRequest::from_text("a=b")]);
        assert!(v.has("taints[0].effect"), "{v:?}");
    }
}
