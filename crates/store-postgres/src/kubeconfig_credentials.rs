//! `KubeconfigCredentials`: the credentials downloads asked for with a lifetime, in
//! `kubeconfig_credentials`, by the digest of their token; a rotation also replaces the
//! standing token in `cluster_credentials`. Each write carries its audit event.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use domain::model::audit::Actor;
use domain::model::identity::ClientKind;
use domain::model::kubeconfig::IssuedCredential;
use domain::model::secret::TokenDigest;
use domain::ports::storage::{KubeconfigCredentials, Revocation, Revoke, StoreError};
use uuid::Uuid;

use crate::PgStore;
use crate::error::{TxError, map};
use crate::schema::{cluster_credentials, kubeconfig_credentials as k};

#[derive(Debug, Insertable, Queryable, Selectable)]
#[diesel(table_name = k)]
struct CredentialRow {
    id: Uuid,
    cluster_id: Uuid,
    organization_id: Uuid,
    token_digest: String,
    issued_to: String,
    issued_to_email: Option<String>,
    issued_to_client: String,
    created_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    revoked_at: Option<DateTime<Utc>>,
    revoked_by: Option<String>,
}

impl CredentialRow {
    fn from_domain(c: &IssuedCredential, digest: TokenDigest) -> CredentialRow {
        CredentialRow {
            id: c.id,
            cluster_id: c.cluster_id,
            organization_id: c.organization_id,
            token_digest: digest.0,
            issued_to: c.issued_to.user_id.clone(),
            issued_to_email: c.issued_to.email.clone(),
            issued_to_client: c.issued_to.client.as_str().to_owned(),
            created_at: c.created_at,
            expires_at: c.expires_at,
            revoked_at: c.revoked_at,
            revoked_by: c.revoked_by.clone(),
        }
    }

    fn into_domain(self) -> IssuedCredential {
        IssuedCredential {
            id: self.id,
            cluster_id: self.cluster_id,
            organization_id: self.organization_id,
            issued_to: Actor {
                user_id: self.issued_to,
                email: self.issued_to_email,
                client: ClientKind::parse(&self.issued_to_client),
            },
            created_at: self.created_at,
            expires_at: self.expires_at,
            revoked_at: self.revoked_at,
            revoked_by: self.revoked_by,
        }
    }
}

#[async_trait]
impl KubeconfigCredentials for PgStore {
    async fn issue_credential(
        &self,
        credential: IssuedCredential,
        digest: TokenDigest,
        audit: domain::model::audit::AuditEvent,
    ) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            conn.transaction(|conn| {
                diesel::insert_into(k::table)
                    .values(CredentialRow::from_domain(&credential, digest.clone()))
                    .execute(conn)?;
                crate::audit::insert_in(conn, &audit)?;
                Ok::<_, TxError>(())
            })
            .map_err(StoreError::from)
        })
        .await
    }

    async fn issued_credentials(
        &self,
        cluster_id: Uuid,
    ) -> Result<Vec<IssuedCredential>, StoreError> {
        self.run_blocking(move |conn| {
            let rows: Vec<CredentialRow> = k::table
                .filter(k::cluster_id.eq(cluster_id))
                .order((k::created_at.desc(), k::id.desc()))
                .select(CredentialRow::as_select())
                .load(conn)
                .map_err(map)?;
            Ok(rows.into_iter().map(CredentialRow::into_domain).collect())
        })
        .await
    }

    async fn credential_by_digest(
        &self,
        digest: TokenDigest,
    ) -> Result<Option<IssuedCredential>, StoreError> {
        self.run_blocking(move |conn| {
            let row: Option<CredentialRow> = k::table
                .filter(k::token_digest.eq(&digest.0))
                .select(CredentialRow::as_select())
                .first(conn)
                .optional()
                .map_err(map)?;
            Ok(row.map(CredentialRow::into_domain))
        })
        .await
    }

    async fn revoke_credentials(&self, revocation: Revocation) -> Result<u64, StoreError> {
        self.run_blocking(move |conn| {
            conn.transaction(|conn| {
                let r = &revocation;
                let open = k::table
                    .filter(k::cluster_id.eq(r.cluster_id))
                    .filter(k::revoked_at.is_null());
                let set = (k::revoked_at.eq(Some(r.at)), k::revoked_by.eq(Some(&r.by)));
                let n = match &r.revoke {
                    Revoke::One(id) => diesel::update(open.filter(k::id.eq(*id)))
                        .set(set)
                        .execute(conn)?,
                    Revoke::All { rotated } => {
                        let n = diesel::update(open).set(set).execute(conn)?;
                        diesel::update(
                            cluster_credentials::table
                                .filter(cluster_credentials::cluster_id.eq(r.cluster_id)),
                        )
                        .set(cluster_credentials::sealed_token.eq(&rotated.0))
                        .execute(conn)?;
                        n
                    }
                };
                crate::audit::insert_in(conn, &r.audit)?;
                Ok::<_, TxError>(n as u64)
            })
            .map_err(StoreError::from)
        })
        .await
    }
}

impl PgStore {
    /// Deletes the credentials that ended before `before`: expired then, or revoked then.
    /// Housekeeping after a grace period, so that a refused download can still be told apart
    /// from an unknown one (and shown in the list) for a while; returns how many.
    pub async fn purge_credentials_ended_before(
        &self,
        before: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        self.run_blocking(move |conn| {
            let n = diesel::delete(
                k::table.filter(k::expires_at.lt(before).or(k::revoked_at.lt(before))),
            )
            .execute(conn)
            .map_err(map)?;
            Ok(n as u64)
        })
        .await
    }
}
