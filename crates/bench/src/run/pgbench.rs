//! pgbench beside item 1: `pgbench -i` (scale 1), then `pgbench -S` at each client count.
//! pgbench has no structured output: its `tps =` and `latency average =` lines are read.

use std::path::Path;

use anyhow::{Context, bail};

use crate::results::PgbenchRun;

/// The figures of pgbench's summary; `None` without a `tps` line (pgbench failed).
pub fn parse(text: &str) -> Option<PgbenchRun> {
    let mut run = PgbenchRun::default();
    let mut saw_tps = false;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            // pgbench before 14 printed two tps lines; the one without connection time counts.
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

async fn pgbench(args: &[&str], raw: &Path) -> anyhow::Result<String> {
    let out = super::process::output("pgbench", args).await?;
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    std::fs::write(raw, &text).with_context(|| format!("writing {}", raw.display()))?;
    if !out.status.success() {
        bail!("pgbench failed ({}): {}", out.status, text.trim());
    }
    Ok(text)
}

/// `pgbench -i -q -s FACTOR` (100,000 accounts a step) of the database at `url`.
pub async fn init_scale(url: &str, factor: u32, raw: &Path) -> anyhow::Result<()> {
    crate::say!("pgbench -i -s {factor} -> raw/pgbench-init-s{factor}.txt");
    let factor = factor.to_string();
    pgbench(
        &["-i", "-q", "-s", &factor, url],
        &raw.join(format!("pgbench-init-s{factor}.txt")),
    )
    .await?;
    Ok(())
}

/// `pgbench -i -q` (scale 1) of the database at `url`.
pub async fn init(url: &str, raw: &Path) -> anyhow::Result<()> {
    crate::say!("pgbench -i (scale 1) -> raw/pgbench-init.txt");
    pgbench(&["-i", "-q", url], &raw.join("pgbench-init.txt")).await?;
    Ok(())
}

/// `pgbench -N -n -c CLIENTS` (its simple-update script: an update of a random account, a
/// select and an insert in one transaction; the TPC-B-like one would queue every client on the
/// single branch row of scale 1) for `seconds`.
pub async fn write(
    url: &str,
    clients: u32,
    seconds: u32,
    raw: &Path,
) -> anyhow::Result<PgbenchRun> {
    timed(
        "-N",
        &format!("pgbench-write-c{clients}.txt"),
        url,
        clients,
        seconds,
        raw,
    )
    .await
}

/// `pgbench -S -n -c CLIENTS` for `seconds`.
pub async fn select_only(
    url: &str,
    clients: u32,
    seconds: u32,
    raw: &Path,
) -> anyhow::Result<PgbenchRun> {
    timed(
        "-S",
        &format!("pgbench-c{clients}.txt"),
        url,
        clients,
        seconds,
        raw,
    )
    .await
}

/// One built-in script (`script`: `-S`, `-N`) at `clients` for `seconds`, threads as many as
/// clients up to the cores, its output kept in `raw/FILE`.
async fn timed(
    script: &str,
    file: &str,
    url: &str,
    clients: u32,
    seconds: u32,
    raw: &Path,
) -> anyhow::Result<PgbenchRun> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let threads = clients.min(cores).max(1);
    crate::say!("pgbench {script} -c {clients} -j {threads} -T {seconds} -> raw/{file}");
    let (c, j, t) = (
        clients.to_string(),
        threads.to_string(),
        seconds.to_string(),
    );
    let text = pgbench(
        &[script, "-n", "-c", &c, "-j", &j, "-T", &t, url],
        &raw.join(file),
    )
    .await?;
    parse(&text).with_context(|| format!("raw/{file}: no tps line"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn reads_tps_and_latency() {
        let text = "pgbench (15.20 (Debian 15.20-0+deb12u1))
transaction type: <builtin: select only>
number of failed transactions: 0 (0.000%)
latency average = 0.081 ms
initial connection time = 2.544 ms
tps = 12345.678901 (without initial connection time)
";
        let r = parse(text).unwrap();
        assert!((r.tps - 12345.678901).abs() < 1e-9);
        assert!((r.latency_avg_ms - 0.081).abs() < 1e-9);
    }

    #[test]
    fn older_versions_print_two_tps_lines() {
        let text = "tps = 900.0 (including connections establishing)
tps = 1000.5 (excluding connections establishing)
";
        assert_eq!(parse(text).unwrap().tps, 1000.5);
    }

    #[test]
    fn a_failed_run_has_no_figures() {
        assert_eq!(parse("pgbench: error: connection to server failed"), None);
        assert_eq!(parse("tps = many (without initial connection time)"), None);
    }
}
