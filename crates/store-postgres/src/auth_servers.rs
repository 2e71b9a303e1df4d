//! `AuthServerRepository`: gateway auth servers with their credentials and audit trail. Every
//! write is one transaction that also notifies `auth_server_changes` so gateways reload.

use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::pg::PgConnection;
use diesel::prelude::*;
use domain::model::auth_server::{
    AuthServer, AuthServerConfig, AuthServerType, BasicConfig, BasicCredential, ClaimNames,
    OidcConfig, TokenConfig, TokenCredential,
};
use domain::model::secret::{PasswordHash, SealedSecret, TokenDigest};
use domain::names::DnsLabel;
use domain::ports::storage::{AuthServerChange, AuthServerRepository, AuthServerWrite, StoreError};
use uuid::Uuid;

use crate::error::{TxError, corrupt};
use crate::idempotency::complete_in;
use crate::schema::{auth_server_credentials as cred, auth_servers as s};
use crate::{AUTH_SERVER_CHANNEL, PgStore};

#[derive(Debug, Clone, Queryable, Selectable, Insertable, AsChangeset)]
#[diesel(table_name = s, check_for_backend(diesel::pg::Pg), treat_none_as_null = true)]
struct ServerRow {
    id: Uuid,
    organization_id: Uuid,
    organization_slug: String,
    name: String,
    environment: String,
    kind: String,
    realm: Option<String>,
    issuer_url: Option<String>,
    redirect_path: Option<String>,
    client_id: Option<String>,
    client_secret_sealed: Option<String>,
    authorized_domain: Option<String>,
    username_claim: Option<String>,
    email_claim: Option<String>,
    role_claim: Option<String>,
    group_claim: Option<String>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Queryable, Selectable, Insertable)]
#[diesel(table_name = cred, check_for_backend(diesel::pg::Pg))]
struct CredentialRow {
    id: Uuid,
    auth_server_id: Uuid,
    username: Option<String>,
    password_hash: Option<String>,
    token_digest: Option<String>,
    hint: Option<String>,
    position: i32,
    created_at: DateTime<Utc>,
}

fn split(server: &AuthServer) -> Result<(ServerRow, Vec<CredentialRow>), StoreError> {
    let mut row = ServerRow {
        id: server.id,
        organization_id: server.organization_id,
        organization_slug: server.organization_slug.clone(),
        name: server.name.as_str().to_owned(),
        environment: server.environment.as_str().to_owned(),
        kind: server.config.kind().as_str().to_owned(),
        realm: None,
        issuer_url: None,
        redirect_path: None,
        client_id: None,
        client_secret_sealed: None,
        authorized_domain: None,
        username_claim: None,
        email_claim: None,
        role_claim: None,
        group_claim: None,
        created_at: server.created_at,
        updated_at: server.updated_at,
    };
    let position = |i: usize| {
        i32::try_from(i).map_err(|_| StoreError::Internal("too many credentials".into()))
    };
    let credential = |id, position, username, password_hash, token_digest, hint| CredentialRow {
        id,
        auth_server_id: server.id,
        username,
        password_hash,
        token_digest,
        hint,
        position,
        created_at: server.updated_at,
    };
    let credentials = match &server.config {
        AuthServerConfig::Oidc(c) => {
            row.issuer_url = Some(c.issuer_url.clone());
            row.redirect_path = Some(c.redirect_path.clone());
            row.client_id = Some(c.client_id.clone());
            row.client_secret_sealed = Some(c.client_secret.0.clone());
            row.authorized_domain = Some(c.authorized_domain.clone());
            row.username_claim = c.claims.username_claim.clone();
            row.email_claim = c.claims.email_claim.clone();
            row.role_claim = c.claims.role_claim.clone();
            row.group_claim = c.claims.group_claim.clone();
            Vec::new()
        }
        AuthServerConfig::Basic(b) => {
            row.realm = b.realm.clone();
            b.credentials
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    Ok(credential(
                        c.id,
                        position(i)?,
                        Some(c.username.clone()),
                        Some(c.password_hash.0.clone()),
                        None,
                        None,
                    ))
                })
                .collect::<Result<_, StoreError>>()?
        }
        AuthServerConfig::Token(t) => t
            .tokens
            .iter()
            .enumerate()
            .map(|(i, c)| {
                Ok(credential(
                    c.id,
                    position(i)?,
                    None,
                    None,
                    Some(c.digest.0.clone()),
                    Some(c.hint.clone()),
                ))
            })
            .collect::<Result<_, StoreError>>()?,
    };
    Ok((row, credentials))
}

