//! Kubernetes versions as numbers, which versions a cluster may move to, and the upgrade in
//! flight. The rules are Kubernetes' own version-skew policy as managed services apply it:
//! never down, at most one minor version at a time (the control plane first, the nodes after,
//! so a node is never newer than its control plane).

use std::cmp::Ordering;
use std::fmt;

use chrono::{DateTime, Utc};

use crate::model::catalog::{KubernetesVersion, ZoneOffer};
use crate::model::cluster::Cluster;

/// `v<major>.<minor>.<patch>`, as the catalog spells version ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KubeVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl KubeVersion {
    /// The version an id names; `None` for anything but `v<digits>.<digits>.<digits>`.
    pub fn parse(id: &str) -> Option<KubeVersion> {
        let mut parts = id.strip_prefix('v')?.split('.');
        let mut number = || -> Option<u32> {
            let p = parts.next()?;
            // Leading zeros or signs would make two spellings of one version.
            if p.is_empty()
                || !p.bytes().all(|b| b.is_ascii_digit())
                || (p.len() > 1 && p.starts_with('0'))
            {
                return None;
            }
            p.parse().ok()
        };
        let v = KubeVersion {
            major: number()?,
            minor: number()?,
            patch: number()?,
        };
        parts.next().is_none().then_some(v)
    }

    /// Whether both are of the same `major.minor`.
    pub fn same_minor(self, other: KubeVersion) -> bool {
        self.major == other.major && self.minor == other.minor
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Why a cluster cannot move to a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpgradeRefusal {
    /// The zone does not offer it.
    NotOffered,
    /// It is the version the cluster runs.
    Current,
    /// It is older than the version the cluster runs.
    Downgrade { current: String },
    /// It is more than one minor version ahead.
    SkipsMinor { current: String, next_minor: String },
}

impl UpgradeRefusal {
    /// The refusal in words, naming what the caller can do instead.
    pub fn text(&self, to: &str) -> String {
        match self {
            UpgradeRefusal::NotOffered => {
                format!("version {to:?} is not offered in this cluster's zone")
            }
            UpgradeRefusal::Current => format!("the cluster already runs {to}"),
            UpgradeRefusal::Downgrade { current } => {
                format!(
                    "the cluster runs {current}: a cluster is never downgraded, so {to} cannot be applied"
                )
            }
            UpgradeRefusal::SkipsMinor {
                current,
                next_minor,
            } => format!(
                "{to} skips a minor version: from {current} upgrade to {next_minor} first (one minor version at a time)"
            ),
        }
    }
}

/// Where `to` stands from `current`: `Ok` when a cluster running `current` may move to it.
/// Versions whose ids do not parse are never a target.
pub fn check_upgrade(
    current: &str,
    to: &str,
    zone: &ZoneOffer,
) -> Result<KubeVersion, UpgradeRefusal> {
    let (Some(from), Some(target)) = (KubeVersion::parse(current), KubeVersion::parse(to)) else {
        return Err(UpgradeRefusal::NotOffered);
    };
    if zone.version(to).is_none() {
        return Err(UpgradeRefusal::NotOffered);
    }
    match target.cmp(&from) {
        Ordering::Equal => return Err(UpgradeRefusal::Current),
        Ordering::Less => {
            return Err(UpgradeRefusal::Downgrade {
                current: current.to_owned(),
            });
        }
        Ordering::Greater => {}
    }
    let one_minor_up = target.major == from.major && target.minor <= from.minor + 1;
    if !one_minor_up {
        let next_minor = newest_of_minor(zone, from.major, from.minor + 1)
            .map(|v| v.id.clone())
            .unwrap_or_else(|| format!("v{}.{}", from.major, from.minor + 1));
        return Err(UpgradeRefusal::SkipsMinor {
            current: current.to_owned(),
            next_minor,
        });
    }
    Ok(target)
}

/// The versions a cluster running `current` may move to, oldest first.
pub fn upgrade_targets<'z>(current: &str, zone: &'z ZoneOffer) -> Vec<&'z KubernetesVersion> {
    let mut targets: Vec<(KubeVersion, &KubernetesVersion)> = zone
        .kubernetes_versions
        .iter()
        .filter_map(|v| Some((check_upgrade(current, &v.id, zone).ok()?, v)))
        .collect();
    targets.sort_by_key(|(k, _)| *k);
    targets.into_iter().map(|(_, v)| v).collect()
}

/// The newest offered patch of `current`'s minor version newer than `current`: what an
/// automatic upgrade applies. `None` when the cluster runs the newest.
pub fn newest_patch<'z>(current: &str, zone: &'z ZoneOffer) -> Option<&'z KubernetesVersion> {
    let from = KubeVersion::parse(current)?;
    newest_of_minor(zone, from.major, from.minor)
        .filter(|v| KubeVersion::parse(&v.id).is_some_and(|k| k > from))
}

fn newest_of_minor(zone: &ZoneOffer, major: u32, minor: u32) -> Option<&KubernetesVersion> {
    zone.kubernetes_versions
        .iter()
        .filter_map(|v| Some((KubeVersion::parse(&v.id)?, v)))
        .filter(|(k, _)| k.major == major && k.minor == minor)
        .max_by_key(|(k, _)| *k)
        .map(|(_, v)| v)
}

