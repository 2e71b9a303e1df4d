//! Every command, flag and help text of `kubesvc`.
//!
//! This file is also compiled by `build.rs` to write the man page, so it uses nothing but clap
//! and std: the values here are plain strings and the commands check them against the API.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// The exit codes, listed in `--help` and the man page.
const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  the operation ran and failed (a cluster or Elastic IP ended Failed), a question was not
     confirmed, or another error
  2  usage: a wrong flag or argument, a request the API refused as invalid (400, 422), or a
     destructive command off a terminal without --yes
  3  authentication or permission: no token, a token refused (401) or not allowed (403)
  4  not found (404)
  5  conflict (409, 412): a name taken, a change already in flight, the wrong state
  6  the server or the network failed (5xx, timeouts, connection refused) after retries
  130 interrupted (Ctrl-C); what was asked of the API is left as it is

Environment:
  KUBESVC_URL, KUBESVC_TOKEN, KUBESVC_ORGANIZATION override the current context's values;
  KUBESVC_CONTEXT picks a context; KUBESVC_CONFIG names the config file (default:
  $XDG_CONFIG_HOME/kubesvc/config.toml); NO_COLOR turns colours off.";

/// A command-line client of the managed-Kubernetes API and the gateway's auth servers.
#[derive(Debug, Parser)]
#[command(
    name = "kubesvc",
    version,
    about,
    after_help = EXIT_CODES,
    after_long_help = EXIT_CODES,
    propagate_version = true,
    max_term_width = 100
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options every command takes: shown in their own section of every `--help`, after the
/// command's own (as gh and doctl do).
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub struct Global {
    /// Use this context of the config file instead of the current one.
    #[arg(long, global = true, env = "KUBESVC_CONTEXT", value_name = "NAME")]
    pub context: Option<String>,
    /// The API's base URL, e.g. https://api.example.com.
    #[arg(long, global = true, env = "KUBESVC_URL", value_name = "URL")]
    pub url: Option<String>,
    /// The organization (slug or id) to work in.
    #[arg(
        long,
        short = 'O',
        global = true,
        env = "KUBESVC_ORGANIZATION",
        value_name = "ORG"
    )]
    pub organization: Option<String>,
    /// Output format.
    #[arg(long, short = 'o', global = true, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Leave the header line out of tables.
    #[arg(long, global = true)]
    pub no_header: bool,
    /// Say more: each request, its answer's status and request id, the idempotency key.
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Give up on a request (and its retries) after this many seconds.
    #[arg(long, global = true, default_value_t = 60, value_name = "SECONDS")]
    pub request_timeout: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Aligned columns, truncated to the terminal.
    Table,
    /// The API's own JSON.
    Json,
    /// The API's own shapes, as YAML.
    Yaml,
    /// Only the name (or id) of each object, one per line: for scripts.
    Name,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Log in, see who you are, log out.
    #[command(subcommand)]
    Auth(AuthCommand),
    /// The endpoints and organizations you work with.
    #[command(subcommand)]
    Context(ContextCommand),
    /// Zones, Kubernetes versions and machine tiers (recommended ones marked).
    #[command(after_help = "Example:\n  kubesvc catalog --zone zone-1")]
    Catalog {
        /// The zone; the default zone when omitted.
        #[arg(long)]
        zone: Option<String>,
    },
    /// Create, list, change and delete clusters; their kubeconfig and exposure.
    #[command(subcommand)]
    Cluster(ClusterCommand),
    /// A cluster's node pools.
    #[command(subcommand, name = "node-pool")]
    NodePool(NodePoolCommand),
    /// A cluster's nodes.
    #[command(subcommand)]
    Node(NodeCommand),
    /// A cluster's Elastic IPs.
    #[command(subcommand)]
    Eip(EipCommand),
    /// A cluster's firewall rules.
    #[command(subcommand, name = "firewall-rule")]
    FirewallRule(FirewallCommand),
    /// The API gateway's auth servers and their credentials.
    #[command(subcommand, name = "auth-server")]
    AuthServer(AuthServerCommand),
    /// The organization's audit trail: who changed what, when.
    #[command(subcommand)]
    Audit(AuditCommand),
    /// What your AI assistant asked to change: see it, approve it (it runs once, as you) or
    /// decline it. Only your own approvals, in every organization.
    #[command(subcommand, alias = "approval")]
    Approvals(ApprovalsCommand),
    /// Serve the assistant's tools to a desktop assistant over standard input and output
    /// (the Model Context Protocol), as the saved context: its changes wait for your approval.
    #[command(
        after_help = "The assistant starts it. Example, in Claude Desktop's claude_desktop_config.json:\n  {\"mcpServers\": {\"kubesvc\": {\"command\": \"kubesvc\", \"args\": [\"mcp\"]}}}\nThe token stays in kubesvc's saved context (kubesvc auth login): it is in no argument."
    )]
    Mcp,
    /// Print a shell completion script.
    #[command(
        after_help = "Examples:\n  kubesvc completion bash > ~/.local/share/bash-completion/completions/kubesvc\n  kubesvc completion zsh > \"${fpath[1]}/_kubesvc\"\n  kubesvc completion fish > ~/.config/fish/completions/kubesvc.fish"
    )]
    Completion {
        /// The shell: bash, zsh or fish.
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Print the man page (roff), made when the binary was built.
    #[command(after_help = "Example:\n  kubesvc man > /usr/local/share/man/man1/kubesvc.1")]
    Man,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Save a token for an endpoint as a context (the token is read without echo, or from stdin).
    #[command(
        after_help = "Examples:\n  kubesvc auth login --url https://api.example.com --organization acme\n  echo \"$TOKEN\" | kubesvc auth login --url https://api.example.com --token-stdin --name prod"
    )]
    Login {
        /// Read the token from standard input (one line) instead of a prompt.
        #[arg(long)]
        token_stdin: bool,
        /// The context to save (default: the current context's name, or `default`).
        #[arg(long, value_name = "CONTEXT")]
        name: Option<String>,
    },
    /// Which context, endpoint and organization are in use, and whether the token is accepted.
    #[command(after_help = "Example:\n  kubesvc auth status")]
    Status,
    /// Forget the token of the current context (or of --context).
    #[command(after_help = "Example:\n  kubesvc auth logout")]
    Logout,
}

