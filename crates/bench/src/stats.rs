//! Summaries (nearest-rank percentiles) of the load clients' own measurements.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Percentiles of a set of latencies, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Summary {
    pub count: usize,
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// The nearest-rank percentile `p` (0-100) of sorted `values`; 0 when empty.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let i = rank.clamp(1, sorted.len()) - 1;
    sorted.get(i).copied().unwrap_or(0.0)
}

impl Summary {
    pub fn of(latencies: &[Duration]) -> Self {
        let mut ms: Vec<f64> = latencies.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        Summary {
            count: ms.len(),
            p50_ms: percentile(&ms, 50.0),
            p90_ms: percentile(&ms, 90.0),
            p99_ms: percentile(&ms, 99.0),
            max_ms: ms.last().copied().unwrap_or(0.0),
        }
    }
}

/// Percentiles of a set of counts (reads per round, say).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
pub struct Counts {
    pub count: usize,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl Counts {
    pub fn of(values: &[u64]) -> Self {
        let mut v: Vec<f64> = values.iter().map(|&n| n as f64).collect();
        v.sort_by(f64::total_cmp);
        Counts {
            count: v.len(),
            mean: v.iter().sum::<f64>() / (v.len().max(1) as f64),
            p50: percentile(&v, 50.0),
            p99: percentile(&v, 99.0),
            max: v.last().copied().unwrap_or(0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let s = Summary::of(&v);
        assert_eq!(
            (s.count, s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms),
            (100, 50.0, 90.0, 99.0, 100.0)
        );
        assert_eq!(Summary::of(&[]).p99_ms, 0.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
        let c = Counts::of(&[1, 1, 2, 8]);
        assert_eq!((c.count, c.mean, c.p50, c.max), (4, 3.0, 1.0, 8.0));
        assert_eq!(Counts::of(&[]).mean, 0.0);
    }
}
