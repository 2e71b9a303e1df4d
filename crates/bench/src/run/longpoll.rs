//! Item 4: `bench-longpoll` (its own process: 10,000 sockets) parks the waiters on a fresh
//! server L and makes the changes through a second server B on the same database.

use anyhow::Context;
use tokio::process::Command;

use super::Bench;
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
    let out = b.raw.join("longpoll.json");
    let _ = std::fs::remove_file(&out);
    let stderr = std::fs::File::create(b.raw.join("longpoll.stderr.txt"))?;
    let status = Command::new(b.bin.join("bench-longpoll"))
        .args([
            "--url",
            &l.url,
            "--patch-url",
            &patcher.url,
            "--token",
            b.token,
            "--server-pid",
            &l.pid().to_string(),
            "--waiters",
            &s.waiters.to_string(),
            "--clusters",
            &s.wait_clusters.to_string(),
            "--gap-ms",
            &s.gap_ms.to_string(),
            "--settle-ms",
            &s.settle_ms.to_string(),
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
    l.stop().await?;
    patcher.stop().await?;
    if !status.success() {
        // Its JSON is written before it fails on missing answers: the report shows them.
        crate::say!(
            "warning: bench-longpoll reported a failure ({status}; see raw/longpoll.json and raw/longpoll.stderr.txt)"
        );
    }
    let text = std::fs::read_to_string(&out)
        .context("bench-longpoll wrote no raw/longpoll.json (see raw/longpoll.stderr.txt)")?;
    serde_json::from_str(&text).context("raw/longpoll.json")
}