#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Every context, the current one marked.
    #[command(after_help = "Example:\n  kubesvc context list")]
    List,
    /// Make a context the current one.
    #[command(after_help = "Example:\n  kubesvc context use staging")]
    Use {
        /// The context to make current.
        name: String,
    },
    /// Remove a context and its token.
    #[command(
        after_help = "Examples:\n  kubesvc context delete old\n  kubesvc context delete old --yes  # without the question (scripts)"
    )]
    Delete {
        /// The context to remove.
        name: String,
        #[command(flatten)]
        yes: YesFlag,
    },
}

/// A node pool given on `cluster create`: `NAME:SIZE:COUNT` (`default:kube.c5.large:3`).
#[derive(Debug, Args)]
pub struct PoolFlags {
    /// A node pool as NAME:SIZE:COUNT; repeat for several. Without it: one pool `default` of
    /// --size and --count.
    #[arg(long = "pool", value_name = "NAME:SIZE:COUNT")]
    pub pools: Vec<String>,
    /// The machine tier of the single pool when --pool is not given (`kubesvc catalog` lists them).
    #[arg(long)]
    pub size: Option<String>,
    /// The node count of the single pool when --pool is not given.
    #[arg(long, default_value_t = 3)]
    pub count: u32,
}

/// Following a change until it settles.
#[derive(Debug, Clone, Args)]
pub struct WaitFlags {
    /// Follow the change until it settles, showing its progress; the exit code says how it ended.
    #[arg(long)]
    pub wait: bool,
    /// Stop waiting after this many seconds (the change goes on).
    #[arg(long, default_value_t = 1800, value_name = "SECONDS")]
    pub wait_timeout: u64,
}

/// Skipping the question a destructive command asks on a terminal (off a terminal, these
/// commands refuse to run without it).
#[derive(Debug, Clone, Copy, Args)]
pub struct YesFlag {
    /// Do it without asking (needed off a terminal: in scripts and CI).
    #[arg(long, short = 'y')]
    pub yes: bool,
}

