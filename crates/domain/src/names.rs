//! Names and keys that have a syntax of their own. Each is a newtype that can only be built by
//! `parse`, so a value of the type is valid by construction ("parse, don't validate").

use std::fmt;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Serialize, Serializer};

/// An RFC 1123 label: lowercase ASCII, 1-63 characters.
pub const DNS_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
pub const DNS_LABEL_MAX: usize = 63;
/// Worker node names.
pub const NODE_NAME_PATTERN: &str = "^[a-z0-9][-a-z0-9.]{0,252}[a-z0-9]$";
/// An idempotency key.
pub const IDEMPOTENCY_KEY_PATTERN: &str = r"^[A-Za-z0-9_\-:.]{8,255}$";
/// Kubernetes' name part of a qualified name (a label or taint key without its prefix), and
/// its label values: alphanumerics at both ends, `-`, `_` and `.` inside.
pub const KUBERNETES_NAME_PATTERN: &str = "^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$";
/// The longest name part of a qualified name, and the longest label value.
pub const KUBERNETES_NAME_MAX: usize = 63;
/// The longest prefix of a qualified name (a DNS subdomain).
pub const DNS_SUBDOMAIN_MAX: usize = 253;

#[expect(
    clippy::expect_used,
    reason = "the patterns are constants checked by the unit tests"
)]
static DNS_LABEL_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(DNS_LABEL_PATTERN).expect("valid pattern"));
#[expect(
    clippy::expect_used,
    reason = "the patterns are constants checked by the unit tests"
)]
static NODE_NAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(NODE_NAME_PATTERN).expect("valid pattern"));
#[expect(
    clippy::expect_used,
    reason = "the patterns are constants checked by the unit tests"
)]
static KUBERNETES_NAME_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(KUBERNETES_NAME_PATTERN).expect("valid pattern"));
#[expect(
    clippy::expect_used,
    reason = "the patterns are constants checked by the unit tests"
)]
static IDEMPOTENCY_KEY_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(IDEMPOTENCY_KEY_PATTERN).expect("valid pattern"));

/// Whether `s` is a DNS label (1-63, lowercase letters, digits and inner hyphens).
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty() && s.len() <= DNS_LABEL_MAX && DNS_LABEL_RE.is_match(s)
}

/// Message for a value that is not a DNS label; says which part of the rule failed.
pub fn dns_label_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        Some("must not be empty".into())
    } else if s.chars().count() > DNS_LABEL_MAX {
        Some(format!("must be at most {DNS_LABEL_MAX} characters"))
    } else if !DNS_LABEL_RE.is_match(s) {
        Some(
            "must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit"
                .into(),
        )
    } else {
        None
    }
}

/// Kubernetes' rule for a qualified name, the key of a label or a taint: an optional prefix
/// (a DNS subdomain of at most 253 characters, lowercase labels joined by dots) and `/`, then a
/// name of 1-63 characters of [`KUBERNETES_NAME_PATTERN`]. `None` when `s` is one; otherwise
/// what is wrong with it, without repeating it (a key may be long or hostile).
pub fn qualified_name_problem(s: &str) -> Option<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, s),
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() || prefix.len() > DNS_SUBDOMAIN_MAX {
            return Some(format!(
                "must have a prefix of 1-{DNS_SUBDOMAIN_MAX} characters before '/' (a DNS subdomain)"
            ));
        }
        if !prefix.split('.').all(is_dns_label) {
            return Some(
                "must have a DNS subdomain before '/': lowercase letters, digits, '-' and '.'"
                    .into(),
            );
        }
    }
    if name.is_empty() {
        return Some("must have a name (after any prefix)".into());
    }
    if name.len() > KUBERNETES_NAME_MAX {
        return Some(format!(
            "must have a name of at most {KUBERNETES_NAME_MAX} characters (after any prefix)"
        ));
    }
    if !KUBERNETES_NAME_RE.is_match(name) {
        return Some(
            "must be a Kubernetes qualified name: an optional DNS-subdomain prefix and '/', then letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
                .into(),
        );
    }
    None
}

