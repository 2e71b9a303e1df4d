//! Auth server bodies: create, PATCH, and credential additions.
//!
//! An auth server's `config` takes the shape of its type. On create the type is in the same
//! body, so `config` is read as that type's shape here. On PATCH the type is the stored
//! server's, which only the use case knows: `config` is read as every type's shape and the
//! domain keeps the reading of the server's type.

use domain::input::auth_server as draft;
use domain::model::auth_server::AuthServerType;
use domain::model::secret::Secret;
use domain::validation::redact_serde_message;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use utoipa::ToSchema;

use crate::enums;
use crate::request::{nullable, schema::StaticTokenText};

/// `POST /v1/public/gateway/auth-servers`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAuthServerRequest {
    /// The organization's slug or id.
    #[schema(required = true, nullable = false)]
    pub organization: Option<String>,
    /// A DNS label, unique in the organization and environment.
    #[schema(
        required = true,
        nullable = false,
        pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
    )]
    pub name: Option<String>,
    /// A DNS label, e.g. `production`.
    #[schema(
        required = true,
        nullable = false,
        pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
    )]
    pub environment: Option<String>,
    #[serde(rename = "type")]
    #[schema(value_type = enums::AuthServerType, required = true, nullable = false)]
    pub kind: Option<AuthServerType>,
    /// Shape depends on `type`: see the OIDC, Basic and Token config schemas.
    #[schema(required = true, nullable = false)]
    pub config: Option<Value>,
}

/// Reads `value` as `T`; on failure, serde's message without any value it quoted (a secret
/// sent in the wrong place is never repeated).
fn read<T: DeserializeOwned, D>(value: Value, into: impl FnOnce(T) -> D) -> Result<D, String> {
    serde_json::from_value::<T>(value)
        .map(into)
        .map_err(|e| redact_serde_message(&e.to_string()))
}

impl From<CreateAuthServerRequest> for draft::CreateAuthServerRequest {
    fn from(b: CreateAuthServerRequest) -> Self {
        use draft::CreateConfig as C;
        let config = match (b.kind, b.config) {
            // Without a type there is no shape to read `config` as; the rules say `type` is
            // required.
            (None, _) | (_, None) => None,
            (Some(kind), Some(value)) => Some(
                match kind {
                    AuthServerType::Oidc => read(value, |c: OidcConfigRequest| C::Oidc(c.into())),
                    AuthServerType::Basic => {
                        read(value, |c: BasicConfigRequest| C::Basic(c.into()))
                    }
                    AuthServerType::Token => {
                        read(value, |c: TokenConfigRequest| C::Token(c.into()))
                    }
                }
                .unwrap_or_else(C::Unreadable),
            ),
        };
        draft::CreateAuthServerRequest {
            organization: b.organization,
            name: b.name,
            environment: b.environment,
            kind: b.kind,
            config,
        }
    }
}

/// OIDC `config` on create.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OidcConfigRequest {
    /// https, or http for a loopback host.
    pub issuer_url: String,
    /// A path of its own, starting with `/`, already normalised (no `.`/`..` segments, no
    /// percent-encoding), of letters, digits and `-._~!$&'()*+:@` (never `;`, `,` or `=`, which
    /// would reach the sign-in cookie's `Path`), and not under `/.gateway/`.
    #[schema(pattern = "^/")]
    pub redirect_path: String,
    pub client_id: String,
    /// Write-only.
    #[schema(value_type = String, write_only)]
    pub client_secret: Secret,
    /// A host name with an optional port (`app.example.com`, `localhost:8443`).
    pub authorized_domain: String,
    pub username_claim: Option<String>,
    pub email_claim: Option<String>,
    pub role_claim: Option<String>,
    pub group_claim: Option<String>,
}

impl From<OidcConfigRequest> for draft::OidcConfigRequest {
    fn from(c: OidcConfigRequest) -> Self {
        draft::OidcConfigRequest {
            issuer_url: c.issuer_url,
            redirect_path: c.redirect_path,
            client_id: c.client_id,
            client_secret: c.client_secret,
            authorized_domain: c.authorized_domain,
            username_claim: c.username_claim,
            email_claim: c.email_claim,
            role_claim: c.role_claim,
            group_claim: c.group_claim,
        }
    }
}

/// A Basic username/password pair (create, and the credentials sub-route).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BasicCredentialRequest {
    pub username: String,
    /// At least 12 characters, not the username, not one character repeated and not a
    /// commonly used password. Stored only as an Argon2id hash; never returned.
    #[schema(value_type = String, write_only, min_length = 12)]
    pub password: Secret,
}