/// The key that makes a retried write run once.
#[derive(Debug, Clone, Args)]
pub struct KeyFlag {
    /// The Idempotency-Key of this write (default: a fresh one per invocation, printed with -v,
    /// reused on the CLI's own retries). Run again with the same key to get the first answer back.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Create a cluster.
    #[command(
        after_help = "Examples:\n  kubesvc cluster create prod-1 --size kube.c5.large --count 3 --wait\n  kubesvc cluster create prod-2 --pool web:kube.c5.large:3 --pool batch:kube.c5.xlarge:2 --exposure private"
    )]
    Create {
        /// The cluster's name: a DNS label, unique in the organization.
        name: String,
        #[command(flatten)]
        pools: PoolFlags,
        /// The zone (default: the catalog's default zone).
        #[arg(long)]
        zone: Option<String>,
        /// The Kubernetes version id (default: the recommended one).
        #[arg(long, value_name = "VERSION")]
        kubernetes_version: Option<String>,
        /// A free-text description.
        #[arg(long)]
        description: Option<String>,
        /// A tag (DNS label); repeat for several.
        #[arg(long = "tag")]
        tags: Vec<String>,
        /// public or private (default: the catalog's default).
        #[arg(long)]
        exposure: Option<String>,
        /// intranet or internet (default intranet); cannot change later.
        #[arg(long)]
        network_mode: Option<String>,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
    },
    /// The organization's clusters.
    #[command(after_help = "Examples:\n  kubesvc cluster list\n  kubesvc cluster list -o name")]
    List {
        /// Only clusters of this zone.
        #[arg(long)]
        zone: Option<String>,
        /// The page, from 1.
        #[arg(long, default_value_t = 1)]
        page: u32,
        /// Clusters per page, 1-100.
        #[arg(long, default_value_t = 100)]
        page_size: u32,
    },
    /// One cluster, by name or id.
    #[command(after_help = "Example:\n  kubesvc cluster get prod-1 -o yaml")]
    Get {
        /// The cluster's name or id.
        cluster: String,
    },
    /// Change a cluster's description or tags.
    #[command(
        after_help = "Examples:\n  kubesvc cluster update prod-1 --description 'payments' --tag team-a --tag prod\n  kubesvc cluster update prod-1 --clear-tags"
    )]
    Update {
        /// The cluster's name or id.
        cluster: String,
        /// A free-text description.
        #[arg(long, conflicts_with = "clear_description")]
        description: Option<String>,
        /// Remove the description.
        #[arg(long)]
        clear_description: bool,
        /// The new tags, replacing the old ones; repeat for several.
        #[arg(long = "tag", conflicts_with = "clear_tags")]
        tags: Vec<String>,
        /// Remove every tag.
        #[arg(long)]
        clear_tags: bool,
    },
    /// Delete a cluster with its pools, nodes, Elastic IPs and firewall rules.
    #[command(
        after_help = "Examples:\n  kubesvc cluster delete prod-1 --wait        # asks for the name on a terminal\n  kubesvc cluster delete prod-1 --wait --yes  # in a script"
    )]
    Delete {
        /// The cluster's name or id.
        cluster: String,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
        #[command(flatten)]
        yes: YesFlag,
    },
    /// Follow a cluster until it settles: Provisioned or Failed, or gone once deleted.
    #[command(after_help = "Example:\n  kubesvc cluster wait prod-1")]
    Wait {
        /// The cluster's name or id.
        cluster: String,
        /// Stop waiting after this many seconds.
        #[arg(long, default_value_t = 1800, value_name = "SECONDS")]
        wait_timeout: u64,
    },
    /// Get a cluster's kubeconfig.
    #[command(subcommand)]
    Kubeconfig(KubeconfigCommand),
    /// Make the API endpoint public or private.
    #[command(subcommand)]
    Exposure(ExposureCommand),
    /// Who may call the cluster's API server.
    #[command(subcommand)]
    ControlPlaneFirewall(ControlPlaneFirewallCommand),
    /// What the cluster's changes are doing: each change handed to provisioning, to its end.
    #[command(
        after_help = "Examples:\n  kubesvc cluster operations prod-1\n  kubesvc cluster operations prod-1 --status running"
    )]
    Operations {
        /// The cluster's name or id.
        cluster: String,
        /// Only operations in this status: running, succeeded, failed or cancelled.
        #[arg(long)]
        status: Option<String>,
    },
    /// The kubeconfig credentials downloads asked for with a lifetime.
    #[command(subcommand)]
    Credential(KubeconfigCredentialCommand),
    /// The Kubernetes versions a cluster can be upgraded to, and its maintenance policy.
    #[command(after_help = "Example:\n  kubesvc cluster upgrades prod-1")]
    Upgrades {
        /// The cluster's name or id.
        cluster: String,
    },
    /// Upgrade a cluster's Kubernetes version: the control plane first, then each node pool,
    /// node by node (a new node is Ready before an old one is removed).
    // `--version` names the Kubernetes version here, not the CLI's own.
    #[command(
        disable_version_flag = true,
        after_help = "Examples:\n  kubesvc cluster upgrade prod-1 --version v1.32.6 --wait\n  kubesvc cluster upgrade prod-1 --version v1.33.2 --max-surge 3"
    )]
    Upgrade {
        /// The cluster's name or id.
        cluster: String,
        /// A version `kubesvc cluster upgrades` lists.
        #[arg(long)]
        version: String,
        /// How many nodes above its count each pool may go meanwhile (1-10; default: each
        /// pool's own, 1 unless set).
        #[arg(long)]
        max_surge: Option<u32>,
        /// How many nodes below its count each pool may go meanwhile (0-10; default: each
        /// pool's own, 0 unless set).
        #[arg(long)]
        max_unavailable: Option<u32>,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
    },
    /// When the service may upgrade a cluster by itself.
    #[command(subcommand)]
    Maintenance(MaintenanceCommand),
}