/// Kubernetes' rule for a label value (also a taint's value): empty, or 1-63 characters of
/// [`KUBERNETES_NAME_PATTERN`]. `None` when `s` is one.
pub fn label_value_problem(s: &str) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    if s.len() > KUBERNETES_NAME_MAX {
        return Some(format!("must be at most {KUBERNETES_NAME_MAX} characters"));
    }
    if !KUBERNETES_NAME_RE.is_match(s) {
        return Some(
            "must be empty or letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
                .into(),
        );
    }
    None
}

/// A validated DNS label: cluster, pool, Elastic IP, firewall rule and auth server names, tags,
/// environments and organization slugs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DnsLabel(String);

impl DnsLabel {
    pub fn parse(s: &str) -> Result<Self, String> {
        match dns_label_problem(s) {
            None => Ok(Self(s.to_owned())),
            Some(problem) => Err(problem),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// For values read back from storage, where the database check constraint already holds
    /// the rule. Not for input.
    pub fn from_trusted(s: String) -> Self {
        Self(s)
    }
}

impl fmt::Display for DnsLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for DnsLabel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl AsRef<str> for DnsLabel {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// A worker node name (DNS subdomain form, at most 254 characters).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct NodeName(String);

impl NodeName {
    pub fn parse(s: &str) -> Result<Self, String> {
        if NODE_NAME_RE.is_match(s) {
            Ok(Self(s.to_owned()))
        } else {
            Err(format!("must match {NODE_NAME_PATTERN}"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for NodeName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A client's idempotency key (8-255 characters of its pattern).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// `None` for a value that breaks the pattern (`DomainError::InvalidIdempotencyKey`).
    pub fn parse(s: &str) -> Option<Self> {
        IDEMPOTENCY_KEY_RE.is_match(s).then(|| Self(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How a caller names an organization: a UUID is an id, anything else a slug.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OrgRef {
    /// A 36-character value with dashes at 8, 13, 18 and 23. It may still not be a valid UUID
    /// (then no organization has it: `DomainError::NotFound`, not a refusal of its form).
    Id(String),
    Slug(String),
}

impl OrgRef {
    /// A UUID-shaped value is an id, anything else a slug: the shape decides, not whether an
    /// organization of that id exists.
    pub fn classify(value: &str) -> Self {
        let b = value.as_bytes();
        let looks_like_id =
            b.len() == 36 && [8, 13, 18, 23].iter().all(|&i| b.get(i) == Some(&b'-'));
        if looks_like_id {
            OrgRef::Id(value.to_ascii_lowercase())
        } else {
            OrgRef::Slug(value.to_owned())
        }
    }

    pub fn as_str(&self) -> &str {
        match self {
            OrgRef::Id(s) | OrgRef::Slug(s) => s,
        }
    }

    /// Whether a reference could name an existing organization at all: ids must be UUIDs and
    /// slugs DNS labels. One that cannot is not found (`DomainError::NotFound`) without asking
    /// the platform.
    pub fn is_well_formed(&self) -> bool {
        match self {
            OrgRef::Id(s) => uuid::Uuid::parse_str(s).is_ok(),
            OrgRef::Slug(s) => is_dns_label(s),
        }
    }

    /// Whether this reference names the organization with this id and slug.
    pub fn matches(&self, id: &uuid::Uuid, slug: &str) -> bool {
        match self {
            OrgRef::Id(s) => uuid::Uuid::parse_str(s).map(|u| &u == id).unwrap_or(false),
            OrgRef::Slug(s) => s == slug,
        }
    }
}

impl fmt::Display for OrgRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_label_accepts_one_to_sixty_three_lowercase_characters() {
        assert!(DnsLabel::parse("a").is_ok());
        assert!(DnsLabel::parse("prod-1").is_ok());
        assert!(DnsLabel::parse(&"a".repeat(63)).is_ok());
    }

    #[test]
    fn dns_label_rejects_sixty_four_characters() {
        assert!(DnsLabel::parse(&"a".repeat(64)).is_err());
    }

    #[test]
    fn dns_label_rejects_empty_uppercase_edges_dots_and_lookalikes() {
        for bad in [
            "", "Prod", "-a", "a-", "a.b", "a_b", "a b", "prоd", /* Cyrillic o */
            "ä",
        ] {
            assert!(DnsLabel::parse(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn node_name_follows_the_node_name_rule_up_to_254_characters() {
        assert!(NodeName::parse("ab").is_ok());
        assert!(NodeName::parse("prod-1-default-x1.y").is_ok());
        assert!(NodeName::parse(&"a".repeat(254)).is_ok());
        assert!(NodeName::parse(&"a".repeat(255)).is_err());
        // one character cannot both start and end the name
        assert!(NodeName::parse("a").is_err());
        assert!(NodeName::parse("-ab").is_err());
        assert!(NodeName::parse("ab.").is_err());
        assert!(NodeName::parse("../etc").is_err());
    }

    #[test]
    fn qualified_names_follow_kubernetes() {
        let long_prefix = format!("{}.example.com", "a".repeat(63));
        for ok in [
            "a",
            "app",
            "App.Kubernetes_io-x",
            "example.com/gpu",
            "node-role.kubernetes.io/worker",
            &"n".repeat(63),
            &format!("{long_prefix}/n"),
        ] {
            assert_eq!(qualified_name_problem(ok), None, "{ok:?}");
        }
        for bad in [
            "",
            "/",
            "/a",
            "a/",
            "a/b/c",
            "-a",
            "a-",
            "a b",
            "Example.com/a",
            "exa_mple.com/a",
            "ä",
            &"n".repeat(64),
            &format!("{}/a", "a".repeat(254)),
            "a/b\n",
        ] {
            assert!(qualified_name_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn label_values_follow_kubernetes_and_may_be_empty() {
        for ok in ["", "a", "v1.2_x-Y", &"v".repeat(63)] {
            assert_eq!(label_value_problem(ok), None, "{ok:?}");
        }
        for bad in ["-a", "a.", "a/b", "a b", &"v".repeat(64), "\u{0}"] {
            assert!(label_value_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn idempotency_key_is_eight_to_255_allowed_characters() {
        assert!(IdempotencyKey::parse("abcdefgh").is_some());
        assert!(IdempotencyKey::parse("A1_-:.zZ").is_some());
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_some());
        assert!(IdempotencyKey::parse("abcdefg").is_none());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_none());
        assert!(IdempotencyKey::parse("abcd efgh").is_none());
        assert!(IdempotencyKey::parse("abcdefgh\r\nX-Evil: 1").is_none());
        assert!(IdempotencyKey::parse("abcdefgh/").is_none());
    }

    #[test]
    fn org_ref_uses_the_dash_positions_rule() {
        let id = "0b6f9c3e-8d1f-4e57-a3c2-5f1d2e3a4b5c";
        assert_eq!(OrgRef::classify(id), OrgRef::Id(id.into()));
        assert_eq!(OrgRef::classify("acme"), OrgRef::Slug("acme".into()));
        // 36 characters but dashes elsewhere: a slug
        let odd = "0b6f9c3e8-d1f-4e57-a3c2-5f1d2e3a4b5c";
        assert!(matches!(OrgRef::classify(odd), OrgRef::Slug(_)));
        // the right shape with non-hex content is still an id, just one that cannot exist
        let bogus = "zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz";
        let r = OrgRef::classify(bogus);
        assert!(matches!(r, OrgRef::Id(_)));
        assert!(!r.is_well_formed());
    }
}
