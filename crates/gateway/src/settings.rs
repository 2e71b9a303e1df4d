//! The gateway's settings, read from the environment. `docs/gateway.md` lists them all.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::forwarding::TrustedProxies;
use crate::outbound::NetworkPolicy;

/// Why the settings were refused; each names the setting and never repeats a secret value.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("{0} is not set; the gateway needs it")]
    Missing(&'static str),
    #[error("{name} is invalid: {reason}")]
    Invalid { name: &'static str, reason: String },
}

/// What the gateway runs with.
#[derive(Clone)]
pub struct Settings {
    pub database_url: String,
    /// `LISTEN_DATABASE_URL`: the LISTEN connection for auth server and sign-out changes, and
    /// the migrations at start, which need one server session of their own (directly to
    /// PostgreSQL when `DATABASE_URL` goes through a transaction pooler); by default
    /// `DATABASE_URL`.
    pub listen_database_url: String,
    /// `DATABASE_STATEMENT_CACHE`: whether pooled connections keep their statements prepared
    /// (off behind a pooler that does not keep them across transactions).
    pub database_statement_cache: bool,
    pub bind_addr: String,
    /// The TLS listener (certificates from the routes file); `None`: none.
    pub tls_bind_addr: Option<String>,
    /// Where `/metrics` is served, apart from the proxied traffic; `None`: nowhere.
    pub admin_bind_addr: Option<String>,
    /// Base64 of 32 bytes; opens the OIDC client secrets and keys the cookies.
    pub secrets_key: String,
    /// Earlier values of `SECRETS_KEY` (comma-separated; empty: none): they still open what
    /// they sealed and still verify the cookies made under them.
    pub secrets_key_previous: String,
    pub routes_file: PathBuf,
    /// How often the routes file is looked at for a change; `None`: only on `SIGHUP`.
    pub routes_check: Option<Duration>,
    /// The least time between two JWKS fetches caused by an unknown `kid`.
    pub jwks_min_refresh: Duration,
    /// How often the auth servers are read again from the database when no change was
    /// notified: the safety net for a notification that never arrived.
    pub reload_interval: Duration,
    /// Peers whose `X-Forwarded-*` headers are believed.
    pub trusted_proxies: TrustedProxies,
    /// The address classes an issuer (and its endpoints) may be at, when set; `None`: as the
    /// listeners decide ([`NetworkPolicy::by_default_for`]).
    pub issuer_networks: Option<NetworkPolicy>,
    /// Hosts besides an issuer's own its `jwks_uri` and `token_endpoint` may be on.
    pub oidc_endpoint_hosts: Vec<String>,
    /// How long a browser session lasts.
    pub session_ttl: Duration,
    /// Part of the session cookie key: a new value ends every session.
    pub session_epoch: String,
    /// Threads serving the proxied traffic, each with its own runtime.
    pub workers: usize,
    /// Client connections open at once, all listeners together; more are closed at accept.
    pub max_connections: usize,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("bind_addr", &self.bind_addr)
            .field("tls_bind_addr", &self.tls_bind_addr)
            .field("admin_bind_addr", &self.admin_bind_addr)
            .field("routes_file", &self.routes_file)
            .field("routes_check", &self.routes_check)
            .field("jwks_min_refresh", &self.jwks_min_refresh)
            .field("reload_interval", &self.reload_interval)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("issuer_networks", &self.issuer_networks)
            .field("oidc_endpoint_hosts", &self.oidc_endpoint_hosts)
            .field("session_ttl", &self.session_ttl)
            .field("workers", &self.workers)
            .field("max_connections", &self.max_connections)
            .field("database_statement_cache", &self.database_statement_cache)
            .finish_non_exhaustive()
    }
}

pub const DEFAULT_BIND_ADDR: &str = "127.0.0.1:8081";
const DEFAULT_SESSION_TTL_S: u64 = 8 * 3600;
/// nginx's `worker_connections` times ten workers: far above what one host serves, far below
/// what exhausts a process's file descriptors once raised for it.
const DEFAULT_MAX_CONNECTIONS: usize = 10_000;
/// Changes arrive by notification within milliseconds; the periodic read only catches one that
/// was lost, so it can be rare.
const DEFAULT_RELOAD_INTERVAL_S: u64 = 30;

fn seconds(name: &'static str, value: &str) -> Result<Duration, SettingsError> {
    value
        .trim()
        .parse::<u64>()
        .map(Duration::from_secs)
        .map_err(|_| SettingsError::Invalid {
            name,
            reason: "must be a whole number of seconds".into(),
        })
}

