//! The config file: named contexts (an endpoint, an organization, a token) and which one is
//! current, in `$XDG_CONFIG_HOME/kubesvc/config.toml` (mode 0600: it holds tokens).
//!
//! What a command uses is the context's values with the environment and flags on top
//! ([`Settings`]); the token itself is never printed back, only where it came from.

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::CliError;

/// The context `auth login` saves to when none is named and none is current.
pub const DEFAULT_CONTEXT: &str = "default";

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_context: Option<String>,
    #[serde(default)]
    pub contexts: BTreeMap<String, Context>,
}

#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub organization: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// Where the config file is: `KUBESVC_CONFIG`, else `$XDG_CONFIG_HOME/kubesvc/config.toml`,
/// else `~/.config/kubesvc/config.toml`.
pub fn path(env: &impl Fn(&str) -> Option<String>) -> Result<PathBuf, CliError> {
    if let Some(p) = env("KUBESVC_CONFIG").filter(|p| !p.is_empty()) {
        return Ok(p.into());
    }
    let base = env("XDG_CONFIG_HOME")
        .filter(|p| Path::new(p).is_absolute())
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| Path::new(&h).join(".config")))
        .ok_or_else(|| {
            CliError::Local(
                "no config directory: set HOME, XDG_CONFIG_HOME or KUBESVC_CONFIG".into(),
            )
        })?;
    Ok(base.join("kubesvc").join("config.toml"))
}

impl ConfigFile {
    /// The file's contents; an absent file is an empty config.
    pub fn load(path: &Path) -> Result<ConfigFile, CliError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ConfigFile::default()),
            Err(e) => return Err(CliError::Local(format!("{}: {e}", path.display()))),
        };
        // toml's messages quote the offending line, which may hold a token: only its place.
        toml::from_str(&text).map_err(|e| {
            let place = e
                .span()
                .map(|s| format!(" (line {})", text[..s.start].lines().count().max(1)))
                .unwrap_or_default();
            CliError::Local(format!(
                "{}: not a kubesvc config file{place}; fix or remove it",
                path.display()
            ))
        })
    }

    /// Writes the file whole: a temporary file made with mode 0600 in the same directory
    /// (0700, created when missing), then renamed over the old one, so a reader never sees
    /// half a file and no other user ever can read a token.
    pub fn save(&self, path: &Path) -> Result<(), CliError> {
        let local = |e: std::io::Error| CliError::Local(format!("{}: {e}", path.display()));
        let dir = path.parent().unwrap_or(Path::new("."));
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(local)?;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(local)?;
        }
        let text = toml::to_string(self)
            .map_err(|e| CliError::Local(format!("the config cannot be written: {e}")))?;
        let tmp = dir.join(format!(
            ".{}.{}.tmp",
            path.file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("config"),
            std::process::id()
        ));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(local)?;
        let written = file
            .write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .and_then(|()| std::fs::rename(&tmp, path));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(local)
    }
}

/// Where the token in use came from, for `auth status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    Environment,
    Context,
}

/// What one invocation uses: the chosen context with the environment and flags on top.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The context's name, when one is in use.
    pub context: Option<String>,
    pub url: Option<String>,
    pub organization: Option<String>,
    pub token: Option<(String, TokenSource)>,
}

