//! The auth servers in memory: a snapshot read from PostgreSQL at start, again whenever the
//! database notifies a change (`AuthServerChanges`: its LISTEN on `auth_server_changes`), and
//! every `reload_interval` as a safety net for a notification that never came.

use std::sync::Arc;
use std::time::Duration;

use domain::model::auth_server::AuthServer;
use store_postgres::{AuthServerChanges, PgStore};

use crate::current::Current;
use crate::metrics::Metrics;
use crate::routes::Route;

/// The auth servers as last read.
#[derive(Debug, Default)]
pub struct Snapshot {
    servers: Vec<Arc<AuthServer>>,
}

impl Snapshot {
    pub fn new(servers: Vec<AuthServer>) -> Snapshot {
        Snapshot {
            servers: servers.into_iter().map(Arc::new).collect(),
        }
    }

    /// The server a route names: by organization slug or id, environment and name.
    pub fn for_route(&self, route: &Route) -> Option<Arc<AuthServer>> {
        self.servers
            .iter()
            .find(|s| {
                (s.organization_slug == route.organization
                    || s.organization_id.to_string() == route.organization)
                    && s.environment.as_str() == route.environment
                    && s.name.as_str() == route.auth_server
            })
            .cloned()
    }
}

/// The shared, swappable snapshot.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    current: Current<Snapshot>,
}

impl Registry {
    pub fn get(&self) -> Arc<Snapshot> {
        self.current.get()
    }

    pub fn set(&self, snapshot: Snapshot) {
        self.current.set(snapshot);
    }

    /// Reads every auth server again; on failure the previous snapshot stays in force.
    pub async fn reload(
        &self,
        store: &PgStore,
    ) -> Result<usize, domain::ports::storage::StoreError> {
        let servers = store.all_auth_servers().await?;
        let count = servers.len();
        self.set(Snapshot::new(servers));
        Ok(count)
    }

    /// Reloads forever: when `changes` wakes it, and at the latest every `interval`.
    pub async fn keep_fresh(
        self,
        store: PgStore,
        changes: AuthServerChanges,
        interval: Duration,
        metrics: std::sync::Arc<Metrics>,
    ) {
        loop {
            tokio::select! {
                () = changes.changed() => {}
                () = tokio::time::sleep(interval) => {}
            }
            match self.reload(&store).await {
                Ok(count) => metrics.auth_servers(count),
                Err(error) => {
                    metrics.reload_failed();
                    tracing::warn!(%error, "cannot reload the auth servers; keeping the last ones");
                }
            }
        }
    }
}
