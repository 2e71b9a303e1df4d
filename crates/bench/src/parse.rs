//! Readers of the text the server exposes: its Prometheus `/metrics` and `/proc/<pid>/status`.

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

/// A `kB` field of the status of process `pid`; `None` when the process or the field is gone.
pub fn proc_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    proc_status_kb(&text, field)
}

#[cfg(test)]
mod tests {
    use super::*;

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
