//! Item 5: how often the server asks the account platform, per 1,000 requests, with the token
//! cache on and off: `account_platform_calls_total` of `/metrics` before and after a wrk run
//! of GET by id.

use super::Bench;
use super::server::Server;
use crate::parse::metric_sum;
use crate::results::Platform;

pub async fn run(
    b: &Bench<'_>,
    server: &Server,
    token_cache_ttl_s: u32,
) -> anyhow::Result<Platform> {
    let s = b.settings;
    let mode = if token_cache_ttl_s > 0 { "on" } else { "off" };
    crate::say!(
        "item 5 (cache {mode}): platform calls during {} s of GET by id",
        s.platform_duration_s
    );
    let name = format!("platform-cache-{mode}");
    let before = server.metrics(&b.http).await?;
    std::fs::write(b.raw.join(format!("{name}.metrics-before.txt")), &before)?;
    let wrk = b
        .wrk
        .run(
            &name,
            s.platform_connections,
            s.platform_duration_s,
            &format!("{}/v1/public/clusters/{}", server.url, b.first_cluster()?),
            &[&b.auth()],
        )
        .await?;
    let after = server.metrics(&b.http).await?;
    std::fs::write(b.raw.join(format!("{name}.metrics-after.txt")), &after)?;
    let metric = "account_platform_calls_total";
    Ok(Platform {
        cache_on: token_cache_ttl_s > 0,
        token_cache_ttl_s,
        calls: metric_sum(&after, metric) - metric_sum(&before, metric),
        wrk,
    })
}
