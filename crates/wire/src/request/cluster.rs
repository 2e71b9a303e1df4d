//! Cluster bodies: create, PATCH (description and tags only), exposure PATCH.

use domain::input::cluster as draft;
use domain::model::cluster::{Exposure, NetworkMode};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::enums;
use crate::request::node_pool::NodePoolRequest;
use crate::request::upgrade::MaintenanceWindowRequest;
use crate::request::{nullable, schema::DnsLabelText};

/// `POST /v1/public/clusters`. A control-plane pick is an unknown field (422).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateClusterRequest {
    /// Required: the organization's slug (DNS label) or id (UUID). Header and query are not read.
    #[schema(required = true, nullable = false, min_length = 1, max_length = 63)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    #[schema(
        required = true,
        nullable = false,
        pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        min_length = 1,
        max_length = 63
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Zone id; the default zone when omitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Kubernetes version id; the zone's recommended version when omitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[schema(max_length = 16384)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// DNS labels, at most 64.
    #[schema(value_type = Option<Vec<DnsLabelText>>, max_items = 64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Default from the catalog (`public`).
    #[schema(value_type = Option<enums::Exposure>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exposure: Option<Exposure>,
    /// Default `intranet`; immutable.
    #[schema(value_type = Option<enums::NetworkMode>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_mode: Option<NetworkMode>,
    #[schema(required = true, nullable = false, min_items = 1, max_items = 20)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_pools: Option<Vec<NodePoolRequest>>,
    /// When the service may upgrade the cluster by itself; any day at 00:00 UTC when omitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maintenance_window: Option<MaintenanceWindowRequest>,
    /// Apply the newest patch of the cluster's minor version inside the maintenance window;
    /// default false.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_upgrade: Option<bool>,
}

impl From<CreateClusterRequest> for draft::CreateClusterRequest {
    fn from(b: CreateClusterRequest) -> Self {
        draft::CreateClusterRequest {
            organization: b.organization,
            name: b.name,
            zone: b.zone,
            version: b.version,
            description: b.description,
            tags: b.tags,
            exposure: b.exposure,
            network_mode: b.network_mode,
            node_pools: b
                .node_pools
                .map(|pools| pools.into_iter().map(Into::into).collect()),
            maintenance_window: b.maintenance_window.map(Into::into),
            auto_upgrade: b.auto_upgrade,
        }
    }
}

/// `PATCH /v1/public/clusters/{id}`: `description`, `tags` and the maintenance policy. Name,
/// zone, version (see `POST …/upgrade`) and network mode are not changed here.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterPatch {
    /// A new description; null clears it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, max_length = 16384)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<Option<String>>,
    /// Replaces the tags whole; null is refused (send `[]` to clear).
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Vec<DnsLabelText>, required = false, max_items = 64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Option<Vec<String>>>,
    /// Changes the window; a part left out stays; null is refused.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = MaintenanceWindowRequest, required = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maintenance_window: Option<Option<MaintenanceWindowRequest>>,
    /// Null is refused.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = bool, required = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_upgrade: Option<Option<bool>>,
}

impl From<ClusterPatch> for draft::ClusterPatch {
    fn from(b: ClusterPatch) -> Self {
        draft::ClusterPatch {
            description: b.description,
            tags: b.tags,
            maintenance_window: b.maintenance_window.map(|w| w.map(Into::into)),
            auto_upgrade: b.auto_upgrade,
        }
    }
}

/// `PATCH /v1/public/clusters/{id}/exposure`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExposurePatch {
    #[schema(value_type = enums::Exposure)]
    pub exposure: Exposure,
}

impl From<ExposurePatch> for draft::ExposurePatch {
    fn from(b: ExposurePatch) -> Self {
        draft::ExposurePatch {
            exposure: b.exposure,
        }
    }
}

/// The body rules as a client meets them: JSON in, through this shape and the domain's rules.
#[cfg(test)]
mod tests {
    use domain::input::cluster::ClusterSpec;
    use domain::validation::Violations;

    use super::*;

    fn create(json: &str) -> Result<ClusterSpec, Violations> {
        let req: CreateClusterRequest =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"));
        draft::CreateClusterRequest::from(req).validate()
    }

    fn patch(json: &str) -> draft::ClusterPatch {
        serde_json::from_str::<ClusterPatch>(json)
            .unwrap_or_else(|e| panic!("{e}"))
            .into()
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
                let count = if i == 3 { 0 } else { 1 };
                format!(r#"{{"name":"p{i}","size":"s","count":{count}}}"#)
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
        let read = |extra: &str| serde_json::from_str::<CreateClusterRequest>(&body(extra));
        assert!(read(r#","exposure":"internal""#).is_err());
        assert!(read(r#","network_mode":"internet""#).is_ok());
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
        assert!(
            patch(r#"{"description":"x","tags":["a"]}"#)
                .validate()
                .is_ok()
        );
    }

    #[test]
    fn patch_empty_body_is_422() {
        assert!(patch("{}").validate().is_err());
    }

    #[test]
    fn patch_null_tags_refused_null_description_clears() {
        assert!(
            patch(r#"{"tags":null}"#)
                .validate()
                .is_err_and(|v| v.has("tags"))
        );
        assert_eq!(
            patch(r#"{"description":null}"#)
                .validate()
                .map(|c| c.description),
            Ok(Some(None))
        );
    }
}
