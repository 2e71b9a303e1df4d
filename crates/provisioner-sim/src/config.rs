//! The simulated cloud's settings: parsed from environment-style settings, each error naming
//! the setting at fault.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use domain::model::cluster::RegistrationReason;
use domain::model::elastic_ip::AddressPool;
use domain::model::firewall::Ipv4Cidr;

/// Every step name [`domain::ports::provisioning::Step::name`] gives, as the fault settings
/// name them.
pub const STEP_NAMES: [&str; 13] = [
    "create_control_plane",
    "register_hub",
    "install_default_environment",
    "create_node",
    "configure_node",
    "delete_node",
    "attach_address",
    "detach_address",
    "apply_firewall_rule",
    "remove_firewall_rule",
    "set_exposure",
    "set_control_plane_firewall",
    "destroy_cluster",
];

/// Delay of each simulated provisioning step, in milliseconds (0 to 600000). `0` runs steps at
/// once, for tests. Default 500.
pub const PROVISIONER_STEP_MS: &str = "PROVISIONER_STEP_MS";
/// Nodes the zone can run in all (at least 1); a create or scale past it gives 503. Default 10000.
pub const ZONE_MAX_NODES: &str = "ZONE_MAX_NODES";
/// The pool private Elastic IPs come from, an IPv4 CIDR of /30 or larger (network and broadcast
/// addresses are never handed out, so a /30 gives two). Default `10.96.0.0/16`.
pub const ELASTIC_IP_PRIVATE_CIDR: &str = "ELASTIC_IP_PRIVATE_CIDR";
/// The pool public Elastic IPs come from, as above; the empty string disables the public pool
/// (public allocations then get 503). Default `198.51.100.0/24`. Must not overlap the private
/// pool.
pub const ELASTIC_IP_PUBLIC_CIDR: &str = "ELASTIC_IP_PUBLIC_CIDR";
/// What public API hostnames end in, e.g. `.k8s.example.com` (a leading dot is added when
/// missing; letters are lowercased). Default `.k8s.example.com`.
pub const PUBLIC_HOSTNAME_SUFFIX: &str = "PUBLIC_HOSTNAME_SUFFIX";
/// Fault injection: comma-separated step names (see [`STEP_NAMES`]) that always fail
/// permanently, so the object they work on goes to `Failed`. Default: none.
pub const PROVISIONER_FAIL_STEPS: &str = "PROVISIONER_FAIL_STEPS";
/// Fault injection: comma-separated step names that fail transiently (retried with backoff) at
/// the rate `PROVISIONER_FLAKY_RATE`; unset, empty or `*` means every step. Default: every step.
pub const PROVISIONER_FLAKY_STEPS: &str = "PROVISIONER_FLAKY_STEPS";
/// Fault injection: the share (0.0 to 1.0) of flaky steps that fail transiently. Default 0.0.
pub const PROVISIONER_FLAKY_RATE: &str = "PROVISIONER_FLAKY_RATE";
/// Fault injection: how hub registration and the default environment end. `ready` (the
/// default), or one of the registration reason texts, which makes the step it belongs to end `failed`
/// with that reason: `organization quota exceeded`, `name or address conflict in the service
/// hub` and `registration rejected by the service hub` fail the hub registration;
/// `waiting for the service platform installation` and `Door platform installation failed`
/// fail the default environment. The other of the two ends `ready`.
pub const PROVISIONER_HUB_OUTCOME: &str = "PROVISIONER_HUB_OUTCOME";

/// Every setting this crate reads.
pub const SETTINGS: [&str; 9] = [
    PROVISIONER_STEP_MS,
    ZONE_MAX_NODES,
    ELASTIC_IP_PRIVATE_CIDR,
    ELASTIC_IP_PUBLIC_CIDR,
    PUBLIC_HOSTNAME_SUFFIX,
    PROVISIONER_FAIL_STEPS,
    PROVISIONER_FLAKY_STEPS,
    PROVISIONER_FLAKY_RATE,
    PROVISIONER_HUB_OUTCOME,
];

const MAX_STEP_MS: u64 = 600_000;

/// A setting that could not be used. Settings here hold no secret, so the message may quote the
/// value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{setting}: {message}")]
pub struct SettingError {
    pub setting: &'static str,
    pub message: String,
}

fn bad(setting: &'static str, message: impl Into<String>) -> SettingError {
    SettingError {
        setting,
        message: message.into(),
    }
}

/// Fault injection, for tests of failure handling.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultConfig {
    /// Step names that always fail with a permanent error.
    pub fail_steps: BTreeSet<String>,
    /// Step names that fail transiently at `flaky_rate`; empty means every step.
    pub flaky_steps: BTreeSet<String>,
    /// 0.0 (never) to 1.0 (always).
    pub flaky_rate: f64,
    /// `None`: hub registration and default environment end `ready`.
    pub hub_outcome: Option<RegistrationReason>,
}

