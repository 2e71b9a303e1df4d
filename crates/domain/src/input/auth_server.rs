//! Auth server drafts: create, change, and credential additions; the rules for
//! issuer URLs, redirect paths, authorized domains, realms, usernames and static tokens.
//! (The rules are tested through the JSON requests clients send, in the `wire` crate's
//! `request::auth_server` tests.)

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

use validator::Validate;

use crate::model::auth_server::{AuthServerType, ClaimNames};
use crate::model::secret::Secret;
use crate::names::{DnsLabel, OrgRef, is_dns_label};
use crate::rules::{MAX_CREDENTIALS_PER_AUTH_SERVER, MIN_STATIC_TOKEN_LEN};
use crate::validation::Violations;

/// Creates an auth server.
#[derive(Debug, Clone, Default)]
pub struct CreateAuthServerRequest {
    /// The organization's slug or id.
    pub organization: Option<String>,
    /// A DNS label, unique in the organization and environment.
    pub name: Option<String>,
    /// A DNS label, e.g. `production`.
    pub environment: Option<String>,
    pub kind: Option<AuthServerType>,
    /// The configuration, of the shape `kind` names.
    pub config: Option<CreateConfig>,
}

/// A create's configuration, as read for the type the client named.
#[derive(Debug, Clone)]
pub enum CreateConfig {
    Oidc(OidcConfigRequest),
    Basic(BasicConfigRequest),
    Token(TokenConfigRequest),
    /// The client's config did not have its type's shape: why, in words that repeat no value.
    Unreadable(String),
}

/// OIDC `config` on create.
#[derive(Debug, Clone, Validate)]
pub struct OidcConfigRequest {
    /// https, or http for a loopback host.
    #[validate(custom(function = "issuer_url_rule"))]
    pub issuer_url: String,
    /// A path of its own, starting with `/`.
    #[validate(custom(function = "redirect_path_rule"))]
    pub redirect_path: String,
    #[validate(length(min = 1, max = 255, message = "must be 1-255 characters"))]
    pub client_id: String,
    /// Write-only.
    pub client_secret: Secret,
    /// A host name with an optional port (`app.example.com`, `localhost:8443`).
    #[validate(custom(function = "authorized_domain_rule"))]
    pub authorized_domain: String,
    #[validate(length(min = 1, max = 255, message = "must be 1-255 characters"))]
    pub username_claim: Option<String>,
    #[validate(length(min = 1, max = 255, message = "must be 1-255 characters"))]
    pub email_claim: Option<String>,
    #[validate(length(min = 1, max = 255, message = "must be 1-255 characters"))]
    pub role_claim: Option<String>,
    #[validate(length(min = 1, max = 255, message = "must be 1-255 characters"))]
    pub group_claim: Option<String>,
}

/// A Basic username/password pair (create, and adding a credential).
#[derive(Debug, Clone)]
pub struct BasicCredentialRequest {
    pub username: String,
    pub password: Secret,
}

/// Basic `config` on create.
#[derive(Debug, Clone)]
pub struct BasicConfigRequest {
    /// Challenge realm; default the server's name. No `"` or `\`.
    pub realm: Option<String>,
    pub credentials: Vec<BasicCredentialRequest>,
}

/// Token `config` on create.
#[derive(Debug, Clone)]
pub struct TokenConfigRequest {
    /// Static tokens (JWTs among them), at least 16 characters each. Write-only.
    pub tokens: Vec<Secret>,
}

/// A Token credential (adding a credential).
#[derive(Debug, Clone)]
pub struct TokenCredentialRequest {
    /// At least 16 visible ASCII characters. Write-only.
    pub token: Secret,
}

/// Adding a credential to an auth server: basic or token, by the server's type.
#[derive(Debug, Clone)]
pub enum CredentialRequest {
    Basic(BasicCredentialRequest),
    Token(TokenCredentialRequest),
}

/// Changes an auth server: name, environment and the non-secret config fields, plus a
/// new client secret; never credentials.
#[derive(Debug, Clone, Default)]
pub struct AuthServerPatch {
    pub name: Option<String>,
    pub environment: Option<String>,
    /// The config fields to replace (merged with the stored ones).
    pub config: Option<ConfigPatch>,
}

