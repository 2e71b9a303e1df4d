//! Cluster bodies: create, PATCH (description and tags only), exposure PATCH.

use std::collections::HashSet;

use serde::Deserialize;

use crate::input::node_pool::{NodePoolRequest, PoolSpec};
use crate::input::{check_len, nullable};
use crate::model::cluster::{Exposure, NetworkMode};
use crate::names::{DnsLabel, OrgRef, is_dns_label};
use crate::rules::{MAX_CLUSTER_DESCRIPTION, MAX_CLUSTER_TAGS, MAX_POOLS, MIN_POOLS};
use crate::validation::Violations;

/// `POST /v1/public/clusters`. A control-plane pick is an unknown field (422).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateClusterRequest {
    /// Required: the organization's slug (DNS label) or id (UUID). Header and query are not read.
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_length = 1, max_length = 63)
    )]
    pub organization: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(
            required = true,
            nullable = false,
            pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
            min_length = 1,
            max_length = 63
        )
    )]
    pub name: Option<String>,
    /// Zone id; the default zone when omitted.
    pub zone: Option<String>,
    /// Kubernetes version id; the zone's recommended version when omitted.
    pub version: Option<String>,
    #[cfg_attr(feature = "openapi", schema(max_length = 16384))]
    pub description: Option<String>,
    /// DNS labels, at most 64.
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<Vec<crate::input::schema::DnsLabelText>>, max_items = 64)
    )]
    pub tags: Option<Vec<String>>,
    /// Default from the catalog (`public`).
    pub exposure: Option<Exposure>,
    /// Default `intranet`; immutable.
    pub network_mode: Option<NetworkMode>,
    #[cfg_attr(
        feature = "openapi",
        schema(required = true, nullable = false, min_items = 1, max_items = 20)
    )]
    pub node_pools: Option<Vec<NodePoolRequest>>,
}

/// A create body that passed every body rule; zone, version and tiers are checked against the
/// catalog by the use case (400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterSpec {
    pub organization: OrgRef,
    pub name: DnsLabel,
    pub zone: Option<String>,
    pub version: Option<String>,
    pub description: Option<String>,
    pub tags: Vec<DnsLabel>,
    pub exposure: Option<Exposure>,
    pub network_mode: Option<NetworkMode>,
    pub node_pools: Vec<PoolSpec>,
}

/// Tags: DNS labels, at most 64.
pub fn check_tags(v: &mut Violations, field: &str, tags: &[String]) -> Vec<DnsLabel> {
    if tags.len() > MAX_CLUSTER_TAGS {
        v.push(
            field,
            format!(
                "at most {MAX_CLUSTER_TAGS} tags are allowed (got {})",
                tags.len()
            ),
        );
    }
    tags.iter()
        .enumerate()
        .filter_map(|(i, t)| v.check(&format!("{field}[{i}]"), DnsLabel::parse(t)))
        .collect()
}

impl CreateClusterRequest {
    /// Every body rule (422), each problem with its path.
    pub fn validate(&self) -> Result<ClusterSpec, Violations> {
        let mut v = Violations::new();
        let organization = match self.organization.as_deref() {
            None | Some("") => {
                v.push("organization", "is required");
                None
            }
            Some(o) => {
                let r = OrgRef::classify(o);
                let ok = match &r {
                    OrgRef::Id(s) => uuid::Uuid::parse_str(s).is_ok(),
                    OrgRef::Slug(s) => is_dns_label(s),
                };
                if !ok {
                    v.push(
                        "organization",
                        "must be an organization slug (DNS label) or id (UUID)",
                    );
                }
                ok.then_some(r)
            }
        };
        let name = match &self.name {
            None => {
                v.push("name", "is required");
                None
            }
            Some(n) => v.check("name", DnsLabel::parse(n)),
        };
        if let Some(d) = &self.description {
            check_len(&mut v, "description", d, MAX_CLUSTER_DESCRIPTION);
        }
        let tags = check_tags(&mut v, "tags", self.tags.as_deref().unwrap_or_default());
        let mut pools = Vec::new();
        match &self.node_pools {
            None => v.push(
                "node_pools",
                format!("is required: {MIN_POOLS}-{MAX_POOLS} node pools"),
            ),
            Some(list) if list.len() < MIN_POOLS || list.len() > MAX_POOLS => v.push(
                "node_pools",
                format!(
                    "must hold {MIN_POOLS}-{MAX_POOLS} node pools (got {})",
                    list.len()
                ),
            ),
            Some(list) => {
                let mut seen = HashSet::new();
                for (i, p) in list.iter().enumerate() {
                    let path = format!("node_pools[{i}]");
                    if let Some(spec) = p.validate(&mut v, &path) {
                        if !seen.insert(spec.name.clone()) {
                            v.push(
                                format!("{path}.name"),
                                format!(
                                    "duplicate pool name {:?} in this request",
                                    spec.name.as_str()
                                ),
                            );
                        }
                        pools.push(spec);
                    }
                }
            }
        }
        if !v.is_empty() {
            return Err(v);
        }
        match (organization, name) {
            (Some(organization), Some(name)) => Ok(ClusterSpec {
                organization,
                name,
                zone: self.zone.clone(),
                version: self.version.clone(),
                description: self.description.clone(),
                tags,
                exposure: self.exposure,
                network_mode: self.network_mode,
                node_pools: pools,
            }),
            _ => Err(v),
        }
    }
}