impl From<BasicCredentialRequest> for draft::BasicCredentialRequest {
    fn from(c: BasicCredentialRequest) -> Self {
        draft::BasicCredentialRequest {
            username: c.username,
            password: c.password,
        }
    }
}

/// Basic `config` on create.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BasicConfigRequest {
    /// Challenge realm; default the server's name. No `"` or `\`.
    #[schema(pattern = "^[^\"\\\\\\x00-\\x1f\\x7f]{1,255}$")]
    pub realm: Option<String>,
    #[schema(min_items = 1, max_items = 100)]
    pub credentials: Vec<BasicCredentialRequest>,
}

impl From<BasicConfigRequest> for draft::BasicConfigRequest {
    fn from(c: BasicConfigRequest) -> Self {
        draft::BasicConfigRequest {
            realm: c.realm,
            credentials: c.credentials.into_iter().map(Into::into).collect(),
        }
    }
}

/// Token `config` on create.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenConfigRequest {
    /// Static tokens (JWTs among them), at least 16 characters each. Write-only.
    #[schema(
        value_type = Vec<StaticTokenText>,
        write_only,
        min_items = 1,
        max_items = 100
    )]
    pub tokens: Vec<Secret>,
}

impl From<TokenConfigRequest> for draft::TokenConfigRequest {
    fn from(c: TokenConfigRequest) -> Self {
        draft::TokenConfigRequest { tokens: c.tokens }
    }
}

/// A Token credential (the credentials sub-route).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenCredentialRequest {
    /// At least 16 visible ASCII characters. Write-only.
    #[schema(value_type = String, write_only, pattern = "^[!-~]{16,}$")]
    pub token: Secret,
}

/// Body of `POST …/auth-servers/{id}/credentials`: basic or token, by the server's type.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum CredentialRequest {
    Basic(BasicCredentialRequest),
    Token(TokenCredentialRequest),
}

impl From<CredentialRequest> for draft::CredentialRequest {
    fn from(c: CredentialRequest) -> Self {
        match c {
            CredentialRequest::Basic(b) => draft::CredentialRequest::Basic(b.into()),
            CredentialRequest::Token(t) => {
                draft::CredentialRequest::Token(draft::TokenCredentialRequest { token: t.token })
            }
        }
    }
}

/// `PATCH …/auth-servers/{id}`: name, environment and the non-secret config fields, plus a
/// new client secret; never credentials.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthServerPatch {
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(nullable = false, pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    pub name: Option<String>,
    #[serde(default, deserialize_with = "super::not_null")]
    #[schema(nullable = false, pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    pub environment: Option<String>,
    /// The config fields to replace (merged with the stored ones).
    #[serde(default, deserialize_with = "super::not_null")]
    pub config: Option<Value>,
}

impl From<AuthServerPatch> for draft::AuthServerPatch {
    fn from(b: AuthServerPatch) -> Self {
        let config = b.config.map(|value| draft::ConfigPatch {
            names_credentials: value.get("credentials").is_some() || value.get("tokens").is_some(),
            is_empty: value.as_object().is_some_and(|o| o.is_empty()),
            oidc: read(value.clone(), |p: OidcConfigPatch| p.into()),
            basic: read(value, |p: BasicConfigPatch| p.into()),
        });
        draft::AuthServerPatch {
            name: b.name,
            environment: b.environment,
            config,
        }
    }
}

/// OIDC `config` on PATCH: any of the fields; a claim set to null stops being sent.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OidcConfigPatch {
    #[schema(nullable = false)]
    pub issuer_url: Option<String>,
    #[schema(nullable = false, pattern = "^/")]
    pub redirect_path: Option<String>,
    #[schema(nullable = false)]
    pub client_id: Option<String>,
    /// A new client secret (write-only).
    #[schema(value_type = String, required = false, write_only)]
    pub client_secret: Option<Secret>,
    #[schema(nullable = false)]
    pub authorized_domain: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub username_claim: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub email_claim: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub role_claim: Option<Option<String>>,
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>)]
    pub group_claim: Option<Option<String>>,
}

impl From<OidcConfigPatch> for draft::OidcConfigPatch {
    fn from(p: OidcConfigPatch) -> Self {
        draft::OidcConfigPatch {
            issuer_url: p.issuer_url,
            redirect_path: p.redirect_path,
            client_id: p.client_id,
            client_secret: p.client_secret,
            authorized_domain: p.authorized_domain,
            username_claim: p.username_claim,
            email_claim: p.email_claim,
            role_claim: p.role_claim,
            group_claim: p.group_claim,
        }
    }
}

