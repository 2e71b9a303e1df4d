//! Who the client of a request is. The TCP peer, unless the peer is a proxy the operator listed
//! as trusted: then the nearest address in `X-Forwarded-For` that is not one of those proxies.
//! Anything further left in that header was written by someone unknown (the client itself, or
//! a proxy nobody vouches for) and is never believed, so no client chooses the address a rate
//! limit counts or a log records. The API server and the gateway both decide it here.

use std::net::IpAddr;

use ipnet::IpNet;

/// The peers whose forwarding headers are believed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// A comma-separated list of CIDRs (`10.0.0.0/8, 192.168.1.7/32`); a bare address means
    /// that one address. The error names the entry that is neither.
    pub fn parse(text: &str) -> Result<TrustedProxies, String> {
        let mut nets = Vec::new();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let net = match item.parse::<IpNet>() {
                Ok(n) => n,
                Err(_) => IpNet::from(
                    item.parse::<IpAddr>()
                        .map_err(|_| format!("{item:?} is not a CIDR or an IP address"))?,
                ),
            };
            nets.push(net.trunc());
        }
        Ok(TrustedProxies(nets))
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical_ip(ip);
        self.0.iter().any(|n| n.contains(&ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// IPv4-mapped IPv6 addresses (`::ffff:10.0.0.1`) as the IPv4 address they are, so one client
/// has one spelling whichever socket family accepted it.
pub fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// An `X-Forwarded-For` entry: an address, perhaps with a port (`1.2.3.4:5`, `[::1]:5`).
pub fn parse_forwarded_addr(entry: &str) -> Option<IpAddr> {
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Some(canonical_ip(ip));
    }
    if let Ok(sock) = entry.parse::<std::net::SocketAddr>() {
        return Some(canonical_ip(sock.ip()));
    }
    None
}

/// The unit a limit counts a client by: an IPv4 address, or an IPv6 address's /64, the block
/// one subscriber is given whole (RFC 6177) and can hop across at will.
pub fn subscriber(ip: IpAddr) -> IpAddr {
    match canonical_ip(ip) {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(std::net::Ipv6Addr::from(bits))
        }
        v4 => v4,
    }
}

/// What can be believed of a request's path through proxies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// The client's address.
    pub client: IpAddr,
    /// The addresses of `X-Forwarded-For` that are believed, nearest last; empty unless the
    /// peer is trusted.
    pub believed: Vec<IpAddr>,
    /// The TCP peer, canonical.
    pub peer: IpAddr,
}

/// The client of a request from its TCP `peer` and the values of its `X-Forwarded-For`
/// headers, in the order received (each may hold a comma-separated list).
pub fn resolve(peer: IpAddr, forwarded_for: &[&str], trusted: &TrustedProxies) -> Chain {
    let peer = canonical_ip(peer);
    if !trusted.contains(peer) {
        return Chain {
            client: peer,
            believed: Vec::new(),
            peer,
        };
    }
    // Read from the nearest hop outwards; an entry that is not an address ends what can be
    // believed (everything left of it was written by someone unknown).
    let mut believed: Vec<IpAddr> = Vec::new();
    for entry in forwarded_for
        .iter()
        .rev()
        .flat_map(|v| v.rsplit(','))
        .map(str::trim)
    {
        match parse_forwarded_addr(entry) {
            Some(ip) => believed.push(ip),
            None => break,
        }
    }
    believed.reverse();
    // The client is the nearest address that is not one of our proxies; a chain made only of
    // our proxies names its first hop.
    let client = believed
        .iter()
        .rev()
        .find(|ip| !trusted.contains(**ip))
        .or(believed.first())
        .copied()
        .unwrap_or(peer);
    Chain {
        client,
        believed,
        peer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))
    }

    fn trusted(s: &str) -> TrustedProxies {
        TrustedProxies::parse(s).unwrap_or_default()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_claims() {
        let c = resolve(ip("203.0.113.9"), &["6.6.6.6"], &TrustedProxies::default());
        assert_eq!(c.client, ip("203.0.113.9"));
        assert!(c.believed.is_empty());
    }

    #[test]
    fn behind_trusted_proxies_the_nearest_untrusted_address_is_the_client() {
        let t = trusted("10.0.0.0/8, 192.0.2.1");
        let c = resolve(ip("10.0.0.2"), &["6.6.6.6, 198.51.100.7", "192.0.2.1"], &t);
        // 6.6.6.6 was written by the client itself: the first proxy saw 198.51.100.7.
        assert_eq!(c.client, ip("198.51.100.7"));
        assert_eq!(
            c.believed,
            [ip("6.6.6.6"), ip("198.51.100.7"), ip("192.0.2.1")]
        );
    }

    #[test]
    fn garbage_in_a_trusted_chain_ends_what_is_believed() {
        let t = trusted("10.0.0.0/8");
        let c = resolve(
            ip("::ffff:10.0.0.2"),
            &["1.1.1.1, not-an-ip, 198.51.100.7:4711"],
            &t,
        );
        assert_eq!(c.client, ip("198.51.100.7"));
        assert_eq!(c.believed, [ip("198.51.100.7")]);
        assert_eq!(c.peer, ip("10.0.0.2"));
    }

    #[test]
    fn a_chain_of_only_trusted_hops_names_its_first() {
        let t = trusted("10.0.0.0/8");
        let c = resolve(ip("10.0.0.2"), &["10.0.0.9, 10.0.0.5"], &t);
        assert_eq!(c.client, ip("10.0.0.9"));
        let none = resolve(ip("10.0.0.2"), &[], &t);
        assert_eq!(none.client, ip("10.0.0.2"));
    }

    #[test]
    fn an_ipv6_subscriber_is_its_64_and_an_ipv4_client_its_address() {
        assert_eq!(
            subscriber(ip("2001:db8:1:2:aaaa::1")),
            subscriber(ip("2001:db8:1:2:ffff:1:2:3"))
        );
        assert_ne!(
            subscriber(ip("2001:db8:1:2::1")),
            subscriber(ip("2001:db8:1:3::1"))
        );
        assert_eq!(subscriber(ip("::ffff:192.0.2.7")), ip("192.0.2.7"));
    }

    #[test]
    fn trusted_proxy_lists_parse_cidrs_and_addresses() {
        assert!(TrustedProxies::parse("").is_ok_and(|t| t.is_empty()));
        let t = trusted("10.1.2.3/8, ::1");
        assert!(t.contains(ip("10.200.0.1")));
        assert!(t.contains(ip("::1")));
        assert!(t.contains(ip("::ffff:10.0.0.1")));
        assert!(!t.contains(ip("11.0.0.1")));
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse("example.com").is_err());
    }
}
