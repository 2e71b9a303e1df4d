//! One invocation's connection to the API and its way of printing, from the config file,
//! the environment and the flags.

use std::io::IsTerminal;
use std::time::Duration;

use crate::args::Global;
use crate::client::Api;
use crate::config::{self, ConfigFile, Settings};
use crate::error::CliError;
use crate::output::Printer;

/// What the commands that call the API are given.
pub struct Session {
    pub api: Api,
    pub out: Printer,
    /// Standard error is a terminal: progress is drawn in place there.
    pub interactive: bool,
}

/// `NO_COLOR` set to anything but the empty string turns colours off (no-color.org).
pub fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The config file's path and contents.
pub fn load_config() -> Result<(std::path::PathBuf, ConfigFile), CliError> {
    let path = config::path(&env)?;
    let file = ConfigFile::load(&path)?;
    Ok((path, file))
}

/// The settings in effect for `global`.
pub fn settings(global: &Global, file: &ConfigFile) -> Result<Settings, CliError> {
    Settings::resolve(
        file,
        global.context.as_deref(),
        global.url.as_deref(),
        global.organization.as_deref(),
        env("KUBESVC_TOKEN").as_deref(),
    )
}

pub fn printer(global: &Global) -> Printer {
    let stdout = std::io::stdout();
    let terminal = stdout.is_terminal();
    Printer {
        format: global.output,
        header: !global.no_header,
        color: terminal && !no_color(),
        width: terminal
            .then(|| terminal_size::terminal_size_of(&stdout))
            .flatten()
            .map(|(w, _)| usize::from(w.0)),
    }
}

impl Session {
    /// A session for a command that calls the API: an endpoint and a token are needed.
    pub fn open(global: &Global) -> Result<Session, CliError> {
        let (_, file) = load_config()?;
        let s = settings(global, &file)?;
        let not_logged_in = || {
            CliError::NotLoggedIn(
                "not logged in: run `kubesvc auth login --url URL`, or set KUBESVC_URL and KUBESVC_TOKEN"
                    .into(),
            )
        };
        let url = s.url.ok_or_else(not_logged_in)?;
        let (token, _) = s.token.ok_or_else(not_logged_in)?;
        Ok(Session {
            api: Api::new(
                &url,
                &token,
                s.organization.as_deref(),
                global.verbose,
                Duration::from_secs(global.request_timeout.max(1)),
            )?,
            out: printer(global),
            interactive: std::io::stderr().is_terminal(),
        })
    }
}
