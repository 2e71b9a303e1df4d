//! Who the client is, and which headers carry that upstream. The gateway states these from what
//! it saw itself (the TCP peer, the Host it was asked for, whether the connection was TLS).
//! Headers that claim them (`Forwarded`, `X-Forwarded-*`, `X-Real-IP` and its cousins) are taken
//! from the client only when the TCP peer is a trusted proxy (`GATEWAY_TRUSTED_PROXIES`, empty by
//! default), and are otherwise dropped, so no client can choose the address an upstream logs or
//! the rate limit counts, nor the host and scheme an upstream builds links from.

use http::HeaderValue;
use std::net::IpAddr;

// The proxy-trust rule itself (which peers are believed, how far `X-Forwarded-For` is read, the
// canonical spelling of an address) is the one the API server uses too.
pub use forwarded::{TrustedProxies, canonical_ip};

/// The forwarding headers of a request, as received (all values of each).
#[derive(Debug, Default, Clone, Copy)]
pub struct Claimed<'a> {
    pub forwarded_for: &'a [&'a str],
    pub forwarded_proto: Option<&'a str>,
    pub forwarded_host: Option<&'a str>,
}

/// The client as the gateway establishes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientView {
    /// The client's address: the peer, or (behind trusted proxies) the nearest untrusted
    /// address of `X-Forwarded-For`.
    pub addr: IpAddr,
    /// `http` or `https`, as the client spoke to the first hop.
    pub proto: &'static str,
    /// The host (and port) the client asked for, if any.
    pub host: Option<String>,
    /// The `X-Forwarded-For` value to send upstream: the believed chain, then the peer. Made
    /// as the header value itself (addresses are always valid ones), so it is sent uncopied.
    pub forwarded_for: HeaderValue,
}

/// Works out the client from the TCP `peer`, the gateway's own view of the request (`host`,
/// whether it came over TLS) and, when `peer` is trusted, the headers it claims.
pub fn client_view(
    peer: IpAddr,
    own_host: Option<&str>,
    tls: bool,
    claimed: Claimed<'_>,
    trusted: &TrustedProxies,
) -> ClientView {
    let own_proto = if tls { "https" } else { "http" };
    let chain = forwarded::resolve(peer, claimed.forwarded_for, trusted);
    let peer = chain.peer;
    if !trusted.contains(peer) {
        return ClientView {
            addr: peer,
            proto: own_proto,
            host: own_host.map(str::to_owned),
            forwarded_for: header_value(peer.to_string()),
        };
    }
    let addr = chain.client;
    let proto = match claimed
        .forwarded_proto
        .map(|p| p.trim().to_ascii_lowercase())
    {
        Some(p) if p == "https" => "https",
        Some(p) if p == "http" => "http",
        _ => own_proto,
    };
    let host = claimed
        .forwarded_host
        .map(str::trim)
        .filter(|h| is_host_and_port(h))
        .or(own_host)
        .map(str::to_owned);
    let mut forwarded_for: Vec<String> = chain.believed.iter().map(IpAddr::to_string).collect();
    forwarded_for.push(peer.to_string());
    ClientView {
        addr,
        proto,
        host,
        forwarded_for: header_value(forwarded_for.join(", ")),
    }
}

