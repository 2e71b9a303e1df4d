//! Ingress firewall rules, their status machine, and the IPv4 CIDR and port-range values.

use std::fmt;
use std::net::Ipv4Addr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize, Serializer};
use uuid::Uuid;

use crate::names::DnsLabel;

/// An IPv4 network in CIDR notation. Host bits must be zero, so a rule means what it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    prefix: u8,
}

impl Ipv4Cidr {
    pub fn parse(s: &str) -> Result<Self, String> {
        let Some((addr, prefix)) = s.split_once('/') else {
            return Err(format!("{s:?} is not an IPv4 CIDR (expected a.b.c.d/n)"));
        };
        if addr.contains(':') {
            return Err(format!("{s:?} is IPv6; only IPv4 CIDRs are allowed"));
        }
        let network: Ipv4Addr = addr
            .parse()
            .map_err(|_| format!("{s:?} is not an IPv4 CIDR (expected a.b.c.d/n)"))?;
        let prefix: u8 = match prefix.parse() {
            Ok(p)
                if p <= 32
                    && !prefix.starts_with('+')
                    && !(prefix.len() > 1 && prefix.starts_with('0')) =>
            {
                p
            }
            _ => return Err(format!("{s:?} has a prefix length outside 0-32")),
        };
        let mask = if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(prefix))
        };
        if u32::from(network) & !mask != 0 {
            let fixed = Ipv4Addr::from(u32::from(network) & mask);
            return Err(format!(
                "{s:?} has host bits set; did you mean {fixed}/{prefix}?"
            ));
        }
        Ok(Self { network, prefix })
    }

    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl Serialize for Ipv4Cidr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Tcp,
    Udp,
    Icmp,
}

impl Protocol {
    /// Every value, in declaration order.
    pub const ALL: [Protocol; 3] = [Protocol::Tcp, Protocol::Udp, Protocol::Icmp];
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Icmp => "icmp",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "tcp" => Some(Protocol::Tcp),
            "udp" => Some(Protocol::Udp),
            "icmp" => Some(Protocol::Icmp),
            _ => None,
        }
    }

    /// tcp and udp need ports; icmp has none.
    pub fn has_ports(self) -> bool {
        self != Protocol::Icmp
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Ingress,
}

impl Direction {
    /// Every value, in declaration order.
    pub const ALL: [Direction; 1] = [Direction::Ingress];
}

/// Ports `from..=to`, 1-65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortRange {
    pub from: u16,
    pub to: u16,
}

/// `Pending`, `Active`, `Deleting`, `Failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FirewallRuleStatus {
    Pending,
    Active,
    Deleting,
    Failed,
}

impl FirewallRuleStatus {
    /// Every value, in declaration order.
    pub const ALL: [FirewallRuleStatus; 4] = [
        FirewallRuleStatus::Pending,
        FirewallRuleStatus::Active,
        FirewallRuleStatus::Deleting,
        FirewallRuleStatus::Failed,
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirewallEvent {
    Applied,
    Fail,
    Delete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a firewall rule in status {from:?} cannot take {event:?}")]
pub struct FirewallTransitionError {
    pub from: FirewallRuleStatus,
    pub event: FirewallEvent,
}

impl FirewallRuleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            FirewallRuleStatus::Pending => "Pending",
            FirewallRuleStatus::Active => "Active",
            FirewallRuleStatus::Deleting => "Deleting",
            FirewallRuleStatus::Failed => "Failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Pending" => FirewallRuleStatus::Pending,
            "Active" => FirewallRuleStatus::Active,
            "Deleting" => FirewallRuleStatus::Deleting,
            "Failed" => FirewallRuleStatus::Failed,
            _ => return None,
        })
    }

    /// A rule can be deleted in any status but `Deleting` (a rule still `Pending` is simply
    /// never applied).
    pub fn apply(
        self,
        event: FirewallEvent,
    ) -> Result<FirewallRuleStatus, FirewallTransitionError> {
        use FirewallEvent::*;
        use FirewallRuleStatus::*;
        match (self, event) {
            (Pending, Applied) => Ok(Active),
            (Pending, Fail) => Ok(Failed),
            (Pending | Active | Failed, Delete) => Ok(Deleting),
            (from, event) => Err(FirewallTransitionError { from, event }),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FirewallRule {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub name: Option<DnsLabel>,
    pub description: Option<String>,
    pub direction: Direction,
    pub protocol: Protocol,
    pub source_cidrs: Vec<Ipv4Cidr>,
    /// Null for icmp.
    pub port_range: Option<PortRange>,
    pub status: FirewallRuleStatus,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[cfg(test)]
mod tests {
    use super::FirewallEvent::*;
    use super::FirewallRuleStatus::*;
    use super::*;

    #[test]
    fn cidr_accepts_ipv4_networks() {
        for ok in [
            "203.0.113.0/24",
            "0.0.0.0/0",
            "10.0.0.5/32",
            "192.168.0.0/16",
        ] {
            let c = Ipv4Cidr::parse(ok);
            assert_eq!(c.map(|c| c.to_string()), Ok(ok.to_owned()));
        }
    }

    #[test]
    fn cidr_rejects_ipv6_bare_addresses_host_bits_and_bad_prefixes() {
        for bad in [
            "2001:db8::/32",
            "::/0",
            "10.0.0.1",
            "10.0.0.1/24",
            "10.0.0.0/33",
            "10.0.0.0/-1",
            "10.0.0/8",
            "a.b.c.d/8",
            "10.0.0.0/08",
            "",
        ] {
            assert!(Ipv4Cidr::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn firewall_rule_status_applies_then_deletes() {
        assert_eq!(Pending.apply(Applied), Ok(Active));
        assert_eq!(Pending.apply(Fail), Ok(Failed));
        assert_eq!(Active.apply(Delete), Ok(Deleting));
        assert_eq!(Failed.apply(Delete), Ok(Deleting));
        assert!(Deleting.apply(Delete).is_err());
        assert!(Active.apply(Applied).is_err());
    }
}
