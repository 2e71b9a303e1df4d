//! Gateway auth server use cases: list, create, get, change, delete, and adding and removing
//! credentials. Secrets are protected before they reach storage and never answered.

use std::collections::HashSet;

use serde_json::json;
use uuid::Uuid;

use super::aggregates::ServerChange;
use super::pipeline::Seen;
use crate::access::OrgSelector;
use crate::access::{self, Access};
use crate::error::{Conflict, DomainError, Resource};
use crate::input::auth_server::{
    AuthServerPatch, ConfigChanges, ConfigSpec, CreateAuthServerRequest, CredentialRequest,
    check_password, check_token, check_username,
};
use crate::input::precondition::Expect;
use crate::model::audit::{Audit, AuditAction, AuditResource};
use crate::model::auth_server::{
    AuthServer, AuthServerConfig, AuthServerView, BasicConfig, BasicCredential, CredentialView,
    OidcConfig, TokenConfig, TokenCredential,
};
use crate::model::identity::Caller;
use crate::model::secret::Secret;
use crate::rules::MAX_CREDENTIALS_PER_AUTH_SERVER;
use crate::service::idempotency::Answer;
use crate::service::{Command, Decision, Scheduled, Services, Target, store_error};
use crate::validation::Violations;

/// What the deletion of an auth server or credential answers: nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted;

fn vault_error(e: crate::ports::secrets::VaultError) -> DomainError {
    DomainError::Internal(e.to_string())
}

/// How the audit trail shows a secret that changed: that it did, never what it is.
const REDACTED: &str = "[redacted]";

impl Services {
    async fn load_auth_server(&self, id: Uuid) -> Result<AuthServer, DomainError> {
        self.ports
            .auth_servers
            .auth_server(id)
            .await
            .map_err(store_error)?
            .ok_or(DomainError::NotFound(Resource::AuthServer))
    }

    async fn hash_credentials(
        &self,
        pairs: &[(String, Secret)],
    ) -> Result<Vec<BasicCredential>, DomainError> {
        let mut out = Vec::with_capacity(pairs.len());
        for (username, password) in pairs {
            out.push(BasicCredential {
                id: self.ports.ids.new_id(),
                username: username.clone(),
                password_hash: self
                    .ports
                    .vault
                    .hash_password(password)
                    .await
                    .map_err(vault_error)?,
            });
        }
        Ok(out)
    }

    fn token_credential(&self, token: &Secret) -> TokenCredential {
        TokenCredential {
            id: self.ports.ids.new_id(),
            digest: self.ports.vault.digest_token(token),
            hint: token.hint(),
        }
    }

