//! Auth server bodies: create, PATCH, and credential additions; the rules for
//! issuer URLs, redirect paths, authorized domains, realms, usernames and static tokens.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr};

use serde::Deserialize;
use serde_json::Value;
use validator::Validate;

use crate::input::nullable;
use crate::model::auth_server::{AuthServerType, ClaimNames};
use crate::model::secret::Secret;
use crate::names::{DnsLabel, OrgRef, is_dns_label};
use crate::rules::{MAX_CREDENTIALS_PER_AUTH_SERVER, MIN_STATIC_TOKEN_LEN};
use crate::validation::Violations;

/// `POST /v1/public/gateway/auth-servers`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateAuthServerRequest {
    /// The organization's slug or id.
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub organization: Option<String>,
    /// A DNS label, unique in the organization and environment.
    #[cfg_attr(
        feature = "openapi",
        schema(
            required = true,
            nullable = false,
            pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
        )
    )]
    pub name: Option<String>,
    /// A DNS label, e.g. `production`.
    #[cfg_attr(
        feature = "openapi",
        schema(
            required = true,
            nullable = false,
            pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
        )
    )]
    pub environment: Option<String>,
    #[serde(rename = "type")]
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub kind: Option<AuthServerType>,
    /// Shape depends on `type`: see the OIDC, Basic and Token config schemas.
    #[cfg_attr(feature = "openapi", schema(required = true, nullable = false))]
    pub config: Option<Value>,
}

/// OIDC `config` on create.
#[derive(Debug, Clone, Deserialize, Validate)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OidcConfigRequest {
    /// https, or http for a loopback host.
    #[validate(custom(function = "issuer_url_rule"))]
    pub issuer_url: String,
    /// A path of its own, starting with `/`.
    #[validate(custom(function = "redirect_path_rule"))]
    #[cfg_attr(feature = "openapi", schema(pattern = "^/"))]
    pub redirect_path: String,
    #[validate(length(min = 1, max = 255, message = "must be 1-255 characters"))]
    pub client_id: String,
    /// Write-only.
    #[cfg_attr(feature = "openapi", schema(value_type = String, write_only))]
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

/// A Basic username/password pair (create, and the credentials sub-route).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BasicCredentialRequest {
    pub username: String,
    #[cfg_attr(feature = "openapi", schema(value_type = String, write_only))]
    pub password: Secret,
}

/// Basic `config` on create.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BasicConfigRequest {
    /// Challenge realm; default the server's name. No `"` or `\`.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[^\"\\\\\\x00-\\x1f\\x7f]{1,255}$")
    )]
    pub realm: Option<String>,
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 100))]
    pub credentials: Vec<BasicCredentialRequest>,
}

/// Token `config` on create.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenConfigRequest {
    /// Static tokens (JWTs among them), at least 16 characters each. Write-only.
    #[cfg_attr(
        feature = "openapi",
        schema(
            value_type = Vec<crate::input::schema::StaticTokenText>,
            write_only,
            min_items = 1,
            max_items = 100
        )
    )]
    pub tokens: Vec<Secret>,
}

/// A Token credential (the credentials sub-route).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenCredentialRequest {
    /// At least 16 visible ASCII characters. Write-only.
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = String, write_only, pattern = "^[!-~]{16,}$")
    )]
    pub token: Secret,
}

/// Body of `POST …/auth-servers/{id}/credentials`: basic or token, by the server's type.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum CredentialRequest {
    Basic(BasicCredentialRequest),
    Token(TokenCredentialRequest),
}

/// `PATCH …/auth-servers/{id}`: name, environment and the non-secret config fields, plus a
/// new client secret; never credentials.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AuthServerPatch {
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    )]
    pub name: Option<String>,
    #[cfg_attr(
        feature = "openapi",
        schema(nullable = false, pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    )]
    pub environment: Option<String>,
    /// The config fields to replace (merged with the stored ones).
    pub config: Option<Value>,
}

/// OIDC `config` on PATCH: any of the fields; a claim set to null stops being sent.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OidcConfigPatch {
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub issuer_url: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false, pattern = "^/"))]
    pub redirect_path: Option<String>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub client_id: Option<String>,
    /// A new client secret (write-only).
    #[cfg_attr(feature = "openapi", schema(value_type = String, required = false, write_only))]
    pub client_secret: Option<Secret>,
    #[cfg_attr(feature = "openapi", schema(nullable = false))]
    pub authorized_domain: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub username_claim: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub email_claim: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub role_claim: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub group_claim: Option<Option<String>>,
}