/// Addresses and commas: always a valid header value.
fn header_value(text: String) -> HeaderValue {
    HeaderValue::try_from(text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `host` or `host:port` and nothing else (RFC 9110 §7.2): a name of letters, digits and
/// `-._`, or an IPv4 address, or an IPv6 address in brackets; a port of 1 to 5 digits. No
/// userinfo, no second colon, no empty port: whatever passes reads one way to the routes and to
/// an upstream.
pub fn is_host_and_port(value: &str) -> bool {
    if value.is_empty() || value.len() > 255 {
        return false;
    }
    let (host_ok, port) = match value.strip_prefix('[') {
        Some(rest) => match rest.split_once(']') {
            Some((literal, after)) => (
                literal.parse::<std::net::Ipv6Addr>().is_ok(),
                match after {
                    "" => None,
                    _ => Some(after.strip_prefix(':').unwrap_or("x")),
                },
            ),
            None => (false, None),
        },
        None => {
            let (host, port) = match value.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (value, None),
            };
            let name = !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._".contains(&b));
            (name, port)
        }
    };
    host_ok
        && port.is_none_or(|p| (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()))
}

/// Headers whose meaning the gateway owns: the identity it asserts (`X-Auth-*`), the client it
/// saw (`X-Forwarded-*`, `Forwarded`, and the client-address headers some frameworks believe),
/// and the path overrides some frameworks route by (`X-Original-URL`, `X-Rewrite-URL`), which
/// would let an upstream act on a path the gateway never checked. A client's copies never pass.
pub fn is_gateway_owned(name: &str) -> bool {
    // Names are compared folded as servers fold them: lower case, and every character that is
    // not a letter or digit as `-` (CGI turns `-` into `_`, PHP `.` and ` ` too, so
    // `X_Auth.User` reaches some applications as `X-Auth-User`). Without making the folded copy:
    // this runs for every header of every request.
    let folded_eq = |a: &str, b: &str| {
        a.len() == b.len()
            && a.bytes().zip(b.bytes()).all(|(x, y)| {
                let x = if x.is_ascii_alphanumeric() {
                    x.to_ascii_lowercase()
                } else {
                    b'-'
                };
                x == y
            })
    };
    let folded_prefix = |p: &str| name.get(..p.len()).is_some_and(|head| folded_eq(head, p));
    folded_prefix("x-auth-")
        || folded_prefix("x-forwarded-")
        || [
            "forwarded",
            "x-real-ip",
            "x-client-ip",
            "true-client-ip",
            "cf-connecting-ip",
            "fastly-client-ip",
            "x-cluster-client-ip",
            "x-original-forwarded-for",
            "x-original-url",
            "x-original-uri",
            "x-rewrite-url",
            "x-request-id",
            // The trace context: the gateway sends its own, continuing the client's trace.
            "traceparent",
            "tracestate",
        ]
        .iter()
        .any(|owned| folded_eq(name, owned))
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
        let v = client_view(
            ip("203.0.113.9"),
            Some("gw.example.com"),
            false,
            Claimed {
                forwarded_for: &["6.6.6.6"],
                forwarded_proto: Some("https"),
                forwarded_host: Some("evil.example.com"),
            },
            &TrustedProxies::default(),
        );
        assert_eq!(v.addr, ip("203.0.113.9"));
        assert_eq!(v.proto, "http");
        assert_eq!(v.host.as_deref(), Some("gw.example.com"));
        assert_eq!(v.forwarded_for, "203.0.113.9");
    }

    #[test]
    fn behind_trusted_proxies_the_nearest_untrusted_address_is_the_client() {
        let t = trusted("10.0.0.0/8, 192.0.2.1");
        let v = client_view(
            ip("10.0.0.2"),
            Some("internal:8081"),
            false,
            Claimed {
                forwarded_for: &["6.6.6.6, 198.51.100.7", "192.0.2.1"],
                forwarded_proto: Some("HTTPS"),
                forwarded_host: Some("app.example.com"),
            },
            &t,
        );
        // 6.6.6.6 was written by the client itself: the first proxy saw 198.51.100.7.
        assert_eq!(v.addr, ip("198.51.100.7"));
        assert_eq!(v.proto, "https");
        assert_eq!(v.host.as_deref(), Some("app.example.com"));
        assert_eq!(
            v.forwarded_for,
            "6.6.6.6, 198.51.100.7, 192.0.2.1, 10.0.0.2"
        );
    }

    #[test]
    fn garbage_in_a_trusted_chain_ends_what_is_believed() {
        let t = trusted("10.0.0.0/8");
        let v = client_view(
            ip("::ffff:10.0.0.2"),
            None,
            false,
            Claimed {
                forwarded_for: &["1.1.1.1, not-an-ip, 198.51.100.7:4711"],
                forwarded_proto: Some("gopher"),
                forwarded_host: Some("bad host\r\nx"),
            },
            &t,
        );
        assert_eq!(v.addr, ip("198.51.100.7"));
        assert_eq!(v.proto, "http");
        assert_eq!(v.host, None);
        assert_eq!(v.forwarded_for, "198.51.100.7, 10.0.0.2");
    }

    #[test]
    fn owned_headers_are_recognised_in_every_spelling() {
        for name in [
            "X-Auth-User",
            "x_auth_user",
            "X-AUTH.groups",
            "Forwarded",
            "X-Forwarded-For",
            "x_forwarded_host",
            "X-Forwarded-User",
            "X-Real-IP",
            "True-Client-IP",
            "X-Original-URL",
            "x-rewrite-url",
            "X-Request-Id",
            "traceparent",
            "TraceState",
        ] {
            assert!(is_gateway_owned(name), "{name}");
        }
        for name in [
            "authorization",
            "x-authorization",
            "content-type",
            "x-forwarder",
        ] {
            assert!(!is_gateway_owned(name), "{name}");
        }
    }

    #[test]
    fn a_host_is_a_name_or_address_with_an_optional_port_and_nothing_else() {
        for good in [
            "app.example",
            "app.example.",
            "App-1.Example_x:8443",
            "127.0.0.1:80",
            "[::1]",
            "[2001:db8::1]:443",
        ] {
            assert!(is_host_and_port(good), "{good}");
        }
        for bad in [
            "",
            "app.example:1@evil.example",
            "user@app.example",
            "app.example:1:2",
            "app.example:",
            "app.example:+80",
            "app.example:123456",
            ":80",
            "[::1",
            "[::1]80",
            "[::1]:",
            "[evil.example]",
            "app example",
            "app.example/x",
            "app.example,evil.example",
        ] {
            assert!(!is_host_and_port(bad), "{bad}");
        }
    }

    #[test]
    fn trusted_proxy_lists_parse_cidrs_and_addresses() {
        assert!(TrustedProxies::parse("").is_ok_and(|t| t.is_empty()));
        let t = trusted("10.1.2.3/8, ::1");
        assert!(t.contains(ip("10.200.0.1")));
        assert!(t.contains(ip("::1")));
        assert!(!t.contains(ip("11.0.0.1")));
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err());
        assert!(TrustedProxies::parse("example.com").is_err());
    }
}
