//! Item 2: the first page of 100 of an organization holding every seeded cluster, at each of
//! `BENCH_LIST_CONNECTIONS`.

use super::Bench;
use super::server::Server;
use crate::results::List;

pub async fn run(b: &Bench<'_>, a: &Server) -> anyhow::Result<Vec<List>> {
    let s = b.settings;
    crate::say!(
        "item 2: GET /v1/public/clusters?size=100 with {} clusters",
        s.clusters
    );
    let url = format!("{}/v1/public/clusters?size=100", a.url);
    let mut rows = Vec::new();
    for &c in &s.list_connections {
        let wrk = b
            .wrk
            .run(
                &format!("list-c{c}"),
                c,
                s.duration_s,
                &url,
                &[&b.auth(), "X-Platform-Organization: acme"],
            )
            .await?;
        rows.push(List {
            connections: c,
            clusters: s.clusters,
            pools: s.pools,
            wrk,
        });
    }
    Ok(rows)
}