/// How the simulated cloud behaves.
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    pub step_delay: Duration,
    pub zone_max_nodes: u64,
    pub private_cidr: Ipv4Cidr,
    /// `None`: the public pool is disabled.
    pub public_cidr: Option<Ipv4Cidr>,
    /// Begins with a dot, e.g. `.k8s.example.com`.
    pub public_hostname_suffix: String,
    pub faults: FaultConfig,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            step_delay: Duration::from_millis(500),
            zone_max_nodes: 10_000,
            private_cidr: cidr_const(10, 96, 0, 0, 16),
            public_cidr: Some(cidr_const(198, 51, 100, 0, 24)),
            public_hostname_suffix: ".k8s.example.com".into(),
            faults: FaultConfig::default(),
        }
    }
}

fn cidr_const(a: u8, b: u8, c: u8, d: u8, prefix: u8) -> Ipv4Cidr {
    // The defaults are valid CIDRs; a failure here would be a typo caught by the tests.
    Ipv4Cidr::parse(&format!("{a}.{b}.{c}.{d}/{prefix}"))
        .unwrap_or_else(|e| panic!("default CIDR: {e}"))
}

impl SimConfig {
    /// Settings without faults and without delay: what tests usually want.
    pub fn for_tests() -> Self {
        SimConfig {
            step_delay: Duration::ZERO,
            ..SimConfig::default()
        }
    }

    /// Reads the process environment (see [`SimConfig::from_settings`]).
    pub fn from_env() -> Result<Self, SettingError> {
        Self::from_settings(|name| std::env::var(name).ok())
    }

    /// Reads a map of settings (see [`SimConfig::from_settings`]).
    pub fn from_map(settings: &HashMap<String, String>) -> Result<Self, SettingError> {
        Self::from_settings(|name| settings.get(name).cloned())
    }

    /// Reads every setting named in [`SETTINGS`] through `lookup`; an unset (or, except for
    /// `ELASTIC_IP_PUBLIC_CIDR`, empty) setting takes its default. The first bad setting is
    /// the error, named.
    pub fn from_settings(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, SettingError> {
        let defaults = SimConfig::default();
        let get = |name: &str| lookup(name).map(|v| v.trim().to_owned());
        let set = |name: &str| get(name).filter(|v| !v.is_empty());

        let step_delay = match set(PROVISIONER_STEP_MS) {
            Some(v) => Duration::from_millis(parse_step_ms(&v)?),
            None => defaults.step_delay,
        };
        let zone_max_nodes = match set(ZONE_MAX_NODES) {
            Some(v) => parse_zone_max_nodes(&v)?,
            None => defaults.zone_max_nodes,
        };
        let private_cidr = match set(ELASTIC_IP_PRIVATE_CIDR) {
            Some(v) => parse_pool_cidr(ELASTIC_IP_PRIVATE_CIDR, &v)?,
            None => defaults.private_cidr,
        };
        let public_cidr = match get(ELASTIC_IP_PUBLIC_CIDR) {
            Some(v) if v.is_empty() => None,
            Some(v) => Some(parse_pool_cidr(ELASTIC_IP_PUBLIC_CIDR, &v)?),
            None => defaults.public_cidr,
        };
        if let Some(public) = public_cidr
            && overlaps(private_cidr, public)
        {
            return Err(bad(
                ELASTIC_IP_PUBLIC_CIDR,
                format!(
                    "{public} overlaps {ELASTIC_IP_PRIVATE_CIDR} ({private_cidr}); the pools must be disjoint"
                ),
            ));
        }
        let public_hostname_suffix = match set(PUBLIC_HOSTNAME_SUFFIX) {
            Some(v) => parse_hostname_suffix(&v)?,
            None => defaults.public_hostname_suffix,
        };
        let fail_steps = match set(PROVISIONER_FAIL_STEPS) {
            Some(v) => parse_step_list(PROVISIONER_FAIL_STEPS, &v)?,
            None => BTreeSet::new(),
        };
        let flaky_steps = match set(PROVISIONER_FLAKY_STEPS) {
            Some(v) if v == "*" => BTreeSet::new(),
            Some(v) => parse_step_list(PROVISIONER_FLAKY_STEPS, &v)?,
            None => BTreeSet::new(),
        };
        let flaky_rate = match set(PROVISIONER_FLAKY_RATE) {
            Some(v) => parse_rate(&v)?,
            None => 0.0,
        };
        let hub_outcome = match set(PROVISIONER_HUB_OUTCOME) {
            Some(v) => parse_hub_outcome(&v)?,
            None => None,
        };
        Ok(SimConfig {
            step_delay,
            zone_max_nodes,
            private_cidr,
            public_cidr,
            public_hostname_suffix,
            faults: FaultConfig {
                fail_steps,
                flaky_steps,
                flaky_rate,
                hub_outcome,
            },
        })
    }
}

fn parse_step_ms(v: &str) -> Result<u64, SettingError> {
    match v.parse::<u64>() {
        Ok(ms) if ms <= MAX_STEP_MS => Ok(ms),
        _ => Err(bad(
            PROVISIONER_STEP_MS,
            format!("{v:?} is not a whole number of milliseconds from 0 to {MAX_STEP_MS}"),
        )),
    }
}

fn parse_zone_max_nodes(v: &str) -> Result<u64, SettingError> {
    match v.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(bad(
            ZONE_MAX_NODES,
            format!("{v:?} is not a whole number of nodes, at least 1"),
        )),
    }
}

