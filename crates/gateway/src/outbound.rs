//! Requests the gateway makes on a tenant's say-so: an auth server's issuer names the host the
//! gateway fetches discovery and keys from and posts client credentials to. Without a guard
//! that is a server-side request forgery lever into the gateway's own network (cloud metadata,
//! admin ports, databases speaking HTTP). So every such request:
//! - goes only to addresses of the classes allowed (`GATEWAY_ALLOWED_ISSUER_NETWORKS`; by
//!   default `public`, and `public,loopback` when every listener of the gateway is on a loopback
//!   address), checked on the addresses a name resolves to at connect time, so a DNS
//!   answer that changes between check and use (rebinding) changes nothing; link-local
//!   (metadata services), unspecified, multicast and reserved addresses are never allowed;
//! - uses https, or http only to a loopback host;
//! - follows no redirect, uses no proxy from the environment, times out, and reads at most
//!   [`MAX_BODY`] of an answer.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::de::DeserializeOwned;

/// The most the gateway reads of a discovery document, a key set or a token answer.
pub const MAX_BODY: usize = 1024 * 1024;
const TIMEOUT: Duration = Duration::from_secs(10);

/// The address classes an outbound request may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkPolicy {
    pub loopback: bool,
    pub private: bool,
}

impl NetworkPolicy {
    /// Public addresses only.
    pub const PUBLIC: NetworkPolicy = NetworkPolicy {
        loopback: false,
        private: false,
    };

    /// The policy when none is set, for a gateway listening on `listeners`: `public,loopback`
    /// when every one is a loopback address (a development or single-host gateway, whose
    /// provider runs beside it, and which nobody off the host can reach anyway), else `public`.
    /// A gateway others can reach never fetches from its own host on a tenant's say-so: its
    /// admin listener, a sidecar, anything bound to 127.0.0.1 there.
    pub fn by_default_for(listeners: &[SocketAddr]) -> NetworkPolicy {
        let loopback = !listeners.is_empty()
            && listeners
                .iter()
                .all(|a| class(a.ip()) == AddressClass::Loopback);
        NetworkPolicy {
            loopback,
            private: false,
        }
    }
}

/// Where an address belongs, for [`NetworkPolicy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    Public,
    Loopback,
    /// RFC 1918, carrier-grade NAT (RFC 6598) and IPv6 unique-local addresses.
    Private,
    /// Never a provider: unspecified, link-local (cloud metadata lives at 169.254.169.254),
    /// multicast, broadcast and reserved addresses.
    Never,
}

pub fn class(ip: IpAddr) -> AddressClass {
    match crate::forwarding::canonical_ip(ip) {
        IpAddr::V4(a) => {
            let o = a.octets();
            if a.is_loopback() {
                AddressClass::Loopback
            } else if a.is_unspecified()
                || a.is_link_local()
                || a.is_multicast()
                || a.is_broadcast()
                || o[0] == 0
                || o[0] >= 240
            {
                AddressClass::Never
            } else if a.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64) {
                AddressClass::Private
            } else {
                AddressClass::Public
            }
        }
        IpAddr::V6(a) => {
            let s = a.segments();
            // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) carry an IPv4 address: judge that.
            if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
                let v4 = std::net::Ipv4Addr::new(
                    (s[6] >> 8) as u8,
                    s[6] as u8,
                    (s[7] >> 8) as u8,
                    s[7] as u8,
                );
                return class(IpAddr::V4(v4));
            }
            if s[0] == 0x2002 {
                let v4 = std::net::Ipv4Addr::new(
                    (s[1] >> 8) as u8,
                    s[1] as u8,
                    (s[2] >> 8) as u8,
                    s[2] as u8,
                );
                return class(IpAddr::V4(v4));
            }
            if a.is_loopback() {
                AddressClass::Loopback
            } else if a.is_unspecified() || a.is_multicast() || (s[0] & 0xffc0) == 0xfe80 {
                AddressClass::Never
            } else if (s[0] & 0xfe00) == 0xfc00 {
                AddressClass::Private
            } else {
                AddressClass::Public
            }
        }
    }
}

