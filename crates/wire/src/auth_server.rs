//! The gateway's auth servers as answered: never a secret (a client secret shows as
//! `client_secret_set`, a token as its hint).

use chrono::{DateTime, Utc};
use domain::model::auth_server::{self as model, AuthServerType};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::enums;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuthServerView {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub organization_slug: String,
    pub name: String,
    pub environment: String,
    #[serde(rename = "type")]
    #[schema(value_type = enums::AuthServerType)]
    pub kind: AuthServerType,
    pub config: AuthServerConfigView,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// `config` as answered: never a secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
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

/// A credential as answered: basic `{"id", "username"}`, token `{"id", "hint"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum CredentialView {
    Basic { id: Uuid, username: String },
    Token { id: Uuid, hint: String },
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuthServerList {
    pub items: Vec<AuthServerView>,
}

impl From<&model::CredentialView> for CredentialView {
    fn from(c: &model::CredentialView) -> Self {
        match c {
            model::CredentialView::Basic { id, username } => CredentialView::Basic {
                id: *id,
                username: username.clone(),
            },
            model::CredentialView::Token { id, hint } => CredentialView::Token {
                id: *id,
                hint: hint.clone(),
            },
        }
    }
}

impl From<&model::AuthServerConfigView> for AuthServerConfigView {
    fn from(c: &model::AuthServerConfigView) -> Self {
        use model::AuthServerConfigView as M;
        match c {
            M::Oidc {
                issuer_url,
                redirect_path,
                client_id,
                client_secret_set,
                authorized_domain,
                username_claim,
                email_claim,
                role_claim,
                group_claim,
            } => AuthServerConfigView::Oidc {
                issuer_url: issuer_url.clone(),
                redirect_path: redirect_path.clone(),
                client_id: client_id.clone(),
                client_secret_set: *client_secret_set,
                authorized_domain: authorized_domain.clone(),
                username_claim: username_claim.clone(),
                email_claim: email_claim.clone(),
                role_claim: role_claim.clone(),
                group_claim: group_claim.clone(),
            },
            M::Basic { realm, credentials } => AuthServerConfigView::Basic {
                realm: realm.clone(),
                credentials: credentials.iter().map(CredentialView::from).collect(),
            },
            M::Token { tokens } => AuthServerConfigView::Token {
                tokens: tokens.iter().map(CredentialView::from).collect(),
            },
        }
    }
}

impl From<&model::AuthServerView> for AuthServerView {
    fn from(v: &model::AuthServerView) -> Self {
        AuthServerView {
            id: v.id,
            organization_id: v.organization_id,
            organization_slug: v.organization_slug.clone(),
            name: v.name.clone(),
            environment: v.environment.clone(),
            kind: v.kind,
            config: (&v.config).into(),
            created_at: v.created_at,
            updated_at: v.updated_at,
        }
    }
}