/// Basic `config` on PATCH: the realm (null: the server's name again).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BasicConfigPatch {
    #[serde(default, deserialize_with = "nullable")]
    #[schema(value_type = Option<String>, pattern = "^[^\"\\\\\\x00-\\x1f\\x7f]{1,255}$")]
    pub realm: Option<Option<String>>,
}

impl From<BasicConfigPatch> for draft::BasicConfigPatch {
    fn from(p: BasicConfigPatch) -> Self {
        draft::BasicConfigPatch { realm: p.realm }
    }
}

/// The auth-server rules as a client meets them: JSON in, through these shapes and the
/// domain's rules (issuer URLs, redirect paths, authorized domains, realms, credentials).
#[cfg(test)]
mod tests {
    use domain::input::auth_server::AuthServerSpec;
    use domain::model::auth_server::AuthServerType;
    use domain::rules::MAX_CREDENTIALS_PER_AUTH_SERVER;
    use domain::validation::Violations;
    use serde_json::{Value, json};

    use super::*;

    fn create(body: Value) -> Result<AuthServerSpec, Violations> {
        let r: CreateAuthServerRequest =
            serde_json::from_value(body).unwrap_or_else(|e| panic!("{e}"));
        draft::CreateAuthServerRequest::from(r).validate()
    }

    fn patch(body: Value) -> draft::AuthServerPatch {
        serde_json::from_value::<AuthServerPatch>(body)
            .unwrap_or_else(|e| panic!("{e}"))
            .into()
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
        for good in ["/callback", "/oauth/callback", "/a/b~v.1/c", "/cb/"] {
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
            // Characters that would end or split the sign-in cookie's Path attribute.
            "/cb;Domain=evil.example",
            "/a/b;v=1/c",
            "/cb,x",
            "/cb=1",
            // The gateway's own prefix.
            "/.gateway/callback",
            "/.gateway",
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
                .map(
                    |i| json!({"username": format!("user{i}"), "password": "long-enough-password"}),
                )
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
        assert!(basic(json!([{"username": "u", "password": "pass:with:colons"}])).is_ok());
        assert!(
            basic(json!([{"username": "u", "password": "first-password-a"}, {"username": "u", "password": "second-password-b"}]))
                .is_err_and(|v| v.has("config.credentials[1].username"))
        );
        assert!(basic(json!([{"username": "u:x", "password": "long-enough-password"}])).is_err());
        assert!(
            basic(json!([{"username": "u", "password": ""}]))
                .is_err_and(|v| v.has("config.credentials[0].password"))
        );
    }

    /// The password rule, as a person reads it beside the field: length, not the username,
    /// not one character repeated, not a common password; composition is not asked for.
    #[test]
    fn a_basic_password_is_long_and_not_guessable() {
        let basic = |username: &str, password: &str| {
            create(
                json!({"organization": "acme", "name": "b", "environment": "dev", "type": "basic", "config": {"credentials": [{"username": username, "password": password}]}}),
            )
        };
        // (username, password) pairs the rule refuses, each for one of its reasons.
        for (user, weak) in [
            ("alice", "a"),
            ("alice", "eleven-char"),
            ("alice-in-the-garden", "alice-in-the-garden"),
            ("alice", "aaaaaaaaaaaaaaaa"),
            ("alice", "Password1234"),
            ("alice", "123456789012"),
        ] {
            let refused = basic(user, weak);
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|v| v.has("config.credentials[0].password")),
                "{weak}: {refused:?}"
            );
        }
        for good in [
            "twelve chars",
            "correct horse battery staple",
            "Zq7!mK2#pL9x",
        ] {
            assert!(basic("alice", good).is_ok(), "{good}");
        }
    }

    #[test]
    fn auth_server_realm_holds_no_quote_or_backslash() {
        let basic = |realm: &str| {
            create(
                json!({"organization": "acme", "name": "b", "environment": "dev", "type": "basic", "config": {"realm": realm, "credentials": [{"username": "u", "password": "long-enough-password"}]}}),
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
        let p = patch(json!({"config": {"credentials": []}}));
        assert!(p.validate(AuthServerType::Basic).is_err());
        let p = patch(json!({"config": {"realm": "New"}}));
        assert!(p.validate(AuthServerType::Basic).is_ok());
        let p = patch(json!({}));
        assert!(p.validate(AuthServerType::Token).is_err());
        let p = patch(json!({"config": {"issuer_url": "http://evil.example.com"}}));
        assert!(
            p.validate(AuthServerType::Oidc)
                .is_err_and(|v| v.has("config.issuer_url"))
        );
    }
}