fn parse_pool_cidr(setting: &'static str, v: &str) -> Result<Ipv4Cidr, SettingError> {
    let cidr = Ipv4Cidr::parse(v).map_err(|e| bad(setting, e))?;
    if AddressPool::new(cidr).capacity() == 0 {
        return Err(bad(
            setting,
            format!(
                "{cidr} has no usable address (network and broadcast are never handed out); use a /30 or larger"
            ),
        ));
    }
    Ok(cidr)
}

fn range(c: Ipv4Cidr) -> (u64, u64) {
    let start = u64::from(u32::from(c.network()));
    (start, start + (1u64 << (32 - u32::from(c.prefix()))) - 1)
}

fn overlaps(a: Ipv4Cidr, b: Ipv4Cidr) -> bool {
    let (a0, a1) = range(a);
    let (b0, b1) = range(b);
    a0 <= b1 && b0 <= a1
}

/// Normalizes a public hostname suffix: lowercase, one leading dot, each label a DNS label.
pub fn parse_hostname_suffix(v: &str) -> Result<String, SettingError> {
    let lower = v.trim().to_ascii_lowercase();
    let body = lower.strip_prefix('.').unwrap_or(&lower);
    let label_ok = |l: &str| {
        let bytes = l.as_bytes();
        (1..=63).contains(&bytes.len())
            && bytes
                .iter()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
            && bytes.first() != Some(&b'-')
            && bytes.last() != Some(&b'-')
    };
    if body.is_empty() || body.len() > 190 || !body.split('.').all(label_ok) {
        return Err(bad(
            PUBLIC_HOSTNAME_SUFFIX,
            format!(
                "{v:?} is not a DNS suffix like \".k8s.example.com\" (DNS labels separated by dots)"
            ),
        ));
    }
    Ok(format!(".{body}"))
}

fn parse_step_list(setting: &'static str, v: &str) -> Result<BTreeSet<String>, SettingError> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|name| {
            if STEP_NAMES.contains(&name) {
                Ok(name.to_owned())
            } else {
                Err(bad(
                    setting,
                    format!(
                        "{name:?} is not a step name; known steps: {}",
                        STEP_NAMES.join(", ")
                    ),
                ))
            }
        })
        .collect()
}

fn parse_rate(v: &str) -> Result<f64, SettingError> {
    match v.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(bad(
            PROVISIONER_FLAKY_RATE,
            format!("{v:?} is not a number from 0.0 to 1.0"),
        )),
    }
}

