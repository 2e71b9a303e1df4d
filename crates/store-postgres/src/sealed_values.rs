//! Every value sealed under the `SECRETS_KEY` ring, by column: read in pages and replaced one
//! by one for a re-seal, and the data keys the vault keeps here (`vault_keys`).
//!
//! A replacement is a compare-and-set on the value read: a value changed meanwhile (a token
//! rotated, a client secret replaced) is already sealed under the current key and is left as
//! the newer write made it.

use diesel::prelude::*;
use domain::model::secret::SealedSecret;
use domain::ports::secrets::VaultError;
use domain::ports::storage::StoreError;
use secrets::Vault;
use uuid::Uuid;

use crate::PgStore;
use crate::error::map;
use crate::schema::{auth_servers, cluster_credentials, vault_keys};

/// The purpose under which the token digest key is kept in `vault_keys`.
pub const TOKEN_DIGEST_KEY: &str = "token digest";

/// Why the vault could not be set up on this database.
#[derive(Debug, thiserror::Error)]
pub enum VaultSetupError {
    #[error(
        "SECRETS_KEY_PREVIOUS is set but this database keeps no token digest key yet: start once \
         with the SECRETS_KEY the data was made with and no SECRETS_KEY_PREVIOUS, then rotate"
    )]
    RotatedBeforeFirstStart,
    #[error(
        "the stored token digest key does not open under SECRETS_KEY or SECRETS_KEY_PREVIOUS: {0}"
    )]
    DigestKey(VaultError),
    #[error("cannot read the vault's data keys: {0}")]
    Store(#[from] StoreError),
}

impl PgStore {
    /// `vault` with the token digest key this database keeps, stored first when there is none
    /// (then it is the key `vault` derives from its `SECRETS_KEY`, the one every earlier release
    /// used, so digests written before keep verifying). Every process that checks tokens calls
    /// this at start.
    pub async fn open_vault(&self, vault: Vault) -> Result<Vault, VaultSetupError> {
        if vault.has_previous_keys() && !self.has_data_key(TOKEN_DIGEST_KEY).await? {
            return Err(VaultSetupError::RotatedBeforeFirstStart);
        }
        let candidate = vault
            .sealed_digest_key()
            .map_err(VaultSetupError::DigestKey)?;
        let stored = self.data_key(TOKEN_DIGEST_KEY, candidate).await?;
        vault
            .with_digest_key(&stored)
            .map_err(VaultSetupError::DigestKey)
    }
}

/// A column holding sealed values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealedColumn {
    /// Each provisioned cluster's standing kubeconfig token.
    ClusterTokens,
    /// Each OIDC auth server's client secret.
    OidcClientSecrets,
    /// The vault's data keys.
    DataKeys,
}

impl SealedColumn {
    pub const ALL: [SealedColumn; 3] = [
        SealedColumn::DataKeys,
        SealedColumn::ClusterTokens,
        SealedColumn::OidcClientSecrets,
    ];

    /// The name an operator reads (and the admin tool prints).
    pub fn name(self) -> &'static str {
        match self {
            SealedColumn::ClusterTokens => "cluster kubeconfig tokens",
            SealedColumn::OidcClientSecrets => "OIDC client secrets",
            SealedColumn::DataKeys => "vault data keys",
        }
    }
}

/// One sealed value and the key of its row (a uuid or a purpose, as text).
#[derive(Debug, Clone)]
pub struct SealedValue {
    pub row: String,
    pub sealed: SealedSecret,
}

impl PgStore {
    /// The data key kept for `purpose`: `candidate` is stored when there is none yet (the first
    /// process to start on the database wins; every other one reads what it wrote).
    pub async fn data_key(
        &self,
        purpose: &str,
        candidate: SealedSecret,
    ) -> Result<SealedSecret, StoreError> {
        let purpose = purpose.to_owned();
        self.run_blocking(move |conn| {
            diesel::insert_into(vault_keys::table)
                .values((
                    vault_keys::purpose.eq(&purpose),
                    vault_keys::sealed.eq(&candidate.0),
                ))
                .on_conflict_do_nothing()
                .execute(conn)
                .map_err(map)?;
            vault_keys::table
                .find(&purpose)
                .select(vault_keys::sealed)
                .first::<String>(conn)
                .map(SealedSecret)
                .map_err(map)
        })
        .await
    }

