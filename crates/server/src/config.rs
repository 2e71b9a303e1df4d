//! Settings from the environment. Each problem names the setting; outside
//! development mode a missing required setting stops the server at once.

use std::collections::HashMap;
use std::time::Duration;

/// Reads settings by name (the environment, or a map in tests).
pub struct Source(HashMap<String, String>);

impl Source {
    pub fn from_env() -> Self {
        Source(std::env::vars().collect())
    }

    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Source(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        )
    }

    /// A set, non-empty value.
    pub fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).filter(|v| !v.trim().is_empty()).cloned()
    }

    /// The raw value, even when empty (for settings where empty means "disabled").
    pub fn raw(&self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("{0} is required (set it in the environment; `server --dev` runs without it)")]
    Missing(&'static str),
    #[error("{name}: {message}")]
    Invalid { name: &'static str, message: String },
}

fn parse<T: std::str::FromStr>(
    src: &Source,
    name: &'static str,
    default: T,
    what: &str,
) -> Result<T, ConfigError> {
    match src.get(name) {
        None => Ok(default),
        Some(v) => v.trim().parse().map_err(|_| ConfigError::Invalid {
            name,
            message: format!("must be {what}"),
        }),
    }
}

fn boolean(src: &Source, name: &'static str) -> Result<bool, ConfigError> {
    boolean_or(src, name, false)
}

fn boolean_or(src: &Source, name: &'static str, default: bool) -> Result<bool, ConfigError> {
    match src.get(name).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(default),
        Some(v) if ["1", "true", "yes", "on"].contains(&v.as_str()) => Ok(true),
        Some(v) if ["0", "false", "no", "off"].contains(&v.as_str()) => Ok(false),
        Some(_) => Err(ConfigError::Invalid {
            name,
            message: "must be true or false".into(),
        }),
    }
}

/// Where identities come from.
#[derive(Debug, Clone)]
pub enum Identity {
    Platform {
        url: String,
        service_token: String,
    },
    /// The embedded development platform (only with `--dev`).
    Development,
}

#[derive(Debug, Clone)]
pub enum SecretsKey {
    /// `SECRETS_KEY`, and `SECRETS_KEY_PREVIOUS` (empty when unset).
    Given { current: String, previous: String },
    /// Generated for this run (only with `--dev`).
    Generated,
}

