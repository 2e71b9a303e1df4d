//! The gateway's settings, read from the environment (CONTRACT §9).

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

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
    pub bind_addr: String,
    /// Base64 of 32 bytes; opens the OIDC client secrets and keys the session cookies.
    pub secrets_key: String,
    pub routes_file: PathBuf,
    /// The least time between two JWKS fetches caused by an unknown `kid`.
    pub jwks_min_refresh: Duration,
    /// How often the auth servers are read again from the database.
    pub reload_interval: Duration,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("bind_addr", &self.bind_addr)
            .field("routes_file", &self.routes_file)
            .field("jwks_min_refresh", &self.jwks_min_refresh)
            .field("reload_interval", &self.reload_interval)
            .finish_non_exhaustive()
    }
}

pub const DEFAULT_BIND_ADDR: &str = "127.0.0.1:8081";

impl Settings {
    pub fn from_env() -> Result<Settings, SettingsError> {
        Settings::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads the settings through `lookup`, so tests need not touch the process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, SettingsError> {
        let get = |name| lookup(name).filter(|v| !v.trim().is_empty());
        let required = |name: &'static str| get(name).ok_or(SettingsError::Missing(name));
        let database_url = required("DATABASE_URL")?;
        let secrets_key = required("SECRETS_KEY")?;
        secrets::Vault::from_base64_key(&secrets_key).map_err(|e| SettingsError::Invalid {
            name: "SECRETS_KEY",
            reason: e.to_string(),
        })?;
        let routes_file = PathBuf::from(required("GATEWAY_ROUTES_FILE")?);
        let bind_addr = get("GATEWAY_BIND_ADDR").unwrap_or_else(|| DEFAULT_BIND_ADDR.to_owned());
        let jwks_min_refresh = match get("GATEWAY_JWKS_MIN_REFRESH_S") {
            None => Duration::from_secs(60),
            Some(v) => Duration::from_secs(v.trim().parse::<u64>().map_err(|_| {
                SettingsError::Invalid {
                    name: "GATEWAY_JWKS_MIN_REFRESH_S",
                    reason: "must be a whole number of seconds".into(),
                }
            })?),
        };
        Ok(Settings {
            database_url,
            bind_addr,
            secrets_key,
            routes_file,
            jwks_min_refresh,
            reload_interval: Duration::from_secs(1),
        })
    }
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

    #[test]
    fn a_missing_setting_is_named() {
        let err = Settings::from_lookup(lookup(&[("DATABASE_URL", "postgres://x")]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("SECRETS_KEY"), "{err}");
        let err = Settings::from_lookup(lookup(&[("DATABASE_URL", "x"), ("SECRETS_KEY", KEY)]))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("GATEWAY_ROUTES_FILE"), "{err}");
    }

    #[test]
    fn defaults_apply() {
        let s = Settings::from_lookup(lookup(&[
            ("DATABASE_URL", "x"),
            ("SECRETS_KEY", KEY),
            ("GATEWAY_ROUTES_FILE", "routes.toml"),
        ]))
        .ok();
        let s = s.as_ref();
        assert_eq!(s.map(|s| s.bind_addr.as_str()), Some(DEFAULT_BIND_ADDR));
        assert_eq!(s.map(|s| s.jwks_min_refresh), Some(Duration::from_secs(60)));
        assert!(!format!("{s:?}").contains(KEY));
    }
}
