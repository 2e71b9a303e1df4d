//! Gateway Auth Servers: how clients prove who they are to a protected
//! route. Stored with their secrets protected; answered without them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::secret::{PasswordHash, SealedSecret, TokenDigest};
use crate::names::DnsLabel;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthServerType {
    Oidc,
    Basic,
    Token,
}

impl AuthServerType {
    /// Every value, in declaration order.
    pub const ALL: [AuthServerType; 3] = [
        AuthServerType::Oidc,
        AuthServerType::Basic,
        AuthServerType::Token,
    ];
}

impl AuthServerType {
    pub fn as_str(self) -> &'static str {
        match self {
            AuthServerType::Oidc => "oidc",
            AuthServerType::Basic => "basic",
            AuthServerType::Token => "token",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "oidc" => Some(AuthServerType::Oidc),
            "basic" => Some(AuthServerType::Basic),
            "token" => Some(AuthServerType::Token),
            _ => None,
        }
    }
}

/// The OIDC claims passed upstream as `X-Auth-*` headers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimNames {
    pub username_claim: Option<String>,
    pub email_claim: Option<String>,
    pub role_claim: Option<String>,
    pub group_claim: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcConfig {
    pub issuer_url: String,
    pub redirect_path: String,
    pub client_id: String,
    pub client_secret: SealedSecret,
    pub authorized_domain: String,
    pub claims: ClaimNames,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicCredential {
    pub id: Uuid,
    pub username: String,
    pub password_hash: PasswordHash,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicConfig {
    /// The challenge realm; `None` means the server's name.
    pub realm: Option<String>,
    pub credentials: Vec<BasicCredential>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenCredential {
    pub id: Uuid,
    pub digest: TokenDigest,
    /// `…` and the token's last four characters.
    pub hint: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenConfig {
    pub tokens: Vec<TokenCredential>,
}

/// The type-specific configuration, secrets protected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthServerConfig {
    Oidc(OidcConfig),
    Basic(BasicConfig),
    Token(TokenConfig),
}

impl AuthServerConfig {
    pub fn kind(&self) -> AuthServerType {
        match self {
            AuthServerConfig::Oidc(_) => AuthServerType::Oidc,
            AuthServerConfig::Basic(_) => AuthServerType::Basic,
            AuthServerConfig::Token(_) => AuthServerType::Token,
        }
    }

    /// How many credentials the server holds (basic and token); an OIDC server has none.
    pub fn credential_count(&self) -> usize {
        match self {
            AuthServerConfig::Oidc(_) => 0,
            AuthServerConfig::Basic(b) => b.credentials.len(),
            AuthServerConfig::Token(t) => t.tokens.len(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthServer {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub organization_slug: String,
    pub name: DnsLabel,
    pub environment: DnsLabel,
    pub config: AuthServerConfig,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A credential as answered: basic `{"id", "username"}`, token `{"id", "hint"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialView {
    Basic { id: Uuid, username: String },
    Token { id: Uuid, hint: String },
}

/// `config` as answered: never a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthServerConfigView {
    Oidc {
        issuer_url: String,
        redirect_path: String,
        client_id: String,
        /// Always true: the secret is write-only.
        client_secret_set: bool,
        authorized_domain: String,
        username_claim: Option<String>,
        email_claim: Option<String>,
        role_claim: Option<String>,
        group_claim: Option<String>,
    },
    Basic {
        realm: String,
        credentials: Vec<CredentialView>,
    },
    Token {
        tokens: Vec<CredentialView>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthServerView {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub organization_slug: String,
    pub name: String,
    pub environment: String,
    pub kind: AuthServerType,
    pub config: AuthServerConfigView,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl BasicConfig {
    pub fn realm_or<'a>(&'a self, server_name: &'a str) -> &'a str {
        self.realm.as_deref().unwrap_or(server_name)
    }
}

impl BasicCredential {
    pub fn view(&self) -> CredentialView {
        CredentialView::Basic {
            id: self.id,
            username: self.username.clone(),
        }
    }
}

impl TokenCredential {
    pub fn view(&self) -> CredentialView {
        CredentialView::Token {
            id: self.id,
            hint: self.hint.clone(),
        }
    }
}

impl AuthServer {
    pub fn view(&self) -> AuthServerView {
        let config = match &self.config {
            AuthServerConfig::Oidc(c) => AuthServerConfigView::Oidc {
                issuer_url: c.issuer_url.clone(),
                redirect_path: c.redirect_path.clone(),
                client_id: c.client_id.clone(),
                client_secret_set: true,
                authorized_domain: c.authorized_domain.clone(),
                username_claim: c.claims.username_claim.clone(),
                email_claim: c.claims.email_claim.clone(),
                role_claim: c.claims.role_claim.clone(),
                group_claim: c.claims.group_claim.clone(),
            },
            AuthServerConfig::Basic(b) => AuthServerConfigView::Basic {
                realm: b.realm_or(self.name.as_str()).to_owned(),
                credentials: b.credentials.iter().map(BasicCredential::view).collect(),
            },
            AuthServerConfig::Token(t) => AuthServerConfigView::Token {
                tokens: t.tokens.iter().map(TokenCredential::view).collect(),
            },
        };
        AuthServerView {
            id: self.id,
            organization_id: self.organization_id,
            organization_slug: self.organization_slug.clone(),
            name: self.name.as_str().to_owned(),
            environment: self.environment.as_str().to_owned(),
            kind: self.config.kind(),
            config,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}