/// `PATCH /v1/public/clusters/{id}`: `description` and `tags` only.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterPatch {
    /// A new description; null clears it.
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>, max_length = 16384))]
    pub description: Option<Option<String>>,
    /// Replaces the tags whole; null is refused (send `[]` to clear).
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Vec<crate::input::schema::DnsLabelText>, required = false, max_items = 64)
    )]
    pub tags: Option<Option<Vec<String>>>,
}

/// A validated cluster PATCH.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterChanges {
    pub description: Option<Option<String>>,
    pub tags: Option<Vec<DnsLabel>>,
}

impl ClusterPatch {
    pub fn validate(&self) -> Result<ClusterChanges, Violations> {
        let mut v = Violations::new();
        if self.description.is_none() && self.tags.is_none() {
            v.push(
                "",
                "the body must change at least one field: description or tags",
            );
        }
        if let Some(Some(d)) = &self.description {
            check_len(&mut v, "description", d, MAX_CLUSTER_DESCRIPTION);
        }
        let tags = match &self.tags {
            None => None,
            Some(None) => {
                v.push("tags", "must not be null (send [] to clear)");
                None
            }
            Some(Some(list)) => Some(check_tags(&mut v, "tags", list)),
        };
        v.into_result(ClusterChanges {
            description: self.description.clone(),
            tags,
        })
    }
}

