//! wrk runs. wrk's figures come from the JSON line its `done()` hook prints
//! (assets/wrk-report.lua); its text report is kept in raw/ beside it for people.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::results::WrkRun;

/// The `done()` script given to every run.
pub const SCRIPT: &str = include_str!("../../assets/wrk-report.lua");
const MARKER: &str = "wrk-json: ";

#[derive(Deserialize)]
struct Errors {
    connect: u64,
    read: u64,
    write: u64,
    status: u64,
    timeout: u64,
}

#[derive(Deserialize)]
struct Latency {
    p50: f64,
    p75: f64,
    p90: f64,
    p99: f64,
    max: f64,
}

#[derive(Deserialize)]
struct Done {
    requests: u64,
    duration_us: u64,
    bytes: u64,
    errors: Errors,
    latency_us: Latency,
}

/// The run's figures from wrk's output; an error when the script's line is missing (wrk did not
/// run to its end).
pub fn parse(text: &str) -> anyhow::Result<WrkRun> {
    let line = text
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix(MARKER))
        .context("no `wrk-json:` line in wrk's output")?;
    let d: Done = serde_json::from_str(line).context("the `wrk-json:` line")?;
    let seconds = d.duration_us as f64 / 1e6;
    let ms = |us: f64| us / 1e3;
    Ok(WrkRun {
        requests: d.requests,
        seconds,
        rps: d.requests as f64 / seconds.max(1e-9),
        bytes: d.bytes,
        p50_ms: ms(d.latency_us.p50),
        p75_ms: ms(d.latency_us.p75),
        p90_ms: ms(d.latency_us.p90),
        p99_ms: ms(d.latency_us.p99),
        max_ms: ms(d.latency_us.max),
        non_2xx: d.errors.status,
        socket_errors: d.errors.connect + d.errors.read + d.errors.write + d.errors.timeout,
    })
}

/// What every wrk run of a bench shares.
#[derive(Debug, Clone)]
pub struct Wrk {
    /// The script's file (wrk reads it from disk).
    script: PathBuf,
    raw: PathBuf,
}

impl Wrk {
    /// Writes the script into `work`; outputs go to `raw`.
    pub fn new(work: &Path, raw: &Path) -> anyhow::Result<Wrk> {
        let script = work.join("wrk-report.lua");
        std::fs::write(&script, SCRIPT).with_context(|| format!("writing {}", script.display()))?;
        Ok(Wrk {
            script,
            raw: raw.to_owned(),
        })
    }

    /// [`Wrk::run`] of a POST of `body` (a script of its own sets the method and the body).
    pub async fn post(
        &self,
        name: &str,
        connections: u32,
        seconds: u32,
        url: &str,
        headers: &[&str],
        body: &str,
    ) -> anyhow::Result<WrkRun> {
        // A Lua long string holds the JSON as it is (it has no `]==]`).
        let lua = format!("wrk.method = \"POST\"\nwrk.body = [==[{body}]==]");
        self.run_lua(name, connections, seconds, url, headers, &lua)
            .await
    }

    /// [`Wrk::run`] with `lua` before the report's script (a `request` function, say).
    pub async fn run_lua(
        &self,
        name: &str,
        connections: u32,
        seconds: u32,
        url: &str,
        headers: &[&str],
        lua: &str,
    ) -> anyhow::Result<WrkRun> {
        let script = self.script.with_file_name(format!("wrk-{name}.lua"));
        std::fs::write(&script, format!("{lua}\n{SCRIPT}"))
            .with_context(|| format!("writing {}", script.display()))?;
        self.run_script(name, connections, seconds, url, headers, &script)
            .await
    }

    /// `wrk --latency -c CONNECTIONS -d SECONDS` of `url` with `headers` (`Name: value`), as many
    /// threads as connections up to the cores; the output goes to raw/`name`.wrk.txt.
    pub async fn run(
        &self,
        name: &str,
        connections: u32,
        seconds: u32,
        url: &str,
        headers: &[&str],
    ) -> anyhow::Result<WrkRun> {
        let script = self.script.clone();
        self.run_script(name, connections, seconds, url, headers, &script)
            .await
    }

    async fn run_script(
        &self,
        name: &str,
        connections: u32,
        seconds: u32,
        url: &str,
        headers: &[&str],
        script: &Path,
    ) -> anyhow::Result<WrkRun> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let threads = connections.min(cores).max(1);
        let file = format!("{name}.wrk.txt");
        crate::say!("wrk -t{threads} -c{connections} -d{seconds}s --latency {url} -> raw/{file}");
        let mut args = vec![
            format!("-t{threads}"),
            format!("-c{connections}"),
            format!("-d{seconds}s"),
            "--latency".to_owned(),
            "-s".to_owned(),
            script.display().to_string(),
        ];
        for h in headers {
            args.push("-H".to_owned());
            args.push((*h).to_owned());
        }
        args.push(url.to_owned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = super::process::output("wrk", &args).await?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        std::fs::write(self.raw.join(&file), stdout.as_bytes())?;
        if !out.status.success() {
            bail!(
                "wrk of {url} failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        parse(&stdout).with_context(|| format!("raw/{file}"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const OUTPUT: &str = "Running 10s test @ http://127.0.0.1:8080/
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   635.91us    0.89ms  12.16ms   91.40%
  Latency Distribution
     50%  515.00us
     99%    4.03ms
  130554 requests in 10.01s, 21.20MB read
  Non-2xx or 3xx responses: 3
Requests/sec:  13043.10
Transfer/sec:      2.12MB
wrk-json: {\"requests\":130554,\"duration_us\":10010000,\"bytes\":22229811,\"errors\":{\"connect\":0,\"read\":1,\"write\":0,\"status\":3,\"timeout\":2},\"latency_us\":{\"p50\":515,\"p75\":663,\"p90\":853,\"p99\":4030,\"max\":12160,\"mean\":635.91}}
";

    #[test]
    fn reads_the_done_line() {
        let r = parse(OUTPUT).unwrap();
        assert_eq!(r.requests, 130_554);
        assert!((r.seconds - 10.01).abs() < 1e-9);
        assert!((r.rps - 130_554.0 / 10.01).abs() < 1e-6);
        assert!((r.p50_ms - 0.515).abs() < 1e-9);
        assert!((r.p75_ms - 0.663).abs() < 1e-9);
        assert!((r.p90_ms - 0.853).abs() < 1e-9);
        assert!((r.p99_ms - 4.03).abs() < 1e-9);
        assert!((r.max_ms - 12.16).abs() < 1e-9);
        assert_eq!(r.bytes, 22_229_811);
        assert_eq!((r.non_2xx, r.socket_errors), (3, 3));
        assert!(!r.clean());
    }

    #[test]
    fn a_run_without_the_line_is_an_error() {
        assert!(parse("unable to connect to 127.0.0.1:1 Connection refused").is_err());
        assert!(parse("wrk-json: {\"requests\":1}").is_err());
    }

    #[test]
    fn the_script_prints_every_field_read() {
        for field in [
            "requests",
            "duration_us",
            "bytes",
            "connect",
            "read",
            "write",
            "status",
            "timeout",
            "p50",
            "p75",
            "p90",
            "p99",
            "max",
        ] {
            assert!(SCRIPT.contains(&format!("\"{field}\"")), "{field}");
        }
        assert!(SCRIPT.contains("wrk-json: "));
    }
}