    /// Whether a data key is kept for `purpose`.
    pub async fn has_data_key(&self, purpose: &str) -> Result<bool, StoreError> {
        let purpose = purpose.to_owned();
        self.run_blocking(move |conn| {
            diesel::select(diesel::dsl::exists(vault_keys::table.find(&purpose)))
                .get_result(conn)
                .map_err(map)
        })
        .await
    }

    /// Up to `limit` values of `column` whose row key sorts after `after`, in row-key order.
    pub async fn sealed_page(
        &self,
        column: SealedColumn,
        after: Option<String>,
        limit: i64,
    ) -> Result<Vec<SealedValue>, StoreError> {
        self.run_blocking(move |conn| {
            let rows: Vec<(String, String)> = match column {
                SealedColumn::ClusterTokens => {
                    let mut q = cluster_credentials::table
                        .select((
                            cluster_credentials::cluster_id,
                            cluster_credentials::sealed_token,
                        ))
                        .order(cluster_credentials::cluster_id)
                        .limit(limit)
                        .into_boxed();
                    if let Some(after) = after.as_deref().map(parse_uuid).transpose()? {
                        q = q.filter(cluster_credentials::cluster_id.gt(after));
                    }
                    q.load::<(Uuid, String)>(conn)
                        .map_err(map)?
                        .into_iter()
                        .map(|(id, s)| (id.to_string(), s))
                        .collect()
                }
                SealedColumn::OidcClientSecrets => {
                    let mut q = auth_servers::table
                        .filter(auth_servers::client_secret_sealed.is_not_null())
                        .select((auth_servers::id, auth_servers::client_secret_sealed))
                        .order(auth_servers::id)
                        .limit(limit)
                        .into_boxed();
                    if let Some(after) = after.as_deref().map(parse_uuid).transpose()? {
                        q = q.filter(auth_servers::id.gt(after));
                    }
                    q.load::<(Uuid, Option<String>)>(conn)
                        .map_err(map)?
                        .into_iter()
                        .filter_map(|(id, s)| Some((id.to_string(), s?)))
                        .collect()
                }
                SealedColumn::DataKeys => {
                    let mut q = vault_keys::table
                        .select((vault_keys::purpose, vault_keys::sealed))
                        .order(vault_keys::purpose)
                        .limit(limit)
                        .into_boxed();
                    if let Some(after) = after.clone() {
                        q = q.filter(vault_keys::purpose.gt(after));
                    }
                    q.load::<(String, String)>(conn).map_err(map)?
                }
            };
            Ok(rows
                .into_iter()
                .map(|(row, sealed)| SealedValue {
                    row,
                    sealed: SealedSecret(sealed),
                })
                .collect())
        })
        .await
    }

    /// Replaces the value of `row` in `column` with `new` if it is still `old`; whether it was.
    pub async fn replace_sealed(
        &self,
        column: SealedColumn,
        row: &str,
        old: &SealedSecret,
        new: &SealedSecret,
    ) -> Result<bool, StoreError> {
        let (row, old, new) = (row.to_owned(), old.0.clone(), new.0.clone());
        self.run_blocking(move |conn| {
            let n = match column {
                SealedColumn::ClusterTokens => diesel::update(
                    cluster_credentials::table
                        .filter(cluster_credentials::cluster_id.eq(parse_uuid(&row)?))
                        .filter(cluster_credentials::sealed_token.eq(&old)),
                )
                .set(cluster_credentials::sealed_token.eq(&new))
                .execute(conn),
                SealedColumn::OidcClientSecrets => diesel::update(
                    auth_servers::table
                        .filter(auth_servers::id.eq(parse_uuid(&row)?))
                        .filter(auth_servers::client_secret_sealed.eq(&old)),
                )
                .set(auth_servers::client_secret_sealed.eq(&new))
                .execute(conn),
                SealedColumn::DataKeys => diesel::update(
                    vault_keys::table
                        .filter(vault_keys::purpose.eq(&row))
                        .filter(vault_keys::sealed.eq(&old)),
                )
                .set(vault_keys::sealed.eq(&new))
                .execute(conn),
            }
            .map_err(map)?;
            Ok(n == 1)
        })
        .await
    }
}

fn parse_uuid(text: &str) -> Result<Uuid, StoreError> {
    Uuid::parse_str(text).map_err(|_| StoreError::Internal(format!("not a row id: {text:?}")))
}
