//! The gateway's metrics, in the OpenMetrics text format on the admin listener
//! (`GATEWAY_ADMIN_BIND_ADDR`) only: they name routes and tenants' traffic, which the proxied
//! port must not tell anyone.

use std::cell::RefCell;
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// How many (route, status) counters a worker keeps at hand; beyond, the family is asked.
const COUNTERS_CACHED: usize = 512;

/// A counter a worker keeps: the `Metrics` it belongs to (its address), route label, status.
type CachedCounter = (usize, Arc<str>, u16, Counter);

thread_local! {
    static COUNTERS: RefCell<Vec<CachedCounter>> = const { RefCell::new(Vec::new()) };
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    /// The route's host and prefix, or `none`.
    route: String,
    /// The answer's status code.
    status: u16,
}

/// The counters, and the registry that renders them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    auth_servers: Gauge,
    reload_failures: Counter,
    routes_reloads: Counter,
    routes_reload_failures: Counter,
    connections_refused: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "gateway_requests",
            "Requests answered, by route and status",
            requests.clone(),
        );
        let auth_servers = Gauge::default();
        registry.register(
            "gateway_auth_servers",
            "Auth servers in the last snapshot read from the database",
            auth_servers.clone(),
        );
        let reload_failures = Counter::default();
        registry.register(
            "gateway_auth_server_reload_failures",
            "Reads of the auth servers that failed (the last snapshot stayed in force)",
            reload_failures.clone(),
        );
        let routes_reloads = Counter::default();
        registry.register(
            "gateway_routes_reloads",
            "Times the routes file was read again and put in force",
            routes_reloads.clone(),
        );
        let routes_reload_failures = Counter::default();
        registry.register(
            "gateway_routes_reload_failures",
            "Routes files refused or unreadable (the routes in force stayed)",
            routes_reload_failures.clone(),
        );
        let connections_refused = Counter::default();
        registry.register(
            "gateway_connections_refused",
            "Client connections closed at accept because GATEWAY_MAX_CONNECTIONS were open",
            connections_refused.clone(),
        );
        Metrics {
            connections_refused,
            registry,
            requests,
            auth_servers,
            reload_failures,
            routes_reloads,
            routes_reload_failures,
        }
    }
}

impl Metrics {
    pub fn connection_refused(&self) {
        self.connections_refused.inc();
    }

    /// Counts an answer on `route` (its label; `None` off every route) with `status`. Each
    /// worker thread keeps the counters it has used, so the common case takes no lock and
    /// makes no label: the family's map is asked once per route and status.
    pub fn request(&self, route: Option<&Arc<str>>, status: u16) {
        let owner = self as *const Metrics as usize;
        let label = route.map_or("none", |r| r.as_ref());
        let counted = COUNTERS.with(|cell| {
            let cache = cell.borrow();
            let found = cache
                .iter()
                .find(|(o, l, s, _)| *o == owner && *s == status && l.as_ref() == label);
            found.map(|(_, _, _, counter)| counter.inc()).is_some()
        });
        if counted {
            return;
        }
        let counter = self
            .requests
            .get_or_create(&RequestLabels {
                route: label.to_owned(),
                status,
            })
            .clone();
        counter.inc();
        COUNTERS.with(|cell| {
            let mut cache = cell.borrow_mut();
            if cache.len() < COUNTERS_CACHED {
                cache.push((owner, Arc::from(label), status, counter));
            }
        });
    }

    pub fn auth_servers(&self, count: usize) {
        self.auth_servers
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    pub fn routes_reloaded(&self) {
        self.routes_reloads.inc();
    }

    pub fn routes_reload_failed(&self) {
        self.routes_reload_failures.inc();
    }

    pub fn reload_failed(&self) {
        self.reload_failures.inc();
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_render_by_route_and_status() {
        let m = Metrics::default();
        let app: Arc<str> = Arc::from("/app");
        m.request(Some(&app), 200);
        m.request(Some(&Arc::from("/app")), 200);
        m.request(None, 404);
        m.auth_servers(3);
        let text = m.render();
        assert!(
            text.contains("gateway_requests_total{route=\"/app\",status=\"200\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("gateway_requests_total{route=\"none\",status=\"404\"} 1"),
            "{text}"
        );
        assert!(text.contains("gateway_auth_servers 3"), "{text}");
    }
}