fn parse_hub_outcome(v: &str) -> Result<Option<RegistrationReason>, SettingError> {
    if v == "ready" {
        return Ok(None);
    }
    RegistrationReason::parse(v).map(Some).ok_or_else(|| {
        let texts: Vec<_> = RegistrationReason::ALL
            .iter()
            .map(|r| format!("{:?}", r.as_str()))
            .collect();
        bad(
            PROVISIONER_HUB_OUTCOME,
            format!("{v:?} is neither \"ready\" nor one of {}", texts.join(", ")),
        )
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use domain::ports::provisioning::Step;
    use uuid::Uuid;

    fn parse(pairs: &[(&str, &str)]) -> Result<SimConfig, SettingError> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        SimConfig::from_map(&map)
    }

    fn err(pairs: &[(&str, &str)]) -> SettingError {
        parse(pairs).expect_err("the settings must be refused")
    }

    #[test]
    fn no_settings_give_the_documented_defaults() {
        let c = parse(&[]).unwrap();
        assert_eq!(c, SimConfig::default());
        assert_eq!(c.zone_max_nodes, 10_000);
        assert_eq!(c.private_cidr.to_string(), "10.96.0.0/16");
        assert_eq!(
            c.public_cidr.map(|c| c.to_string()).as_deref(),
            Some("198.51.100.0/24")
        );
        assert_eq!(c.public_hostname_suffix, ".k8s.example.com");
        assert_eq!(c.faults, FaultConfig::default());
    }

    #[test]
    fn every_setting_is_read() {
        let c = parse(&[
            (PROVISIONER_STEP_MS, "0"),
            (ZONE_MAX_NODES, "12"),
            (ELASTIC_IP_PRIVATE_CIDR, "10.0.0.0/30"),
            (ELASTIC_IP_PUBLIC_CIDR, "192.0.2.0/30"),
            (PUBLIC_HOSTNAME_SUFFIX, "Clusters.Example.NET"),
            (PROVISIONER_FAIL_STEPS, "create_node, register_hub"),
            (PROVISIONER_FLAKY_STEPS, "attach_address"),
            (PROVISIONER_FLAKY_RATE, "0.25"),
            (PROVISIONER_HUB_OUTCOME, "organization quota exceeded"),
        ])
        .unwrap();
        assert_eq!(c.step_delay, Duration::ZERO);
        assert_eq!(c.zone_max_nodes, 12);
        assert_eq!(c.private_cidr.to_string(), "10.0.0.0/30");
        assert_eq!(
            c.public_cidr.map(|c| c.to_string()).as_deref(),
            Some("192.0.2.0/30")
        );
        assert_eq!(c.public_hostname_suffix, ".clusters.example.net");
        assert_eq!(
            c.faults.fail_steps,
            ["create_node", "register_hub"].map(String::from).into()
        );
        assert_eq!(
            c.faults.flaky_steps,
            ["attach_address"].map(String::from).into()
        );
        assert_eq!(c.faults.flaky_rate, 0.25);
        assert_eq!(
            c.faults.hub_outcome,
            Some(RegistrationReason::QuotaExceeded)
        );
    }

    #[test]
    fn an_empty_public_cidr_disables_the_public_pool() {
        assert_eq!(
            parse(&[(ELASTIC_IP_PUBLIC_CIDR, "")]).unwrap().public_cidr,
            None
        );
    }

    #[test]
    fn hub_outcome_ready_and_every_reason_text_are_accepted() {
        assert_eq!(
            parse(&[(PROVISIONER_HUB_OUTCOME, "ready")])
                .unwrap()
                .faults
                .hub_outcome,
            None
        );
        for r in RegistrationReason::ALL {
            assert_eq!(
                parse(&[(PROVISIONER_HUB_OUTCOME, r.as_str())])
                    .unwrap()
                    .faults
                    .hub_outcome,
                Some(r)
            );
        }
    }

    #[test]
    fn bad_values_are_refused_naming_the_setting() {
        let cases: &[(&str, &str)] = &[
            (PROVISIONER_STEP_MS, "abc"),
            (PROVISIONER_STEP_MS, "-1"),
            (PROVISIONER_STEP_MS, "600001"),
            (ZONE_MAX_NODES, "0"),
            (ZONE_MAX_NODES, "ten"),
            (ELASTIC_IP_PRIVATE_CIDR, "10.96.0.0"),
            (ELASTIC_IP_PRIVATE_CIDR, "10.96.0.1/16"),
            (ELASTIC_IP_PRIVATE_CIDR, "10.0.0.0/31"),
            (ELASTIC_IP_PUBLIC_CIDR, "fd00::/64"),
            (ELASTIC_IP_PUBLIC_CIDR, "10.96.4.0/24"),
            (PUBLIC_HOSTNAME_SUFFIX, "."),
            (PUBLIC_HOSTNAME_SUFFIX, ".bad_label.example.com"),
            (PUBLIC_HOSTNAME_SUFFIX, ".-x.example.com"),
            (PROVISIONER_FAIL_STEPS, "create_node,launch_rocket"),
            (PROVISIONER_FLAKY_STEPS, "CreateNode"),
            (PROVISIONER_FLAKY_RATE, "1.5"),
            (PROVISIONER_FLAKY_RATE, "NaN"),
            (PROVISIONER_FLAKY_RATE, "half"),
            (PROVISIONER_HUB_OUTCOME, "failed"),
        ];
        for &(setting, value) in cases {
            let e = err(&[(setting, value)]);
            assert_eq!(e.setting, setting, "{setting}={value:?}: {e}");
            assert!(e.to_string().starts_with(&format!("{setting}: ")), "{e}");
        }
    }

    #[test]
    fn step_names_are_exactly_those_of_the_port() {
        let mut names: Vec<&str> = crate::test_steps::one_of_each(Uuid::new_v4())
            .iter()
            .map(Step::name)
            .collect();
        names.sort_unstable();
        let mut known = STEP_NAMES.to_vec();
        known.sort_unstable();
        assert_eq!(names, known);
    }
}
