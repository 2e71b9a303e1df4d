//! Gateway auth server use cases: list, create, get, change, delete, and adding and removing
//! credentials. Secrets are protected before they reach storage and never answered.

use std::collections::HashSet;

use serde_json::json;
use uuid::Uuid;

use super::idempotency::Held;
use crate::access::OrgSelector;
use crate::access::{self, Access};
use crate::error::{Conflict, DomainError, Resource};
use crate::input::auth_server::{
    AuthServerPatch, ConfigChanges, ConfigSpec, CreateAuthServerRequest, CredentialRequest,
    check_password, check_token, check_username,
};
use crate::input::precondition::{Expect, check};
use crate::model::audit::{Audit, AuditAction, AuditEvent, AuditResource, Outcome, Parent};
use crate::model::auth_server::{
    AuthServer, AuthServerConfig, AuthServerView, BasicConfig, BasicCredential, CredentialView,
    OidcConfig, TokenConfig, TokenCredential,
};
use crate::model::identity::Caller;
use crate::model::secret::Secret;
use crate::ports::storage::{AuthServerChange, AuthServerWrite, StoreError};
use crate::rules::MAX_CREDENTIALS_PER_AUTH_SERVER;
use crate::service::idempotency::{Answer, IdempotencyRequest};
use crate::service::{MAX_ATTEMPTS, Services, name_taken, store_error};
use crate::validation::Violations;

/// What the deletion of an auth server or credential answers: nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted;

fn vault_error(e: crate::ports::secrets::VaultError) -> DomainError {
    DomainError::Internal(e.to_string())
}

/// What a change of an auth server decided: the server as it will be, what the audit trail
/// says of the change, and the answer to give.
struct ServerChange<T> {
    next: AuthServer,
    audit: Audit,
    answer: T,
}

/// How the audit trail shows a secret that changed: that it did, never what it is.
const REDACTED: &str = "[redacted]";

impl Services {
    /// The audit event of a change of `server` (or of one of its credentials): an auth
    /// server's changes take effect as they commit.
    fn audit(&self, caller: &Caller, server: &AuthServer, audit: Audit) -> AuditEvent {
        self.audit_event(
            caller,
            server.organization_id,
            Some(Parent::AuthServer(server.id)),
            audit,
            Outcome::Applied,
        )
    }

    async fn load_auth_server(&self, id: Uuid) -> Result<AuthServer, DomainError> {
        self.ports
            .auth_servers
            .auth_server(id)
            .await
            .map_err(store_error)?
            .ok_or(DomainError::NotFound(Resource::AuthServer))
    }

