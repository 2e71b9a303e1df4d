//! Elastic IP and firewall rule bodies.

use domain::input::{elastic_ip as eip_draft, firewall as rule_draft};
use domain::model::cluster::Exposure;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::enums;
use crate::request::{integer, schema::Ipv4CidrText};

/// `POST …/elastic-ips`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateElasticIpRequest {
    /// Optional DNS label, unique among the cluster's alive Elastic IPs.
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `private` or `public`; bound by the cluster's network mode. Omitted: the one the
    /// network mode allows.
    #[schema(value_type = Option<enums::Exposure>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exposure: Option<Exposure>,
}

impl From<CreateElasticIpRequest> for eip_draft::CreateElasticIpRequest {
    fn from(b: CreateElasticIpRequest) -> Self {
        eip_draft::CreateElasticIpRequest {
            name: b.name,
            exposure: b.exposure,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PortRangeRequest {
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 65535)]
    pub from: i64,
    #[serde(deserialize_with = "integer")]
    #[schema(minimum = 1, maximum = 65535)]
    pub to: i64,
}

/// `POST …/firewall-rules`: ingress only; tcp/udp with a port range, icmp without.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFirewallRuleRequest {
    /// Optional DNS label.
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// At most 255 characters.
    #[schema(max_length = 255)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Only `ingress`; optional.
    #[schema(value_type = Option<enums::Direction>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// `tcp`, `udp` or `icmp`.
    #[schema(value_type = enums::Protocol, required = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// 1-16 IPv4 CIDRs (host bits zero).
    #[schema(
        value_type = Vec<Ipv4CidrText>,
        required = true,
        nullable = false,
        min_items = 1,
        max_items = 16
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_cidrs: Option<Vec<String>>,
    /// Required for tcp and udp (1-65535, from <= to); forbidden for icmp.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port_range: Option<PortRangeRequest>,
}

impl From<CreateFirewallRuleRequest> for rule_draft::CreateFirewallRuleRequest {
    fn from(b: CreateFirewallRuleRequest) -> Self {
        rule_draft::CreateFirewallRuleRequest {
            name: b.name,
            description: b.description,
            direction: b.direction,
            protocol: b.protocol,
            source_cidrs: b.source_cidrs,
            port_range: b.port_range.map(|r| rule_draft::PortRangeRequest {
                from: r.from,
                to: r.to,
            }),
        }
    }
}

/// The networking rules as a client meets them: JSON in, through these shapes and the
/// domain's rules.
#[cfg(test)]
mod tests {
    use domain::input::firewall::FirewallRuleSpec;
    use domain::validation::Violations;

    use super::*;

    fn rule(json: &str) -> Result<FirewallRuleSpec, Violations> {
        let r: CreateFirewallRuleRequest =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"));
        rule_draft::CreateFirewallRuleRequest::from(r).validate()
    }

    fn cidrs(n: usize) -> String {
        let list: Vec<String> = (0..n).map(|i| format!("\"10.0.{i}.0/24\"")).collect();
        format!(
            r#"{{"protocol":"tcp","source_cidrs":[{}],"port_range":{{"from":443,"to":443}}}}"#,
            list.join(",")
        )
    }

    fn ports(from: i64, to: i64) -> String {
        format!(
            r#"{{"protocol":"tcp","source_cidrs":["10.0.0.0/8"],"port_range":{{"from":{from},"to":{to}}}}}"#
        )
    }

    fn described(n: usize) -> String {
        format!(
            r#"{{"description":"{}","protocol":"icmp","source_cidrs":["10.0.0.0/8"]}}"#,
            "d".repeat(n)
        )
    }

    /// Each body and the field it is refused at (`None`: accepted).
    #[test]
    fn firewall_rule_rules() {
        let cases: Vec<(String, Option<&str>)> = vec![
            (r#"{"name":"https","direction":"ingress","protocol":"tcp","source_cidrs":["203.0.113.0/24"],"port_range":{"from":443,"to":443}}"#.into(), None),
            (cidrs(16), None),
            (cidrs(17), Some("source_cidrs")),
            (cidrs(0), Some("source_cidrs")),
            (r#"{"protocol":"udp","source_cidrs":["10.0.0.0/8","2001:db8::/32"],"port_range":{"from":53,"to":53}}"#.into(), Some("source_cidrs[1]")),
            (r#"{"direction":"egress","protocol":"icmp","source_cidrs":["10.0.0.0/8"]}"#.into(), Some("direction")),
            (r#"{"protocol":"sctp","source_cidrs":["10.0.0.0/8"]}"#.into(), Some("protocol")),
            (r#"{"source_cidrs":["10.0.0.0/8"]}"#.into(), Some("protocol")),
            (r#"{"protocol":"tcp","source_cidrs":["10.0.0.0/8"]}"#.into(), Some("port_range")),
            (r#"{"protocol":"icmp","source_cidrs":["10.0.0.0/8"]}"#.into(), None),
            (r#"{"protocol":"icmp","source_cidrs":["10.0.0.0/8"],"port_range":{"from":1,"to":2}}"#.into(), Some("port_range")),
            (ports(1, 65535), None),
            (ports(0, 10), Some("port_range.from")),
            (ports(1, 65536), Some("port_range.to")),
            (ports(10, 9), Some("port_range")),
            (described(255), None),
            (described(256), Some("description")),
            (r#"{"name":"a_b","protocol":"icmp","source_cidrs":["10.0.0.0/8"]}"#.into(), Some("name")),
        ];
        for (json, refused_at) in cases {
            match (rule(&json), refused_at) {
                (Ok(_), None) => {}
                (Err(v), Some(field)) => assert!(v.has(field), "{json}: {v:?}"),
                (got, want) => panic!("{json}: got {got:?}, want refusal at {want:?}"),
            }
        }
    }

    #[test]
    fn elastic_ip_name_is_optional_and_a_dns_label() {
        let eip = |json: &str| {
            eip_draft::CreateElasticIpRequest::from(
                serde_json::from_str::<CreateElasticIpRequest>(json)
                    .unwrap_or_else(|e| panic!("{e}")),
            )
            .validate()
        };
        assert!(eip(r#"{"exposure":"private"}"#).is_ok());
        assert!(eip(r#"{"name":"Web!"}"#).is_err_and(|v| v.has("name")));
        assert!(eip(&format!(r#"{{"name":"{}"}}"#, "a".repeat(64))).is_err());
        assert!(eip(&format!(r#"{{"name":"{}"}}"#, "a".repeat(63))).is_ok());
    }

    #[test]
    fn elastic_ip_extra_fields_and_bad_exposure_are_refused_by_the_shape() {
        for json in [r#"{"address":"1.2.3.4"}"#, r#"{"exposure":"global"}"#] {
            assert!(
                serde_json::from_str::<CreateElasticIpRequest>(json).is_err(),
                "{json}"
            );
        }
    }
}
