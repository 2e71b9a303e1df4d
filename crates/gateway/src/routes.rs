//! The routes file (`GATEWAY_ROUTES_FILE`): which hosts and path prefixes go where, behind which
//! auth server. Prefixes are matched on the canonical path ([`crate::path`]) at whole segments.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::path::{self, CanonicalPath};
use crate::tls::{CertificateSpec, TlsError};
use crate::upstream::ClientKind;

#[derive(Debug, thiserror::Error)]
pub enum RoutesError {
    #[error("cannot read the routes file {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("the routes file is not valid TOML of [[route]] tables: {0}")]
    Parse(String),
    #[error("route {index}: {reason}")]
    Invalid { index: usize, reason: String },
    #[error("certificate {index}: {reason}")]
    Certificate { index: usize, reason: String },
    #[error(transparent)]
    Tls(#[from] TlsError),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutesFile {
    #[serde(default)]
    route: Vec<RouteConfig>,
    #[serde(default)]
    certificate: Vec<CertificateConfig>,
}

/// A `[[certificate]]`: for the TLS listener, the pair a client naming one of `hosts` gets.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CertificateConfig {
    #[serde(default)]
    hosts: Vec<String>,
    #[serde(default)]
    default: bool,
    /// PEM files; a relative path is read from the routes file's directory.
    cert: String,
    key: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RouteConfig {
    /// Optional: the route then matches only requests for this host (any port).
    host: Option<String>,
    path_prefix: String,
    upstream: String,
    organization: String,
    environment: String,
    auth_server: String,
    #[serde(default)]
    timeouts: TimeoutsConfig,
    /// Optional: the largest request body passed upstream.
    max_request_body_bytes: Option<u64>,
    /// Optional: the most header bytes a request on this route may carry.
    max_request_header_bytes: Option<u64>,
    /// HTTP/2 to the upstream: prior knowledge (h2c) for `http://`, ALPN for `https://`.
    #[serde(default)]
    upstream_http2: bool,
    /// Whether requests to switch protocols (WebSocket, any `Upgrade`) are passed on; default
    /// yes.
    upgrades: Option<bool>,
}

/// A route's upstream timeouts, in milliseconds; each defaults as [`Limits::default`] says.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimeoutsConfig {
    connect_ms: Option<u64>,
    first_byte_ms: Option<u64>,
    idle_ms: Option<u64>,
}

/// What one request on a route may cost the gateway and its upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// To open a connection to the upstream.
    pub connect: Duration,
    /// From sending the request to the upstream's answer head (its status and headers).
    pub first_byte: Duration,
    /// Between two pieces of a body, either way, once it flows.
    pub idle: Duration,
    /// The largest request body passed upstream; `None`: no limit (bodies are streamed, so
    /// the gateway's memory does not grow with them).
    pub max_request_body: Option<u64>,
    /// The most header bytes (each field's name and value, and 4 for `: ` and CRLF) a request
    /// may carry; larger is 431 before any auth check.
    pub max_request_headers: u64,
}

/// The listeners' own bound on a request head: no route can take more.
pub const MAX_REQUEST_HEADERS: u64 = 64 * 1024;

impl Default for Limits {
    /// nginx's defaults for a proxy (`proxy_read_timeout`, `proxy_send_timeout`), with a
    /// shorter connect: an upstream that takes seconds to accept is down.
    fn default() -> Self {
        Limits {
            connect: Duration::from_secs(5),
            first_byte: Duration::from_secs(60),
            idle: Duration::from_secs(60),
            max_request_body: None,
            // nginx's large_client_header_buffers (4 × 8 KiB).
            max_request_headers: 32 * 1024,
        }
    }
}

/// The longest timeout a route may set: beyond it, a stuck upstream holds a connection for
/// good.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// One protected host and prefix.
#[derive(Debug, Clone)]
pub struct Route {
    /// What the failed-attempt limit counts under: the route's host and prefix, so a reload
    /// that adds, removes or reorders other routes leaves this one's counts where they were.
    pub limit_key: u64,
    /// The host and prefix, as logs and metrics name the route.
    pub label: Arc<str>,
    /// Lower case, without a port or trailing dot; `None` matches every host.
    pub host: Option<String>,
    /// The prefix in canonical form.
    pub prefix: CanonicalPath,
    /// `scheme://host[:port]` of the upstream, without a path.
    pub upstream_origin: String,
    /// The upstream's base path in canonical form (`/` when none was given).
    pub upstream_base: CanonicalPath,
    /// An organization's slug or id.
    pub organization: String,
    /// The same, when it is an id.
    pub organization_id: Option<uuid::Uuid>,
    pub environment: String,
    pub auth_server: String,
    pub limits: Limits,
    /// Which of a worker's upstream clients its requests go through (the route's connect
    /// timeout, HTTP/1.1 or HTTP/2).
    pub client: ClientKind,
    /// Whether a request to switch protocols is passed on. A tunnel carries whatever bytes the
    /// client sends, unchecked, to the upstream (requests for any of its paths among them), so
    /// a route can refuse them.
    pub upgrades: bool,
}