    async fn auth_server_for_write(
        &self,
        caller: &Caller,
        id: Uuid,
    ) -> Result<AuthServer, DomainError> {
        access::require_writer_somewhere(caller)?;
        let server = self.load_auth_server(id).await?;
        access::authorize_object(caller, &server.organization_id, Access::Write)?;
        self.spend_write(&server.organization_id)?;
        Ok(server)
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
    pub async fn create_auth_server(
        &self,
        caller: &Caller,
        body: CreateAuthServerRequest,
        idempotency: Option<IdempotencyRequest<'_, AuthServerView>>,
    ) -> Result<Answer<AuthServerView>, DomainError> {
        let spec = body.validate()?;
        let org =
            access::resolve_create_org(self.ports.identity.as_ref(), caller, &spec.organization)
                .await?;
        self.spend_write(&org.id)?;
        self.idempotently(org.id, idempotency, async |held| {
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
            let audit = self.audit(
                caller,
                &server,
                Audit::new(
                    AuditResource::AuthServer,
                    server.id,
                    AuditAction::Created,
                    json!({"name": view.name, "environment": view.environment, "type": view.kind}),
                ),
            );
            let write = AuthServerWrite {
                change: AuthServerChange::Insert(server),
                audit,
                idempotency: held.map(|h| h.completion(&view)),
            };
            self.ports
                .auth_servers
                .write_auth_server(write)
                .await
                .map_err(|e| name_taken(e, Resource::AuthServer, spec.name.as_str()))?;
            held.inspect(|h| h.committed());
            Ok(view)
        })
        .await
    }

    /// Gets one auth server.
    pub async fn get_auth_server(
        &self,
        caller: &Caller,
        id: Uuid,
    ) -> Result<AuthServerView, DomainError> {
        let server = self.load_auth_server(id).await?;
        access::authorize_object(caller, &server.organization_id, Access::Read)?;
        Ok(server.view())
    }

    /// Replaces a stored server with `decide`'s version, decided again on a fresh read if a
    /// concurrent change won.
    async fn change_auth_server<T>(
        &self,
        mut server: AuthServer,
        caller: &Caller,
        mut decide: impl AsyncFnMut(&AuthServer) -> Result<ServerChange<T>, DomainError>,
        held: Option<&Held<'_, T>>,
        expect: Expect<'_, AuthServerView>,
    ) -> Result<T, DomainError> {
        for attempt in 0..MAX_ATTEMPTS {
            if attempt > 0 {
                server = self.load_auth_server(server.id).await?;
            }
            // On the server as it is stored: the write below applies only to that version.
            check(expect, &server.view())?;
            // The change is decided on the server as it will be stored, stamped already, so
            // the answer it builds shows the `updated_at` a read will show next.
            let mut stamped = server.clone();
            stamped.updated_at = self
                .ports
                .clock
                .now()
                .max(server.updated_at + chrono::Duration::microseconds(1));
            let ServerChange {
                mut next,
                audit,
                answer: value,
            } = decide(&stamped).await?;
            next.updated_at = stamped.updated_at;
            let audit = self.audit(caller, &next, audit);
            let name = next.name.as_str().to_owned();
            let write = AuthServerWrite {
                change: AuthServerChange::Update {
                    server: next,
                    expected_updated_at: server.updated_at,
                },
                audit,
                idempotency: held.map(|h| h.completion(&value)),
            };
            match self.ports.auth_servers.write_auth_server(write).await {
                Ok(()) => {
                    held.inspect(|h| h.committed());
                    return Ok(value);
                }
                Err(StoreError::RevisionMismatch) => continue,
                Err(StoreError::Duplicate(crate::ports::storage::UniqueRule::CredentialName)) => {
                    return Err(DomainError::Conflict(Conflict::NameTaken {
                        resource: Resource::Credential,
                        name: String::new(),
                    }));
                }
                Err(e) => return Err(name_taken(e, Resource::AuthServer, &name)),
            }
        }
        Err(DomainError::Conflict(Conflict::ConcurrentModification))
    }

    /// Changes an auth server: merges the given fields.
    pub async fn patch_auth_server(
        &self,
        caller: &Caller,
        id: Uuid,
        body: AuthServerPatch,
        expect: Expect<'_, AuthServerView>,
    ) -> Result<AuthServerView, DomainError> {
        let server = self.auth_server_for_write(caller, id).await?;
        let changes = body.validate(server.config.kind())?;
        let new_secret = match &changes.config {
            ConfigChanges::Oidc(o) => o
                .client_secret
                .as_ref()
                .map(|s| self.ports.vault.seal(s))
                .transpose()
                .map_err(vault_error)?,
            _ => None,
        };
        self.change_auth_server(
            server,
            caller,
            async |current: &AuthServer| {
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
                Ok(ServerChange {
                    next,
                    audit,
                    answer: view,
                })
            },
            None,
            expect,
        )
        .await
    }

    /// Deletes an auth server (only while it is as `expect` says).
    pub async fn delete_auth_server(
        &self,
        caller: &Caller,
        id: Uuid,
        idempotency: Option<IdempotencyRequest<'_, Deleted>>,
        expect: Expect<'_, AuthServerView>,
    ) -> Result<Answer<Deleted>, DomainError> {
        access::require_writer_somewhere(caller)?;
        let found = self
            .ports
            .auth_servers
            .auth_server(id)
            .await
            .map_err(store_error)?;
        let Some(server) = found else {
            return Err(DomainError::NotFound(Resource::AuthServer));
        };
        access::authorize_object(caller, &server.organization_id, Access::Write)?;
        self.spend_write(&server.organization_id)?;
        self.idempotently(server.organization_id, idempotency, async |held| {
            check(expect, &server.view())?;
            let audit = self.audit(
                caller,
                &server,
                Audit::new(
                    AuditResource::AuthServer,
                    server.id,
                    AuditAction::Deleted,
                    json!({"name": server.name.as_str(), "environment": server.environment.as_str()}),
                ),
            );
            // With a condition, only the version it was checked on is deleted.
            let change = match expect {
                Some(_) => AuthServerChange::DeleteIfUnchanged {
                    id: server.id,
                    expected_updated_at: server.updated_at,
                },
                None => AuthServerChange::Delete(server.id),
            };
            let write = AuthServerWrite {
                change,
                audit,
                idempotency: held.map(|h| h.completion(&Deleted)),
            };
            self.ports
                .auth_servers
                .write_auth_server(write)
                .await
                .map_err(|e| match e {
                    StoreError::RevisionMismatch => DomainError::PreconditionFailed,
                    e => store_error(e),
                })?;
            held.inspect(|h| h.committed());
            Ok(Deleted)
        })
        .await
    }

    /// Adds a credential to an auth server: answers with the new entry.
    pub async fn add_credential(
        &self,
        caller: &Caller,
        id: Uuid,
        body: CredentialRequest,
        idempotency: Option<IdempotencyRequest<'_, CredentialView>>,
    ) -> Result<Answer<CredentialView>, DomainError> {
        let server = self.auth_server_for_write(caller, id).await?;
        self.idempotently(server.organization_id, idempotency, async |held| {
            // Checked before anything is hashed, and again below on the row being written.
            at_capacity(&server)?;
            let mut v = Violations::new();
            // The request's shape must match the server's type.
            let prepared = match (&server.config, &body) {
                (AuthServerConfig::Basic(_), CredentialRequest::Basic(b)) => {
                    check_username(&mut v, "username", &b.username);
                    check_password(&mut v, "password", &b.password);
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
            self.change_auth_server(
                server,
                caller,
                async |current: &AuthServer| {
                    at_capacity(current)?;
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
                    Ok(ServerChange {
                        next,
                        audit,
                        answer: view,
                    })
                },
                held,
                None,
            )
            .await
        })
        .await
    }

    /// Removes a credential from an auth server; never the last one
    /// (`Conflict::LastCredential`).
    pub async fn remove_credential(
        &self,
        caller: &Caller,
        id: Uuid,
        credential_id: Uuid,
        idempotency: Option<IdempotencyRequest<'_, Deleted>>,
    ) -> Result<Answer<Deleted>, DomainError> {
        let server = self.auth_server_for_write(caller, id).await?;
        self.idempotently(server.organization_id, idempotency, async |held| {
            self.change_auth_server(
                server,
                caller,
                async |current: &AuthServer| {
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
                        AuthServerConfig::Basic(b) => {
                            b.credentials.retain(|c| c.id != credential_id)
                        }
                        AuthServerConfig::Token(t) => t.tokens.retain(|c| c.id != credential_id),
                        AuthServerConfig::Oidc(_) => {}
                    }
                    Ok(ServerChange {
                        next,
                        audit: Audit::new(
                            AuditResource::Credential,
                            credential_id,
                            AuditAction::Deleted,
                            json!({}),
                        ),
                        answer: Deleted,
                    })
                },
                held,
                None,
            )
            .await
        })
        .await
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

enum Prepared {
    Basic(BasicCredential),
    Token(TokenCredential),
}
