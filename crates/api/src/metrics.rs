//! Request metrics in the Prometheus text format: requests by route template and status, and
//! latency histograms. Hand-written: a handful of counters does not need a metrics framework.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Histogram bucket bounds, in seconds.
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

#[derive(Default)]
struct Series {
    count: u64,
    sum: f64,
    buckets: [u64; BUCKETS.len()],
}

#[derive(Default)]
pub struct Metrics {
    /// Requests being handled now (state long-polls included).
    in_flight: std::sync::atomic::AtomicI64,
    // (method, route template, status) → series; a BTreeMap keeps the output stable.
    requests: Mutex<BTreeMap<(String, String, u16), Series>>,
}

/// Counts a request as in flight until dropped.
pub struct InFlight<'a>(&'a Metrics);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0
            .in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Metrics {
    pub fn start_request(&self) -> InFlight<'_> {
        self.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        InFlight(self)
    }

    pub fn record(&self, method: &str, route: &str, status: u16, latency: Duration) {
        let secs = latency.as_secs_f64();
        let Ok(mut map) = self.requests.lock() else {
            return;
        };
        let s = map
            .entry((method.to_owned(), route.to_owned(), status))
            .or_default();
        s.count += 1;
        s.sum += secs;
        for (i, bound) in BUCKETS.iter().enumerate() {
            if secs <= *bound {
                s.buckets[i] += 1;
            }
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        let in_flight = self.in_flight.load(std::sync::atomic::Ordering::Relaxed);
        out.push_str("# HELP http_requests_in_flight Requests being handled now, waiting long-polls included.\n");
        out.push_str("# TYPE http_requests_in_flight gauge\n");
        let _ = writeln!(out, "http_requests_in_flight {in_flight}");
        let Ok(map) = self.requests.lock() else {
            return out;
        };
        out.push_str("# HELP http_requests_total Requests by method, route template and status.\n");
        out.push_str("# TYPE http_requests_total counter\n");
        for ((m, r, st), s) in map.iter() {
            let _ = writeln!(
                out,
                "http_requests_total{{method=\"{m}\",route=\"{r}\",status=\"{st}\"}} {}",
                s.count
            );
        }
        out.push_str(
            "# HELP http_request_duration_seconds Request latency by method and route template.\n",
        );
        out.push_str("# TYPE http_request_duration_seconds histogram\n");
        let mut by_route: BTreeMap<(&str, &str), Series> = BTreeMap::new();
        for ((m, r, _), s) in map.iter() {
            let t = by_route.entry((m.as_str(), r.as_str())).or_default();
            t.count += s.count;
            t.sum += s.sum;
            for i in 0..BUCKETS.len() {
                t.buckets[i] += s.buckets[i];
            }
        }
        for ((m, r), s) in by_route {
            for (i, bound) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "http_request_duration_seconds_bucket{{method=\"{m}\",route=\"{r}\",le=\"{bound}\"}} {}",
                    s.buckets[i]
                );
            }
            let _ = writeln!(
                out,
                "http_request_duration_seconds_bucket{{method=\"{m}\",route=\"{r}\",le=\"+Inf\"}} {}",
                s.count
            );
            let _ = writeln!(
                out,
                "http_request_duration_seconds_sum{{method=\"{m}\",route=\"{r}\"}} {}",
                s.sum
            );
            let _ = writeln!(
                out,
                "http_request_duration_seconds_count{{method=\"{m}\",route=\"{r}\"}} {}",
                s.count
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_by_route_template_and_status_with_a_histogram() {
        let m = Metrics::default();
        m.record(
            "GET",
            "/v1/public/clusters/{id}",
            200,
            Duration::from_millis(3),
        );
        m.record(
            "GET",
            "/v1/public/clusters/{id}",
            404,
            Duration::from_millis(30),
        );
        let text = m.render();
        assert!(text.contains("http_requests_total{method=\"GET\",route=\"/v1/public/clusters/{id}\",status=\"200\"} 1"));
        assert!(text.contains("http_request_duration_seconds_bucket{method=\"GET\",route=\"/v1/public/clusters/{id}\",le=\"0.005\"} 1"));
        assert!(text.contains("http_request_duration_seconds_count{method=\"GET\",route=\"/v1/public/clusters/{id}\"} 2"));
    }
}
