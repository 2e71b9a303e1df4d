//! `kubesvc-admin`: the operator's tool. It links the domain and the PostgreSQL adapter and
//! runs the domain's maintenance use cases on the service's own database, no HTTP between:
//! the same model, rules and state machines as the API, because it is the same domain.
//!
//! Settings come from the environment, as the server's do: `DATABASE_URL`, and for what opens
//! or seals secrets `SECRETS_KEY` (and `SECRETS_KEY_PREVIOUS` during a rotation). Exit codes:
//! 0 done (or nothing found), 1 refused or problems found, 2 bad usage or settings.

mod args;
mod cluster;
mod context;
mod invariants;
mod keys;
mod operations;
mod output;

use std::process::ExitCode;

use clap::Parser;

use crate::args::{Cli, Command};

/// What a command ends with.
pub enum Outcome {
    Done,
    /// Nothing failed, but what the operator asked about is not right (problems found).
    Problems,
}

/// Why a command did not do its work.
#[derive(Debug)]
pub enum AdminError {
    /// A setting is missing or wrong: exit 2.
    Settings(String),
    /// Refused or failed: exit 1.
    Failed(String),
}

impl From<domain::maintenance::MaintenanceError> for AdminError {
    fn from(e: domain::maintenance::MaintenanceError) -> AdminError {
        AdminError::Failed(e.to_string())
    }
}

impl From<domain::ports::storage::StoreError> for AdminError {
    fn from(e: domain::ports::storage::StoreError) -> AdminError {
        AdminError::Failed(e.to_string())
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    let outcome = runtime.block_on(async {
        let outcome = run(cli).await;
        context::close().await;
        outcome
    });
    match outcome {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Problems) => ExitCode::from(1),
        Err(AdminError::Settings(e)) => {
            eprintln!("error: {}", output::printable(&e));
            ExitCode::from(2)
        }
        Err(AdminError::Failed(e)) => {
            eprintln!("error: {}", output::printable(&e));
            ExitCode::from(1)
        }
    }
}

async fn run(cli: Cli) -> Result<Outcome, AdminError> {
    match cli.command {
        Command::Migrate => context::migrate().await,
        Command::Cluster(c) => cluster::run(c).await,
        Command::Operations(c) => operations::run(c).await,
        Command::Check(c) => invariants::run(c).await,
        Command::Keys(c) => keys::run(c).await,
    }
}
