//! Node pool drafts (create and change) and the count /
//! auto_scale / min / max rules.

use std::collections::BTreeMap;

use crate::input::upgrade::{check_surge, surge_or};
use crate::model::upgrade::SurgeSettings;
use crate::names::DnsLabel;
use crate::rules::{DEFAULT_MIN_NODES, DEFAULT_POOL_NAME, MAX_NODES_PER_POOL};
use crate::validation::Violations;

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
    pub tags: Option<BTreeMap<String, String>>,
    /// 1-10, default 1: how many nodes above its count the pool may go during an upgrade.
    pub max_surge: Option<i64>,
    /// 0-10, default 0: how many nodes below its count the pool may go during an upgrade.
    pub max_unavailable: Option<i64>,
}

/// Changing a node pool: any of count, auto_scale, min_nodes, max_nodes, labels, tags.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodePoolPatch {
    pub count: Option<Option<i64>>,
    pub auto_scale: Option<Option<bool>>,
    pub min_nodes: Option<Option<i64>>,
    pub max_nodes: Option<Option<i64>>,
    /// Replaces the labels whole; null is refused.
    pub labels: Option<Option<BTreeMap<String, String>>>,
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
    pub tags: BTreeMap<String, String>,
    pub surge: SurgeSettings,
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
        if v.len() > before {
            return None;
        }
        Some(PoolSpec {
            name: name?,
            size: size?,
            sizing: sizing?,
            labels: self.labels.clone().unwrap_or_default(),
            tags: self.tags.clone().unwrap_or_default(),
            surge: surge_or(SurgeSettings::DEFAULT, max_surge, max_unavailable),
        })
    }
}

impl NodePoolPatch {
    pub fn is_empty(&self) -> bool {
        self == &NodePoolPatch::default()
    }

    /// Refuses `null` for every field and a change of nothing.
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
        v.into_result(())
    }
}
