//! The numeric limits, in one place: validation, the catalog's
//! published constraints and the tests all read these.

pub const MIN_POOLS: usize = 1;
pub const MAX_POOLS: usize = 20;
pub const MAX_NODES_PER_POOL: u32 = 200;
pub const MAX_CLUSTER_TAGS: usize = 64;
pub const MAX_CLUSTER_DESCRIPTION: usize = 16384;
pub const MAX_FIREWALL_DESCRIPTION: usize = 255;
pub const MAX_SOURCE_CIDRS: usize = 16;
/// Taints one node pool may put on its nodes.
pub const MAX_TAINTS_PER_POOL: usize = 50;
/// Networks a cluster's control-plane allow-list may hold.
pub const MAX_CONTROL_PLANE_ALLOWED: usize = 100;
pub const DEFAULT_POOL_NAME: &str = "default";
pub const DEFAULT_MIN_NODES: u32 = 1;
/// How many nodes above its count a pool may go while an upgrade replaces nodes.
pub const MAX_SURGE: u32 = 10;
/// How many nodes below its count a pool may go while an upgrade replaces nodes.
pub const MAX_UNAVAILABLE: u32 = 10;

pub const PAGE_DEFAULT: u32 = 1;
pub const SIZE_DEFAULT: u32 = 20;
pub const SIZE_MAX: u32 = 100;
pub const TIMEOUT_SECONDS_DEFAULT: u32 = 25;
pub const TIMEOUT_SECONDS_MAX: u32 = 60;
/// Seconds a client waits before asking for a kubeconfig again.
pub const KUBECONFIG_RETRY_AFTER_SECONDS: u32 = 5;

/// Static gateway tokens are at least this long.
pub const MIN_STATIC_TOKEN_LEN: usize = 16;
/// Basic passwords are at least this long (NIST SP 800-63B's advice for passwords a person
/// chooses: length, not composition rules).
pub const MIN_PASSWORD_LEN: usize = 12;
/// The password rule in the words every face shows beside the field (API, console, CLI).
pub const PASSWORD_RULE: &str = "at least 12 characters, not the username, not one character repeated and not a commonly used password";
/// Credentials (Basic pairs or static tokens) one auth server may hold. Each Basic password
/// costs an Argon2id hash when it is stored and a verification at the gateway; the bound keeps
/// one request's hashing, and the gateway's per-request comparison of tokens, small.
pub const MAX_CREDENTIALS_PER_AUTH_SERVER: usize = 100;