/// Basic `config` on PATCH: the realm (null: the server's name again).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BasicConfigPatch {
    #[serde(default, deserialize_with = "nullable")]
    #[cfg_attr(
        feature = "openapi",
        schema(value_type = Option<String>, pattern = "^[^\"\\\\\\x00-\\x1f\\x7f]{1,255}$")
    )]
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

/// A validated PATCH of the non-secret OIDC fields (and maybe a new secret).
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
    if let Some(ip) = literal_ip(&url) {
        if never_an_issuer(ip) {
            return Err(rule_error(
                "must not be a link-local, cloud metadata, unspecified, multicast or broadcast address",
            ));
        }
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
    let plain = |c: char| c.is_ascii_alphanumeric() || "-._~!$&'()*+,;=:@".contains(c);
    let body = value.strip_prefix('/').unwrap_or(value);
    let body = body.strip_suffix('/').unwrap_or(body);
    if body.is_empty() {
        return Err(rule_error("must name a path below '/'"));
    }
    for segment in body.split('/') {
        let bare = segment.split(';').next().unwrap_or(segment);
        if segment.is_empty() || bare == "." || bare == ".." || !segment.chars().all(plain) {
            return Err(rule_error(
                "must be a normalised path: non-empty segments of letters, digits and -._~!$&'()*+,;=:@, no '.' or '..' segment, no percent-encoding, query or fragment",
            ));
        }
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

pub fn check_password(v: &mut Violations, field: &str, password: &Secret) {
    if password.is_empty() {
        v.push(field, "must not be empty");
    } else if password.len() > 1024 || password.expose().chars().any(char::is_control) {
        v.push(
            field,
            "must be at most 1024 characters without control characters",
        );
    }
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

fn typed<T: for<'de> Deserialize<'de>>(
    v: &mut Violations,
    field: &str,
    value: &Value,
) -> Option<T> {
    match serde_json::from_value::<T>(value.clone()) {
        Ok(t) => Some(t),
        Err(e) => {
            // serde's message names the offending field, never echoes a string value back
            // beyond the field name, so no secret is repeated.
            v.push(
                field,
                crate::validation::redact_serde_message(&e.to_string()),
            );
            None
        }
    }
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
                    "is required (a DNS label such as `production`)",
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
            (Some(AuthServerType::Oidc), Some(c)) => {
                typed::<OidcConfigRequest>(&mut v, "config", c).map(|c| oidc_spec(&mut v, c))
            }
            (Some(AuthServerType::Basic), Some(c)) => {
                typed::<BasicConfigRequest>(&mut v, "config", c).map(|c| basic_spec(&mut v, c))
            }
            (Some(AuthServerType::Token), Some(c)) => {
                typed::<TokenConfigRequest>(&mut v, "config", c).map(|c| token_spec(&mut v, c))
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
    if let Some(Some(s)) = c {
        if s.is_empty() || s.chars().count() > 255 {
            v.push(field, "must be 1-255 characters (null clears it)");
        }
    }
}

impl AuthServerPatch {
    /// Validates a PATCH for a server of type `kind`.
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
            (Some(c), _) if c.get("credentials").is_some() || c.get("tokens").is_some() => {
                v.push(
                    "config",
                    "credentials change only through the credentials sub-route",
                );
                ConfigChanges::None
            }
            (Some(c), AuthServerType::Oidc) => {
                match typed::<OidcConfigPatch>(&mut v, "config", c) {
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
                        if let Some(id) = &p.client_id {
                            if id.is_empty() || id.chars().count() > 255 {
                                v.push("config.client_id", "must be 1-255 characters");
                            }
                        }
                        if let Some(s) = &p.client_secret {
                            if s.is_empty() {
                                v.push("config.client_secret", "must not be empty");
                            }
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
                }
            }
            (Some(c), AuthServerType::Basic) => {
                match typed::<BasicConfigPatch>(&mut v, "config", c) {
                    None => ConfigChanges::None,
                    Some(p) => {
                        if let Some(Some(r)) = &p.realm {
                            check_realm(&mut v, "config.realm", r);
                        }
                        ConfigChanges::Basic { realm: p.realm }
                    }
                }
            }
            (Some(c), AuthServerType::Token) => {
                if c.as_object().is_some_and(|o| o.is_empty()) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn create(body: Value) -> Result<AuthServerSpec, Violations> {
        let r: CreateAuthServerRequest =
            serde_json::from_value(body).unwrap_or_else(|e| panic!("{e}"));
        r.validate()
    }

    fn oidc(config: Value) -> Result<AuthServerSpec, Violations> {
        create(
            json!({"organization": "acme", "name": "corp-sso", "environment": "production", "type": "oidc", "config": config}),
        )
    }

    fn oidc_config() -> Value {
        json!({"issuer_url": "https://id.example.com", "redirect_path": "/callback", "client_id": "app",
               "client_secret": "s3cret", "authorized_domain": "app.example.com"})
    }

    fn with(mut base: Value, key: &str, value: Value) -> Value {
        base[key] = value;
        base
    }

    #[test]
    fn auth_server_oidc_valid_config() {
        assert!(oidc(oidc_config()).is_ok());
    }

    #[test]
    fn auth_server_issuer_url_is_https_or_loopback_http() {
        assert!(
            oidc(with(
                oidc_config(),
                "issuer_url",
                json!("http://id.example.com")
            ))
            .is_err_and(|v| v.has("config.issuer_url"))
        );
        assert!(
            oidc(with(
                oidc_config(),
                "issuer_url",
                json!("http://127.0.0.1:3900")
            ))
            .is_ok()
        );
        assert!(
            oidc(with(
                oidc_config(),
                "issuer_url",
                json!("http://localhost:3900")
            ))
            .is_ok()
        );
        assert!(oidc(with(oidc_config(), "issuer_url", json!("not a url"))).is_err());
    }

    #[test]
    fn auth_server_redirect_path_starts_with_slash() {
        assert!(
            oidc(with(oidc_config(), "redirect_path", json!("callback")))
                .is_err_and(|v| v.has("config.redirect_path"))
        );
        assert!(
            oidc(with(
                oidc_config(),
                "redirect_path",
                json!("//evil.example.com/cb")
            ))
            .is_err()
        );
    }

    #[test]
    fn auth_server_redirect_path_is_already_normalised() {
        for good in ["/callback", "/oauth/callback", "/a/b;v=1/c", "/cb/"] {
            assert!(
                oidc(with(oidc_config(), "redirect_path", json!(good))).is_ok(),
                "{good}"
            );
        }
        for bad in [
            "/",
            "/a/../b",
            "/a/./b",
            "/a//b",
            "/%2e%2e/x",
            "/a%2Fb",
            "/a\\b",
            "/..;/x",
            "/a/..",
            "/caf\u{e9}",
        ] {
            assert!(
                oidc(with(oidc_config(), "redirect_path", json!(bad)))
                    .is_err_and(|v| v.has("config.redirect_path")),
                "{bad}"
            );
        }
    }

    #[test]
    fn auth_server_issuer_is_never_a_link_local_metadata_or_unspecified_address() {
        for bad in [
            "https://169.254.169.254/latest",
            "https://[fe80::1]/",
            "https://0.0.0.0/",
            "https://[::]/",
            "https://[::ffff:169.254.169.254]/",
            "https://224.0.0.1/",
            "https://255.255.255.255/",
        ] {
            assert!(
                oidc(with(oidc_config(), "issuer_url", json!(bad)))
                    .is_err_and(|v| v.has("config.issuer_url")),
                "{bad}"
            );
        }
        // Private and loopback addresses are the gateway's network policy to judge.
        for fine in [
            "https://10.0.0.5/realms/x",
            "http://127.0.0.1:3900",
            "https://[::1]:8443",
        ] {
            assert!(
                oidc(with(oidc_config(), "issuer_url", json!(fine))).is_ok(),
                "{fine}"
            );
        }
    }

    #[test]
    fn auth_server_holds_at_most_100_credentials_checked_before_anything_else() {
        let basic = |n: usize| {
            let creds: Vec<Value> = (0..n)
                .map(|i| json!({"username": format!("user{i}"), "password": "p"}))
                .collect();
            create(
                json!({"organization": "acme", "name": "b", "environment": "dev", "type": "basic", "config": {"credentials": creds}}),
            )
        };
        let token = |n: usize| {
            let tokens: Vec<String> = (0..n).map(|i| format!("static-token-{i:08}-xyz")).collect();
            create(
                json!({"organization": "acme", "name": "t", "environment": "dev", "type": "token", "config": {"tokens": tokens}}),
            )
        };
        assert!(basic(MAX_CREDENTIALS_PER_AUTH_SERVER).is_ok());
        assert!(token(MAX_CREDENTIALS_PER_AUTH_SERVER).is_ok());
        let over = basic(MAX_CREDENTIALS_PER_AUTH_SERVER + 1)
            .err()
            .unwrap_or_default();
        assert!(over.has("config.credentials"), "{over:?}");
        // One error for the list, not one per entry.
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(token(300).is_err_and(|v| v.has("config.tokens") && v.len() == 1));
    }

    #[test]
    fn auth_server_authorized_domain_is_a_host_with_optional_port() {
        assert!(
            oidc(with(
                oidc_config(),
                "authorized_domain",
                json!("localhost:8443")
            ))
            .is_ok()
        );
        for bad in [
            "https://app.example.com",
            "app.example.com/path",
            "app.example.com:0",
            "app.example.com:70000",
            "bad host",
            "",
        ] {
            assert!(
                oidc(with(oidc_config(), "authorized_domain", json!(bad)))
                    .is_err_and(|v| v.has("config.authorized_domain")),
                "{bad}"
            );
        }
    }

    #[test]
    fn auth_server_claim_names_non_empty() {
        assert!(
            oidc(with(oidc_config(), "email_claim", json!("")))
                .is_err_and(|v| v.has("config.email_claim"))
        );
        assert!(oidc(with(oidc_config(), "group_claim", json!("groups"))).is_ok());
    }

    #[test]
    fn auth_server_basic_needs_a_credential_with_unique_usernames() {
        let basic = |creds: Value| {
            create(
                json!({"organization": "acme", "name": "b", "environment": "dev", "type": "basic", "config": {"credentials": creds}}),
            )
        };
        assert!(basic(json!([])).is_err_and(|v| v.has("config.credentials")));
        assert!(basic(json!([{"username": "u", "password": "p:with:colons"}])).is_ok());
        assert!(
            basic(json!([{"username": "u", "password": "a"}, {"username": "u", "password": "b"}]))
                .is_err_and(|v| v.has("config.credentials[1].username"))
        );
        assert!(basic(json!([{"username": "u:x", "password": "a"}])).is_err());
        assert!(
            basic(json!([{"username": "u", "password": ""}]))
                .is_err_and(|v| v.has("config.credentials[0].password"))
        );
    }

    #[test]
    fn auth_server_realm_holds_no_quote_or_backslash() {
        let basic = |realm: &str| {
            create(
                json!({"organization": "acme", "name": "b", "environment": "dev", "type": "basic", "config": {"realm": realm, "credentials": [{"username": "u", "password": "p"}]}}),
            )
        };
        assert!(basic("Corp area").is_ok());
        assert!(basic("a\"b").is_err_and(|v| v.has("config.realm")));
        assert!(basic("a\\b").is_err_and(|v| v.has("config.realm")));
    }

    #[test]
    fn auth_server_static_tokens_are_at_least_16_characters() {
        let token = |tokens: Value| {
            create(
                json!({"organization": "acme", "name": "t", "environment": "dev", "type": "token", "config": {"tokens": tokens}}),
            )
        };
        assert!(token(json!(["0123456789abcdef"])).is_ok());
        assert!(token(json!(["0123456789abcde"])).is_err_and(|v| v.has("config.tokens[0]")));
        assert!(token(json!([])).is_err_and(|v| v.has("config.tokens")));
    }

    #[test]
    fn auth_server_name_environment_and_type_required() {
        let e = create(json!({"organization": "acme"}))
            .err()
            .unwrap_or_default();
        assert!(e.has("name") && e.has("environment") && e.has("type"));
        assert!(create(json!({"organization": "acme", "name": "x", "environment": "Prod!", "type": "token", "config": {"tokens": ["0123456789abcdef"]}})).is_err_and(|v| v.has("environment")));
    }

    #[test]
    fn auth_server_config_of_the_wrong_type_is_refused() {
        assert!(create(json!({"organization": "acme", "name": "t", "environment": "dev", "type": "token", "config": {"credentials": []}})).is_err_and(|v| v.has("config")));
    }

    #[test]
    fn auth_server_error_texts_never_echo_a_secret() {
        let e = oidc(with(oidc_config(), "client_secret", json!(12345)))
            .err()
            .unwrap_or_default();
        assert!(!e.to_string().contains("12345"));
        let t = create(json!({"organization": "acme", "name": "t", "environment": "dev", "type": "token", "config": {"tokens": ["short-secret"]}})).err().unwrap_or_default();
        assert!(!t.to_string().contains("short-secret"));
    }

    #[test]
    fn auth_server_patch_never_carries_credentials() {
        let p: AuthServerPatch =
            serde_json::from_value(json!({"config": {"credentials": []}})).unwrap_or_default();
        assert!(p.validate(AuthServerType::Basic).is_err());
        let p: AuthServerPatch =
            serde_json::from_value(json!({"config": {"realm": "New"}})).unwrap_or_default();
        assert!(p.validate(AuthServerType::Basic).is_ok());
        let p: AuthServerPatch = serde_json::from_value(json!({})).unwrap_or_default();
        assert!(p.validate(AuthServerType::Token).is_err());
        let p: AuthServerPatch =
            serde_json::from_value(json!({"config": {"issuer_url": "http://evil.example.com"}}))
                .unwrap_or_default();
        assert!(
            p.validate(AuthServerType::Oidc)
                .is_err_and(|v| v.has("config.issuer_url"))
        );
    }
}