#[derive(Debug)]
pub struct Config {
    pub dev: bool,
    pub database_url: String,
    /// `LISTEN_DATABASE_URL`: the change feed's LISTEN connection and the migrations at start,
    /// which need one server session of their own (directly to PostgreSQL when `DATABASE_URL`
    /// goes through a transaction pooler); by default `DATABASE_URL`.
    pub listen_database_url: String,
    /// `DATABASE_STATEMENT_CACHE`: whether pooled connections keep their statements prepared
    /// (off behind a pooler that does not keep them across transactions).
    pub database_statement_cache: bool,
    pub bind_addr: String,
    pub identity: Identity,
    pub secrets_key: SecretsKey,
    pub catalog_file: Option<String>,
    pub public_hostname_suffix: String,
    pub annotation_domain: String,
    pub token_cache_ttl: Duration,
    /// `TOKEN_REFUSAL_CACHE_TTL_S`: how long a token the platform refused is refused without
    /// asking again (capped by `token_cache_ttl`).
    pub refusal_cache_ttl: Duration,
    pub org_cache_ttl: Duration,
    pub platform_timeout: Duration,
    pub kubeconfig_requires_super_admin: bool,
    /// `KUBECONFIG_EXPIRY_DEFAULT_SECONDS`: the lifetime of a download's own credential when
    /// the download asks for none (unset: such a download gets the standing credential).
    pub kubeconfig_expiry_default_seconds: Option<u32>,
    /// `KUBECONFIG_EXPIRY_MAX_SECONDS`: the longest lifetime a download may ask for.
    pub kubeconfig_expiry_max_seconds: u32,
    pub database_pool_size: u32,
    /// Clusters the watch cache may hold (0: no cache, every read goes to the database).
    pub cluster_cache_size: usize,
    /// `CLUSTER_CACHE_PREFILL`: whether the watch cache reads every live cluster in the
    /// background once the change feed listens (and after each reconnect), up to its size.
    pub cluster_cache_prefill: bool,
    pub reconciler_workers: usize,
    /// How often an idle provisioning worker looks at the queue.
    pub reconciler_poll: Duration,
    /// `SHUTDOWN_DELAY_SECONDS`: after SIGTERM, how long the process keeps serving with
    /// `/readyz` failing, so load balancers stop sending before it stops accepting.
    pub shutdown_delay: Duration,
    /// `DRAIN_TIMEOUT_SECONDS`: how long requests in flight get to finish once it stops
    /// accepting.
    pub drain_timeout: Duration,
    /// The simulated cloud's settings (provisioning speed, capacity, address pools, faults).
    pub sim: provisioner_sim::SimConfig,
    /// Requests and writes per token per minute, unauthenticated requests per address, and
    /// the processes sharing them.
    pub rate_limits: api::ratelimit::Limits,
    /// `TRUSTED_PROXIES`: the proxies whose `X-Forwarded-For` names the client address.
    pub trusted_proxies: forwarded::TrustedProxies,
    /// Writes per organization per minute (0: unlimited).
    pub writes_per_organization: u32,
    /// `APPROVAL_TTL_MINUTES`: how long an approval waits for its person.
    pub approval_ttl_minutes: u32,
    /// `PUBLIC_URL`: the server's public address, for the URLs `/mcp` gives out (approval
    /// pages, its metadata document); unset, each request's own `Host`.
    pub public_url: Option<String>,
    /// `AUTHORIZATION_SERVER_URL`: the OAuth authorization server an MCP client signs its
    /// person in with (the account platform's issuer), named in `/mcp`'s metadata document;
    /// by default `ACCOUNT_PLATFORM_URL`.
    pub authorization_server_url: Option<String>,
    /// Days an audit event, and a finished operation, is kept (`AUDIT_RETENTION_DAYS`; 0 keeps
    /// them forever).
    pub audit_retention_days: u32,
    /// Days a kubeconfig credential is kept once it expired or was revoked
    /// (`KUBECONFIG_CREDENTIAL_GRACE_DAYS`; 0 keeps them forever).
    pub credential_grace_days: u32,
}

/// Days an expired or revoked kubeconfig credential is kept: long enough that a refused
/// download still reads as "expired" or "revoked" (and shows in the list) for a month.
pub const CREDENTIAL_GRACE_DAYS_DEFAULT: u32 = 30;

