//! Parsers of the raw tool output kept under docs/benchmarks/raw/: wrk (`--latency`), pgbench,
//! the server's Prometheus text, and `/proc/<pid>/status`.

use serde::Serialize;

/// One wrk run.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct WrkRun {
    pub requests: u64,
    pub seconds: f64,
    pub rps: f64,
    pub p50_ms: f64,
    pub p75_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    /// Answers that were not 2xx/3xx: a run with any is not a clean measurement.
    pub non_2xx: u64,
    /// connect + read + write + timeout socket errors.
    pub socket_errors: u64,
}

/// A wrk duration such as `515.00us`, `4.03ms`, `1.20s` or `2.00m`, in milliseconds.
pub fn duration_ms(s: &str) -> Option<f64> {
    let s = s.trim();
    let (num, factor) = if let Some(n) = s.strip_suffix("us") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60e3)
    } else {
        return None;
    };
    num.trim().parse::<f64>().ok().map(|v| v * factor)
}

/// Parses wrk's report; `None` when it has no `Requests/sec` line (wrk failed).
pub fn wrk(text: &str) -> Option<WrkRun> {
    let mut run = WrkRun::default();
    let mut saw_rps = false;
    for line in text.lines() {
        let t = line.trim();
        let words: Vec<&str> = t.split_whitespace().collect();
        match words.as_slice() {
            ["50%", v] => run.p50_ms = duration_ms(v)?,
            ["75%", v] => run.p75_ms = duration_ms(v)?,
            ["90%", v] => run.p90_ms = duration_ms(v)?,
            ["99%", v] => run.p99_ms = duration_ms(v)?,
            ["Requests/sec:", v] => {
                run.rps = v.parse().ok()?;
                saw_rps = true;
            }
            ["Non-2xx", "or", "3xx", "responses:", n] => run.non_2xx = n.parse().ok()?,
            [n, "requests", "in", secs, ..] => {
                run.requests = n.parse().ok()?;
                run.seconds = duration_ms(secs.trim_end_matches(','))? / 1e3;
            }
            ["Socket", "errors:", rest @ ..] => {
                run.socket_errors = rest
                    .iter()
                    .filter_map(|w| w.trim_end_matches(',').parse::<u64>().ok())
                    .sum();
            }
            _ => {}
        }
    }
    saw_rps.then_some(run)
}

/// pgbench's figures.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct PgbenchRun {
    pub tps: f64,
    pub latency_avg_ms: f64,
}

pub fn pgbench(text: &str) -> Option<PgbenchRun> {
    let mut run = PgbenchRun::default();
    let mut saw_tps = false;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["tps", "=", v, rest @ ..] if !rest.contains(&"(including") => {
                run.tps = v.parse().ok()?;
                saw_tps = true;
            }
            ["latency", "average", "=", v, "ms"] => run.latency_avg_ms = v.parse().ok()?,
            _ => {}
        }
    }
    saw_tps.then_some(run)
}

/// The sum of the samples of `metric` (every label set) in Prometheus text; 0 when absent.
pub fn metric_sum(text: &str, metric: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            let base = name.split('{').next()?;
            (base == metric).then(|| value.trim().parse::<f64>().ok())?
        })
        .sum()
}

/// A `kB` field of `/proc/<pid>/status` (VmRSS, VmHWM), in kB.
pub fn proc_status_kb(text: &str, field: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    #![expect(clippy::expect_used, reason = "test code: a failure should be loud")]

    use super::*;

    const WRK: &str = "Running 10s test @ http://127.0.0.1:8080/
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   635.91us    0.89ms  12.16ms   91.40%
    Req/Sec     6.56k   434.57     7.48k    70.50%
  Latency Distribution
     50%  515.00us
     75%  663.00us
     90%  853.00us
     99%    4.03ms
  130554 requests in 10.01s, 21.20MB read
  Non-2xx or 3xx responses: 3
  Socket errors: connect 0, read 1, write 0, timeout 2
Requests/sec:  13043.10
Transfer/sec:      2.12MB
";

    #[test]
    fn reads_wrk_latency_reports() {
        let r = wrk(WRK).expect("parsed");
        assert_eq!(r.requests, 130_554);
        assert!((r.seconds - 10.01).abs() < 1e-9);
        assert!((r.rps - 13043.10).abs() < 1e-9);
        assert!((r.p50_ms - 0.515).abs() < 1e-9);
        assert!((r.p99_ms - 4.03).abs() < 1e-9);
        assert_eq!((r.non_2xx, r.socket_errors), (3, 3));
        assert!(wrk("unable to connect to 127.0.0.1:1 Connection refused").is_none());
    }

    #[test]
    fn reads_pgbench_tps() {
        let text = "number of failed transactions: 0 (0.000%)
latency average = 0.081 ms
initial connection time = 2.544 ms
tps = 12345.678901 (without initial connection time)
";
        let r = pgbench(text).expect("parsed");
        assert!((r.tps - 12345.678901).abs() < 1e-9);
        assert!((r.latency_avg_ms - 0.081).abs() < 1e-9);
    }

    #[test]
    fn reads_metrics_and_proc_status() {
        let m = "# HELP x\naccount_platform_calls_total{endpoint=\"me\"} 12\naccount_platform_calls_total{endpoint=\"organizations\"} 3\nother 9\n";
        assert_eq!(metric_sum(m, "account_platform_calls_total"), 15.0);
        assert_eq!(metric_sum(m, "missing"), 0.0);
        let s = "Name:\tserver\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
        assert_eq!(proc_status_kb(s, "VmRSS"), Some(102_400));
        assert_eq!(proc_status_kb(s, "VmHWM"), Some(204_800));
    }
}
