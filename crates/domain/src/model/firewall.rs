//! Ingress firewall rules, their status machine, and the IPv4 CIDR and port-range values.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize, Serializer};
use uuid::Uuid;

use crate::names::DnsLabel;

/// The longest CIDR text read: the longest IPv6 network written out in full, with room to
/// spare. Anything longer is refused without being read or repeated back.
pub const CIDR_TEXT_MAX: usize = 64;

/// An IPv4 or IPv6 network in CIDR notation (`203.0.113.0/24`, `2001:db8::/32`). The prefix
/// length is required (`/32` or `/128` for one address) and host bits must be zero, so a
/// network means what it says; an IPv4 network written as IPv6 (`::ffff:10.0.0.0/104`) is
/// refused, so each network has one spelling. Shown as Rust prints the address (IPv6
/// lowercase and compressed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpCidr {
    network: IpAddr,
    prefix: u8,
}

impl IpCidr {
    pub fn parse(s: &str) -> Result<Self, String> {
        const EXPECTED: &str = "expected a network and its prefix length, e.g. 203.0.113.0/24 or 2001:db8::/32 (/32 or /128 for one address)";
        if s.len() > CIDR_TEXT_MAX {
            return Err(format!(
                "is not a CIDR: longer than {CIDR_TEXT_MAX} characters ({EXPECTED})"
            ));
        }
        let Some((addr, prefix)) = s.split_once('/') else {
            return Err(format!("{s:?} is not a CIDR ({EXPECTED})"));
        };
        // The standard parser takes neither leading zeros in IPv4 octets nor IPv6 zone ids.
        let network: IpAddr = addr
            .parse()
            .map_err(|_| format!("{s:?} is not a CIDR ({EXPECTED})"))?;
        if let IpAddr::V6(v6) = network
            && v6.to_ipv4_mapped().is_some()
        {
            return Err(format!(
                "{s:?} is an IPv4 network written as IPv6; write it in IPv4 form"
            ));
        }
        let max: u8 = if network.is_ipv4() { 32 } else { 128 };
        let prefix: u8 = match prefix.parse() {
            Ok(p)
                if p <= max
                    && !prefix.starts_with('+')
                    && !(prefix.len() > 1 && prefix.starts_with('0')) =>
            {
                p
            }
            _ => return Err(format!("{s:?} has a prefix length outside 0-{max}")),
        };
        let masked = mask(network, prefix);
        if masked != network {
            return Err(format!(
                "{s:?} has host bits set; did you mean {masked}/{prefix}?"
            ));
        }
        Ok(Self { network, prefix })
    }

    pub fn network(&self) -> IpAddr {
        self.network
    }

    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// Whether `address` lies in this network. An IPv4 address that arrives as IPv6
    /// (`::ffff:203.0.113.7`, from a dual-stack listener) is the IPv4 address it carries.
    pub fn contains(&self, address: IpAddr) -> bool {
        let address = address.to_canonical();
        address.is_ipv4() == self.network.is_ipv4() && mask(address, self.prefix) == self.network
    }
}

/// `address` with every bit past the first `prefix` cleared.
fn mask(address: IpAddr, prefix: u8) -> IpAddr {
    match address {
        // A shift by the whole width (prefix 0) keeps nothing.
        IpAddr::V4(a) => {
            let kept = u32::from(a) & u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(kept))
        }
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            let kept = bits & u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(kept))
        }
    }
}

impl fmt::Display for IpCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl Serialize for IpCidr {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// An IPv4 network in CIDR notation, by the rule of [`IpCidr`]: the source of a firewall rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    prefix: u8,
}

impl Ipv4Cidr {
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.len() <= CIDR_TEXT_MAX && s.contains(':') {
            return Err(format!("{s:?} is IPv6; only IPv4 CIDRs are allowed"));
        }
        let cidr = IpCidr::parse(s)?;
        match cidr.network {
            IpAddr::V4(network) => Ok(Self {
                network,
                prefix: cidr.prefix,
            }),
            IpAddr::V6(_) => Err(format!("{s:?} is IPv6; only IPv4 CIDRs are allowed")),
        }
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
    fn ip_cidr_takes_both_families_and_is_shown_in_one_spelling() {
        for (input, shown) in [
            ("203.0.113.0/24", "203.0.113.0/24"),
            ("0.0.0.0/0", "0.0.0.0/0"),
            ("198.51.100.7/32", "198.51.100.7/32"),
            ("2001:DB8::/32", "2001:db8::/32"),
            ("2001:db8:0:0::/64", "2001:db8::/64"),
            ("::/0", "::/0"),
            ("2001:db8::1/128", "2001:db8::1/128"),
        ] {
            assert_eq!(
                IpCidr::parse(input).map(|c| c.to_string()),
                Ok(shown.to_owned()),
                "{input}"
            );
        }
    }

    #[test]
    fn ip_cidr_refuses_host_bits_mapped_addresses_bare_addresses_and_oddities() {
        let long = format!("10.0.0.0/8{}", " ".repeat(100));
        for bad in [
            "10.0.0.1/24",
            "2001:db8::1/32",
            "::ffff:10.0.0.0/104",
            "10.0.0.1",
            "2001:db8::",
            "010.0.0.0/8",
            "10.0.0.0/08",
            "10.0.0.0/+8",
            "10.0.0.0/33",
            "2001:db8::/129",
            "fe80::%eth0/64",
            "10.0.0.0/8/8",
            " 10.0.0.0/8",
            "",
            "/",
            long.as_str(),
        ] {
            assert!(IpCidr::parse(bad).is_err(), "{bad:?} should be refused");
        }
        assert_eq!(
            IpCidr::parse("10.1.2.3/8"),
            Err("\"10.1.2.3/8\" has host bits set; did you mean 10.0.0.0/8?".to_owned())
        );
        // A hostile length is not repeated back.
        assert!(IpCidr::parse(&long).is_err_and(|e| !e.contains("10.0.0.0")));
    }

    #[test]
    fn ip_cidr_contains_addresses_of_its_family_and_mapped_ipv4() {
        let v4 = IpCidr::parse("203.0.113.0/24").unwrap_or_else(|e| panic!("{e}"));
        let v6 = IpCidr::parse("2001:db8::/32").unwrap_or_else(|e| panic!("{e}"));
        let all4 = IpCidr::parse("0.0.0.0/0").unwrap_or_else(|e| panic!("{e}"));
        let ip = |s: &str| s.parse::<IpAddr>().unwrap_or_else(|e| panic!("{e}"));
        assert!(v4.contains(ip("203.0.113.7")));
        assert!(v4.contains(ip("::ffff:203.0.113.7")));
        assert!(!v4.contains(ip("203.0.114.7")));
        assert!(!v4.contains(ip("2001:db8::1")));
        assert!(v6.contains(ip("2001:db8:ffff::1")));
        assert!(!v6.contains(ip("2001:db9::1")));
        assert!(!v6.contains(ip("203.0.113.7")));
        assert!(all4.contains(ip("198.51.100.1")));
        assert!(!all4.contains(ip("::1")));
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