impl Config {
    pub fn load(src: &Source, dev: bool) -> Result<Config, ConfigError> {
        let required = |name: &'static str| src.get(name).ok_or(ConfigError::Missing(name));
        let database_url = match (src.get("DATABASE_URL"), dev) {
            (Some(u), _) => u,
            (None, true) => "postgres://postgres@127.0.0.1:5432/kubesvc_dev".to_owned(),
            (None, false) => return Err(ConfigError::Missing("DATABASE_URL")),
        };
        let listen_database_url = src
            .get("LISTEN_DATABASE_URL")
            .unwrap_or_else(|| database_url.clone());
        let identity = match (src.get("ACCOUNT_PLATFORM_URL"), dev) {
            (Some(url), _) => Identity::Platform {
                url,
                service_token: required("ACCOUNT_PLATFORM_SERVICE_TOKEN")?,
            },
            (None, true) => Identity::Development,
            (None, false) => return Err(ConfigError::Missing("ACCOUNT_PLATFORM_URL")),
        };
        if !dev {
            required("ACCOUNT_PLATFORM_SERVICE_TOKEN")?;
        }
        let secrets_key = match (src.get("SECRETS_KEY"), dev) {
            (Some(current), _) => SecretsKey::Given {
                current,
                previous: src.get("SECRETS_KEY_PREVIOUS").unwrap_or_default(),
            },
            (None, true) => SecretsKey::Generated,
            (None, false) => return Err(ConfigError::Missing("SECRETS_KEY")),
        };
        let authorization_server_url = match absolute_url(src, "AUTHORIZATION_SERVER_URL")? {
            Some(url) => Some(url),
            None => match &identity {
                Identity::Platform { url, .. } => Some(url.trim_end_matches('/').to_owned()),
                Identity::Development => None,
            },
        };
        Ok(Config {
            dev,
            database_url,
            listen_database_url,
            database_statement_cache: boolean_or(src, "DATABASE_STATEMENT_CACHE", true)?,
            bind_addr: src
                .get("BIND_ADDR")
                .unwrap_or_else(|| "127.0.0.1:8080".into()),
            identity,
            secrets_key,
            catalog_file: src.get("CATALOG_FILE"),
            // Normalized as the provider normalizes it (lowercase, one leading dot).
            public_hostname_suffix: provisioner_sim::config::parse_hostname_suffix(
                &src.get("PUBLIC_HOSTNAME_SUFFIX")
                    .unwrap_or_else(|| ".k8s.example.com".into()),
            )
            .map_err(|e| ConfigError::Invalid {
                name: "PUBLIC_HOSTNAME_SUFFIX",
                message: e.to_string(),
            })?,
            annotation_domain: src
                .get("ANNOTATION_DOMAIN")
                .unwrap_or_else(|| "k8s.example.com".into()),
            token_cache_ttl: Duration::from_secs(parse(
                src,
                "TOKEN_CACHE_TTL_S",
                10u64,
                "a whole number of seconds",
            )?),
            refusal_cache_ttl: Duration::from_secs(parse(
                src,
                "TOKEN_REFUSAL_CACHE_TTL_S",
                5u64,
                "a whole number of seconds",
            )?),
            org_cache_ttl: Duration::from_secs(parse(
                src,
                "ORG_CACHE_TTL_S",
                60u64,
                "a whole number of seconds",
            )?),
            platform_timeout: Duration::from_millis(parse(
                src,
                "ACCOUNT_PLATFORM_TIMEOUT_MS",
                5000u64,
                "a whole number of milliseconds",
            )?),
            kubeconfig_requires_super_admin: boolean(src, "KUBECONFIG_REQUIRES_SUPER_ADMIN")?,
            kubeconfig_expiry_default_seconds: match parse(
                src,
                "KUBECONFIG_EXPIRY_DEFAULT_SECONDS",
                0u32,
                "a whole number of seconds (0 or unset: the standing credential)",
            )? {
                0 => None,
                s => Some(s),
            },
            kubeconfig_expiry_max_seconds: parse(
                src,
                "KUBECONFIG_EXPIRY_MAX_SECONDS",
                domain::service::KUBECONFIG_EXPIRY_MAX_SECONDS_DEFAULT,
                "a whole number of seconds",
            )?,
            database_pool_size: parse(src, "DATABASE_POOL_SIZE", 16u32, "a positive whole number")?
                .max(1),
            cluster_cache_size: parse(
                src,
                "CLUSTER_CACHE_SIZE",
                50_000usize,
                "a whole number (0 switches the cache off)",
            )?,
            cluster_cache_prefill: boolean_or(src, "CLUSTER_CACHE_PREFILL", true)?,
            reconciler_workers: parse(
                src,
                "RECONCILER_WORKERS",
                2usize,
                "a whole number (0 switches provisioning off)",
            )?,
            shutdown_delay: Duration::from_secs(parse(
                src,
                "SHUTDOWN_DELAY_SECONDS",
                5u64,
                "a whole number of seconds",
            )?),
            drain_timeout: Duration::from_secs(
                parse(
                    src,
                    "DRAIN_TIMEOUT_SECONDS",
                    10u64,
                    "a whole number of seconds",
                )?
                .max(1),
            ),
            reconciler_poll: Duration::from_millis(
                parse(
                    src,
                    "RECONCILER_POLL_MS",
                    200u64,
                    "a whole number of milliseconds",
                )?
                .max(10),
            ),
            rate_limits: api::ratelimit::Limits {
                per_token: parse(
                    src,
                    "RATE_LIMIT_PER_TOKEN",
                    600u32,
                    "a whole number of requests per minute (0 switches the limit off)",
                )?,
                writes_per_token: parse(
                    src,
                    "RATE_LIMIT_WRITES_PER_TOKEN",
                    120u32,
                    "a whole number of writes per minute (0 switches the limit off)",
                )?,
                unauthenticated_per_address: parse(
                    src,
                    "RATE_LIMIT_UNAUTHENTICATED_PER_ADDRESS",
                    120u32,
                    "a whole number of requests per minute (0 switches the limit off)",
                )?,
                replicas: parse(
                    src,
                    "RATE_LIMIT_REPLICAS",
                    1u32,
                    "the number of server processes sharing the limits",
                )?
                .max(1),
            },
            trusted_proxies: forwarded::TrustedProxies::parse(
                &src.get("TRUSTED_PROXIES").unwrap_or_default(),
            )
            .map_err(|message| ConfigError::Invalid {
                name: "TRUSTED_PROXIES",
                message,
            })?,
            writes_per_organization: parse(
                src,
                "RATE_LIMIT_WRITES_PER_ORGANIZATION",
                300u32,
                "a whole number of writes per minute (0 switches the limit off)",
            )?,
            approval_ttl_minutes: parse(
                src,
                "APPROVAL_TTL_MINUTES",
                domain::model::approval::DEFAULT_TTL_MINUTES as u32,
                "a whole number of minutes",
            )?
            .max(1),
            public_url: absolute_url(src, "PUBLIC_URL")?,
            authorization_server_url,
            audit_retention_days: parse(
                src,
                "AUDIT_RETENTION_DAYS",
                domain::model::audit::RETENTION_DAYS_DEFAULT,
                "a whole number of days (0 keeps audit events forever)",
            )?,
            credential_grace_days: parse(
                src,
                "KUBECONFIG_CREDENTIAL_GRACE_DAYS",
                CREDENTIAL_GRACE_DAYS_DEFAULT,
                "a whole number of days (0 keeps ended credentials forever)",
            )?,
            sim: provisioner_sim::SimConfig::from_settings(|name| src.raw(name)).map_err(|e| {
                ConfigError::Invalid {
                    name: "provisioner",
                    message: e.to_string(),
                }
            })?,
        })
    }
}