#[derive(Debug, Subcommand)]
pub enum MaintenanceCommand {
    /// Set the maintenance window (four hours from --start, UTC) and automatic patch upgrades.
    #[command(
        after_help = "Examples:\n  kubesvc cluster maintenance set prod-1 --day saturday --start 03:00 --auto-upgrade on\n  kubesvc cluster maintenance set prod-1 --auto-upgrade off"
    )]
    Set {
        /// The cluster's name or id.
        cluster: String,
        /// any, or a weekday (monday … sunday).
        #[arg(long)]
        day: Option<String>,
        /// HH:MM in UTC.
        #[arg(long, value_name = "HH:MM")]
        start: Option<String>,
        /// on: apply the newest patch of the cluster's minor version inside the window; off: never.
        #[arg(long, value_name = "on|off")]
        auto_upgrade: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum KubeconfigCredentialCommand {
    /// List them, with who holds each and until when (never a token).
    #[command(after_help = "Example:\n  kubesvc cluster credential list prod-1")]
    List {
        /// The cluster's name or id.
        cluster: String,
    },
    /// Revoke one at once (your own; anyone's as super_admin).
    #[command(after_help = "Example:\n  kubesvc cluster credential revoke prod-1 6f1c…")]
    Revoke {
        /// The cluster's name or id.
        cluster: String,
        /// The credential's id (`kubesvc cluster credential list CLUSTER` shows them).
        credential: String,
        #[command(flatten)]
        yes: YesFlag,
    },
    /// Revoke every credential and replace the standing one: every kubeconfig downloaded
    /// before stops working (super_admin).
    #[command(
        after_help = "Examples:\n  kubesvc cluster credential rotate prod-1\n  kubesvc cluster credential rotate prod-1 --yes  # without the question (scripts)"
    )]
    Rotate {
        /// The cluster's name or id.
        cluster: String,
        #[command(flatten)]
        yes: YesFlag,
    },
}

#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// The newest events first, narrowed by the filters.
    #[command(
        after_help = "Examples:\n  kubesvc audit list\n  kubesvc audit list --cluster prod-1 --since 2026-11-26T00:00:00Z\n  kubesvc audit list --resource kubeconfig_credential --all -o json"
    )]
    List {
        /// Only events about this kind of object (cluster, node_pool, node, elastic_ip,
        /// firewall_rule, auth_server, credential, kubeconfig_credential).
        #[arg(long)]
        resource: Option<String>,
        /// Only events of this cluster (name or id) and everything under it.
        #[arg(long)]
        cluster: Option<String>,
        /// Only changes made by this user id.
        #[arg(long)]
        actor: Option<String>,
        /// From this RFC 3339 instant on.
        #[arg(long)]
        since: Option<String>,
        /// Before this RFC 3339 instant.
        #[arg(long)]
        until: Option<String>,
        /// At most this many events (1-100) unless --all.
        #[arg(long, default_value_t = 50)]
        limit: u32,
        /// Every matching event, page after page.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Your approvals, newest first (at most the 100 newest).
    #[command(
        after_help = "Examples:\n  kubesvc approvals list\n  kubesvc approvals list --status pending -o name"
    )]
    List {
        /// Only those in this status: pending, approved, declined or expired.
        #[arg(long)]
        status: Option<String>,
    },
    /// One approval: what will happen, in words and exactly as asked, and where it stands.
    #[command(after_help = "Example:\n  kubesvc approvals show 6f1c…")]
    Show {
        /// The approval's id (`kubesvc approvals list` shows them).
        approval: String,
    },
    /// Approve: the change runs once, as you, with your role; the answer says what became of
    /// it. A change that deletes something asks first on a terminal.
    #[command(
        after_help = "Examples:\n  kubesvc approvals approve 6f1c…\n  kubesvc approvals approve 6f1c… --yes  # a deletion, without the question (scripts)"
    )]
    Approve {
        /// The approval's id (`kubesvc approvals list` shows them).
        approval: String,
        #[command(flatten)]
        yes: YesFlag,
    },
    /// Decline: the change never runs.
    #[command(after_help = "Example:\n  kubesvc approvals decline 6f1c…")]
    Decline {
        /// The approval's id (`kubesvc approvals list` shows them).
        approval: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum KubeconfigCommand {
    /// Merge the kubeconfig into ~/.kube/config (or the first file of $KUBECONFIG), as kubectl
    /// would: a context named after the cluster, existing entries of that name updated.
    #[command(
        after_help = "Examples:\n  kubesvc cluster kubeconfig save prod-1 --set-current\n  KUBECONFIG=./prod.yaml kubesvc cluster kubeconfig save prod-1 --context-name prod"
    )]
    Save {
        /// The cluster's name or id.
        cluster: String,
        /// Also make it kubectl's current context.
        #[arg(long)]
        set_current: bool,
        /// The context's name (default: the cluster's name).
        #[arg(long)]
        context_name: Option<String>,
        /// Write to this file instead of $KUBECONFIG or ~/.kube/config.
        #[arg(long, value_name = "FILE")]
        kubeconfig: Option<PathBuf>,
        /// How long to wait for a control plane that is not up yet.
        #[arg(long, default_value_t = 1800, value_name = "SECONDS")]
        wait_timeout: u64,
        #[command(flatten)]
        expiry: ExpiryFlag,
    },
    /// Print the kubeconfig (it holds the cluster's credential).
    #[command(
        after_help = "Examples:\n  kubesvc cluster kubeconfig show prod-1 > prod-1.yaml\n  kubesvc cluster kubeconfig show prod-1 --expiry-seconds 28800 > prod-1-today.yaml"
    )]
    Show {
        /// The cluster's name or id.
        cluster: String,
        #[command(flatten)]
        expiry: ExpiryFlag,
    },
}