impl Settings {
    /// `--context` (or `KUBESVC_CONTEXT`) names a context that must exist; otherwise the
    /// current one, if any. `--url`, `--organization` (or their variables) and `KUBESVC_TOKEN`
    /// win over its values.
    pub fn resolve(
        file: &ConfigFile,
        context: Option<&str>,
        url: Option<&str>,
        organization: Option<&str>,
        env_token: Option<&str>,
    ) -> Result<Settings, CliError> {
        let name = match context {
            Some(name) if !file.contexts.contains_key(name) => {
                return Err(CliError::usage(format!(
                    "no context named {name:?} (kubesvc context list shows them)"
                )));
            }
            Some(name) => Some(name.to_owned()),
            None => file
                .current_context
                .clone()
                .filter(|c| file.contexts.contains_key(c)),
        };
        let ctx = name.as_ref().and_then(|n| file.contexts.get(n));
        let token = env_token
            .filter(|t| !t.trim().is_empty())
            .map(|t| (t.trim().to_owned(), TokenSource::Environment))
            .or_else(|| {
                ctx.and_then(|c| c.token.clone())
                    .map(|t| (t, TokenSource::Context))
            });
        Ok(Settings {
            context: name,
            url: url
                .filter(|u| !u.is_empty())
                .map(str::to_owned)
                .or_else(|| ctx.map(|c| c.url.clone())),
            organization: organization
                .filter(|o| !o.is_empty())
                .map(str::to_owned)
                .or_else(|| ctx.and_then(|c| c.organization.clone())),
            token,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> ConfigFile {
        let mut f = ConfigFile {
            current_context: Some("prod".into()),
            ..ConfigFile::default()
        };
        for (name, url) in [("prod", "https://prod"), ("staging", "https://staging")] {
            f.contexts.insert(
                name.into(),
                Context {
                    url: url.into(),
                    organization: Some("acme".into()),
                    token: Some(format!("{name}-token")),
                },
            );
        }
        f
    }

    #[test]
    fn the_current_context_is_used_and_flags_and_environment_win() {
        let s =
            Settings::resolve(&file(), None, None, None, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.context.as_deref(), Some("prod"));
        assert_eq!(s.url.as_deref(), Some("https://prod"));
        assert_eq!(s.token, Some(("prod-token".into(), TokenSource::Context)));

        let s = Settings::resolve(
            &file(),
            Some("staging"),
            Some("https://other"),
            Some("globex"),
            Some(" env-token "),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.url.as_deref(), Some("https://other"));
        assert_eq!(s.organization.as_deref(), Some("globex"));
        assert_eq!(
            s.token,
            Some(("env-token".into(), TokenSource::Environment))
        );
    }

    #[test]
    fn an_unknown_context_is_a_usage_error_and_no_context_means_no_values() {
        let e = Settings::resolve(&file(), Some("nope"), None, None, None).err();
        assert_eq!(e.map(|e| e.exit_code()), Some(2));
        let s = Settings::resolve(&ConfigFile::default(), None, None, None, None)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(s.context.is_none() && s.url.is_none() && s.token.is_none());
    }

    #[test]
    fn the_file_is_written_0600_in_a_0700_directory_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("kubesvc-config-{}", std::process::id()));
        let path = dir.join("sub").join("config.toml");
        file().save(&path).unwrap_or_else(|e| panic!("{e}"));
        let mode = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0)
        };
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.join("sub")), 0o700);
        assert_eq!(ConfigFile::load(&path).ok(), Some(file()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_broken_file_is_refused_without_quoting_it() {
        let dir = std::env::temp_dir().join(format!("kubesvc-broken-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("config.toml");
        let _ = std::fs::write(
            &path,
            "[contexts.a]\nurl = \"x\"\ntoken = s3cr3t-unquoted\n",
        );
        let e = ConfigFile::load(&path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("not a kubesvc config file (line 3)"), "{e}");
        assert!(!e.contains("s3cr3t"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_config_path_follows_the_xdg_rules() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        let p = |pairs| path(&env(pairs)).ok();
        assert_eq!(
            p(&[("KUBESVC_CONFIG", "/x/c.toml"), ("HOME", "/h")]),
            Some("/x/c.toml".into())
        );
        assert_eq!(
            p(&[("XDG_CONFIG_HOME", "/xdg"), ("HOME", "/h")]),
            Some("/xdg/kubesvc/config.toml".into())
        );
        assert_eq!(
            p(&[("XDG_CONFIG_HOME", "relative"), ("HOME", "/h")]),
            Some("/h/.config/kubesvc/config.toml".into())
        );
        assert_eq!(p(&[]), None);
    }
}
