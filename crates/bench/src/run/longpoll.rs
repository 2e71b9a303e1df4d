//! Item 4: `bench-longpoll` (its own process: 10,000 sockets) parks the waiters on a fresh
//! server L and makes the changes through a second server B on the same database.

use std::path::Path;

use anyhow::Context;
use tokio::process::Command;

use super::Bench;
use super::server::Server;
use crate::results::LongPoll;

pub async fn run(b: &Bench<'_>) -> anyhow::Result<LongPoll> {
    let s = b.settings;
    crate::say!(
        "item 4: {} long-polls over {} clusters on a fresh server L, changes through server B",
        s.waiters,
        s.wait_clusters
    );
    let l = b.env.start("l", 60).await?;
    let patcher = b.env.start("b", 60).await?;
    let waiting = Waiting {
        token: b.token,
        waiters: s.waiters,
        clusters: s.wait_clusters,
        gap_ms: s.gap_ms,
        settle_ms: s.settle_ms,
        source_addresses: 1,
    };
    let out = b.raw.join("longpoll.json");
    let result = waiting.run(&b.bin, &l, &patcher, &out).await;
    l.stop().await?;
    patcher.stop().await?;
    result
}

/// One run of `bench-longpoll`: its waiters parked on server `l`, the changes made through
/// `patcher`.
#[derive(Debug, Clone, Copy)]
pub struct Waiting<'a> {
    pub token: &'a str,
    pub waiters: usize,
    pub clusters: usize,
    pub gap_ms: u64,
    pub settle_ms: u64,
    /// Loopback addresses the waiters connect from in turn (one holds about 28,000).
    pub source_addresses: u8,
}

impl Waiting<'_> {
    /// Runs it; its figures go to `out` (JSON), its stderr beside it (`.stderr.txt`).
    pub async fn run(
        &self,
        bin: &Path,
        l: &Server,
        patcher: &Server,
        out: &Path,
    ) -> anyhow::Result<LongPoll> {
        let _ = std::fs::remove_file(out);
        let stderr_path = out.with_extension("stderr.txt");
        let stderr = std::fs::File::create(&stderr_path)?;
        let status = Command::new(bin.join("bench-longpoll"))
            .args([
                "--url",
                &l.url,
                "--patch-url",
                &patcher.url,
                "--token",
                self.token,
                "--server-pid",
                &l.pid().to_string(),
                "--waiters",
                &self.waiters.to_string(),
                "--clusters",
                &self.clusters.to_string(),
                "--gap-ms",
                &self.gap_ms.to_string(),
                "--settle-ms",
                &self.settle_ms.to_string(),
                "--source-addresses",
                &self.source_addresses.to_string(),
                "--out",
                &out.display().to_string(),
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .status()
            .await
            .context("running bench-longpoll")?;
        if !status.success() {
            // Its JSON is written before it fails on missing answers: the report shows them.
            crate::say!(
                "warning: bench-longpoll reported a failure ({status}; see {} and {})",
                out.display(),
                stderr_path.display()
            );
        }
        let text = std::fs::read_to_string(out).with_context(|| {
            format!(
                "bench-longpoll wrote no {} (see {})",
                out.display(),
                stderr_path.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("{}", out.display()))
    }
}