/// A credential of the download's own, with a lifetime.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct ExpiryFlag {
    /// Get a credential of its own that expires after this many seconds (recorded, and
    /// revocable with `kubesvc cluster credential revoke`); without it, the cluster's standing
    /// credential. A retried download may leave an extra credential unused until it expires.
    #[arg(long, value_name = "SECONDS")]
    pub expiry_seconds: Option<u32>,
}

#[derive(Debug, Subcommand)]
pub enum ExposureCommand {
    /// Start an exposure change (public or private).
    #[command(after_help = "Example:\n  kubesvc cluster exposure set prod-1 private --wait")]
    Set {
        /// The cluster's name or id.
        cluster: String,
        /// public or private.
        exposure: String,
        #[command(flatten)]
        wait: WaitFlags,
    },
}

#[derive(Debug, Subcommand)]
pub enum ControlPlaneFirewallCommand {
    /// Let only callers from these networks reach the API server, or let everyone (--disable).
    #[command(
        after_help = "Examples:\n  kubesvc cluster control-plane-firewall set prod-1 --allow 203.0.113.0/24 --allow 2001:db8::/32 --wait\n  kubesvc cluster control-plane-firewall set prod-1 --disable"
    )]
    Set {
        /// The cluster's name or id.
        cluster: String,
        /// A network in CIDR notation (IPv4 or IPv6; /32 or /128 for one address); the
        /// networks given replace the list; repeat for several.
        #[arg(
            long = "allow",
            value_name = "CIDR",
            required_unless_present = "disable"
        )]
        allow: Vec<String>,
        /// Let every holder of a credential call the API server (the list is kept unless
        /// --allow gives another).
        #[arg(long)]
        disable: bool,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
    },
}

/// Pool sizes given on `node-pool add` and `node-pool scale`.
#[derive(Debug, Args)]
pub struct ScaleFlags {
    /// The number of nodes.
    #[arg(long)]
    pub count: Option<u32>,
    /// Let the pool scale between --min-nodes and --max-nodes.
    #[arg(long, overrides_with = "no_auto_scale")]
    pub auto_scale: bool,
    /// Turn auto-scaling off (--count then gives the size).
    #[arg(long)]
    pub no_auto_scale: bool,
    /// Autoscale: the fewest nodes the pool scales down to.
    #[arg(long)]
    pub min_nodes: Option<u32>,
    /// Autoscale: the most nodes the pool scales up to.
    #[arg(long)]
    pub max_nodes: Option<u32>,
}