/// `PATCH /v1/public/clusters/{id}/exposure`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExposurePatch {
    pub exposure: Exposure,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(json: &str) -> Result<ClusterSpec, Violations> {
        let req: CreateClusterRequest =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"));
        req.validate()
    }

    const POOL: &str = r#"{"size":"kube.c5.large","count":1}"#;

    fn body(extra: &str) -> String {
        format!(r#"{{"organization":"acme","name":"prod-1","node_pools":[{POOL}]{extra}}}"#)
    }

    #[test]
    fn create_minimal_body_is_valid() {
        let s = create(&body(""));
        assert!(s.is_ok(), "{s:?}");
    }

    #[test]
    fn create_missing_organization_is_422() {
        let e = create(&format!(r#"{{"name":"prod-1","node_pools":[{POOL}]}}"#));
        assert!(e.is_err_and(|v| v.has("organization")));
    }

    #[test]
    fn create_organization_must_be_slug_or_uuid() {
        assert!(
            create(&body("").replace("\"acme\"", "\"Acme Corp\""))
                .is_err_and(|v| v.has("organization"))
        );
        let with_id = body("").replace("\"acme\"", "\"0b6f9c3e-8d1f-4e57-a3c2-5f1d2e3a4b5c\"");
        assert!(create(&with_id).is_ok());
    }

    #[test]
    fn create_name_is_a_dns_label_of_at_most_63() {
        let ok = body("").replace("prod-1", &"a".repeat(63));
        assert!(create(&ok).is_ok());
        let long = body("").replace("prod-1", &"a".repeat(64));
        assert!(create(&long).is_err_and(|v| v.has("name")));
        assert!(create(&body("").replace("prod-1", "Prod_1")).is_err_and(|v| v.has("name")));
    }

    #[test]
    fn create_needs_one_to_twenty_pools() {
        let none = r#"{"organization":"acme","name":"a","node_pools":[]}"#;
        assert!(create(none).is_err_and(|v| v.has("node_pools")));
        let pools = |n: usize| {
            let list: Vec<String> = (0..n)
                .map(|i| format!(r#"{{"name":"p{i}","size":"kube.c5.large","count":1}}"#))
                .collect();
            format!(
                r#"{{"organization":"acme","name":"a","node_pools":[{}]}}"#,
                list.join(",")
            )
        };
        assert!(create(&pools(20)).is_ok());
        assert!(create(&pools(21)).is_err_and(|v| v.has("node_pools")));
    }

    #[test]
    fn create_pool_names_unique_within_the_request() {
        let two_defaults =
            format!(r#"{{"organization":"acme","name":"a","node_pools":[{POOL},{POOL}]}}"#);
        assert!(create(&two_defaults).is_err_and(|v| v.has("node_pools[1].name")));
    }

    #[test]
    fn create_errors_name_the_pool_by_index() {
        let list: Vec<String> = (0..4)
            .map(|i| {
                if i == 3 {
                    r#"{"name":"p3","size":"s","count":0}"#.to_owned()
                } else {
                    format!(r#"{{"name":"p{i}","size":"s","count":1}}"#)
                }
            })
            .collect();
        let json = format!(
            r#"{{"organization":"acme","name":"a","node_pools":[{}]}}"#,
            list.join(",")
        );
        assert!(create(&json).is_err_and(|v| v.has("node_pools[3].count")));
    }

    #[test]
    fn create_tags_are_dns_labels_at_most_64() {
        let tags = |n: usize| {
            let list: Vec<String> = (0..n).map(|i| format!("\"t{i}\"")).collect();
            body(&format!(r#","tags":[{}]"#, list.join(",")))
        };
        assert!(create(&tags(64)).is_ok());
        assert!(create(&tags(65)).is_err_and(|v| v.has("tags")));
        assert!(create(&body(r#","tags":["env=prod"]"#)).is_err_and(|v| v.has("tags[0]")));
        assert!(
            create(&body(&format!(r#","tags":["{}"]"#, "t".repeat(64))))
                .is_err_and(|v| v.has("tags[0]"))
        );
    }

    #[test]
    fn create_description_at_most_16384() {
        assert!(create(&body(&format!(r#","description":"{}""#, "d".repeat(16384)))).is_ok());
        assert!(
            create(&body(&format!(r#","description":"{}""#, "d".repeat(16385))))
                .is_err_and(|v| v.has("description"))
        );
    }

    #[test]
    fn create_control_plane_pick_is_an_unknown_field() {
        let json = body(r#","control_plane_option_id":"cp-ha""#);
        assert!(serde_json::from_str::<CreateClusterRequest>(&json).is_err());
    }

    #[test]
    fn create_exposure_and_network_mode_are_enums() {
        assert!(
            serde_json::from_str::<CreateClusterRequest>(&body(r#","exposure":"internal""#))
                .is_err()
        );
        assert!(
            serde_json::from_str::<CreateClusterRequest>(&body(r#","network_mode":"internet""#))
                .is_ok()
        );
    }

    #[test]
    fn patch_accepts_description_and_tags_only() {
        for bad in [
            r#"{"name":"x"}"#,
            r#"{"network_mode":"internet"}"#,
            r#"{"zone":"zone-1"}"#,
            r#"{"version":"v1.32.4"}"#,
        ] {
            assert!(serde_json::from_str::<ClusterPatch>(bad).is_err(), "{bad}");
        }
        let p: ClusterPatch =
            serde_json::from_str(r#"{"description":"x","tags":["a"]}"#).unwrap_or_default();
        assert!(p.validate().is_ok());
    }

    #[test]
    fn patch_empty_body_is_422() {
        let p: ClusterPatch = serde_json::from_str("{}").unwrap_or_default();
        assert!(p.validate().is_err());
    }

    #[test]
    fn patch_null_tags_refused_null_description_clears() {
        let p: ClusterPatch = serde_json::from_str(r#"{"tags":null}"#).unwrap_or_default();
        assert!(p.validate().is_err_and(|v| v.has("tags")));
        let p: ClusterPatch = serde_json::from_str(r#"{"description":null}"#).unwrap_or_default();
        assert_eq!(p.validate().map(|c| c.description), Ok(Some(None)));
    }
}
