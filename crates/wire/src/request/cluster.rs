//! Cluster bodies: create, PATCH (description, tags, control-plane firewall), exposure PATCH.

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
    /// Who may call the cluster's API server; disabled (anyone with a credential) when omitted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_firewall: Option<ControlPlaneFirewallRequest>,
}

/// Who may call the cluster's API server. Enabled, only callers from one of
/// `allowed_addresses` reach it (any other is refused, whatever credential it holds);
/// disabled, anyone holding a credential does. On create an absent field takes its default
/// (disabled, no networks); in a PATCH it keeps the cluster's current value, so
/// `{"enabled": false}` opens the control plane and keeps the list for later.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ControlPlaneFirewallRequest {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// IPv4 and IPv6 networks in CIDR notation (`203.0.113.0/24`, `2001:db8::/32`; `/32` or
    /// `/128` for one address), at most 100, none twice, host bits zero (refused otherwise,
    /// with the network meant). An IPv4 network written as IPv6 (`::ffff:…`) is refused.
    /// Must hold at least one network while enabled.
    #[schema(max_items = 100)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_addresses: Option<Vec<String>>,
}

impl From<ControlPlaneFirewallRequest> for draft::ControlPlaneFirewallRequest {
    fn from(b: ControlPlaneFirewallRequest) -> Self {
        draft::ControlPlaneFirewallRequest {
            enabled: b.enabled,
            allowed_addresses: b.allowed_addresses,
        }
    }
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
            control_plane_firewall: b.control_plane_firewall.map(Into::into),
        }
    }
}

/// `PATCH /v1/public/clusters/{id}`: `description`, `tags`, the maintenance policy and
/// `control_plane_firewall`. Name, zone, version (see `POST …/upgrade`) and network mode are not
/// changed here.
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
    /// A new control-plane firewall (absent fields stay as they are); null is refused. A
    /// change is carried out by provisioning: the answer is 202 with its operation, and the
    /// cluster's `control_plane_firewall_change` shows it until the API server enforces it.
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = ControlPlaneFirewallRequest, required = false)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control_plane_firewall: Option<Option<ControlPlaneFirewallRequest>>,
}

impl From<ClusterPatch> for draft::ClusterPatch {
    fn from(b: ClusterPatch) -> Self {
        draft::ClusterPatch {
            description: b.description,
            tags: b.tags,
            maintenance_window: b.maintenance_window.map(|w| w.map(Into::into)),
            auto_upgrade: b.auto_upgrade,
            control_plane_firewall: b.control_plane_firewall.map(|f| f.map(Into::into)),
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

    /// Each firewall in a create body and where it is refused (`None`: accepted, shown so).
    #[test]
    fn create_control_plane_firewall_rules() {
        let many = |n: usize| {
            let list: Vec<String> = (0..n).map(|i| format!("\"10.0.{i}.0/24\"")).collect();
            format!(
                r#"{{"enabled":true,"allowed_addresses":[{}]}}"#,
                list.join(",")
            )
        };
        let cases: Vec<(String, Result<Vec<&str>, &str>)> = vec![
            (
                r#"{"enabled":true,"allowed_addresses":["203.0.113.0/24","2001:DB8::/32"]}"#.into(),
                Ok(vec!["203.0.113.0/24", "2001:db8::/32"]),
            ),
            (
                r#"{"allowed_addresses":["0.0.0.0/0","::/0"]}"#.into(),
                Ok(vec!["0.0.0.0/0", "::/0"]),
            ),
            (r#"{}"#.into(), Ok(vec![])),
            (many(100), Ok(vec![])),
            (many(101), Err("control_plane_firewall.allowed_addresses")),
            (
                r#"{"enabled":true}"#.into(),
                Err("control_plane_firewall.allowed_addresses"),
            ),
            (
                r#"{"enabled":true,"allowed_addresses":[]}"#.into(),
                Err("control_plane_firewall.allowed_addresses"),
            ),
            (
                r#"{"allowed_addresses":["10.0.0.1/8"]}"#.into(),
                Err("control_plane_firewall.allowed_addresses[0]"),
            ),
            (
                r#"{"allowed_addresses":["10.0.0.0/8","::ffff:10.0.0.0/104"]}"#.into(),
                Err("control_plane_firewall.allowed_addresses[1]"),
            ),
            (
                r#"{"allowed_addresses":["10.0.0.0/8","010.0.0.0/8"]}"#.into(),
                Err("control_plane_firewall.allowed_addresses[1]"),
            ),
            (
                r#"{"allowed_addresses":["10.0.0.0/8","10.0.0.0/8"]}"#.into(),
                Err("control_plane_firewall.allowed_addresses[1]"),
            ),
            (
                format!(r#"{{"allowed_addresses":["{}"]}}"#, "1".repeat(100_000)),
                Err("control_plane_firewall.allowed_addresses[0]"),
            ),
        ];
        for (firewall, want) in cases {
            let got = create(&body(&format!(r#","control_plane_firewall":{firewall}"#)));
            match (got, want) {
                (Ok(spec), Ok(shown)) => {
                    let list: Vec<String> = spec
                        .control_plane_firewall
                        .allowed_addresses
                        .iter()
                        .map(ToString::to_string)
                        .collect();
                    if !shown.is_empty() {
                        assert_eq!(list, shown, "{firewall}");
                    }
                }
                (Err(v), Err(field)) => assert!(v.has(field), "{firewall}: {v:?}"),
                (got, want) => panic!("{:.200}: got {got:?}, want {want:?}", firewall),
            }
        }
        let omitted = create(&body("")).map(|s| s.control_plane_firewall);
        assert_eq!(omitted, Ok(Default::default()));
    }

    #[test]
    fn patch_control_plane_firewall_null_is_refused_and_alone_is_a_change() {
        assert!(
            patch(r#"{"control_plane_firewall":null}"#)
                .validate()
                .is_err_and(|v| v.has("control_plane_firewall"))
        );
        assert!(
            patch(r#"{"control_plane_firewall":{"enabled":false}}"#)
                .validate()
                .is_ok()
        );
        assert!(
            patch(r#"{"control_plane_firewall":{"allowed_addresses":["10.1.0.0/8"]}}"#)
                .validate()
                .is_err_and(|v| v.has("control_plane_firewall.allowed_addresses[0]"))
        );
        assert!(
            serde_json::from_str::<ClusterPatch>(r#"{"control_plane_firewall":{"enable":true}}"#)
                .is_err()
        );
    }
}
