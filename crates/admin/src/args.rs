//! The command line, parsed by clap.

use clap::{Args, Parser, Subcommand};
use uuid::Uuid;

#[derive(Debug, Parser)]
#[command(
    name = "kubesvc-admin",
    version,
    about = "The operator's tool: look at clusters and operations, repair invariants, run migrations, rotate SECRETS_KEY.",
    after_help = "Settings (environment): DATABASE_URL (required); SECRETS_KEY and SECRETS_KEY_PREVIOUS \
                  (for `check --fix` and `keys`). Exit codes: 0 done or nothing found, 1 refused or \
                  problems found, 2 bad usage or settings."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply the database migrations of this release (as `server --migrate` does).
    Migrate,
    /// Look at one cluster.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// Follow stuck operations; retry or cancel one.
    #[command(subcommand)]
    Operations(OperationsCommand),
    /// Check the invariants the service keeps; repair what breaks them with --fix.
    Check(CheckArgs),
    /// The SECRETS_KEY ring: what each key sealed, re-seal under the current key, verify.
    #[command(subcommand)]
    Keys(KeysCommand),
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// The cluster (deleted ones too) with its pools, nodes, Elastic IPs, firewall rules,
    /// credentials, provisioning queue entry and latest operations.
    Show { id: Uuid },
}

#[derive(Debug, Subcommand)]
pub enum OperationsCommand {
    /// Running operations started more than --older-than-minutes ago, oldest first.
    List {
        #[arg(long, default_value_t = 10)]
        older_than_minutes: u32,
        /// Only those whose provisioning failed at least once.
        #[arg(long)]
        failing: bool,
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        limit: i64,
    },
    /// Schedule the operation's cluster for provisioning now (its backoff cut short).
    Retry { id: Uuid },
    /// End a running operation as cancelled; the reason is shown to the cluster's owners.
    Cancel {
        id: Uuid,
        #[arg(long)]
        reason: String,
    },
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// Repair each finding (then check again and report what is left).
    #[arg(long)]
    pub fix: bool,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// The key ring, and how many values each key sealed, by kind.
    Status,
    /// Seal every value again under SECRETS_KEY, in batches, beside running servers.
    Reseal {
        #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(i64).range(1..=10_000))]
        batch_size: i64,
    },
    /// Open every sealed value under the ring; exit 1 if any does not open.
    Verify,
}
