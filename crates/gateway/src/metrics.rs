//! The gateway's metrics, in the OpenMetrics text format on the admin listener
//! (`GATEWAY_ADMIN_BIND_ADDR`) only: they name routes and tenants' traffic, which the proxied
//! port must not tell anyone.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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
        Metrics {
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
    pub fn request(&self, route: Option<String>, status: u16) {
        self.requests
            .get_or_create(&RequestLabels {
                route: route.unwrap_or_else(|| "none".into()),
                status,
            })
            .inc();
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
        m.request(Some("/app".into()), 200);
        m.request(Some("/app".into()), 200);
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