impl Route {
    /// Whether the route takes a request for `host` (lower case, no port) and `path`.
    pub fn matches(&self, host: Option<&str>, path: &CanonicalPath) -> bool {
        let host_ok = match &self.host {
            None => true,
            Some(want) => host == Some(want.as_str()),
        };
        host_ok && path.starts_with(&self.prefix)
    }

    /// The absolute URL the upstream is sent for `path` (already matched to this route): the
    /// upstream's base path, then the whole request path (prefix kept), then the query as
    /// received.
    pub fn upstream_url(&self, path: &CanonicalPath, query: &str) -> String {
        // One allocation of the exact size: it becomes the upstream URI without a copy.
        let mut url = String::with_capacity(
            self.upstream_origin.len()
                + self.upstream_base.as_str().len()
                + path.as_str().len()
                + 1
                + query.len(),
        );
        url.push_str(&self.upstream_origin);
        path.push_under(&self.upstream_base, &mut url);
        if !query.is_empty() {
            url.push('?');
            url.push_str(query);
        }
        url
    }

    /// How the route is named in logs and metrics: its host and prefix.
    pub fn label(&self) -> &str {
        &self.label
    }
}

/// A request host as routes compare it: lower case, no port, no trailing dot. Borrowed when the
/// host is already in that form (every request computes one).
pub fn host_key(host: &str) -> Option<Cow<'_, str>> {
    let host = host.trim();
    let without_port: Cow<'_, str> = match host.strip_prefix('[') {
        // An IPv6 literal keeps its brackets.
        Some(rest) => Cow::Owned(format!("[{}]", rest.split(']').next()?)),
        None => Cow::Borrowed(host.rsplit_once(':').map_or(host, |(h, _)| h)),
    };
    let trimmed = without_port.trim_end_matches('.');
    if trimmed.is_empty() {
        return None;
    }
    if trimmed.bytes().any(|b| b.is_ascii_uppercase()) || trimmed.len() != without_port.len() {
        return Some(Cow::Owned(trimmed.to_ascii_lowercase()));
    }
    Some(without_port)
}

/// Every route, most specific first: routes with a host before those without, then the longest
/// prefix (in segments), then the order of the file.
#[derive(Debug, Clone, Default)]
pub struct Routes {
    routes: Vec<Route>,
    /// The TLS listener's certificates, as the file names them (paths not yet resolved).
    pub certificates: Vec<CertificateSpec>,
}

impl Routes {
    pub fn parse(text: &str) -> Result<Routes, RoutesError> {
        let mut file: RoutesFile =
            toml::from_str(text).map_err(|e| RoutesError::Parse(e.message().to_owned()))?;
        let mut routes = Vec::with_capacity(file.route.len());
        for (index, r) in std::mem::take(&mut file.route).into_iter().enumerate() {
            routes.push(route(index, r)?);
        }
        // Stable: among equally specific routes the first in the file wins.
        routes.sort_by_key(|r| {
            (
                std::cmp::Reverse(r.host.is_some()),
                std::cmp::Reverse(r.prefix.segment_count()),
            )
        });
        let certificates = file
            .certificate
            .into_iter()
            .enumerate()
            .map(|(index, c)| certificate(index, c))
            .collect::<Result<_, _>>()?;
        Ok(Routes {
            routes,
            certificates,
        })
    }

    /// The most specific route for `host` and `path`.
    pub fn find(&self, host: Option<&str>, path: &CanonicalPath) -> Option<&Route> {
        self.routes.iter().find(|r| r.matches(host, path))
    }

    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.routes.iter()
    }
}