impl NetworkPolicy {
    /// A comma-separated list of `public`, `loopback`, `private` (`public` is always in).
    pub fn parse(text: &str) -> Result<NetworkPolicy, String> {
        let mut policy = NetworkPolicy {
            loopback: false,
            private: false,
        };
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match item.to_ascii_lowercase().as_str() {
                "public" => {}
                "loopback" => policy.loopback = true,
                "private" => policy.private = true,
                other => {
                    return Err(format!("{other:?} is not one of public, loopback, private"));
                }
            }
        }
        Ok(policy)
    }

    pub fn permits(&self, ip: IpAddr) -> bool {
        match class(ip) {
            AddressClass::Public => true,
            AddressClass::Loopback => self.loopback,
            AddressClass::Private => self.private,
            AddressClass::Never => false,
        }
    }
}

/// Why an outbound request was not made or not answered usably. The texts are for logs.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OutboundError {
    #[error("{0} is not an address this gateway may reach (GATEWAY_ALLOWED_ISSUER_NETWORKS)")]
    Forbidden(String),
    #[error("{0}")]
    Failed(String),
    #[error("the answer was larger than {MAX_BODY} bytes")]
    TooLarge,
}

/// The resolver reqwest connects through: the system's answer, less the addresses the policy
/// forbids.
#[derive(Debug)]
struct GuardedResolver {
    policy: NetworkPolicy,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.policy;
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0))
                .await?
                .filter(|a| policy.permits(a.ip()))
                .collect();
            if addrs.is_empty() {
                return Err(Box::new(OutboundError::Forbidden(host))
                    as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The guarded HTTP client.
#[derive(Debug, Clone)]
pub struct Outbound {
    http: reqwest::Client,
    policy: NetworkPolicy,
}

/// A loopback host name (RFC 8252): the only hosts plain http may reach.
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost") || h.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

impl Outbound {
    pub fn new(policy: NetworkPolicy) -> Outbound {
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .connect_timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver { policy }))
            .build()
            .unwrap_or_default();
        Outbound { http, policy }
    }

    /// Refuses a URL before any connection: its scheme, and a literal address (which reqwest
    /// connects to without asking the resolver).
    pub fn check(&self, url: &url::Url) -> Result<(), OutboundError> {
        let host = url
            .host_str()
            .ok_or_else(|| OutboundError::Forbidden("a URL without a host".into()))?;
        match url.scheme() {
            "https" => {}
            "http" if is_loopback_host(host) => {}
            _ => {
                return Err(OutboundError::Forbidden(format!(
                    "{} (https is required, http only to a loopback host)",
                    url.origin().ascii_serialization()
                )));
            }
        }
        let literal = match url.host() {
            Some(url::Host::Ipv4(a)) => Some(IpAddr::V4(a)),
            Some(url::Host::Ipv6(a)) => Some(IpAddr::V6(a)),
            _ => None,
        };
        if let Some(ip) = literal
            && !self.policy.permits(ip)
        {
            return Err(OutboundError::Forbidden(ip.to_string()));
        }
        Ok(())
    }

    /// GET a JSON document.
    pub async fn get_json<T: DeserializeOwned>(&self, url: &url::Url) -> Result<T, OutboundError> {
        self.check(url)?;
        let response = self
            .http
            .get(url.clone())
            .header("accept", "application/json")
            .send()
            .await
            .map_err(failed)?;
        if !response.status().is_success() {
            return Err(OutboundError::Failed(format!(
                "{} answered {}",
                url.origin().ascii_serialization(),
                response.status()
            )));
        }
        let body = read_capped(response).await?;
        serde_json::from_slice(&body).map_err(|e| {
            OutboundError::Failed(format!(
                "{} answered malformed JSON: {e}",
                url.origin().ascii_serialization()
            ))
        })
    }

    /// POST a form with HTTP Basic client authentication; the status and the (capped) body.
    pub async fn post_form(
        &self,
        url: &url::Url,
        authorization: &str,
        form: &[(&str, &str)],
    ) -> Result<(u16, Vec<u8>), OutboundError> {
        self.check(url)?;
        let response = self
            .http
            .post(url.clone())
            .header("authorization", authorization)
            .header("accept", "application/json")
            .form(form)
            .send()
            .await
            .map_err(failed)?;
        let status = response.status().as_u16();
        Ok((status, read_capped(response).await?))
    }
}

fn failed(e: reqwest::Error) -> OutboundError {
    // The source chain carries the resolver's refusal; the URL is left out of logs.
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    OutboundError::Failed(text)
}