#[derive(Debug, Subcommand)]
pub enum NodePoolCommand {
    /// Add a node pool.
    #[command(
        after_help = "Examples:\n  kubesvc node-pool add prod-1 batch --size kube.c5.xlarge --count 2 --wait\n  kubesvc node-pool add prod-1 web --size kube.c5.large --auto-scale --min-nodes 1 --max-nodes 5 --label tier=web"
    )]
    Add {
        /// The cluster's name or id.
        cluster: String,
        /// The node pool's name.
        pool: String,
        /// The machine tier (cannot change later).
        #[arg(long)]
        size: String,
        #[command(flatten)]
        scale: ScaleFlags,
        /// A Kubernetes label KEY=VALUE; repeat for several.
        #[arg(long = "label", value_name = "KEY=VALUE")]
        labels: Vec<String>,
        /// A Kubernetes taint KEY=VALUE:EFFECT or KEY:EFFECT (NoSchedule, PreferNoSchedule or
        /// NoExecute); repeat for several.
        #[arg(long = "taint", value_name = "KEY=VALUE:EFFECT")]
        taints: Vec<String>,
        /// A tag KEY=VALUE; repeat for several.
        #[arg(long = "tag", value_name = "KEY=VALUE")]
        tags: Vec<String>,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
    },
    /// Replace a pool's Kubernetes labels or taints; its running nodes get them in place.
    #[command(
        after_help = "Examples:\n  kubesvc node-pool update prod-1 gpu --taint nvidia.com/gpu:NoSchedule --label role=gpu --wait\n  kubesvc node-pool update prod-1 gpu --clear-taints"
    )]
    Update {
        /// The cluster's name or id.
        cluster: String,
        /// The node pool's name.
        pool: String,
        /// A Kubernetes label KEY=VALUE; the labels given replace the pool's; repeat for several.
        #[arg(
            long = "label",
            value_name = "KEY=VALUE",
            conflicts_with = "clear_labels"
        )]
        labels: Vec<String>,
        /// Remove every label of the pool.
        #[arg(long)]
        clear_labels: bool,
        /// A Kubernetes taint KEY=VALUE:EFFECT or KEY:EFFECT; the taints given replace the
        /// pool's; repeat for several.
        #[arg(
            long = "taint",
            value_name = "KEY=VALUE:EFFECT",
            conflicts_with = "clear_taints"
        )]
        taints: Vec<String>,
        /// Remove every taint of the pool.
        #[arg(long)]
        clear_taints: bool,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
    },
    /// A cluster's node pools.
    #[command(after_help = "Example:\n  kubesvc node-pool list prod-1")]
    List {
        /// The cluster's name or id.
        cluster: String,
    },
    /// Change a pool's size or auto-scaling.
    #[command(
        after_help = "Examples:\n  kubesvc node-pool scale prod-1 web --count 5 --wait\n  kubesvc node-pool scale prod-1 web --auto-scale --min-nodes 2 --max-nodes 8"
    )]
    Scale {
        /// The cluster's name or id.
        cluster: String,
        /// The node pool's name.
        pool: String,
        #[command(flatten)]
        scale: ScaleFlags,
        /// A pool's machine tier cannot change: this flag only explains how to replace the pool.
        #[arg(long, hide = true)]
        size: Option<String>,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
    },
    /// Delete a pool and its nodes (a cluster keeps at least one pool).
    #[command(
        after_help = "Examples:\n  kubesvc node-pool delete prod-1 batch --wait\n  kubesvc node-pool delete prod-1 batch --wait --yes  # without the question (scripts)"
    )]
    Delete {
        /// The cluster's name or id.
        cluster: String,
        /// The node pool's name.
        pool: String,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
        #[command(flatten)]
        yes: YesFlag,
    },
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// A cluster's nodes.
    #[command(after_help = "Example:\n  kubesvc node list prod-1 --pool web")]
    List {
        /// The cluster's name or id.
        cluster: String,
        /// Only this pool's nodes.
        #[arg(long)]
        pool: Option<String>,
    },
    /// Replace a node (its pool keeps its count).
    #[command(
        after_help = "Examples:\n  kubesvc node delete prod-1 web-7f3k2\n  kubesvc node delete prod-1 web-7f3k2 --yes  # without the question (scripts)"
    )]
    Delete {
        /// The cluster's name or id.
        cluster: String,
        /// The node's name (`kubesvc node list CLUSTER` shows them).
        node: String,
        #[command(flatten)]
        key: KeyFlag,
        #[command(flatten)]
        yes: YesFlag,
    },
}

#[derive(Debug, Subcommand)]
pub enum EipCommand {
    /// Allocate an Elastic IP.
    #[command(
        after_help = "Example:\n  kubesvc eip allocate prod-1 --name web --exposure private --wait"
    )]
    Allocate {
        /// The cluster's name or id.
        cluster: String,
        /// A name (DNS label), unique in the cluster.
        #[arg(long)]
        name: Option<String>,
        /// public or private (default: what the cluster's network mode allows).
        #[arg(long)]
        exposure: Option<String>,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
    },
    /// A cluster's Elastic IPs.
    #[command(after_help = "Example:\n  kubesvc eip list prod-1")]
    List {
        /// The cluster's name or id.
        cluster: String,
    },
    /// One Elastic IP, by id or name.
    #[command(after_help = "Example:\n  kubesvc eip get prod-1 web")]
    Get {
        /// The cluster's name or id.
        cluster: String,
        /// The Elastic IP's name or id.
        eip: String,
    },
    /// Release an Elastic IP (its address returns to the pool).
    #[command(
        after_help = "Examples:\n  kubesvc eip release prod-1 web --wait\n  kubesvc eip release prod-1 web --wait --yes  # without the question (scripts)"
    )]
    Release {
        /// The cluster's name or id.
        cluster: String,
        /// The Elastic IP's name or id.
        eip: String,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
        #[command(flatten)]
        yes: YesFlag,
    },
}

