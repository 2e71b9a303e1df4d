//! Shell completion that knows the organization: cluster, node pool, node, Elastic IP,
//! firewall rule and auth server names, and the person's approval ids, come from the API, as
//! `kubectl get pods <TAB>` does.
//!
//! The shell calls `kubesvc` back on each TAB (`COMPLETE=bash kubesvc -- kubesvc …`, the
//! script `kubesvc completion SHELL` prints sets this up); the words typed so far pick the
//! context, organization and cluster. A completion never prompts, never prints on stderr and
//! gives up after two seconds: no candidates is better than a hung prompt.

use std::ffi::{OsStr, OsString};
use std::time::Duration;

use clap::{ArgMatches, CommandFactory, FromArgMatches};
use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use clap_complete::env::EnvCompleter;
use serde_json::Value;

use crate::args::{Cli, Global, Shell};
use crate::client::{Api, Call};
use crate::resolve;
use crate::session::{load_config, settings};

/// The longest a completion waits for the API.
const BUDGET: Duration = Duration::from_secs(2);

/// The variable the shell sets when it asks for completions.
const VAR: &str = "COMPLETE";

/// Answers the shell and exits when it is asking for completions; returns otherwise.
pub fn answer_the_shell() {
    clap_complete::CompleteEnv::with_factory(command)
        .var(VAR)
        .complete();
}

/// The registration script for `shell`: what `source <(kubesvc completion bash)` runs.
pub fn registration(shell: Shell) -> std::io::Result<Vec<u8>> {
    let mut script = Vec::new();
    let adapter: &dyn EnvCompleter = match shell {
        Shell::Bash => &clap_complete::env::Bash,
        Shell::Zsh => &clap_complete::env::Zsh,
        Shell::Fish => &clap_complete::env::Fish,
    };
    adapter.write_registration(VAR, "kubesvc", "kubesvc", "kubesvc", &mut script)?;
    Ok(script)
}

/// Which list of the API names the values of an argument.
#[derive(Clone, Copy)]
enum Names {
    Clusters,
    Pools,
    Nodes,
    ElasticIps,
    FirewallRules,
    AuthServers,
    /// The caller's own approvals, by id (they have no name).
    Approvals,
}

impl Names {
    /// By the argument's id, the same in every command that takes it.
    fn of(id: &str) -> Option<Names> {
        Some(match id {
            "cluster" => Names::Clusters,
            "pool" => Names::Pools,
            "node" => Names::Nodes,
            "eip" => Names::ElasticIps,
            "rule" => Names::FirewallRules,
            "server" => Names::AuthServers,
            "approval" => Names::Approvals,
            _ => return None,
        })
    }
}

/// The command line's definition with a completer on every argument that names an object.
fn command() -> clap::Command {
    attach(Cli::command())
}

fn attach(mut command: clap::Command) -> clap::Command {
    let ids: Vec<(String, Names)> = command
        .get_arguments()
        .filter_map(|a| Names::of(a.get_id().as_str()).map(|n| (a.get_id().to_string(), n)))
        .collect();
    for (id, names) in ids {
        command = command.mut_arg(id, |a| {
            a.add(ArgValueCompleter::new(move |current: &OsStr| {
                candidates(names, current)
            }))
        });
    }
    let subs: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in subs {
        command = command.mut_subcommand(name, attach);
    }
    command
}

fn candidates(names: Names, current: &OsStr) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy();
    let typed = typed_so_far();
    let Some(found) = list(names, &typed) else {
        return Vec::new();
    };
    found
        .into_iter()
        .filter(|name| name.starts_with(current.as_ref()))
        .map(CompletionCandidate::new)
        .collect()
}

/// The words of the command line before the one being completed, as the shell passed them
/// after `--`.
fn typed_so_far() -> Vec<OsString> {
    let mut words: Vec<OsString> = std::env::args_os()
        .skip_while(|w| w != "--")
        .skip(1)
        .collect();
    words.pop();
    words
}

/// The names the API holds for `names`, within what the typed words pick; `None` on any
/// failure (not logged in, no answer in time).
fn list(names: Names, typed: &[OsString]) -> Option<Vec<String>> {
    let matches = Cli::command()
        .ignore_errors(true)
        .try_get_matches_from(typed)
        .ok()?;
    let global = Global::from_arg_matches(&matches).ok()?;
    let cluster = deepest(&matches)
        .try_get_one::<String>("cluster")
        .ok()
        .flatten()
        .cloned();
    let (_, file) = load_config().ok()?;
    let s = settings(&global, &file).ok()?;
    let (token, _) = s.token?;
    let api = Api::new(&s.url?, &token, s.organization.as_deref(), 0, BUDGET)
        .ok()?
        .quiet();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        let items = match names {
            Names::Clusters => items(&api, "/v1/public/clusters?size=100".into()).await?,
            Names::AuthServers => items(&api, "/v1/public/gateway/auth-servers".into()).await?,
            Names::Approvals => {
                let all = items(&api, "/v1/public/approvals".into()).await?;
                return Some(
                    all.iter()
                        .filter_map(|a| a["id"].as_str().map(str::to_owned))
                        .collect(),
                );
            }
            Names::Pools | Names::Nodes | Names::ElasticIps | Names::FirewallRules => {
                let cluster = resolve::cluster(&api, &cluster?).await.ok()?;
                let collection = match names {
                    Names::Pools => "node-pools",
                    Names::Nodes => "nodes",
                    Names::ElasticIps => "elastic-ips",
                    _ => "firewall-rules",
                };
                items(&api, format!("{}/{collection}", cluster.path())).await?
            }
        };
        Some(
            items
                .iter()
                .filter_map(|i| i["name"].as_str().map(str::to_owned))
                .collect(),
        )
    })
}

/// The matches of the innermost subcommand typed.
fn deepest(matches: &ArgMatches) -> &ArgMatches {
    match matches.subcommand() {
        Some((_, sub)) => deepest(sub),
        None => matches,
    }
}

async fn items(api: &Api, path: String) -> Option<Vec<Value>> {
    let (path, query) = path.split_once('?').unwrap_or((&path, ""));
    let mut call = Call::get(path);
    if let Some(size) = query.strip_prefix("size=") {
        call = call.query("size", size);
    }
    let list: Value = api.send(&call).await.ok()?.json().ok()?;
    list["items"].as_array().cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every argument that names an object of the API completes from it.
    #[test]
    fn every_argument_that_names_an_object_completes_from_the_api() {
        fn walk(command: &clap::Command, path: &str, seen: &mut usize) {
            for arg in command.get_arguments() {
                if Names::of(arg.get_id().as_str()).is_some() {
                    assert!(
                        arg.get::<ArgValueCompleter>().is_some(),
                        "{path} {}",
                        arg.get_id()
                    );
                    *seen += 1;
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), seen);
            }
        }
        let mut seen = 0;
        walk(&command(), "kubesvc", &mut seen);
        assert!(seen > 20, "{seen}");
    }

    #[test]
    fn each_shell_gets_a_script_that_calls_kubesvc_back() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
            let script = registration(shell)
                .map(String::from_utf8)
                .ok()
                .and_then(Result::ok);
            assert!(
                script.is_some_and(|s| s.contains("COMPLETE") && s.contains("kubesvc")),
                "{shell:?}"
            );
        }
    }
}