/// A change's `config`. Its shape is the stored server's type, which only the use case knows,
/// so it is read as each type's shape (each reading an error text when it does not fit) and
/// the use case keeps the reading of the server's type.
#[derive(Debug, Clone)]
pub struct ConfigPatch {
    pub oidc: Result<OidcConfigPatch, String>,
    pub basic: Result<BasicConfigPatch, String>,
    /// It names `credentials` or `tokens`, which change only by adding or removing credentials.
    pub names_credentials: bool,
    /// It is `{}`: the one config a token server's change may carry.
    pub is_empty: bool,
}

impl ConfigPatch {
    /// The change of an OIDC server's config.
    pub fn oidc(patch: OidcConfigPatch) -> Self {
        ConfigPatch {
            oidc: Ok(patch),
            basic: Err("not a Basic configuration".into()),
            names_credentials: false,
            is_empty: false,
        }
    }

    /// The change of a Basic server's realm.
    pub fn basic(patch: BasicConfigPatch) -> Self {
        ConfigPatch {
            oidc: Err("not an OIDC configuration".into()),
            basic: Ok(patch),
            names_credentials: false,
            is_empty: false,
        }
    }
}

/// OIDC `config` on a change: any of the fields; a claim set to null stops being sent.
#[derive(Debug, Clone, Default)]
pub struct OidcConfigPatch {
    pub issuer_url: Option<String>,
    pub redirect_path: Option<String>,
    pub client_id: Option<String>,
    /// A new client secret (write-only).
    pub client_secret: Option<Secret>,
    pub authorized_domain: Option<String>,
    pub username_claim: Option<Option<String>>,
    pub email_claim: Option<Option<String>>,
    pub role_claim: Option<Option<String>>,
    pub group_claim: Option<Option<String>>,
}

/// Basic `config` on a change: the realm (null: the server's name again).
#[derive(Debug, Clone, Default)]
pub struct BasicConfigPatch {
    pub realm: Option<Option<String>>,
}

/// A validated OIDC configuration (plaintext secret, to be sealed by the use case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcSpec {
    pub issuer_url: String,
    pub redirect_path: String,
    pub client_id: String,
    pub client_secret: Secret,
    pub authorized_domain: String,
    pub claims: ClaimNames,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSpec {
    Oidc(OidcSpec),
    Basic {
        realm: Option<String>,
        credentials: Vec<(String, Secret)>,
    },
    Token {
        tokens: Vec<Secret>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthServerSpec {
    pub organization: OrgRef,
    pub name: DnsLabel,
    pub environment: DnsLabel,
    pub config: ConfigSpec,
}

/// A validated change of the non-secret OIDC fields (and maybe a new secret).
#[derive(Debug, Clone, Default)]
pub struct OidcChanges {
    pub issuer_url: Option<String>,
    pub redirect_path: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
    pub authorized_domain: Option<String>,
    pub username_claim: Option<Option<String>>,
    pub email_claim: Option<Option<String>>,
    pub role_claim: Option<Option<String>>,
    pub group_claim: Option<Option<String>>,
}

#[derive(Debug, Clone)]
pub enum ConfigChanges {
    None,
    Oidc(OidcChanges),
    Basic { realm: Option<Option<String>> },
}

#[derive(Debug, Clone)]
pub struct AuthServerChanges {
    pub name: Option<DnsLabel>,
    pub environment: Option<DnsLabel>,
    pub config: ConfigChanges,
}

fn rule_error(message: &'static str) -> validator::ValidationError {
    validator::ValidationError::new("rule").with_message(message.into())
}

/// Whether a host is a loopback name (RFC 8252 allows http for those).
pub fn is_loopback_host(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .map(|a| a.is_loopback())
            .unwrap_or(false)
}

fn issuer_url_rule(value: &str) -> Result<(), validator::ValidationError> {
    let url = url::Url::parse(value).map_err(|_| rule_error("must be an absolute URL"))?;
    let host = url
        .host_str()
        .ok_or_else(|| rule_error("must name a host"))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback_host(host) => {}
        _ => return Err(rule_error("must use https (http only for a loopback host)")),
    }
    if let Some(ip) = literal_ip(&url)
        && never_an_issuer(ip)
    {
        return Err(rule_error(
            "must not be a link-local, cloud metadata, unspecified, multicast or broadcast address",
        ));
    }
    if url.query().is_some()
        || url.fragment().is_some()
        || !url.username().is_empty()
        || url.password().is_some()
    {
        return Err(rule_error(
            "must not carry credentials, a query or a fragment",
        ));
    }
    Ok(())
}

/// The IP address an URL names literally, if it names one.
fn literal_ip(url: &url::Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(a) => Some(IpAddr::V4(a)),
        url::Host::Ipv6(a) => Some(IpAddr::V6(a)),
        url::Host::Domain(_) => None,
    }
}