#[derive(Debug, Subcommand)]
pub enum FirewallCommand {
    /// Allow ingress traffic from some networks.
    #[command(
        after_help = "Examples:\n  kubesvc firewall-rule create prod-1 --name https --protocol tcp --port 443 --source 203.0.113.0/24\n  kubesvc firewall-rule create prod-1 --protocol udp --port 30000-30100 --source 10.0.0.0/8 --source 192.168.0.0/16"
    )]
    Create {
        /// The cluster's name or id.
        cluster: String,
        /// A name (DNS label).
        #[arg(long)]
        name: Option<String>,
        /// A free-text description.
        #[arg(long)]
        description: Option<String>,
        /// tcp, udp or icmp.
        #[arg(long)]
        protocol: String,
        /// A port or a range FROM-TO (tcp and udp only).
        #[arg(long, value_name = "PORT|FROM-TO")]
        port: Option<String>,
        /// A source network in CIDR notation; repeat for several.
        #[arg(long = "source", value_name = "CIDR", required = true)]
        sources: Vec<String>,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
    },
    /// A cluster's firewall rules.
    #[command(after_help = "Example:\n  kubesvc firewall-rule list prod-1")]
    List {
        /// The cluster's name or id.
        cluster: String,
    },
    /// One rule, by id or name.
    #[command(after_help = "Example:\n  kubesvc firewall-rule get prod-1 https")]
    Get {
        /// The cluster's name or id.
        cluster: String,
        /// The firewall rule's name or id.
        rule: String,
    },
    /// Delete a rule.
    #[command(
        after_help = "Examples:\n  kubesvc firewall-rule delete prod-1 https\n  kubesvc firewall-rule delete prod-1 https --yes  # without the question (scripts)"
    )]
    Delete {
        /// The cluster's name or id.
        cluster: String,
        /// The firewall rule's name or id.
        rule: String,
        #[command(flatten)]
        wait: WaitFlags,
        #[command(flatten)]
        key: KeyFlag,
        #[command(flatten)]
        yes: YesFlag,
    },
}

/// The help of a Basic server's `--username`, with the password rule the server applies, so the
/// rule is read before a refusal.
fn basic_username_help(whose: &str) -> String {
    format!(
        "basic: {whose}; its password is the secret: {}",
        crate::rules::PASSWORD_RULE
    )
}

/// Where a secret comes from: a prompt without echo by default, never from the command line
/// (argv is visible to every user of the machine through ps).
#[derive(Debug, Clone, Args)]
pub struct SecretFlags {
    /// Read the secret (password, token or client secret) from standard input.
    #[arg(long, conflicts_with = "secret_from_env")]
    pub secret_stdin: bool,
    /// Read the secret from this environment variable.
    #[arg(long, value_name = "VAR", alias = "password-from-env")]
    pub secret_from_env: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum AuthServerCommand {
    /// Create an auth server: token, basic or oidc.
    #[command(
        after_help = "Examples:\n  kubesvc auth-server create api-keys --environment production --type token --secret-stdin < token.txt\n  kubesvc auth-server create staff --environment production --type basic --username alice\n  kubesvc auth-server create corp-sso --environment production --type oidc \\\n    --issuer-url https://login.example.com --client-id gw --authorized-domain app.example.com \\\n    --redirect-path /oauth2/callback --secret-from-env CLIENT_SECRET"
    )]
    Create {
        /// The auth server's name: a DNS label, unique in its environment.
        name: String,
        /// A DNS label, e.g. production.
        #[arg(long)]
        environment: String,
        /// token, basic or oidc.
        #[arg(long = "type", value_name = "TYPE")]
        kind: String,
        #[arg(long, help = basic_username_help("the first user's name"))]
        username: Option<String>,
        /// basic: the realm of the challenge.
        #[arg(long)]
        realm: Option<String>,
        #[command(flatten)]
        oidc: OidcFlags,
        #[command(flatten)]
        secret: SecretFlags,
        #[command(flatten)]
        key: KeyFlag,
    },
    /// The organization's auth servers.
    #[command(after_help = "Example:\n  kubesvc auth-server list --environment production")]
    List {
        /// Only the auth servers of this environment.
        #[arg(long)]
        environment: Option<String>,
    },
    /// One auth server, by id, or by name (with --environment when the name is in several).
    #[command(after_help = "Example:\n  kubesvc auth-server get corp-sso")]
    Get {
        /// The auth server's name or id.
        server: String,
        /// The gateway environment, a DNS label such as production (to tell apart servers of one name).
        #[arg(long)]
        environment: Option<String>,
    },
    /// Rename, move or reconfigure an auth server (credentials change with `credential`).
    #[command(
        after_help = "Examples:\n  kubesvc auth-server update corp-sso --new-name sso --new-environment staging\n  kubesvc auth-server update corp-sso --client-secret --secret-stdin < secret.txt"
    )]
    Update {
        /// The auth server's name or id.
        server: String,
        /// The gateway environment, a DNS label such as production (to tell apart servers of one name).
        #[arg(long)]
        environment: Option<String>,
        /// Rename the server to this.
        #[arg(long)]
        new_name: Option<String>,
        /// Move the server to this environment.
        #[arg(long)]
        new_environment: Option<String>,
        /// basic: a new realm.
        #[arg(long)]
        realm: Option<String>,
        #[command(flatten)]
        oidc: OidcFlags,
        /// oidc: set a new client secret (read like every secret).
        #[arg(long)]
        client_secret: bool,
        #[command(flatten)]
        secret: SecretFlags,
    },
    /// Delete an auth server (gateway routes naming it fail closed).
    #[command(
        after_help = "Examples:\n  kubesvc auth-server delete corp-sso\n  kubesvc auth-server delete corp-sso --yes  # without the question (scripts)"
    )]
    Delete {
        /// The auth server's name or id.
        server: String,
        /// The gateway environment, a DNS label such as production (to tell apart servers of one name).
        #[arg(long)]
        environment: Option<String>,
        #[command(flatten)]
        key: KeyFlag,
        #[command(flatten)]
        yes: YesFlag,
    },
    /// Add or remove a basic user or a static token.
    #[command(subcommand)]
    Credential(CredentialCommand),
}

