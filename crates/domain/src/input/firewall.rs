//! `POST …/firewall-rules`: ingress only; tcp/udp with a port range, icmp
//! without; 1-16 IPv4 CIDRs.

use serde::Deserialize;

use crate::input::check_len;
use crate::model::firewall::{Direction, Ipv4Cidr, PortRange, Protocol};
use crate::names::DnsLabel;
use crate::rules::{MAX_FIREWALL_DESCRIPTION, MAX_SOURCE_CIDRS};
use crate::validation::Violations;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PortRangeRequest {
    #[serde(deserialize_with = "crate::input::integer")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 65535))]
    pub from: i64,
    #[serde(deserialize_with = "crate::input::integer")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 65535))]
    pub to: i64,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateFirewallRuleRequest {
    /// Optional DNS label.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    )]
    pub name: Option<String>,
    /// At most 255 characters.
    #[cfg_attr(feature = "openapi", schema(max_length = 255))]
    pub description: Option<String>,
    /// Only `ingress`; optional.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Direction>))]
    pub direction: Option<String>,
    /// `tcp`, `udp` or `icmp`.
    #[cfg_attr(feature = "openapi", schema(value_type = Protocol, required = true))]
    pub protocol: Option<String>,
    /// 1-16 IPv4 CIDRs (host bits zero).
    #[cfg_attr(
        feature = "openapi",
        schema(
            value_type = Vec<crate::input::schema::Ipv4CidrText>,
            required = true,
            nullable = false,
            min_items = 1,
            max_items = 16
        )
    )]
    pub source_cidrs: Option<Vec<String>>,
    /// Required for tcp and udp (1-65535, from <= to); forbidden for icmp.
    pub port_range: Option<PortRangeRequest>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirewallRuleSpec {
    pub name: Option<DnsLabel>,
    pub description: Option<String>,
    pub direction: Direction,
    pub protocol: Protocol,
    pub source_cidrs: Vec<Ipv4Cidr>,
    pub port_range: Option<PortRange>,
}