/// Addresses no OpenID provider can be at, whatever the deployment: link-local (the cloud
/// metadata services live there: 169.254.169.254, fd00:ec2::254 is unique-local and left to
/// the gateway's network policy), unspecified, multicast and broadcast. Private and loopback
/// addresses may be right for one deployment and wrong for another: the gateway decides those
/// when it connects (its allowed issuer networks), for names as well as literals.
pub fn never_an_issuer(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(a) => {
            a.is_link_local() || a.is_unspecified() || a.is_multicast() || a.is_broadcast()
        }
        IpAddr::V6(a) => {
            a.is_unspecified() || a.is_multicast() || (a.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

/// A redirect path is matched against request paths after the gateway has normalised them, so
/// it must already be in that form: `/`-separated non-empty segments of plain characters, no
/// `.` or `..` segment, no percent-encoding, no backslash, query or fragment. Anything else
/// could never be the path a browser comes back to.
fn redirect_path_rule(value: &str) -> Result<(), validator::ValidationError> {
    if !value.starts_with('/') || value.starts_with("//") {
        return Err(rule_error("must be a path starting with a single '/'"));
    }
    if value.len() > 1024 {
        return Err(rule_error("must be at most 1024 characters"));
    }
    // `;`, `,` and `=` are path characters too, but a cookie's `Path` attribute ends at `;`
    // and some parsers split on `,`: a redirect path is also the path of the sign-in cookie, so
    // none of them can be in it.
    let plain = |c: char| c.is_ascii_alphanumeric() || "-._~!$&'()*+:@".contains(c);
    let body = value.strip_prefix('/').unwrap_or(value);
    let body = body.strip_suffix('/').unwrap_or(body);
    if body.is_empty() {
        return Err(rule_error("must name a path below '/'"));
    }
    for segment in body.split('/') {
        if segment.is_empty() || segment == "." || segment == ".." || !segment.chars().all(plain) {
            return Err(rule_error(
                "must be a normalised path: non-empty segments of letters, digits and -._~!$&'()*+:@, no '.' or '..' segment, no percent-encoding, query or fragment",
            ));
        }
    }
    // The gateway answers everything under its own prefix itself (sign-out); a callback there
    // would never reach the sign-in it completes.
    if body == ".gateway" || body.starts_with(".gateway/") {
        return Err(rule_error(
            "must not be under /.gateway/, which the gateway keeps for itself",
        ));
    }
    Ok(())
}

fn is_host_name(host: &str) -> bool {
    if host.parse::<Ipv4Addr>().is_ok() {
        return true;
    }
    let host = host.strip_suffix('.').unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host
            .split('.')
            .all(|l| is_dns_label(&l.to_ascii_lowercase()))
}

fn authorized_domain_rule(value: &str) -> Result<(), validator::ValidationError> {
    let (host, port) = match value.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (value, None),
    };
    if let Some(p) = port {
        match p.parse::<u16>() {
            Ok(n) if n > 0 && !p.starts_with('0') => {}
            _ => {
                return Err(rule_error(
                    "must be a host name with an optional port 1-65535",
                ));
            }
        }
    }
    if !is_host_name(host) {
        return Err(rule_error(
            "must be a host name with an optional port (e.g. app.example.com, localhost:8443)",
        ));
    }
    Ok(())
}

fn check_realm(v: &mut Violations, field: &str, realm: &str) {
    if realm.is_empty() || realm.chars().count() > 255 {
        v.push(field, "must be 1-255 characters");
    }
    if realm.contains('"') || realm.contains('\\') || realm.chars().any(char::is_control) {
        v.push(field, "must not contain '\"', '\\' or control characters");
    }
}

/// Username rules: non-empty, no ':' (Basic splits at the first colon), no control characters.
pub fn check_username(v: &mut Violations, field: &str, username: &str) {
    if username.is_empty() || username.chars().count() > 255 {
        v.push(field, "must be 1-255 characters");
    } else if username.contains(':') || username.chars().any(char::is_control) {
        v.push(field, "must not contain ':' or control characters");
    }
}

/// A Basic password: [`crate::rules::PASSWORD_RULE`]. A guessable password behind the gateway
/// is a door left open; the gateway slows guessing down per client, not per password.
pub fn check_password(v: &mut Violations, field: &str, username: &str, password: &Secret) {
    let p = password.expose();
    let chars: Vec<char> = p.chars().collect();
    let broken = if p.is_empty() {
        Some("must not be empty")
    } else if p.len() > 1024 || chars.iter().any(|c| c.is_control()) {
        Some("must be at most 1024 characters without control characters")
    } else if chars.len() < crate::rules::MIN_PASSWORD_LEN
        || p.eq_ignore_ascii_case(username)
        || chars.iter().all(|c| *c == chars[0])
        || is_common_password(p)
    {
        Some(crate::rules::PASSWORD_RULE)
    } else {
        None
    };
    if let Some(message) = broken {
        v.push(field, message);
    }
}

/// Passwords of twelve characters or more that appear near the top of every leaked list.
fn is_common_password(p: &str) -> bool {
    const COMMON: [&str; 24] = [
        "123456789012",
        "1234567890123",
        "12345678901234",
        "123456789abc",
        "abcdefghijkl",
        "qwertyuiopas",
        "qwertyuiop123",
        "qwerty123456",
        "password1234",
        "password12345",
        "passwordpassword",
        "password123!",
        "iloveyou1234",
        "welcome12345",
        "letmein12345",
        "administrator",
        "admin1234567",
        "changeme1234",
        "trustno11234",
        "monkey123456",
        "football1234",
        "baseball1234",
        "superman1234",
        "000000000000",
    ];
    let lower = p.to_ascii_lowercase();
    COMMON.contains(&lower.as_str())
}

/// Static tokens: at least 16 visible ASCII characters (they travel in a header).
pub fn check_token(v: &mut Violations, field: &str, token: &Secret) {
    let t = token.expose();
    if t.len() < MIN_STATIC_TOKEN_LEN {
        v.push(
            field,
            format!("must be at least {MIN_STATIC_TOKEN_LEN} characters"),
        );
    } else if t.len() > 4096 || !t.bytes().all(|b| b.is_ascii_graphic()) {
        v.push(field, "must be at most 4096 visible ASCII characters");
    }
}

/// The reading of a config of the expected shape, or its error text at `config`.
fn taken<T>(v: &mut Violations, reading: Result<T, String>) -> Option<T> {
    reading.map_err(|message| v.push("config", message)).ok()
}

/// The bound on credentials per server, checked before anything is hashed.
fn too_many(v: &mut Violations, field: &str, count: usize) -> bool {
    let over = count > MAX_CREDENTIALS_PER_AUTH_SERVER;
    if over {
        v.push(
            field,
            format!("must hold at most {MAX_CREDENTIALS_PER_AUTH_SERVER} credentials"),
        );
    }
    over
}

fn basic_spec(v: &mut Violations, c: BasicConfigRequest) -> ConfigSpec {
    if let Some(r) = &c.realm {
        check_realm(v, "config.realm", r);
    }
    if c.credentials.is_empty() {
        v.push(
            "config.credentials",
            "must hold at least one username/password pair",
        );
    }
    if too_many(v, "config.credentials", c.credentials.len()) {
        return ConfigSpec::Basic {
            realm: c.realm,
            credentials: Vec::new(),
        };
    }
    let mut seen = HashSet::new();
    for (i, cred) in c.credentials.iter().enumerate() {
        check_username(
            v,
            &format!("config.credentials[{i}].username"),
            &cred.username,
        );
        check_password(
            v,
            &format!("config.credentials[{i}].password"),
            &cred.username,
            &cred.password,
        );
        if !seen.insert(cred.username.clone()) {
            v.push(
                format!("config.credentials[{i}].username"),
                "usernames must be unique within a server",
            );
        }
    }
    ConfigSpec::Basic {
        realm: c.realm,
        credentials: c
            .credentials
            .into_iter()
            .map(|c| (c.username, c.password))
            .collect(),
    }
}

fn token_spec(v: &mut Violations, c: TokenConfigRequest) -> ConfigSpec {
    if c.tokens.is_empty() {
        v.push("config.tokens", "must hold at least one token");
    }
    if too_many(v, "config.tokens", c.tokens.len()) {
        return ConfigSpec::Token { tokens: Vec::new() };
    }
    let mut seen = HashSet::new();
    for (i, t) in c.tokens.iter().enumerate() {
        check_token(v, &format!("config.tokens[{i}]"), t);
        if !seen.insert(t.expose().to_owned()) {
            v.push(
                format!("config.tokens[{i}]"),
                "tokens must be unique within a server",
            );
        }
    }
    ConfigSpec::Token { tokens: c.tokens }
}

fn oidc_spec(v: &mut Violations, c: OidcConfigRequest) -> ConfigSpec {
    if let Err(e) = c.validate() {
        v.extend(Violations::from_validator("config", &e));
    }
    if c.client_secret.is_empty() {
        v.push("config.client_secret", "must not be empty");
    }
    ConfigSpec::Oidc(OidcSpec {
        issuer_url: c.issuer_url,
        redirect_path: c.redirect_path,
        client_id: c.client_id,
        client_secret: c.client_secret,
        authorized_domain: c.authorized_domain.to_ascii_lowercase(),
        claims: ClaimNames {
            username_claim: c.username_claim,
            email_claim: c.email_claim,
            role_claim: c.role_claim,
            group_claim: c.group_claim,
        },
    })
}

impl CreateAuthServerRequest {
    pub fn validate(&self) -> Result<AuthServerSpec, Violations> {
        let mut v = Violations::new();
        let organization = match self.organization.as_deref() {
            None | Some("") => {
                v.push("organization", "is required");
                None
            }
            Some(o) => {
                let r = OrgRef::classify(o);
                if r.is_well_formed() {
                    Some(r)
                } else {
                    v.push(
                        "organization",
                        "must be an organization slug (DNS label) or id (UUID)",
                    );
                    None
                }
            }
        };
        let name = match &self.name {
            None => {
                v.push("name", "is required");
                None
            }
            Some(n) => v.check("name", DnsLabel::parse(n)),
        };
        let environment = match &self.environment {
            None => {
                v.push(
                    "environment",
                    "is required: a DNS label, for example production",
                );
                None
            }
            Some(e) => v.check("environment", DnsLabel::parse(e)),
        };
        let config = match (self.kind, &self.config) {
            (None, _) => {
                v.push("type", "is required: oidc, basic or token");
                None
            }
            (Some(_), None) => {
                v.push("config", "is required");
                None
            }
            (Some(_), Some(CreateConfig::Unreadable(message))) => {
                v.push("config", message.clone());
                None
            }
            (Some(AuthServerType::Oidc), Some(CreateConfig::Oidc(c))) => {
                Some(oidc_spec(&mut v, c.clone()))
            }
            (Some(AuthServerType::Basic), Some(CreateConfig::Basic(c))) => {
                Some(basic_spec(&mut v, c.clone()))
            }
            (Some(AuthServerType::Token), Some(CreateConfig::Token(c))) => {
                Some(token_spec(&mut v, c.clone()))
            }
            (Some(kind), Some(_)) => {
                v.push(
                    "config",
                    format!("must be the configuration of a {} server", kind.as_str()),
                );
                None
            }
        };
        if !v.is_empty() {
            return Err(v);
        }
        match (organization, name, environment, config) {
            (Some(organization), Some(name), Some(environment), Some(config)) => {
                Ok(AuthServerSpec {
                    organization,
                    name,
                    environment,
                    config,
                })
            }
            _ => Err(v),
        }
    }
}

fn claim_change(v: &mut Violations, field: &str, c: &Option<Option<String>>) {
    if let Some(Some(s)) = c
        && (s.is_empty() || s.chars().count() > 255)
    {
        v.push(field, "must be 1-255 characters (null clears it)");
    }
}

impl AuthServerPatch {
    /// Validates a change for a server of type `kind`.
    pub fn validate(&self, kind: AuthServerType) -> Result<AuthServerChanges, Violations> {
        let mut v = Violations::new();
        if self.name.is_none() && self.environment.is_none() && self.config.is_none() {
            v.push("", "the body must change at least one field");
        }
        let name = self
            .name
            .as_deref()
            .and_then(|n| v.check("name", DnsLabel::parse(n)));
        let environment = self
            .environment
            .as_deref()
            .and_then(|e| v.check("environment", DnsLabel::parse(e)));
        let config = match (&self.config, kind) {
            (None, _) => ConfigChanges::None,
            (Some(c), _) if c.names_credentials => {
                v.push(
                    "config",
                    "credentials change only through the credentials sub-route",
                );
                ConfigChanges::None
            }
            (Some(c), AuthServerType::Oidc) => match taken(&mut v, c.oidc.clone()) {
                None => ConfigChanges::None,
                Some(p) => {
                    let wrap = |r: Result<(), validator::ValidationError>,
                                field: &str,
                                v: &mut Violations| {
                        if let Err(e) = r {
                            v.push(field, e.message.map(|m| m.to_string()).unwrap_or_default());
                        }
                    };
                    if let Some(u) = &p.issuer_url {
                        wrap(issuer_url_rule(u), "config.issuer_url", &mut v);
                    }
                    if let Some(r) = &p.redirect_path {
                        wrap(redirect_path_rule(r), "config.redirect_path", &mut v);
                    }
                    if let Some(d) = &p.authorized_domain {
                        wrap(
                            authorized_domain_rule(d),
                            "config.authorized_domain",
                            &mut v,
                        );
                    }
                    if let Some(id) = &p.client_id
                        && (id.is_empty() || id.chars().count() > 255)
                    {
                        v.push("config.client_id", "must be 1-255 characters");
                    }
                    if let Some(s) = &p.client_secret
                        && s.is_empty()
                    {
                        v.push("config.client_secret", "must not be empty");
                    }
                    claim_change(&mut v, "config.username_claim", &p.username_claim);
                    claim_change(&mut v, "config.email_claim", &p.email_claim);
                    claim_change(&mut v, "config.role_claim", &p.role_claim);
                    claim_change(&mut v, "config.group_claim", &p.group_claim);
                    ConfigChanges::Oidc(OidcChanges {
                        issuer_url: p.issuer_url,
                        redirect_path: p.redirect_path,
                        client_id: p.client_id,
                        client_secret: p.client_secret,
                        authorized_domain: p.authorized_domain.map(|d| d.to_ascii_lowercase()),
                        username_claim: p.username_claim,
                        email_claim: p.email_claim,
                        role_claim: p.role_claim,
                        group_claim: p.group_claim,
                    })
                }
            },
            (Some(c), AuthServerType::Basic) => match taken(&mut v, c.basic.clone()) {
                None => ConfigChanges::None,
                Some(p) => {
                    if let Some(Some(r)) = &p.realm {
                        check_realm(&mut v, "config.realm", r);
                    }
                    ConfigChanges::Basic { realm: p.realm }
                }
            },
            (Some(c), AuthServerType::Token) => {
                if c.is_empty {
                    ConfigChanges::None
                } else {
                    v.push("config", "a token server has no editable config fields");
                    ConfigChanges::None
                }
            }
        };
        v.into_result(AuthServerChanges {
            name,
            environment,
            config,
        })
    }
}
