//! Item 1: `GET /v1/public/clusters/{id}` of one seeded cluster at each of `BENCH_CONNECTIONS`,
//! next to `pgbench -S` (the database's own primary-key read) at the same client counts, on a
//! scratch database dropped right after.

use super::server::Server;
use super::{Bench, pgbench};
use crate::results::GetById;

pub async fn run(b: &Bench<'_>, a: &Server) -> anyhow::Result<Vec<GetById>> {
    let s = b.settings;
    crate::say!(
        "item 1: GET /v1/public/clusters/{{id}} at {:?} connections, pgbench -S beside it",
        s.connections
    );
    let url = format!("{}/v1/public/clusters/{}", a.url, b.first_cluster()?);
    let mut wrk = Vec::new();
    for &c in &s.connections {
        let run = b
            .wrk
            .run(
                &format!("get-by-id-c{c}"),
                c,
                s.duration_s,
                &url,
                &[&b.auth()],
            )
            .await?;
        wrk.push((c, run));
    }
    let name = b.dbs.name("_pgbench");
    let pg_url = b.dbs.create(&name).await?;
    let mut rows = Vec::new();
    pgbench::init(&pg_url, &b.raw).await?;
    for (c, w) in wrk {
        let p = pgbench::select_only(&pg_url, c, s.duration_s, &b.raw).await?;
        rows.push(GetById {
            connections: c,
            wrk: w,
            pgbench: p,
        });
    }
    b.dbs.drop(&name).await?;
    Ok(rows)
}