    /// Lists the organization's auth servers, optionally only those of one environment.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn list_auth_servers(
        &self,
        caller: &Caller,
        org: &OrgSelector,
        environment: Option<&str>,
    ) -> Result<Vec<AuthServerView>, DomainError> {
        let org = access::resolve_collection_org(self.ports.identity.as_ref(), caller, org).await?;
        // The adapter checked the filter's shape (a DNS label, else it refused the request): an
        // unknown environment simply lists nothing.
        let environment = environment.map(str::to_owned);
        let servers = self
            .ports
            .auth_servers
            .list_auth_servers(org.id, environment)
            .await
            .map_err(store_error)?;
        Ok(servers.iter().map(AuthServer::view).collect())
    }

    /// Creates an auth server.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn create_auth_server(
        &self,
        cmd: Command<'_, Scheduled<AuthServerView>>,
        body: CreateAuthServerRequest,
    ) -> Result<Answer<Scheduled<AuthServerView>>, DomainError> {
        let spec = body.validate()?;
        let naming = (Resource::AuthServer, spec.name.as_str().to_owned());
        self.create::<AuthServer, _>(cmd, &spec.organization, Some(naming), async |org| {
            let config = match &spec.config {
                ConfigSpec::Oidc(o) => AuthServerConfig::Oidc(OidcConfig {
                    issuer_url: o.issuer_url.clone(),
                    redirect_path: o.redirect_path.clone(),
                    client_id: o.client_id.clone(),
                    client_secret: self
                        .ports
                        .vault
                        .seal(&o.client_secret)
                        .map_err(vault_error)?,
                    authorized_domain: o.authorized_domain.clone(),
                    claims: o.claims.clone(),
                }),
                ConfigSpec::Basic { realm, credentials } => AuthServerConfig::Basic(BasicConfig {
                    realm: realm.clone(),
                    credentials: self.hash_credentials(credentials).await?,
                }),
                ConfigSpec::Token { tokens } => AuthServerConfig::Token(TokenConfig {
                    tokens: tokens.iter().map(|t| self.token_credential(t)).collect(),
                }),
            };
            let now = self.ports.clock.now();
            let server = AuthServer {
                id: self.ports.ids.new_id(),
                organization_id: org.id,
                organization_slug: org.slug.clone(),
                name: spec.name.clone(),
                environment: spec.environment.clone(),
                config,
                created_at: now,
                updated_at: now,
            };
            let view = server.view();
            let audit = Audit::new(
                AuditResource::AuthServer,
                server.id,
                AuditAction::Created,
                json!({"name": view.name, "environment": view.environment, "type": view.kind}),
            );
            Ok(Decision::record(ServerChange::Insert(server), audit, view))
        })
        .await
    }

    /// Gets one auth server.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn get_auth_server(
        &self,
        caller: &Caller,
        id: Uuid,
    ) -> Result<AuthServerView, DomainError> {
        let server = self.load_auth_server(id).await?;
        access::authorize_object(caller, &server.organization_id, Access::Read)?;
        Ok(server.view())
    }

    /// Changes an auth server: merges the given fields.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn patch_auth_server(
        &self,
        cmd: Command<'_, Scheduled<AuthServerView>>,
        id: Uuid,
        body: AuthServerPatch,
        expect: Expect<'_, AuthServerView>,
    ) -> Result<Answer<Scheduled<AuthServerView>>, DomainError> {
        // The patch's shape depends on the server's type: checked once the caller is known to
        // be allowed to see it, and the new secret sealed once.
        let mut prepared = None;
        self.mutate(
            cmd,
            Target::of(id),
            expect,
            // A patch wrong whatever the server's state is refused before the precondition
            // is weighed: a stale If-Match must not hide a 422.
            async |current: &AuthServer| {
                body.validate(current.config.kind())?;
                Ok(seen(current))
            },
            async |current: &AuthServer, _| {
                if prepared.is_none() {
                    let changes = body.validate(current.config.kind())?;
                    let new_secret = match &changes.config {
                        ConfigChanges::Oidc(o) => o
                            .client_secret
                            .as_ref()
                            .map(|s| self.ports.vault.seal(s))
                            .transpose()
                            .map_err(vault_error)?,
                        _ => None,
                    };
                    prepared = Some((changes, new_secret));
                }
                let Some((changes, new_secret)) = &prepared else {
                    return Err(DomainError::Internal("the patch was not prepared".into()));
                };
                let mut next = current.clone();
                let mut changed = serde_json::Map::new();
                if let Some(n) = &changes.name {
                    next.name = n.clone();
                    changed.insert("name".into(), json!(n.as_str()));
                }
                if let Some(e) = &changes.environment {
                    next.environment = e.clone();
                    changed.insert("environment".into(), json!(e.as_str()));
                }
                match (&changes.config, &mut next.config) {
                    (ConfigChanges::Oidc(o), AuthServerConfig::Oidc(c)) => {
                        let mut set =
                            |field: &'static str, target: &mut String, value: &Option<String>| {
                                if let Some(v) = value {
                                    *target = v.clone();
                                    changed.insert(field.into(), json!(v));
                                }
                            };
                        set("issuer_url", &mut c.issuer_url, &o.issuer_url);
                        set("redirect_path", &mut c.redirect_path, &o.redirect_path);
                        set("client_id", &mut c.client_id, &o.client_id);
                        set(
                            "authorized_domain",
                            &mut c.authorized_domain,
                            &o.authorized_domain,
                        );
                        let mut claim =
                            |field: &'static str,
                             target: &mut Option<String>,
                             value: &Option<Option<String>>| {
                                if let Some(v) = value {
                                    *target = v.clone();
                                    changed.insert(field.into(), json!(v));
                                }
                            };
                        claim(
                            "username_claim",
                            &mut c.claims.username_claim,
                            &o.username_claim,
                        );
                        claim("email_claim", &mut c.claims.email_claim, &o.email_claim);
                        claim("role_claim", &mut c.claims.role_claim, &o.role_claim);
                        claim("group_claim", &mut c.claims.group_claim, &o.group_claim);
                        if let Some(s) = &new_secret {
                            c.client_secret = s.clone();
                            changed.insert("client_secret".into(), json!(REDACTED));
                        }
                    }
                    (ConfigChanges::Basic { realm: Some(r) }, AuthServerConfig::Basic(b)) => {
                        b.realm = r.clone();
                        changed.insert("realm".into(), json!(r));
                    }
                    _ => {}
                }
                let view = next.view();
                let audit = Audit::new(
                    AuditResource::AuthServer,
                    next.id,
                    AuditAction::Updated,
                    changed.into(),
                );
                Ok(Decision::record(ServerChange::Replace(next), audit, view))
            },
        )
        .await
    }

    /// Deletes an auth server (only while it is as `expect` says).
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn delete_auth_server(
        &self,
        cmd: Command<'_, Scheduled<Deleted>>,
        id: Uuid,
        expect: Expect<'_, AuthServerView>,
    ) -> Result<Answer<Scheduled<Deleted>>, DomainError> {
        self.mutate(
            cmd,
            Target::of(id),
            expect,
            async |current: &AuthServer| Ok(seen(current)),
            async |server: &AuthServer, _| {
                let audit = Audit::new(
                    AuditResource::AuthServer,
                    server.id,
                    AuditAction::Deleted,
                    json!({"name": server.name.as_str(), "environment": server.environment.as_str()}),
                );
                Ok(Decision::record(ServerChange::Delete, audit, Deleted))
            },
        )
        .await
    }

    /// Adds a credential to an auth server: answers with the new entry.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn add_credential(
        &self,
        cmd: Command<'_, Scheduled<CredentialView>>,
        id: Uuid,
        body: CredentialRequest,
    ) -> Result<Answer<Scheduled<CredentialView>>, DomainError> {
        // Prepared (checked, hashed) once, on the server as first found; the decision checks
        // it against the server as it is when the change is made.
        let mut prepared: Option<Prepared> = None;
        self.mutate(
            cmd,
            Target::of(id),
            None,
            async |current: &AuthServer| Ok(seen(current)),
            async |current: &AuthServer, _| {
                at_capacity(current)?;
                let prepared = match &prepared {
                    Some(p) => p.clone(),
                    None => {
                        let p = self.prepare_credential(current, &body).await?;
                        prepared = Some(p.clone());
                        p
                    }
                };
                let mut next = current.clone();
                let view = match (&mut next.config, &prepared) {
                    (AuthServerConfig::Basic(b), Prepared::Basic(cred)) => {
                        if b.credentials.iter().any(|c| c.username == cred.username) {
                            return Err(DomainError::Conflict(Conflict::NameTaken {
                                resource: Resource::Credential,
                                name: cred.username.clone(),
                            }));
                        }
                        b.credentials.push(cred.clone());
                        cred.view()
                    }
                    (AuthServerConfig::Token(t), Prepared::Token(cred)) => {
                        if t.tokens.iter().any(|c| c.digest == cred.digest) {
                            return Err(DomainError::Conflict(Conflict::NameTaken {
                                resource: Resource::Credential,
                                name: cred.hint.clone(),
                            }));
                        }
                        t.tokens.push(cred.clone());
                        cred.view()
                    }
                    _ => {
                        return Err(DomainError::Internal("auth server type changed".into()));
                    }
                };
                let audit = match &view {
                    CredentialView::Basic { id, username } => Audit::new(
                        AuditResource::Credential,
                        id,
                        AuditAction::Created,
                        json!({"username": username}),
                    ),
                    CredentialView::Token { id, hint } => Audit::new(
                        AuditResource::Credential,
                        id,
                        AuditAction::Created,
                        json!({"hint": hint}),
                    ),
                };
                Ok(Decision::record(ServerChange::Replace(next), audit, view))
            },
        )
        .await
    }

    /// A new credential for `server`, checked and protected (hashed or digested).
    async fn prepare_credential(
        &self,
        server: &AuthServer,
        body: &CredentialRequest,
    ) -> Result<Prepared, DomainError> {
        let mut v = Violations::new();
        // The request's shape must match the server's type.
        let prepared = match (&server.config, body) {
            (AuthServerConfig::Basic(_), CredentialRequest::Basic(b)) => {
                check_username(&mut v, "username", &b.username);
                check_password(&mut v, "password", &b.username, &b.password);
                if !v.is_empty() {
                    return Err(DomainError::Validation(v));
                }
                let hashed = self
                    .hash_credentials(&[(b.username.clone(), b.password.clone())])
                    .await?;
                Prepared::Basic(
                    hashed
                        .into_iter()
                        .next()
                        .ok_or_else(|| DomainError::Internal("no hash".into()))?,
                )
            }
            (AuthServerConfig::Token(_), CredentialRequest::Token(t)) => {
                check_token(&mut v, "token", &t.token);
                if !v.is_empty() {
                    return Err(DomainError::Validation(v));
                }
                Prepared::Token(self.token_credential(&t.token))
            }
            (AuthServerConfig::Oidc(_), _) => {
                return Err(DomainError::validation(
                    "",
                    "an oidc auth server has no credentials",
                ));
            }
            (AuthServerConfig::Basic(_), _) => {
                return Err(DomainError::validation(
                    "",
                    "a basic auth server takes {\"username\", \"password\"}",
                ));
            }
            (AuthServerConfig::Token(_), _) => {
                return Err(DomainError::validation(
                    "",
                    "a token auth server takes {\"token\"}",
                ));
            }
        };
        Ok(prepared)
    }

    /// Removes a credential from an auth server; never the last one
    /// (`Conflict::LastCredential`).
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn remove_credential(
        &self,
        cmd: Command<'_, Scheduled<Deleted>>,
        id: Uuid,
        credential_id: Uuid,
    ) -> Result<Answer<Scheduled<Deleted>>, DomainError> {
        self.mutate(
            cmd,
            Target::of(id),
            None,
            async |current: &AuthServer| Ok(seen(current)),
            async |current: &AuthServer, _| {
                let mut next = current.clone();
                let ids: HashSet<Uuid> = match &next.config {
                    AuthServerConfig::Basic(b) => b.credentials.iter().map(|c| c.id).collect(),
                    AuthServerConfig::Token(t) => t.tokens.iter().map(|c| c.id).collect(),
                    AuthServerConfig::Oidc(_) => HashSet::new(),
                };
                if !ids.contains(&credential_id) {
                    return Err(DomainError::NotFound(Resource::Credential));
                }
                if ids.len() <= 1 {
                    return Err(DomainError::Conflict(Conflict::LastCredential));
                }
                match &mut next.config {
                    AuthServerConfig::Basic(b) => b.credentials.retain(|c| c.id != credential_id),
                    AuthServerConfig::Token(t) => t.tokens.retain(|c| c.id != credential_id),
                    AuthServerConfig::Oidc(_) => {}
                }
                let audit = Audit::new(
                    AuditResource::Credential,
                    credential_id,
                    AuditAction::Deleted,
                    json!({}),
                );
                Ok(Decision::record(
                    ServerChange::Replace(next),
                    audit,
                    Deleted,
                ))
            },
        )
        .await
    }
}

/// An auth server as the faces show it, for a caller's precondition.
fn seen(server: &AuthServer) -> Seen<AuthServerView, ()> {
    Seen {
        view: server.view(),
        value: (),
    }
}

/// Refused as a validation error when the server already holds as many credentials as one may.
fn at_capacity(server: &AuthServer) -> Result<(), DomainError> {
    if server.config.credential_count() >= MAX_CREDENTIALS_PER_AUTH_SERVER {
        return Err(DomainError::validation(
            "credentials",
            format!(
                "this auth server already holds {MAX_CREDENTIALS_PER_AUTH_SERVER} credentials, the most one may; remove one first"
            ),
        ));
    }
    Ok(())
}

#[derive(Clone)]
enum Prepared {
    Basic(BasicCredential),
    Token(TokenCredential),
}
