//! Item 5: how often the server asks the account platform, per 1,000 requests, with the token
//! cache on and off: `account_platform_calls_total` of `/metrics` before and after a wrk run
//! of GET by id; and per 1,000 requests with tokens the platform refuses (one token again and
//! again, or a new one each time), which the refusal cache and the per-address limit of
//! unauthenticated requests keep off the platform.

use std::collections::BTreeMap;
use std::time::Instant;

use futures::StreamExt;

use super::Bench;
use super::server::Server;
use crate::parse::metric_sum;
use crate::results::{InvalidTokens, Platform};

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

/// The server's defaults, which the bench servers keep for these two settings.
const ADDRESS_QUOTA: u32 = 120;
const REFUSAL_TTL_S: u32 = 5;
/// Requests of each invalid-token run, and how many are in flight at once.
const INVALID_REQUESTS: u64 = 1000;
const INVALID_CONCURRENCY: usize = 16;

/// 1,000 requests with tokens the platform refuses: the same one each time (`distinct`
/// false) or a new one each time.
pub async fn invalid_tokens(
    b: &Bench<'_>,
    server: &Server,
    distinct: bool,
) -> anyhow::Result<InvalidTokens> {
    let what = if distinct {
        "a new made-up token each"
    } else {
        "one made-up token"
    };
    crate::say!("item 5: {INVALID_REQUESTS} requests with {what}");
    let name = format!(
        "invalid-tokens-{}",
        if distinct { "distinct" } else { "same" }
    );
    let before = server.metrics(&b.http).await?;
    let url = format!("{}/v1/public/clusters?organization=acme", server.url);
    let started = Instant::now();
    let statuses: Vec<u16> = futures::stream::iter(0..INVALID_REQUESTS)
        .map(|i| {
            let token = if distinct {
                format!("made-up-{}-{i:06}-0123456789abcdef", b.run_id)
            } else {
                format!("made-up-{}-0123456789abcdef", b.run_id)
            };
            let req = b.http.get(&url).bearer_auth(token);
            async move { req.send().await.map(|r| r.status().as_u16()).unwrap_or(0) }
        })
        .buffer_unordered(INVALID_CONCURRENCY)
        .collect()
        .await;
    let elapsed_s = started.elapsed().as_secs_f64();
    let after = server.metrics(&b.http).await?;
    std::fs::write(b.raw.join(format!("{name}.metrics-after.txt")), &after)?;
    let metric = "account_platform_calls_total";
    let mut counts = BTreeMap::new();
    for s in statuses {
        *counts.entry(s).or_insert(0u64) += 1;
    }
    Ok(InvalidTokens {
        distinct,
        requests: INVALID_REQUESTS,
        calls: metric_sum(&after, metric) - metric_sum(&before, metric),
        statuses: counts,
        elapsed_s,
        address_quota: ADDRESS_QUOTA,
        refusal_ttl_s: REFUSAL_TTL_S,
    })
}

/// The most platform calls the limits allow for `r`: one per refusal TTL for one token; the
/// address's quota and its refill over the run for new ones.
pub fn invalid_token_bound(r: &InvalidTokens) -> f64 {
    if r.distinct {
        f64::from(r.address_quota) + (r.elapsed_s * f64::from(r.address_quota) / 60.0).ceil()
    } else {
        (r.elapsed_s / f64::from(r.refusal_ttl_s.max(1))).ceil() + 1.0
    }
}
