//! `kubesvc`: the command-line client of the public API.
//!
//! Parsing is clap's (`args`), the calls are `client`'s, each command group is a module of
//! `commands`; this file only runs one invocation and turns its outcome into an exit code
//! (`kubesvc --help` lists them).

mod args;
mod client;
mod commands;
mod complete;
mod config;
mod confirm;
mod error;
mod kubeconfig;
mod output;
mod resolve;
mod secret;
mod session;
mod wait;
mod yaml;

/// The domain's limits, at the crate root so `args.rs` names them the same way here and in
/// `build.rs`, which includes the same file (and cannot depend on the domain crate).
use domain::rules;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;

use crate::error::CliError;

fn main() -> ExitCode {
    // A shell asking for completions (COMPLETE=… set) is answered here, and the process ends.
    complete::answer_the_shell();
    let cli = match args::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // clap prints help and version on stdout (exit 0), mistakes on stderr (exit 2).
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(&CliError::Local(format!("cannot start: {e}"))),
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Prints the failure on stderr (`error:` in red on a terminal) and gives its exit code.
fn fail(e: &CliError) -> ExitCode {
    let color = std::io::stderr().is_terminal() && !session::no_color();
    let label = if color {
        "\x1b[31merror:\x1b[0m"
    } else {
        "error:"
    };
    // The API's words, like everything it holds, are shown, never obeyed by the terminal.
    eprintln!("{label} {}", output::printable(&e.to_string()));
    for line in e.details() {
        eprintln!("  {}", output::printable(&line));
    }
    ExitCode::from(e.exit_code())
}