fn route(index: usize, r: RouteConfig) -> Result<Route, RoutesError> {
    let invalid = |reason: &str| RoutesError::Invalid {
        index,
        reason: reason.to_owned(),
    };
    // The prefix must already be canonical: a prefix the gateway would rewrite is a prefix
    // the operator did not mean.
    let prefix =
        path::normalize(&r.path_prefix).map_err(|e| invalid(&format!("path_prefix: {e}")))?;
    let written = r.path_prefix.trim_end_matches('/');
    let canonical = prefix.to_string();
    if written != canonical.trim_end_matches('/') {
        return Err(invalid(&format!(
            "path_prefix must be a normalised path (it reads as {canonical})"
        )));
    }
    if crate::signout::is_reserved(&prefix) {
        return Err(invalid(
            "path_prefix may not be under /.gateway: the gateway answers that prefix itself",
        ));
    }
    let upstream = url::Url::parse(&r.upstream)
        .map_err(|_| invalid("upstream must be an absolute http(s) URL"))?;
    if !matches!(upstream.scheme(), "http" | "https") || upstream.host().is_none() {
        return Err(invalid("upstream must be an absolute http(s) URL"));
    }
    if upstream.query().is_some()
        || upstream.fragment().is_some()
        || !upstream.username().is_empty()
        || upstream.password().is_some()
    {
        return Err(invalid("upstream takes no query, fragment or credentials"));
    }
    let upstream_base =
        path::normalize(upstream.path()).map_err(|e| invalid(&format!("upstream path: {e}")))?;
    let origin = upstream.origin().ascii_serialization();
    for (field, value) in [
        ("organization", &r.organization),
        ("environment", &r.environment),
        ("auth_server", &r.auth_server),
    ] {
        if value.trim().is_empty() {
            return Err(invalid(&format!("{field} must not be empty")));
        }
    }
    let host = match &r.host {
        None => None,
        Some(h) => {
            let key = host_key(h)
                .ok_or_else(|| invalid("host must not be empty"))?
                .into_owned();
            if h.contains(':') && !h.starts_with('[') || h.contains('/') {
                return Err(invalid("host is a host name without a port or path"));
            }
            Some(key)
        }
    };
    let limits = limits(
        &r.timeouts,
        r.max_request_body_bytes,
        r.max_request_header_bytes,
    )
    .map_err(|e| invalid(&e))?;
    let client = ClientKind {
        connect: limits.connect,
        http2: r.upstream_http2,
    };
    let label = match &host {
        Some(h) => format!("{h}{prefix}"),
        None => prefix.to_string(),
    };
    Ok(Route {
        limit_key: limit_key(host.as_deref(), &prefix),
        label: label.into(),
        host,
        prefix,
        limits,
        client,
        upgrades: r.upgrades.unwrap_or(true),
        upstream_origin: origin,
        upstream_base,
        organization_id: uuid::Uuid::parse_str(r.organization.trim()).ok(),
        organization: r.organization,
        environment: r.environment,
        auth_server: r.auth_server,
    })
}

fn certificate(index: usize, c: CertificateConfig) -> Result<CertificateSpec, RoutesError> {
    let invalid = |reason: &str| RoutesError::Certificate {
        index,
        reason: reason.to_owned(),
    };
    if c.hosts.is_empty() && !c.default {
        return Err(invalid("names no hosts and is not the default"));
    }
    let mut hosts = Vec::with_capacity(c.hosts.len());
    for h in &c.hosts {
        if h.contains(':') || h.contains('/') {
            return Err(invalid("hosts are host names without a port or path"));
        }
        hosts.push(
            host_key(h)
                .ok_or_else(|| invalid("a host is empty"))?
                .into_owned(),
        );
    }
    if c.cert.trim().is_empty() || c.key.trim().is_empty() {
        return Err(invalid("cert and key are the paths of PEM files"));
    }
    Ok(CertificateSpec {
        hosts,
        default: c.default,
        cert: c.cert.into(),
        key: c.key.into(),
    })
}

/// The failed-attempt limit's key of the route for `host` and `prefix` (stable within the
/// process, which is as long as the counts live).
fn limit_key(host: Option<&str>, prefix: &CanonicalPath) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    host.hash(&mut hasher);
    prefix.to_string().hash(&mut hasher);
    hasher.finish()
}

