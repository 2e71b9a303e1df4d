//! `/metrics`: one registry of the Prometheus project's client (`prometheus-client`), rendered
//! in the OpenMetrics text format. The API's own series (requests by route template and
//! status, latency histograms, requests in flight) are registered here; the adapters add theirs
//! as collectors ([`Metrics::register`]), read at each scrape.

use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Histogram bucket bounds, in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// The media type of the rendering.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: String,
    /// The route template (`/v1/public/clusters/{id}`), never the path: ids would make a
    /// series per object.
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: String,
    route: String,
}

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    in_flight: Gauge,
    requests: Family<RequestLabels, Counter>,
    durations: Family<RouteLabels, Histogram, fn() -> Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let in_flight = Gauge::default();
        registry.register(
            "http_requests_in_flight",
            "Requests being handled now, waiting long-polls included",
            in_flight.clone(),
        );
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "http_requests",
            "Requests by method, route template and status",
            requests.clone(),
        );
        let durations = Family::<RouteLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        registry.register(
            "http_request_duration_seconds",
            "Request latency by method and route template",
            durations.clone(),
        );
        Metrics {
            registry,
            in_flight,
            requests,
            durations,
        }
    }
}

/// Counts a request as in flight until dropped.
pub struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.dec();
    }
}

impl Metrics {
    /// Adds an adapter's series, read at each scrape.
    pub fn register(&mut self, collector: Box<dyn Collector>) {
        self.registry.register_collector(collector);
    }

    pub fn start_request(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(self)
    }

    pub fn record(&self, method: &str, route: &str, status: u16, latency: Duration) {
        self.requests
            .get_or_create(&RequestLabels {
                method: method.to_owned(),
                route: route.to_owned(),
                status,
            })
            .inc();
        self.durations
            .get_or_create(&RouteLabels {
                method: method.to_owned(),
                route: route.to_owned(),
            })
            .observe(latency.as_secs_f64());
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
    use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
    use prometheus_client::metrics::MetricType;
    use prometheus_client::metrics::gauge::ConstGauge;

    use super::*;

    #[derive(Debug)]
    struct Fixed;

    impl Collector for Fixed {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let m = encoder.encode_descriptor("fixed_value", "A test", None, MetricType::Gauge)?;
            ConstGauge::new(7).encode(m)
        }
    }

    #[test]
    fn counts_by_route_template_and_status_with_a_histogram_and_collectors() {
        let mut m = Metrics::default();
        m.register(Box::new(Fixed));
        let route = "/v1/public/clusters/{id}";
        m.record("GET", route, 200, Duration::from_millis(3));
        m.record("GET", route, 404, Duration::from_millis(30));
        let held = m.start_request();
        let text = m.render();
        drop(held);
        for line in [
            format!("http_requests_total{{method=\"GET\",route=\"{route}\",status=\"200\"}} 1"),
            format!(
                "http_request_duration_seconds_bucket{{le=\"0.005\",method=\"GET\",route=\"{route}\"}} 1"
            ),
            format!("http_request_duration_seconds_count{{method=\"GET\",route=\"{route}\"}} 2"),
            "http_requests_in_flight 1".to_owned(),
            "fixed_value 7".to_owned(),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in:\n{text}");
        }
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
