//! What every command stands on: the settings, the database, the vault and the domain's
//! maintenance use cases wired on them.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use domain::maintenance::{Maintenance, MaintenancePorts};
use domain::model::secret::{PasswordHash, SealedSecret, Secret, TokenDigest};
use domain::ports::clock::Clock;
use domain::ports::secrets::{SecretVault, VaultError};
use secrets::Vault;
use store_postgres::PgStore;

use crate::{AdminError, Outcome};

/// Connections the tool opens: it runs one thing at a time.
const POOL_SIZE: u32 = 2;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

fn setting(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

fn database_url() -> Result<String, AdminError> {
    setting("DATABASE_URL").ok_or_else(|| {
        AdminError::Settings("DATABASE_URL is not set: the service's database URL".into())
    })
}

/// `migrate`: applies what is pending and says how it stands.
pub async fn migrate() -> Result<Outcome, AdminError> {
    let url = database_url()?;
    blocking(move || store_postgres::run_migrations(&url)).await?;
    println!("migrations: the database is at this release's schema");
    Ok(Outcome::Done)
}

/// The stores opened by this run, closed by [`close`] before the process exits.
static OPENED: Mutex<Vec<PgStore>> = Mutex::new(Vec::new());

/// The service's database, which must be migrated already: the tool never changes the schema
/// as a side effect of another command.
pub async fn store() -> Result<PgStore, AdminError> {
    let url = database_url()?;
    let store =
        blocking(move || PgStore::connect_migrated(&url, POOL_SIZE, CONNECT_TIMEOUT)).await?;
    OPENED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(store.clone());
    Ok(store)
}

/// Lets each store's notifier send what a change queued and end its thread: the process must
/// not exit while libpq works on another thread (the TLS library's exit handlers then crash
/// it, at random).
pub async fn close() {
    let stores = std::mem::take(&mut *OPENED.lock().unwrap_or_else(PoisonError::into_inner));
    let _ = tokio::task::spawn_blocking(move || {
        for store in &stores {
            store.close_notifier();
        }
    })
    .await;
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, store_postgres::StoreSetupError> + Send + 'static,
) -> Result<T, AdminError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| AdminError::Failed(format!("the database task failed: {e}")))?
        .map_err(|e| AdminError::Failed(e.to_string()))
}

/// The vault of `SECRETS_KEY` and `SECRETS_KEY_PREVIOUS`, with the token digest key the
/// database keeps.
pub async fn vault(store: &PgStore) -> Result<Vault, AdminError> {
    let current = setting(secrets::KEY_SETTING).ok_or_else(|| {
        AdminError::Settings("SECRETS_KEY is not set: this command opens or seals secrets".into())
    })?;
    let previous = setting(secrets::PREVIOUS_SETTING).unwrap_or_default();
    let vault =
        Vault::from_keys(&current, &previous).map_err(|e| AdminError::Settings(e.to_string()))?;
    store
        .open_vault(vault)
        .await
        .map_err(|e| AdminError::Failed(e.to_string()))
}

/// The maintenance use cases on `store`; `vault` only for the commands that seal (without it
/// a seal fails, naming the missing setting).
pub fn maintenance(store: &PgStore, vault: Option<Vault>) -> Result<Maintenance, AdminError> {
    let sim =
        provisioner_sim::SimConfig::from_env().map_err(|e| AdminError::Settings(e.to_string()))?;
    let store = Arc::new(store.clone());
    let vault: Arc<dyn SecretVault> = match vault {
        Some(v) => Arc::new(v),
        None => Arc::new(NoVault),
    };
    Ok(Maintenance::new(MaintenancePorts {
        store: store.clone(),
        clusters: store.clone(),
        operations: store,
        cloud: Arc::new(provisioner_sim::SimulatedCloud::new(sim)),
        vault,
        clock: Arc::new(SystemClock),
    }))
}

struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now()
    }
}

/// The vault of a command run without `SECRETS_KEY`: everything it is asked fails.
struct NoVault;

const NO_KEY: &str = "SECRETS_KEY is not set: this command needs it";

#[async_trait]
impl SecretVault for NoVault {
    async fn hash_password(&self, _: &Secret) -> Result<PasswordHash, VaultError> {
        Err(VaultError::Internal(NO_KEY.into()))
    }
    fn digest_token(&self, _: &Secret) -> TokenDigest {
        TokenDigest(String::new())
    }
    fn seal(&self, _: &Secret) -> Result<SealedSecret, VaultError> {
        Err(VaultError::Internal(NO_KEY.into()))
    }
    fn open(&self, _: &SealedSecret) -> Result<Secret, VaultError> {
        Err(VaultError::Internal(NO_KEY.into()))
    }
}
