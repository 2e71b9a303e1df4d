//! One module per command group; [`run`] picks the one asked for.

mod activity;
mod approvals;
mod auth;
mod auth_servers;
mod catalog;
mod clusters;
mod mcp;
mod networking;
mod pools;
mod upgrades;

use serde_json::Value;

use crate::args::{Cli, Command, Shell};
use crate::error::CliError;
use crate::output::print_out;
use crate::session::Session;

/// The man page `build.rs` wrote from the same clap definitions.
const MAN_PAGE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/kubesvc.1"));

pub async fn run(cli: Cli) -> Result<(), CliError> {
    let global = &cli.global;
    match cli.command {
        Command::Completion { shell } => completion(shell),
        Command::Man => print_out(&String::from_utf8_lossy(MAN_PAGE)),
        Command::Auth(c) => auth::auth(c, global).await,
        Command::Context(c) => auth::context(c, global),
        Command::Catalog { zone } => catalog::show(&Session::open(global)?, zone).await,
        Command::Cluster(c) => clusters::run(&Session::open(global)?, c).await,
        Command::NodePool(c) => pools::pools(&Session::open(global)?, c).await,
        Command::Node(c) => pools::nodes(&Session::open(global)?, c).await,
        Command::Eip(c) => networking::eips(&Session::open(global)?, c).await,
        Command::FirewallRule(c) => networking::rules(&Session::open(global)?, c).await,
        Command::AuthServer(c) => auth_servers::run(&Session::open(global)?, c).await,
        Command::Audit(c) => activity::audit(&Session::open(global)?, c).await,
        Command::Approvals(c) => approvals::run(&Session::open(global)?, c).await,
        Command::Mcp => mcp::serve(Session::open(global)?.api).await,
    }
}

/// The script that makes the shell ask `kubesvc` for completions (names included).
fn completion(shell: Shell) -> Result<(), CliError> {
    let script = crate::complete::registration(shell)
        .map_err(|e| CliError::Local(format!("writing the completion script: {e}")))?;
    print_out(&String::from_utf8_lossy(&script))
}

/// A value the API sent for a field of an object (`-` when absent or null).
fn field(v: &Value, name: &str) -> String {
    crate::output::cell(&v[name])
}

/// A value parsed the way the API spells it (`"public"` into an exposure, say); a usage
/// error naming the flag when it is not one of them.
fn spelled<T: serde::de::DeserializeOwned>(
    flag: &str,
    value: &str,
    allowed: &str,
) -> Result<T, CliError> {
    serde_json::from_value(Value::String(value.to_owned()))
        .map_err(|_| CliError::usage(format!("{flag} must be {allowed}, not {value:?}")))
}

/// `KEY=VALUE` pairs into a map.
fn pairs(
    flag: &str,
    items: &[String],
) -> Result<std::collections::BTreeMap<String, String>, CliError> {
    items
        .iter()
        .map(|item| {
            item.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| CliError::usage(format!("{flag} takes KEY=VALUE, not {item:?}")))
        })
        .collect()
}

/// The key of one write: the one given, else a fresh one (the client's retries reuse it).
fn key(flag: &crate::args::KeyFlag) -> String {
    flag.idempotency_key
        .clone()
        .unwrap_or_else(crate::client::fresh_key)
}

/// An answer of the API read as one of its shapes.
fn parse<T: serde::de::DeserializeOwned>(raw: Value) -> Result<T, CliError> {
    serde_json::from_value(raw).map_err(|e| {
        CliError::Network(format!(
            "the API's answer does not have the expected shape: {e}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_value_pairs_are_split_at_the_first_equals_sign() {
        let map =
            pairs("--label", &["a=1".into(), "b=x=y".into(), "c=".into()]).unwrap_or_default();
        assert_eq!(map.get("b").map(String::as_str), Some("x=y"));
        assert_eq!(map.get("c").map(String::as_str), Some(""));
        assert_eq!(
            pairs("--label", &["nope".into()])
                .map_err(|e| e.exit_code())
                .err(),
            Some(2)
        );
    }

    #[test]
    fn a_value_is_read_as_the_api_spells_it() {
        use domain::model::cluster::Exposure;
        let exposure: Result<Exposure, _> = spelled("--exposure", "private", "public or private");
        assert_eq!(exposure.ok(), Some(Exposure::Private));
        let refused = spelled::<Exposure>("--exposure", "hidden", "public or private");
        assert_eq!(
            refused.err().map(|e| e.to_string()),
            Some("--exposure must be public or private, not \"hidden\"".into())
        );
    }
}