/// A setting of whole seconds that must be at least 1; `default` when unset.
fn positive_seconds(
    name: &'static str,
    value: Option<String>,
    default: u64,
) -> Result<Duration, SettingsError> {
    match value {
        None => Ok(Duration::from_secs(default)),
        Some(v) => match seconds(name, &v)? {
            d if d.is_zero() => Err(SettingsError::Invalid {
                name,
                reason: "must be at least 1".into(),
            }),
            d => Ok(d),
        },
    }
}

impl Settings {
    pub fn from_env() -> Result<Settings, SettingsError> {
        Settings::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `lookup`, so tests need not touch the process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, SettingsError> {
        let get = |name| lookup(name).filter(|v| !v.trim().is_empty());
        let required = |name: &'static str| get(name).ok_or(SettingsError::Missing(name));
        let invalid =
            |name: &'static str| move |reason: String| SettingsError::Invalid { name, reason };
        let database_url = required("DATABASE_URL")?;
        let listen_database_url =
            get("LISTEN_DATABASE_URL").unwrap_or_else(|| database_url.clone());
        let database_statement_cache = match get("DATABASE_STATEMENT_CACHE")
            .map(|v| v.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("1" | "true" | "yes" | "on") => true,
            Some("0" | "false" | "no" | "off") => false,
            Some(_) => {
                return Err(SettingsError::Invalid {
                    name: "DATABASE_STATEMENT_CACHE",
                    reason: "must be true or false".into(),
                });
            }
        };
        let secrets_key = required("SECRETS_KEY")?;
        let secrets_key_previous = get("SECRETS_KEY_PREVIOUS").unwrap_or_default();
        // The key errors name their setting and never repeat a value.
        secrets::Vault::from_keys(&secrets_key, &secrets_key_previous).map_err(|e| {
            SettingsError::Invalid {
                name: "SECRETS_KEY",
                reason: e.to_string(),
            }
        })?;
        let routes_file = PathBuf::from(required("GATEWAY_ROUTES_FILE")?);
        let bind_addr = get("GATEWAY_BIND_ADDR").unwrap_or_else(|| DEFAULT_BIND_ADDR.to_owned());
        let jwks_min_refresh = match get("GATEWAY_JWKS_MIN_REFRESH_S") {
            None => Duration::from_secs(60),
            Some(v) => seconds("GATEWAY_JWKS_MIN_REFRESH_S", &v)?,
        };
        let session_ttl = positive_seconds(
            "GATEWAY_SESSION_TTL_S",
            get("GATEWAY_SESSION_TTL_S"),
            DEFAULT_SESSION_TTL_S,
        )?;
        let workers = match get("GATEWAY_WORKERS") {
            None => std::thread::available_parallelism().map_or(1, usize::from),
            Some(v) => whole_number("GATEWAY_WORKERS", &v, 1..=1024)?,
        };
        let max_connections = match get("GATEWAY_MAX_CONNECTIONS") {
            None => DEFAULT_MAX_CONNECTIONS,
            Some(v) => whole_number("GATEWAY_MAX_CONNECTIONS", &v, 1..=1_000_000)?,
        };
        let routes_check = match get("GATEWAY_ROUTES_CHECK_S") {
            None => Some(Duration::from_secs(1)),
            Some(v) => Some(seconds("GATEWAY_ROUTES_CHECK_S", &v)?).filter(|d| !d.is_zero()),
        };
        let reload_interval = positive_seconds(
            "GATEWAY_RELOAD_INTERVAL_S",
            get("GATEWAY_RELOAD_INTERVAL_S"),
            DEFAULT_RELOAD_INTERVAL_S,
        )?;
        let trusted_proxies = match get("GATEWAY_TRUSTED_PROXIES") {
            None => TrustedProxies::default(),
            Some(v) => TrustedProxies::parse(&v).map_err(invalid("GATEWAY_TRUSTED_PROXIES"))?,
        };
        let issuer_networks = match get("GATEWAY_ALLOWED_ISSUER_NETWORKS") {
            None => None,
            Some(v) => {
                Some(NetworkPolicy::parse(&v).map_err(invalid("GATEWAY_ALLOWED_ISSUER_NETWORKS"))?)
            }
        };
        let oidc_endpoint_hosts = get("GATEWAY_OIDC_ENDPOINT_HOSTS")
            .map(|v| {
                v.split(',')
                    .map(|h| h.trim().to_ascii_lowercase())
                    .filter(|h| !h.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Ok(Settings {
            database_url,
            listen_database_url,
            database_statement_cache,
            bind_addr,
            tls_bind_addr: get("GATEWAY_TLS_BIND_ADDR"),
            admin_bind_addr: get("GATEWAY_ADMIN_BIND_ADDR"),
            secrets_key,
            secrets_key_previous,
            routes_file,
            routes_check,
            jwks_min_refresh,
            reload_interval,
            trusted_proxies,
            issuer_networks,
            oidc_endpoint_hosts,
            session_ttl,
            session_epoch: get("GATEWAY_SESSION_EPOCH").unwrap_or_default(),
            workers,
            max_connections,
        })
    }
}

/// A count setting within `range`.
fn whole_number(
    name: &'static str,
    value: &str,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize, SettingsError> {
    value
        .trim()
        .parse::<usize>()
        .ok()
        .filter(|n| range.contains(n))
        .ok_or_else(|| SettingsError::Invalid {
            name,
            reason: format!(
                "must be a whole number from {} to {}",
                range.start(),
                range.end()
            ),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    const KEY: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    const BASE: [(&str, &str); 3] = [
        ("DATABASE_URL", "x"),
        ("SECRETS_KEY", KEY),
        ("GATEWAY_ROUTES_FILE", "routes.toml"),
    ];

    fn error(pairs: &[(&str, &str)]) -> String {
        Settings::from_lookup(lookup(pairs))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn a_missing_setting_is_named() {
        assert!(error(&[("DATABASE_URL", "postgres://x")]).contains("SECRETS_KEY"));
        assert!(
            error(&[("DATABASE_URL", "x"), ("SECRETS_KEY", KEY)]).contains("GATEWAY_ROUTES_FILE")
        );
    }

    #[test]
    fn defaults_apply() {
        let s = Settings::from_lookup(lookup(&BASE)).ok();
        let s = s.as_ref();
        assert_eq!(s.map(|s| s.bind_addr.as_str()), Some(DEFAULT_BIND_ADDR));
        assert_eq!(s.map(|s| s.jwks_min_refresh), Some(Duration::from_secs(60)));
        assert_eq!(
            s.map(|s| s.session_ttl),
            Some(Duration::from_secs(8 * 3600))
        );
        assert_eq!(s.map(|s| s.trusted_proxies.is_empty()), Some(true));
        assert_eq!(s.map(|s| s.issuer_networks), Some(None));
        assert_eq!(s.map(|s| s.admin_bind_addr.is_none()), Some(true));
        assert_eq!(s.map(|s| s.reload_interval), Some(Duration::from_secs(30)));
        assert_eq!(
            s.map(|s| s.workers),
            std::thread::available_parallelism().ok().map(usize::from)
        );
        assert_eq!(s.map(|s| s.max_connections), Some(10_000));
        assert_eq!(
            s.map(|s| s.routes_check),
            Some(Some(Duration::from_secs(1)))
        );
        assert!(!format!("{s:?}").contains(KEY));
    }

    #[test]
    fn the_listen_url_defaults_to_the_database_url_and_the_statement_cache_is_on() {
        let s = Settings::from_lookup(lookup(&BASE)).ok();
        assert_eq!(
            s.map(|s| (s.listen_database_url, s.database_statement_cache)),
            Some(("x".to_owned(), true))
        );
        let mut pairs = BASE.to_vec();
        pairs.extend([
            (
                "LISTEN_DATABASE_URL",
                "postgres://kubesvc:hunter2@primary/k",
            ),
            ("DATABASE_STATEMENT_CACHE", "off"),
        ]);
        let s = Settings::from_lookup(lookup(&pairs)).ok();
        assert_eq!(
            s.as_ref()
                .map(|s| (s.listen_database_url.as_str(), s.database_statement_cache)),
            Some(("postgres://kubesvc:hunter2@primary/k", false))
        );
        assert!(!format!("{s:?}").contains("hunter2"), "no URL in Debug");
    }

    #[test]
    fn bad_values_are_refused_by_name() {
        for (name, value) in [
            ("GATEWAY_TRUSTED_PROXIES", "10.0.0.0/99"),
            ("GATEWAY_ALLOWED_ISSUER_NETWORKS", "anything"),
            ("GATEWAY_SESSION_TTL_S", "0"),
            ("GATEWAY_RELOAD_INTERVAL_S", "0"),
            ("GATEWAY_RELOAD_INTERVAL_S", "1.5"),
            ("GATEWAY_ROUTES_CHECK_S", "-1"),
            ("GATEWAY_WORKERS", "0"),
            ("GATEWAY_WORKERS", "many"),
            ("GATEWAY_MAX_CONNECTIONS", "0"),
            ("GATEWAY_MAX_CONNECTIONS", "lots"),
            ("GATEWAY_JWKS_MIN_REFRESH_S", "soon"),
            ("DATABASE_STATEMENT_CACHE", "sometimes"),
        ] {
            let mut pairs = BASE.to_vec();
            pairs.push((name, value));
            assert!(error(&pairs).contains(name), "{name}");
        }
    }
}
