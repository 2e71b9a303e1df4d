//! The auth servers in memory: a snapshot read from PostgreSQL at start, again whenever the
//! database notifies a change (`AuthServerChanges`: its LISTEN on `auth_server_changes`), and
//! every `reload_interval` as a safety net for a notification that never came.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use domain::model::auth_server::AuthServer;
use store_postgres::{AuthServerChanges, PgStore};

use crate::current::Current;
use crate::metrics::Metrics;
use crate::routes::Route;

/// The auth servers as last read, by name (every request looks its route's server up: a name
/// finds the few servers of that name, whatever the number of servers).
#[derive(Debug, Default)]
pub struct Snapshot {
    by_name: HashMap<String, Vec<Arc<AuthServer>>>,
}

impl Snapshot {
    pub fn new(servers: Vec<AuthServer>) -> Snapshot {
        let mut by_name: HashMap<String, Vec<Arc<AuthServer>>> = HashMap::new();
        for server in servers {
            by_name
                .entry(server.name.as_str().to_owned())
                .or_default()
                .push(Arc::new(server));
        }
        Snapshot { by_name }
    }

    /// The server a route names: by organization slug or id, environment and name.
    pub fn for_route(&self, route: &Route) -> Option<Arc<AuthServer>> {
        self.by_name
            .get(route.auth_server.as_str())?
            .iter()
            .find(|s| {
                (s.organization_slug == route.organization
                    || route.organization_id == Some(s.organization_id))
                    && s.environment.as_str() == route.environment
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

#[cfg(test)]
mod tests {
    use chrono::Utc;
    use domain::model::auth_server::{AuthServerConfig, TokenConfig};
    use domain::names::DnsLabel;
    use uuid::Uuid;

    use super::*;
    use crate::routes::Routes;

    fn server(org: Uuid, slug: &str, environment: &str, name: &str) -> AuthServer {
        let label = |s: &str| DnsLabel::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
        AuthServer {
            id: Uuid::new_v4(),
            organization_id: org,
            organization_slug: slug.into(),
            name: label(name),
            environment: label(environment),
            config: AuthServerConfig::Token(TokenConfig { tokens: vec![] }),
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    fn route(organization: &str, environment: &str, name: &str) -> Route {
        let file = format!(
            "[[route]]\npath_prefix = \"/x\"\nupstream = \"http://127.0.0.1:9\"\n\
             organization = \"{organization}\"\nenvironment = \"{environment}\"\nauth_server = \"{name}\"\n"
        );
        let routes = Routes::parse(&file).unwrap_or_else(|e| panic!("{e}"));
        routes
            .iter()
            .next()
            .cloned()
            .unwrap_or_else(|| panic!("no route"))
    }

    /// The same name in two organizations and two environments: a route finds its own, by the
    /// organization's slug or id (in any spelling of it), and nothing of another's.
    #[test]
    fn a_route_finds_its_server_by_organization_environment_and_name() {
        let (acme, globex) = (Uuid::new_v4(), Uuid::new_v4());
        let servers = vec![
            server(acme, "acme", "production", "machines"),
            server(acme, "acme", "staging", "machines"),
            server(globex, "globex", "production", "machines"),
        ];
        let ids: Vec<Uuid> = servers.iter().map(|s| s.id).collect();
        let snapshot = Snapshot::new(servers);
        let found = |r: Route| snapshot.for_route(&r).map(|s| s.id);
        assert_eq!(found(route("acme", "production", "machines")), Some(ids[0]));
        assert_eq!(found(route("acme", "staging", "machines")), Some(ids[1]));
        assert_eq!(
            found(route(&globex.to_string(), "production", "machines")),
            Some(ids[2])
        );
        let upper = globex.to_string().to_uppercase();
        assert_eq!(found(route(&upper, "production", "machines")), Some(ids[2]));
        assert_eq!(found(route("globex", "staging", "machines")), None);
        assert_eq!(found(route("acme", "production", "people")), None);
        assert_eq!(found(route("initech", "production", "machines")), None);
    }
}