async fn read_capped(response: reqwest::Response) -> Result<Vec<u8>, OutboundError> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_BODY as u64)
    {
        return Err(OutboundError::TooLarge);
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(failed)?;
        if body.len() + chunk.len() > MAX_BODY {
            return Err(OutboundError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap_or(IpAddr::from([0, 0, 0, 0]))
    }

    #[test]
    fn addresses_fall_into_their_classes() {
        use AddressClass::*;
        for (addr, want) in [
            ("127.0.0.1", Loopback),
            ("::1", Loopback),
            ("::ffff:127.0.0.1", Loopback),
            ("10.1.2.3", Private),
            ("172.16.0.1", Private),
            ("192.168.1.1", Private),
            ("100.64.0.1", Private),
            ("fd00:ec2::254", Private),
            ("169.254.169.254", Never),
            ("::ffff:169.254.169.254", Never),
            ("64:ff9b::a9fe:a9fe", Never),
            ("2002:a9fe:a9fe::1", Never),
            ("fe80::1", Never),
            ("0.0.0.0", Never),
            ("::", Never),
            ("224.0.0.1", Never),
            ("255.255.255.255", Never),
            ("240.0.0.1", Never),
            ("8.8.8.8", Public),
            ("2606:4700::1111", Public),
            ("64:ff9b::808:808", Public),
        ] {
            assert_eq!(class(ip(addr)), want, "{addr}");
        }
    }

    #[test]
    fn the_policy_parses_and_never_allows_the_never_class() {
        let all =
            NetworkPolicy::parse("public, loopback, PRIVATE").unwrap_or(NetworkPolicy::PUBLIC);
        assert!(all.permits(ip("10.0.0.1")) && all.permits(ip("127.0.0.1")));
        assert!(!all.permits(ip("169.254.169.254")));
        let public = NetworkPolicy::parse("public").unwrap_or(NetworkPolicy::PUBLIC);
        assert!(!public.permits(ip("127.0.0.1")) && public.permits(ip("8.8.8.8")));
        assert!(NetworkPolicy::parse("public,everything").is_err());
        assert!(!NetworkPolicy::PUBLIC.permits(ip("127.0.0.1")));
    }

    #[test]
    fn loopback_is_allowed_by_default_only_when_every_listener_is_on_loopback() {
        let addr = |s: &str| {
            s.parse::<SocketAddr>()
                .unwrap_or_else(|e| panic!("{s}: {e}"))
        };
        for (listeners, loopback) in [
            (&["127.0.0.1:8081"][..], true),
            (&["127.0.0.1:8081", "[::1]:8443"], true),
            (&["[::ffff:127.0.0.1]:8081"], true),
            (&["127.0.0.1:8081", "0.0.0.0:8443"], false),
            (&["0.0.0.0:8081"], false),
            (&["[::]:8081"], false),
            (&["10.0.0.5:8081"], false),
            (&["203.0.113.5:8081"], false),
            (&[], false),
        ] {
            let listeners: Vec<SocketAddr> = listeners.iter().map(|s| addr(s)).collect();
            let policy = NetworkPolicy::by_default_for(&listeners);
            assert_eq!(policy.permits(ip("127.0.0.1")), loopback, "{listeners:?}");
            assert!(policy.permits(ip("8.8.8.8")) && !policy.permits(ip("10.0.0.1")));
        }
    }

    #[test]
    fn urls_are_refused_before_connecting() {
        let o = Outbound::new(NetworkPolicy::by_default_for(&[SocketAddr::from((
            [127, 0, 0, 1],
            8081,
        ))]));
        let url = |s: &str| url::Url::parse(s).unwrap_or_else(|_| panic!("{s}"));
        assert!(o.check(&url("https://id.example.com/x")).is_ok());
        assert!(o.check(&url("http://127.0.0.1:3900/x")).is_ok());
        assert!(o.check(&url("http://localhost:3900/x")).is_ok());
        assert!(o.check(&url("http://id.example.com/x")).is_err());
        assert!(
            o.check(&url("https://169.254.169.254/latest/meta-data"))
                .is_err()
        );
        assert!(o.check(&url("https://10.0.0.1/")).is_err());
        assert!(o.check(&url("https://[::ffff:a9fe:a9fe]/")).is_err());
        assert!(o.check(&url("file:///etc/passwd")).is_err());
    }

    #[tokio::test]
    async fn a_name_that_resolves_only_to_forbidden_addresses_is_never_reached() {
        let o = Outbound::new(NetworkPolicy::PUBLIC);
        // localhost resolves to loopback only: refused by the resolver, not connected to.
        let r: Result<serde_json::Value, _> = o
            .get_json(&url::Url::parse("https://localhost:1/x").unwrap_or_else(|_| panic!()))
            .await;
        let text = r.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(text.contains("may reach"), "{text}");
    }
}
