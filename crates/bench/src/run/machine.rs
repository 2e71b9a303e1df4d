//! The machine a run measured on, and the versions of everything measured: the report's
//! "Machine" list.

use std::path::Path;

use super::database::Databases;
use super::process::{find_program, output, version};
use crate::parse::proc_status_kb;
use crate::results::Machine;

/// The first `model name` of /proc/cpuinfo.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_owned())
    })
}

async fn tool(name: &str, args: &[&str]) -> String {
    match find_program(name) {
        Some(p) => version(&p, args).await,
        None => format!("{name} not found"),
    }
}

pub async fn describe(dbs: &Databases, profile: &str) -> Machine {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let kernel = match output(Path::new("uname"), &["-srm"]).await {
        Ok(o) => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        Err(e) => format!("unknown ({e:#})"),
    };
    let postgres = dbs
        .server_version()
        .await
        .unwrap_or_else(|e| format!("unknown ({e:#})"));
    let lines = [
        (
            "date",
            chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
        ),
        (
            "CPU",
            cpu_model(&cpuinfo).unwrap_or_else(|| "unknown".into()),
        ),
        (
            "cores (nproc)",
            std::thread::available_parallelism()
                .map_or(0, |n| n.get())
                .to_string(),
        ),
        (
            "memory",
            format!(
                "{} MiB",
                proc_status_kb(&meminfo, "MemTotal").unwrap_or(0) / 1024
            ),
        ),
        ("kernel", kernel),
        ("PostgreSQL", postgres),
        ("wrk", tool("wrk", &["-v"]).await),
        ("nginx", tool("nginx", &["-v"]).await),
        ("Caddy", tool("caddy", &["version"]).await),
        ("pgbench", tool("pgbench", &["--version"]).await),
        ("rustc", tool("rustc", &["--version"]).await),
        ("build profile", profile.to_owned()),
    ];
    lines.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_cpu_model() {
        let text =
            "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC\nmodel\t: 1\n";
        assert_eq!(cpu_model(text).as_deref(), Some("AMD EPYC"));
        assert_eq!(cpu_model(""), None);
    }
}