impl CreateFirewallRuleRequest {
    pub fn validate(&self) -> Result<FirewallRuleSpec, Violations> {
        let mut v = Violations::new();
        let name = self
            .name
            .as_deref()
            .and_then(|n| v.check("name", DnsLabel::parse(n)));
        if let Some(d) = &self.description {
            check_len(&mut v, "description", d, MAX_FIREWALL_DESCRIPTION);
        }
        if let Some(d) = &self.direction {
            if d != "ingress" {
                v.push("direction", "only `ingress` is supported");
            }
        }
        let protocol = match self.protocol.as_deref() {
            None => {
                v.push("protocol", "is required: tcp, udp or icmp");
                None
            }
            Some(p) => {
                let parsed = Protocol::parse(p);
                if parsed.is_none() {
                    v.push("protocol", "must be tcp, udp or icmp");
                }
                parsed
            }
        };
        let mut cidrs = Vec::new();
        match &self.source_cidrs {
            None => v.push("source_cidrs", "is required: 1-16 IPv4 CIDRs"),
            Some(list) if list.is_empty() => {
                v.push("source_cidrs", "must hold at least one IPv4 CIDR")
            }
            Some(list) if list.len() > MAX_SOURCE_CIDRS => v.push(
                "source_cidrs",
                format!(
                    "at most {MAX_SOURCE_CIDRS} CIDRs are allowed (got {})",
                    list.len()
                ),
            ),
            Some(list) => {
                for (i, c) in list.iter().enumerate() {
                    if let Some(c) = v.check(&format!("source_cidrs[{i}]"), Ipv4Cidr::parse(c)) {
                        cidrs.push(c);
                    }
                }
            }
        }
        let port_range = match (protocol, &self.port_range) {
            (Some(p), Some(_)) if !p.has_ports() => {
                v.push("port_range", "must be omitted for icmp");
                None
            }
            (Some(p), None) if p.has_ports() => {
                v.push("port_range", format!("is required for {}", p.as_str()));
                None
            }
            (_, Some(r)) => {
                let mut ok = true;
                for (field, value) in [("port_range.from", r.from), ("port_range.to", r.to)] {
                    if !(1..=65535).contains(&value) {
                        v.push(field, "must be between 1 and 65535");
                        ok = false;
                    }
                }
                if ok && r.from > r.to {
                    v.push("port_range", "`from` must not exceed `to`");
                    ok = false;
                }
                match (ok, u16::try_from(r.from), u16::try_from(r.to)) {
                    (true, Ok(from), Ok(to)) => Some(PortRange { from, to }),
                    _ => None,
                }
            }
            (_, None) => None,
        };
        if !v.is_empty() {
            return Err(v);
        }
        match protocol {
            Some(protocol) => Ok(FirewallRuleSpec {
                name,
                description: self.description.clone(),
                direction: Direction::Ingress,
                protocol,
                source_cidrs: cidrs,
                port_range,
            }),
            None => Err(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(json: &str) -> Result<FirewallRuleSpec, Violations> {
        let r: CreateFirewallRuleRequest =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}"));
        r.validate()
    }

    fn cidrs(n: usize) -> String {
        let list: Vec<String> = (0..n).map(|i| format!("\"10.0.{i}.0/24\"")).collect();
        format!(
            r#"{{"protocol":"tcp","source_cidrs":[{}],"port_range":{{"from":443,"to":443}}}}"#,
            list.join(",")
        )
    }

    #[test]
    fn firewall_tcp_rule_with_ports_is_valid() {
        let s = rule(
            r#"{"name":"https","direction":"ingress","protocol":"tcp","source_cidrs":["203.0.113.0/24"],"port_range":{"from":443,"to":443}}"#,
        );
        assert!(s.is_ok(), "{s:?}");
    }

    #[test]
    fn firewall_at_most_16_cidrs() {
        assert!(rule(&cidrs(16)).is_ok());
        assert!(rule(&cidrs(17)).is_err_and(|v| v.has("source_cidrs")));
        assert!(rule(&cidrs(0)).is_err_and(|v| v.has("source_cidrs")));
    }

    #[test]
    fn firewall_ipv6_cidr_is_refused_with_its_index() {
        let r = rule(
            r#"{"protocol":"udp","source_cidrs":["10.0.0.0/8","2001:db8::/32"],"port_range":{"from":53,"to":53}}"#,
        );
        assert!(r.is_err_and(|v| v.has("source_cidrs[1]")));
    }

    #[test]
    fn firewall_ingress_only() {
        let r = rule(r#"{"direction":"egress","protocol":"icmp","source_cidrs":["10.0.0.0/8"]}"#);
        assert!(r.is_err_and(|v| v.has("direction")));
    }

    #[test]
    fn firewall_protocol_is_tcp_udp_or_icmp() {
        let r = rule(r#"{"protocol":"sctp","source_cidrs":["10.0.0.0/8"]}"#);
        assert!(r.is_err_and(|v| v.has("protocol")));
        assert!(rule(r#"{"source_cidrs":["10.0.0.0/8"]}"#).is_err_and(|v| v.has("protocol")));
    }

    #[test]
    fn firewall_ports_required_for_tcp_forbidden_for_icmp() {
        assert!(
            rule(r#"{"protocol":"tcp","source_cidrs":["10.0.0.0/8"]}"#)
                .is_err_and(|v| v.has("port_range"))
        );
        assert!(rule(r#"{"protocol":"icmp","source_cidrs":["10.0.0.0/8"]}"#).is_ok());
        assert!(rule(r#"{"protocol":"icmp","source_cidrs":["10.0.0.0/8"],"port_range":{"from":1,"to":2}}"#)
            .is_err_and(|v| v.has("port_range")));
    }

    #[test]
    fn firewall_port_range_bounds() {
        let pr = |f: i64, t: i64| {
            format!(
                r#"{{"protocol":"tcp","source_cidrs":["10.0.0.0/8"],"port_range":{{"from":{f},"to":{t}}}}}"#
            )
        };
        assert!(rule(&pr(1, 65535)).is_ok());
        assert!(rule(&pr(0, 10)).is_err_and(|v| v.has("port_range.from")));
        assert!(rule(&pr(1, 65536)).is_err_and(|v| v.has("port_range.to")));
        assert!(rule(&pr(10, 9)).is_err_and(|v| v.has("port_range")));
    }

    #[test]
    fn firewall_description_at_most_255() {
        let d = |n: usize| {
            format!(
                r#"{{"description":"{}","protocol":"icmp","source_cidrs":["10.0.0.0/8"]}}"#,
                "d".repeat(n)
            )
        };
        assert!(rule(&d(255)).is_ok());
        assert!(rule(&d(256)).is_err_and(|v| v.has("description")));
    }

    #[test]
    fn firewall_name_optional_dns_label() {
        assert!(
            rule(r#"{"name":"a_b","protocol":"icmp","source_cidrs":["10.0.0.0/8"]}"#)
                .is_err_and(|v| v.has("name"))
        );
    }
}
