//! How database failures become the domain's [`StoreError`]: unique violations name the rule
//! they broke, a lost or unreachable database is `Unavailable` (503), the rest is `Internal`.

use diesel::result::{DatabaseErrorKind, Error as DieselError};
use domain::ports::storage::{StoreError, UniqueRule};

/// Why the store could not be set up at start.
#[derive(Debug, thiserror::Error)]
pub enum StoreSetupError {
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    #[error("cannot run the database migrations: {0}")]
    Migrations(String),
    #[error(
        "the database lacks migrations of this release; apply them first (`server --migrate` or `kubesvc-admin migrate`)"
    )]
    Pending,
}

/// The unique rule behind a unique index or constraint, by its name in the migrations.
fn unique_rule(constraint: &str) -> Option<UniqueRule> {
    Some(match constraint {
        "clusters_org_name_live_key" => UniqueRule::ClusterName,
        "node_pools_pkey" => UniqueRule::PoolName,
        "elastic_ips_cluster_name_key" => UniqueRule::ElasticIpName,
        "elastic_ips_exposure_address_key" => UniqueRule::ElasticIpAddress,
        "firewall_rules_cluster_name_key" => UniqueRule::FirewallRuleName,
        "auth_servers_org_env_name_key" => UniqueRule::AuthServerName,
        "auth_server_credentials_username_key" | "auth_server_credentials_token_digest_key" => {
            UniqueRule::CredentialName
        }
        _ => return None,
    })
}

/// Texts libpq and the server use when the session is gone; diesel reports some of them as
/// `Unknown` database errors, yet each means "try again once the database is back".
const CONNECTION_LOST: [&str; 7] = [
    "server closed the connection",
    "terminating connection",
    "no connection to the server",
    "could not receive data",
    "could not send data",
    "connection to server",
    "the database system is",
];

/// Whether an error means the connection (not the statement) failed.
pub(crate) fn is_connection_lost(e: &DieselError) -> bool {
    match e {
        DieselError::DatabaseError(kind, info) => {
            matches!(
                kind,
                DatabaseErrorKind::ClosedConnection | DatabaseErrorKind::UnableToSendCommand
            ) || CONNECTION_LOST.iter().any(|t| info.message().contains(t))
        }
        DieselError::BrokenTransactionManager => true,
        _ => false,
    }
}

pub(crate) fn map(e: DieselError) -> StoreError {
    if is_connection_lost(&e) {
        return StoreError::Unavailable(format!("database connection lost: {e}"));
    }
    match &e {
        DieselError::DatabaseError(DatabaseErrorKind::UniqueViolation, info) => {
            match info.constraint_name().and_then(unique_rule) {
                Some(rule) => StoreError::Duplicate(rule),
                None => StoreError::Internal(format!(
                    "unexpected unique violation on {:?}: {}",
                    info.constraint_name(),
                    info.message()
                )),
            }
        }
        DieselError::DatabaseError(DatabaseErrorKind::SerializationFailure, _) => {
            StoreError::Unavailable(format!("transaction conflict, retry: {e}"))
        }
        DieselError::DatabaseError(DatabaseErrorKind::ReadOnlyTransaction, _) => {
            StoreError::Unavailable(format!("database is read-only: {e}"))
        }
        _ => StoreError::Internal(e.to_string()),
    }
}

/// Failure of a write step: a database error, or a domain outcome that rolls back the
/// transaction (`RevisionMismatch`, `LeaseLost`, …).
#[derive(Debug)]
pub(crate) enum TxError {
    Db(DieselError),
    Store(StoreError),
}

impl From<DieselError> for TxError {
    fn from(e: DieselError) -> Self {
        TxError::Db(e)
    }
}

impl From<StoreError> for TxError {
    fn from(e: StoreError) -> Self {
        TxError::Store(e)
    }
}

impl From<TxError> for StoreError {
    fn from(e: TxError) -> Self {
        match e {
            TxError::Db(e) => map(e),
            TxError::Store(e) => e,
        }
    }
}

/// A value read back that breaks what the schema promises.
pub(crate) fn corrupt(what: &str, value: &str) -> StoreError {
    StoreError::Internal(format!("stored {what} {value:?} is not valid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unique_index_of_the_migrations_maps_to_a_rule() {
        let names = [
            ("clusters_org_name_live_key", UniqueRule::ClusterName),
            ("node_pools_pkey", UniqueRule::PoolName),
            ("elastic_ips_cluster_name_key", UniqueRule::ElasticIpName),
            (
                "elastic_ips_exposure_address_key",
                UniqueRule::ElasticIpAddress,
            ),
            (
                "firewall_rules_cluster_name_key",
                UniqueRule::FirewallRuleName,
            ),
            ("auth_servers_org_env_name_key", UniqueRule::AuthServerName),
            (
                "auth_server_credentials_username_key",
                UniqueRule::CredentialName,
            ),
            (
                "auth_server_credentials_token_digest_key",
                UniqueRule::CredentialName,
            ),
        ];
        let sql: String = [
            "2025-11-22-000001_clusters",
            "2025-11-22-000003_auth_servers",
        ]
        .iter()
        .map(|d| {
            let path = format!("{}/../../migrations/{d}/up.sql", env!("CARGO_MANIFEST_DIR"));
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
        })
        .collect();
        for (name, rule) in names {
            assert_eq!(unique_rule(name), Some(rule));
            assert!(sql.contains(name), "{name} is not in the migrations");
        }
    }
}