/// The OIDC settings of `auth-server create` and `update`.
#[derive(Debug, Clone, Args)]
pub struct OidcFlags {
    /// oidc: the issuer (https, or http on a loopback host).
    #[arg(long)]
    pub issuer_url: Option<String>,
    /// oidc: the client id.
    #[arg(long)]
    pub client_id: Option<String>,
    /// oidc: the host (and port) the gateway answers for, e.g. app.example.com.
    #[arg(long)]
    pub authorized_domain: Option<String>,
    /// oidc: the callback path, e.g. /oauth2/callback.
    #[arg(long)]
    pub redirect_path: Option<String>,
    /// oidc: the ID-token claim that names the user (default: preferred_username).
    #[arg(long)]
    pub username_claim: Option<String>,
    /// oidc: the claim that holds the user's email (default: email).
    #[arg(long)]
    pub email_claim: Option<String>,
    /// oidc: the claim that holds the user's roles.
    #[arg(long)]
    pub role_claim: Option<String>,
    /// oidc: the claim that holds the user's groups.
    #[arg(long)]
    pub group_claim: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum CredentialCommand {
    /// Add a user (basic: --username, the password as the secret) or a token (token servers).
    #[command(
        after_help = "Examples:\n  kubesvc auth-server credential add staff --username bob --secret-from-env BOB_PASSWORD\n  kubesvc auth-server credential add api-keys --secret-stdin < new-token.txt"
    )]
    Add {
        /// The auth server's name or id.
        server: String,
        /// The gateway environment, a DNS label such as production (to tell apart servers of one name).
        #[arg(long)]
        environment: Option<String>,
        #[arg(long, help = basic_username_help("the new user's name"))]
        username: Option<String>,
        #[command(flatten)]
        secret: SecretFlags,
        #[command(flatten)]
        key: KeyFlag,
    },
    /// Remove a credential by id (`auth-server get` lists them).
    #[command(after_help = "Example:\n  kubesvc auth-server credential remove api-keys 6f1c…")]
    Remove {
        /// The auth server's name or id.
        server: String,
        /// The credential's id (`kubesvc auth-server get SERVER` shows them).
        credential: String,
        /// The gateway environment, a DNS label such as production (to tell apart servers of one name).
        #[arg(long)]
        environment: Option<String>,
        #[command(flatten)]
        key: KeyFlag,
        #[command(flatten)]
        yes: YesFlag,
    },
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// Every command a user can run (a leaf of the tree) shows an example in its help.
    #[test]
    fn every_command_has_an_example() {
        fn leaves(cmd: &clap::Command, path: String, out: &mut Vec<(String, bool)>) {
            let subs: Vec<&clap::Command> = cmd
                .get_subcommands()
                .filter(|c| c.get_name() != "help")
                .collect();
            if subs.is_empty() {
                let example = cmd
                    .get_after_help()
                    .is_some_and(|h| h.to_string().contains("Example"));
                out.push((path.clone(), example));
            }
            for sub in subs {
                leaves(sub, format!("{path} {}", sub.get_name()), out);
            }
        }
        let mut all = Vec::new();
        leaves(&Cli::command(), "kubesvc".into(), &mut all);
        let missing: Vec<&String> = all.iter().filter(|(_, ok)| !ok).map(|(p, _)| p).collect();
        assert!(all.len() > 30, "{all:?}");
        assert!(missing.is_empty(), "no example: {missing:?}");
    }

    #[test]
    fn the_definitions_hold_together() {
        Cli::command().debug_assert();
    }

    /// Every command's `--help` says what each of its arguments is, and shows the global
    /// options apart from the command's own.
    #[test]
    fn every_argument_says_what_it_is() {
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                let id = arg.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
                if arg.is_global_set() {
                    assert_eq!(
                        arg.get_help_heading(),
                        Some("Global options"),
                        "{path} {id}"
                    );
                }
            }
            for sub in command.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        walk(&Cli::command(), "kubesvc", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}
