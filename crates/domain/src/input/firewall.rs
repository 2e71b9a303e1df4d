//! Creating a firewall rule: ingress only; tcp/udp with a port range, icmp
//! without; 1-16 IPv4 CIDRs.

use crate::input::check_len;
use crate::model::firewall::{Direction, Ipv4Cidr, PortRange, Protocol};
use crate::names::DnsLabel;
use crate::rules::{MAX_FIREWALL_DESCRIPTION, MAX_SOURCE_CIDRS};
use crate::validation::Violations;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PortRangeRequest {
    pub from: i64,
    pub to: i64,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateFirewallRuleRequest {
    /// Optional DNS label.
    pub name: Option<String>,
    /// At most 255 characters.
    pub description: Option<String>,
    /// Only `ingress`; optional.
    pub direction: Option<String>,
    /// `tcp`, `udp` or `icmp`.
    pub protocol: Option<String>,
    /// 1-16 IPv4 CIDRs (host bits zero).
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
        if let Some(d) = &self.direction
            && d != "ingress"
        {
            v.push("direction", "only `ingress` is supported");
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