/// An optional `http(s)://` URL setting, without its trailing slash.
fn absolute_url(src: &Source, name: &'static str) -> Result<Option<String>, ConfigError> {
    match src.get(name) {
        None => Ok(None),
        Some(v) => {
            let v = v.trim().trim_end_matches('/').to_owned();
            let ok = (v.starts_with("http://") || v.starts_with("https://"))
                && v.split("://").nth(1).is_some_and(|rest| !rest.is_empty())
                && !v.contains(|c: char| c.is_whitespace() || c.is_control());
            if ok {
                Ok(Some(v))
            } else {
                Err(ConfigError::Invalid {
                    name,
                    message: "must be an http:// or https:// URL".into(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_dev_mode_a_missing_setting_is_named() {
        let e = Config::load(&Source::from_pairs(&[]), false).err();
        assert_eq!(e, Some(ConfigError::Missing("DATABASE_URL")));
        let e = Config::load(
            &Source::from_pairs(&[("DATABASE_URL", "postgres://x")]),
            false,
        )
        .err();
        assert_eq!(e, Some(ConfigError::Missing("ACCOUNT_PLATFORM_URL")));
        let e = Config::load(
            &Source::from_pairs(&[
                ("DATABASE_URL", "postgres://x"),
                ("ACCOUNT_PLATFORM_URL", "http://p"),
            ]),
            false,
        )
        .err();
        assert_eq!(
            e,
            Some(ConfigError::Missing("ACCOUNT_PLATFORM_SERVICE_TOKEN"))
        );
        let e = Config::load(
            &Source::from_pairs(&[
                ("DATABASE_URL", "postgres://x"),
                ("ACCOUNT_PLATFORM_URL", "http://p"),
                ("ACCOUNT_PLATFORM_SERVICE_TOKEN", "t"),
            ]),
            false,
        )
        .err();
        assert_eq!(e, Some(ConfigError::Missing("SECRETS_KEY")));
    }

    #[test]
    fn dev_mode_falls_back_to_the_development_platform_only_when_no_platform_is_set() {
        let c = Config::load(&Source::from_pairs(&[]), true).ok();
        assert!(matches!(c.map(|c| c.identity), Some(Identity::Development)));
        let c = Config::load(
            &Source::from_pairs(&[
                ("ACCOUNT_PLATFORM_URL", "http://p"),
                ("ACCOUNT_PLATFORM_SERVICE_TOKEN", "t"),
            ]),
            true,
        )
        .ok();
        assert!(matches!(
            c.map(|c| c.identity),
            Some(Identity::Platform { .. })
        ));
    }

    #[test]
    fn the_listen_url_defaults_to_the_database_url_and_the_statement_cache_is_on() {
        let load = |pairs: &[(&str, &str)]| Config::load(&Source::from_pairs(pairs), true);
        let c = load(&[("DATABASE_URL", "postgres://pgbouncer:6432/k")]).ok();
        assert_eq!(
            c.map(|c| (c.listen_database_url, c.database_statement_cache)),
            Some(("postgres://pgbouncer:6432/k".into(), true))
        );
        let c = load(&[
            ("DATABASE_URL", "postgres://pgbouncer:6432/k"),
            ("LISTEN_DATABASE_URL", "postgres://primary:5432/k"),
            ("DATABASE_STATEMENT_CACHE", "off"),
        ])
        .ok();
        assert_eq!(
            c.map(|c| (
                c.database_url,
                c.listen_database_url,
                c.database_statement_cache
            )),
            Some((
                "postgres://pgbouncer:6432/k".into(),
                "postgres://primary:5432/k".into(),
                false
            ))
        );
        // Unset and empty are the same: DATABASE_URL.
        let c = load(&[
            ("DATABASE_URL", "postgres://a/k"),
            ("LISTEN_DATABASE_URL", " "),
        ])
        .ok();
        assert_eq!(
            c.map(|c| c.listen_database_url).as_deref(),
            Some("postgres://a/k")
        );
        assert_eq!(
            load(&[("DATABASE_STATEMENT_CACHE", "sometimes")]).err(),
            Some(ConfigError::Invalid {
                name: "DATABASE_STATEMENT_CACHE",
                message: "must be true or false".into()
            })
        );
    }

    #[test]
    fn bad_numbers_name_their_setting() {
        let e = Config::load(&Source::from_pairs(&[("TOKEN_CACHE_TTL_S", "ten")]), true).err();
        assert!(matches!(
            e,
            Some(ConfigError::Invalid {
                name: "TOKEN_CACHE_TTL_S",
                ..
            })
        ));
        let c = Config::load(&Source::from_pairs(&[("TOKEN_CACHE_TTL_S", "0")]), true).ok();
        assert_eq!(c.map(|c| c.token_cache_ttl), Some(Duration::ZERO));
    }

    #[test]
    fn the_assistants_addresses_are_urls_and_the_platform_is_its_authorization_server() {
        let load = |pairs: &[(&str, &str)]| Config::load(&Source::from_pairs(pairs), true);
        let c = load(&[]).ok();
        assert_eq!(
            c.map(|c| (c.public_url, c.authorization_server_url)),
            Some((None, None))
        );
        let c = load(&[
            ("ACCOUNT_PLATFORM_URL", "https://accounts.example.com/"),
            ("ACCOUNT_PLATFORM_SERVICE_TOKEN", "t"),
            ("PUBLIC_URL", "https://kubesvc.example.com/"),
        ])
        .ok();
        assert_eq!(
            c.map(|c| (c.public_url, c.authorization_server_url)),
            Some((
                Some("https://kubesvc.example.com".into()),
                Some("https://accounts.example.com".into())
            ))
        );
        let c = load(&[("AUTHORIZATION_SERVER_URL", "https://issuer.example.com")]).ok();
        assert_eq!(
            c.and_then(|c| c.authorization_server_url).as_deref(),
            Some("https://issuer.example.com")
        );
        for bad in ["kubesvc.example.com", "ftp://x", "https://", "https://a b"] {
            assert_eq!(
                load(&[("PUBLIC_URL", bad)]).err(),
                Some(ConfigError::Invalid {
                    name: "PUBLIC_URL",
                    message: "must be an http:// or https:// URL".into()
                }),
                "{bad}"
            );
        }
    }
}