/// A route's limits: what it set, the defaults for the rest.
fn limits(
    t: &TimeoutsConfig,
    max_request_body: Option<u64>,
    max_request_headers: Option<u64>,
) -> Result<Limits, String> {
    let default = Limits::default();
    let timeout = |name: &str, ms: Option<u64>, default: Duration| match ms {
        None => Ok(default),
        Some(0) => Err(format!("timeouts.{name} must be at least 1")),
        Some(ms) if Duration::from_millis(ms) > MAX_TIMEOUT => Err(format!(
            "timeouts.{name} must be at most {} (a day)",
            MAX_TIMEOUT.as_millis()
        )),
        Some(ms) => Ok(Duration::from_millis(ms)),
    };
    if max_request_body == Some(0) {
        return Err("max_request_body_bytes must be at least 1".into());
    }
    let max_request_headers = match max_request_headers {
        None => default.max_request_headers,
        Some(n) if (1024..=MAX_REQUEST_HEADERS).contains(&n) => n,
        Some(_) => {
            return Err(format!(
                "max_request_header_bytes must be from 1024 to {MAX_REQUEST_HEADERS}"
            ));
        }
    };
    Ok(Limits {
        connect: timeout("connect_ms", t.connect_ms, default.connect)?,
        first_byte: timeout("first_byte_ms", t.first_byte_ms, default.first_byte)?,
        idle: timeout("idle_ms", t.idle_ms, default.idle)?,
        max_request_body,
        max_request_headers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[route]]
path_prefix = "/app"
upstream = "http://127.0.0.1:9000"
organization = "acme"
environment = "production"
auth_server = "a"

[[route]]
path_prefix = "/app/admin/"
upstream = "http://127.0.0.1:9001/base/"
organization = "acme"
environment = "production"
auth_server = "b"

[[route]]
host = "Tenant.Example.com"
path_prefix = "/"
upstream = "http://127.0.0.1:9002"
organization = "globex"
environment = "production"
auth_server = "c"
"#;

    fn routes() -> Routes {
        Routes::parse(FILE).unwrap_or_else(|e| panic!("{e}"))
    }

    fn server(routes: &Routes, host: Option<&str>, path: &str) -> Option<String> {
        let path = path::normalize(path).ok()?;
        routes.find(host, &path).map(|r| r.auth_server.clone())
    }

    #[test]
    fn whole_segment_most_specific_route_wins() {
        let r = routes();
        for (path, want) in [
            ("/app", Some("a")),
            ("/app/x", Some("a")),
            ("/apple", None),
            ("/app/admin", Some("b")),
            ("/app/admin/users", Some("b")),
            ("/app/administrator", Some("a")),
            ("/other", None),
        ] {
            assert_eq!(
                server(&r, Some("gw.example.com"), path).as_deref(),
                want,
                "{path}"
            );
        }
    }

    #[test]
    fn a_host_route_wins_for_its_host_only() {
        let r = routes();
        assert_eq!(
            server(&r, Some("tenant.example.com"), "/app").as_deref(),
            Some("c")
        );
        assert_eq!(
            server(&r, Some("tenant.example.com"), "/x").as_deref(),
            Some("c")
        );
        assert_eq!(server(&r, Some("other.example.com"), "/x"), None);
        assert_eq!(server(&r, None, "/app").as_deref(), Some("a"));
    }

    #[test]
    fn host_keys_drop_ports_case_and_the_trailing_dot() {
        assert_eq!(
            host_key("Tenant.Example.COM:8443").as_deref(),
            Some("tenant.example.com")
        );
        assert_eq!(
            host_key("tenant.example.com.").as_deref(),
            Some("tenant.example.com")
        );
        assert_eq!(host_key("[::1]:80").as_deref(), Some("[::1]"));
        assert_eq!(host_key(""), None);
    }

    #[test]
    fn the_upstream_url_is_base_then_the_whole_path_then_the_query() {
        let r = routes();
        let path = path::normalize("/app/admin/%2e%2e/admin/u%41")
            .unwrap_or_else(|_| path::CanonicalPath::root());
        let route = r.find(None, &path).map(|r| r.upstream_url(&path, "q=1"));
        assert_eq!(
            route.as_deref(),
            Some("http://127.0.0.1:9001/base/app/admin/uA?q=1")
        );
    }

    #[test]
    fn a_routes_limit_key_survives_other_routes_coming_and_going() {
        let key = |routes: &Routes, name: &str| {
            routes
                .iter()
                .find(|r| r.auth_server == name)
                .map(|r| r.limit_key)
        };
        let before = routes();
        let first = "[[route]]\npath_prefix = \"/new\"\nupstream = \"http://127.0.0.1:9\"\n\
                     organization = \"acme\"\nenvironment = \"production\"\nauth_server = \"n\"\n\n";
        let after = Routes::parse(&format!("{first}{FILE}")).unwrap_or_else(|e| panic!("{e}"));
        for name in ["a", "b", "c"] {
            assert_eq!(key(&before, name), key(&after, name), "{name}");
        }
        assert_ne!(key(&after, "a"), key(&after, "b"));
        assert_ne!(key(&after, "n"), key(&after, "a"));
    }

    #[test]
    fn limits_default_and_are_set_per_route() {
        let r = Routes::parse(&format!(
            "{FILE}\ntimeouts = {{ connect_ms = 250, idle_ms = 1500 }}\nmax_request_body_bytes = 1024\n\
             max_request_header_bytes = 4096"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        let of = |name: &str| {
            r.iter()
                .find(|route| route.auth_server == name)
                .map(|route| route.limits)
        };
        // The settings follow the last [[route]] of the file: route c.
        assert_eq!(
            of("c"),
            Some(Limits {
                connect: Duration::from_millis(250),
                first_byte: Duration::from_secs(60),
                idle: Duration::from_millis(1500),
                max_request_body: Some(1024),
                max_request_headers: 4096,
            })
        );
        assert_eq!(of("a"), Some(Limits::default()));
    }

    #[test]
    fn upgrades_are_taken_unless_a_route_says_not() {
        let r =
            Routes::parse(&format!("{FILE}\nupgrades = false")).unwrap_or_else(|e| panic!("{e}"));
        let upgrades: Vec<(&str, bool)> = r
            .iter()
            .map(|route| (route.auth_server.as_str(), route.upgrades))
            .collect();
        assert_eq!(upgrades, vec![("c", false), ("b", true), ("a", true)]);
        assert!(Routes::parse(&format!("{FILE}\nupgrades = \"no\"")).is_err());
    }

    #[test]
    fn certificates_name_their_hosts_or_are_the_default() {
        let r = Routes::parse(&format!(
            "{FILE}\n[[certificate]]\nhosts = [\"Tenant.Example.com\"]\ncert = \"t.crt\"\nkey = \"t.key\"\n\n\
             [[certificate]]\ndefault = true\ncert = \"/etc/gw/d.crt\"\nkey = \"/etc/gw/d.key\"\n"
        ))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r.certificates,
            vec![
                CertificateSpec {
                    hosts: vec!["tenant.example.com".into()],
                    default: false,
                    cert: "t.crt".into(),
                    key: "t.key".into(),
                },
                CertificateSpec {
                    hosts: vec![],
                    default: true,
                    cert: "/etc/gw/d.crt".into(),
                    key: "/etc/gw/d.key".into(),
                },
            ]
        );
        for bad in [
            "[[certificate]]\ncert = \"a\"\nkey = \"b\"\n",
            "[[certificate]]\nhosts = [\"a.example:443\"]\ncert = \"a\"\nkey = \"b\"\n",
            "[[certificate]]\ndefault = true\ncert = \"\"\nkey = \"b\"\n",
            "[[certificate]]\ndefault = true\ncert = \"a\"\n",
        ] {
            assert!(Routes::parse(&format!("{FILE}\n{bad}")).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_routes_are_refused() {
        for bad in [
            FILE.replace("\"/app\"", "\"app\""),
            FILE.replace("http://127.0.0.1:9000", "ftp://h"),
            FILE.replace("http://127.0.0.1:9000", "http://u:p@h"),
            FILE.replace("\"/app\"", "\"/app/../x\""),
            FILE.replace("\"/app\"", "\"/a%2fpp\""),
            FILE.replace("\"/app\"", "\"/%61pp\""),
            FILE.replace("\"/app\"", "\"/.gateway\""),
            FILE.replace("\"/app\"", "\"/.gateway/app\""),
            FILE.replace("Tenant.Example.com", "tenant.example.com:8443"),
            format!("{FILE}\nextra = 1"),
            format!("{FILE}\ntimeouts = {{ first_byte_ms = 0 }}"),
            format!("{FILE}\ntimeouts = {{ idle_ms = 86400001 }}"),
            format!("{FILE}\ntimeouts = {{ read_ms = 10 }}"),
            format!("{FILE}\nmax_request_body_bytes = 0"),
            format!("{FILE}\nmax_request_body_bytes = -1"),
            format!("{FILE}\nmax_request_header_bytes = 1023"),
            format!("{FILE}\nmax_request_header_bytes = 65537"),
        ] {
            assert!(Routes::parse(&bad).is_err(), "{bad}");
        }
    }
}