/// What an automatic upgrade of `c` at `now` would apply, and the start of the window it
/// starts in: only for an owner who asked for it, inside an open maintenance window in which
/// none started before, when the cluster could take an upgrade and a newer patch of its
/// minor version is offered.
pub fn auto_upgrade_due(
    c: &Cluster,
    zone: &ZoneOffer,
    now: DateTime<Utc>,
) -> Option<(String, DateTime<Utc>)> {
    if !c.auto_upgrade || c.upgrade_blocker().is_some() {
        return None;
    }
    let window = c.maintenance_window.open_at(now)?;
    if c.last_auto_upgrade_window
        .is_some_and(|last| last >= window)
    {
        return None;
    }
    let to = newest_patch(&c.version, zone)?;
    Some((to.id.clone(), window))
}

/// An upgrade in flight: the control plane moves to `to` first (the cluster's `version` shows
/// the control plane's), then each pool in turn, node by node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeInFlight {
    /// The version the cluster ran when the upgrade started.
    pub from: String,
    pub to: String,
    /// Whether the cluster's maintenance policy started it, rather than a person.
    pub automatic: bool,
}

/// How a pool replaces its nodes during an upgrade: at most `max_surge` nodes above its count
/// and at most `max_unavailable` below it at any time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SurgeSettings {
    pub max_surge: u32,
    pub max_unavailable: u32,
}

impl SurgeSettings {
    pub const DEFAULT: SurgeSettings = SurgeSettings {
        max_surge: 1,
        max_unavailable: 0,
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::catalog::Catalog;

    fn zone_with(ids: &[&str]) -> ZoneOffer {
        let mut z = Catalog::builtin().default_zone().clone();
        z.kubernetes_versions = ids
            .iter()
            .enumerate()
            .map(|(i, id)| KubernetesVersion {
                id: (*id).into(),
                label: id.trim_start_matches('v').into(),
                recommended: i == 0,
                channel: "stable".into(),
                end_of_support: None,
            })
            .collect();
        z
    }

    #[test]
    fn version_ids_parse_only_in_their_one_spelling() {
        assert_eq!(
            KubeVersion::parse("v1.32.4"),
            Some(KubeVersion {
                major: 1,
                minor: 32,
                patch: 4
            })
        );
        for bad in [
            "1.32.4",
            "v1.32",
            "v1.32.4.1",
            "v1.032.4",
            "v1.-3.4",
            "v1.32.x",
            "v",
            "",
        ] {
            assert_eq!(KubeVersion::parse(bad), None, "{bad}");
        }
        assert!(KubeVersion::parse("v1.33.0") > KubeVersion::parse("v1.32.10"));
    }

    #[test]
    fn targets_are_newer_and_at_most_one_minor_ahead() {
        let z = zone_with(&[
            "v1.32.4", "v1.31.9", "v1.32.6", "v1.33.2", "v1.33.1", "v1.34.0",
        ]);
        let ids = |current| -> Vec<String> {
            upgrade_targets(current, &z)
                .iter()
                .map(|v| v.id.clone())
                .collect()
        };
        assert_eq!(ids("v1.32.4"), ["v1.32.6", "v1.33.1", "v1.33.2"]);
        assert_eq!(ids("v1.31.9"), ["v1.32.4", "v1.32.6"]);
        assert_eq!(ids("v1.34.0"), Vec::<String>::new());
    }

    #[test]
    fn refusals_say_why_and_what_to_do() {
        let z = zone_with(&["v1.32.4", "v1.31.9", "v1.33.1", "v1.34.0"]);
        let table = [
            ("v1.32.4", "v1.30.0", UpgradeRefusal::NotOffered),
            ("v1.32.4", "v1.32.4", UpgradeRefusal::Current),
            (
                "v1.32.4",
                "v1.31.9",
                UpgradeRefusal::Downgrade {
                    current: "v1.32.4".into(),
                },
            ),
            (
                "v1.31.9",
                "v1.33.1",
                UpgradeRefusal::SkipsMinor {
                    current: "v1.31.9".into(),
                    next_minor: "v1.32.4".into(),
                },
            ),
        ];
        for (current, to, refusal) in table {
            assert_eq!(
                check_upgrade(current, to, &z),
                Err(refusal),
                "{current} → {to}"
            );
        }
        let text = UpgradeRefusal::SkipsMinor {
            current: "v1.31.9".into(),
            next_minor: "v1.32.4".into(),
        }
        .text("v1.33.1");
        assert!(text.contains("upgrade to v1.32.4 first"), "{text}");
    }

    #[test]
    fn the_newest_patch_is_within_the_minor() {
        let z = zone_with(&["v1.32.4", "v1.32.6", "v1.32.5", "v1.33.1"]);
        let newest = |current| newest_patch(current, &z).map(|v| v.id.as_str());
        assert_eq!(newest("v1.32.4"), Some("v1.32.6"));
        assert_eq!(newest("v1.32.6"), None);
        assert_eq!(newest("v1.33.1"), None);
    }
}