fn join(row: ServerRow, credentials: Vec<CredentialRow>) -> Result<AuthServer, StoreError> {
    let kind =
        AuthServerType::parse(&row.kind).ok_or_else(|| corrupt("auth server type", &row.kind))?;
    let missing = |what: &str| corrupt(what, &row.id.to_string());
    let config = match kind {
        AuthServerType::Oidc => AuthServerConfig::Oidc(OidcConfig {
            issuer_url: row
                .issuer_url
                .clone()
                .ok_or_else(|| missing("issuer_url of auth server"))?,
            redirect_path: row
                .redirect_path
                .clone()
                .ok_or_else(|| missing("redirect_path of auth server"))?,
            client_id: row
                .client_id
                .clone()
                .ok_or_else(|| missing("client_id of auth server"))?,
            client_secret: SealedSecret(
                row.client_secret_sealed
                    .clone()
                    .ok_or_else(|| missing("client secret of auth server"))?,
            ),
            authorized_domain: row
                .authorized_domain
                .clone()
                .ok_or_else(|| missing("authorized_domain of auth server"))?,
            claims: ClaimNames {
                username_claim: row.username_claim.clone(),
                email_claim: row.email_claim.clone(),
                role_claim: row.role_claim.clone(),
                group_claim: row.group_claim.clone(),
            },
        }),
        AuthServerType::Basic => AuthServerConfig::Basic(BasicConfig {
            realm: row.realm.clone(),
            credentials: credentials
                .into_iter()
                .map(|c| match (c.username, c.password_hash) {
                    (Some(username), Some(hash)) => Ok(BasicCredential {
                        id: c.id,
                        username,
                        password_hash: PasswordHash(hash),
                    }),
                    _ => Err(corrupt("basic credential", &c.id.to_string())),
                })
                .collect::<Result<_, _>>()?,
        }),
        AuthServerType::Token => AuthServerConfig::Token(TokenConfig {
            tokens: credentials
                .into_iter()
                .map(|c| match (c.token_digest, c.hint) {
                    (Some(digest), Some(hint)) => Ok(TokenCredential {
                        id: c.id,
                        digest: TokenDigest(digest),
                        hint,
                    }),
                    _ => Err(corrupt("token credential", &c.id.to_string())),
                })
                .collect::<Result<_, _>>()?,
        }),
    };
    Ok(AuthServer {
        id: row.id,
        organization_id: row.organization_id,
        organization_slug: row.organization_slug,
        name: DnsLabel::from_trusted(row.name),
        environment: DnsLabel::from_trusted(row.environment),
        config,
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}

fn credentials_of(
    conn: &mut PgConnection,
    ids: Vec<Uuid>,
) -> Result<HashMap<Uuid, Vec<CredentialRow>>, TxError> {
    let rows: Vec<CredentialRow> = cred::table
        .filter(cred::auth_server_id.eq_any(ids))
        .order((cred::auth_server_id, cred::position.asc(), cred::id.asc()))
        .select(CredentialRow::as_select())
        .load(conn)?;
    let mut by_server: HashMap<Uuid, Vec<CredentialRow>> = HashMap::new();
    for r in rows {
        by_server.entry(r.auth_server_id).or_default().push(r);
    }
    Ok(by_server)
}

fn load(conn: &mut PgConnection, rows: Vec<ServerRow>) -> Result<Vec<AuthServer>, StoreError> {
    let ids = rows.iter().map(|r| r.id).collect();
    let mut credentials = credentials_of(conn, ids)?;
    rows.into_iter()
        .map(|r| {
            let c = credentials.remove(&r.id).unwrap_or_default();
            join(r, c)
        })
        .collect()
}

/// Writes the server's credentials as given: removes the ones no longer there, then adds or
/// re-positions the rest (removal first, so a username can move to a new entry).
fn replace_credentials(
    conn: &mut PgConnection,
    server_id: Uuid,
    rows: &[CredentialRow],
) -> Result<(), TxError> {
    let keep: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    diesel::delete(
        cred::table
            .filter(cred::auth_server_id.eq(server_id))
            .filter(cred::id.ne_all(keep)),
    )
    .execute(conn)?;
    for r in rows {
        diesel::insert_into(cred::table)
            .values(r)
            .on_conflict(cred::id)
            .do_update()
            .set((
                cred::username.eq(&r.username),
                cred::password_hash.eq(&r.password_hash),
                cred::token_digest.eq(&r.token_digest),
                cred::hint.eq(&r.hint),
                cred::position.eq(r.position),
            ))
            .execute(conn)?;
    }
    Ok(())
}

fn write_in(conn: &mut PgConnection, w: &AuthServerWrite) -> Result<(), TxError> {
    let server_id = match &w.change {
        AuthServerChange::Insert(server) => {
            let (row, credentials) = split(server)?;
            diesel::insert_into(s::table).values(&row).execute(conn)?;
            diesel::insert_into(cred::table)
                .values(&credentials)
                .execute(conn)?;
            server.id
        }
        AuthServerChange::Update {
            server,
            expected_updated_at,
        } => {
            let (row, credentials) = split(server)?;
            let n = diesel::update(
                s::table
                    .filter(s::id.eq(server.id))
                    .filter(s::updated_at.eq(expected_updated_at)),
            )
            .set(&row)
            .execute(conn)?;
            if n == 0 {
                return Err(StoreError::RevisionMismatch.into());
            }
            replace_credentials(conn, server.id, &credentials)?;
            server.id
        }
        AuthServerChange::Delete(id) => {
            // Credentials go with it (ON DELETE CASCADE); the audit trail stays.
            diesel::delete(s::table.find(id)).execute(conn)?;
            *id
        }
        AuthServerChange::DeleteIfUnchanged {
            id,
            expected_updated_at,
        } => {
            let n = diesel::delete(
                s::table
                    .find(id)
                    .filter(s::updated_at.eq(expected_updated_at)),
            )
            .execute(conn)?;
            if n == 0 {
                return Err(StoreError::RevisionMismatch.into());
            }
            *id
        }
    };
    crate::audit::insert_in(conn, &w.audit)?;
    if let Some(completion) = &w.idempotency {
        complete_in(conn, completion)?;
    }
    notify(conn, AUTH_SERVER_CHANNEL, &server_id.to_string())
}

#[async_trait]
impl AuthServerRepository for PgStore {
    async fn auth_server(&self, id: Uuid) -> Result<Option<AuthServer>, StoreError> {
        self.run_blocking(move |conn| {
            conn.build_transaction()
                .repeatable_read()
                .read_only()
                .run(|conn| {
                    let rows: Vec<ServerRow> = s::table
                        .filter(s::id.eq(id))
                        .select(ServerRow::as_select())
                        .load(conn)?;
                    Ok::<_, TxError>(load(conn, rows)?.into_iter().next())
                })
                .map_err(StoreError::from)
        })
        .await
    }

    async fn list_auth_servers(
        &self,
        organization_id: Uuid,
        environment: Option<String>,
    ) -> Result<Vec<AuthServer>, StoreError> {
        self.run_blocking(move |conn| {
            conn.build_transaction()
                .repeatable_read()
                .read_only()
                .run(|conn| {
                    let mut q = s::table
                        .filter(s::organization_id.eq(organization_id))
                        .into_boxed();
                    if let Some(env) = environment.clone() {
                        q = q.filter(s::environment.eq(env));
                    }
                    let rows: Vec<ServerRow> = q
                        .order((s::created_at.asc(), s::id.asc()))
                        .select(ServerRow::as_select())
                        .load(conn)?;
                    Ok::<_, TxError>(load(conn, rows)?)
                })
                .map_err(StoreError::from)
        })
        .await
    }

    async fn write_auth_server(&self, write: AuthServerWrite) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            conn.transaction(|conn| write_in(conn, &write))
                .map_err(StoreError::from)
        })
        .await
    }
}

/// Tells the gateways of every process that an auth server changed, when the write commits.
fn notify(conn: &mut PgConnection, channel: &str, payload: &str) -> Result<(), TxError> {
    diesel::sql_query("SELECT pg_notify($1, $2)")
        .bind::<diesel::sql_types::Text, _>(channel)
        .bind::<diesel::sql_types::Text, _>(payload)
        .execute(conn)?;
    Ok(())
}
