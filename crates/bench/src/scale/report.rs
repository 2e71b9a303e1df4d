//! docs/scale.md from a run's results: each goal as a line with the figure at both sizes and
//! its verdict at the large one.

use std::fmt::Write as _;

use super::{ScaleResults, SizeResult};

fn n(v: u32) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**missed**" }
}

/// One goal: its words, the figure at each size, and whether the large size meets it.
struct Goal {
    what: String,
    figure: fn(&SizeResult) -> String,
    met: fn(&SizeResult) -> bool,
    missed_by: fn(&SizeResult) -> String,
}

fn worst_page_p99(r: &SizeResult) -> f64 {
    r.pages.iter().map(|(_, w)| w.p99_ms).fold(0.0, f64::max)
}

fn worst_audit_p99(r: &SizeResult) -> f64 {
    r.audit_pages
        .iter()
        .map(|(_, w)| w.p99_ms)
        .fold(0.0, f64::max)
}

fn ratio(r: &SizeResult) -> f64 {
    r.get_by_id.rps / r.pgbench.tps.max(1e-9)
}

fn goals() -> Vec<Goal> {
    vec![
        Goal {
            what: "GET by id, uniformly random over all clusters, ≥ 1.0 × `pgbench -S`".into(),
            figure: |r| {
                format!(
                    "{:.0}/s vs {:.0}/s = {:.2}×",
                    r.get_by_id.rps,
                    r.pgbench.tps,
                    ratio(r)
                )
            },
            met: |r| ratio(r) >= 1.0 && r.get_by_id.clean(),
            missed_by: |r| format!("{:.0} % short", (1.0 - ratio(r)) * 100.0),
        },
        Goal {
            what: "a page of 100 of the big organization (first, middle, last): p99 < 20 ms".into(),
            figure: |r| {
                r.pages
                    .iter()
                    .map(|(w, run)| {
                        format!("{}: {:.1} ms", w.split(' ').next().unwrap_or(w), run.p99_ms)
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            met: |r| worst_page_p99(r) < 20.0 && r.pages.iter().all(|(_, w)| w.clean()),
            missed_by: |r| format!("{:.1} ms over", worst_page_p99(r) - 20.0),
        },
        Goal {
            what: "an audit-events page of the big organization: p99 < 50 ms".into(),
            figure: |r| {
                r.audit_pages
                    .iter()
                    .map(|(w, run)| format!("{w}: {:.1} ms", run.p99_ms))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            met: |r| worst_audit_p99(r) < 50.0 && r.audit_pages.iter().all(|(_, w)| w.clean()),
            missed_by: |r| format!("{:.1} ms over", worst_audit_p99(r) - 50.0),
        },
        Goal {
            what: "server RSS with all of it served ≤ 1.5 GB".into(),
            figure: |r| format!("{} MiB", r.rss_kb / 1024),
            met: |r| r.rss_kb <= 1_500_000,
            missed_by: |r| format!("{} MB over", (r.rss_kb as i64 - 1_500_000) / 1000),
        },
        Goal {
            what: "start to `/readyz` 200 ≤ 20 s".into(),
            figure: |r| format!("{:.2} s", r.ready_seconds),
            met: |r| r.ready_seconds <= 20.0,
            missed_by: |r| format!("{:.1} s over", r.ready_seconds - 20.0),
        },
        Goal {
            what: "converting the audit events to monthly partitions stops writes ≤ 1 s".into(),
            figure: |r| {
                format!(
                    "{} events in {:.1} s; longest write {:.1} ms of {}",
                    r.conversion.events,
                    r.conversion.seconds,
                    r.conversion.longest_write_ms,
                    r.conversion.writes
                )
            },
            met: |r| r.conversion.longest_write_ms <= 1000.0 && r.conversion.writes > 0,
            missed_by: |r| format!("{:.0} ms over", r.conversion.longest_write_ms - 1000.0),
        },
    ]
}

pub fn markdown(results: &ScaleResults) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# The service at scale (`make scale`)\n");
    let _ = writeln!(
        md,
        "Written by `make scale` (crates/bench/src/scale): for each size a database made in \
         bulk (N clusters 100 to an organization plus one organization, `acme`, of N / 10: \
         at a million, 10,000 organizations of 100 and one of 100,000; 3 pools and one \
         finished operation a cluster; {} audit events for each of the N, a tenth of them \
         acme's, over the last 13 months), one release `server` \
         (`DATABASE_POOL_SIZE` {}, tokens cached for the run), wrk and pgbench with {} \
         connections for {} s each, on the same machine, one after the other. The figure at \
         the small size is there so the growth shows; each verdict is the large size's.\n",
        results.settings.events_per_cluster,
        results.settings.pool_size,
        results.settings.connections,
        results.settings.duration_s,
    );
    let _ = writeln!(md, "## Machine\n");
    for (k, v) in &results.machine {
        let _ = writeln!(md, "- {k}: {v}");
    }
    let (Some(small), Some(large)) = (results.sizes.first(), results.sizes.last()) else {
        return md;
    };
    let _ = writeln!(md, "\n## Goals\n");
    let _ = writeln!(
        md,
        "| goal | {} clusters | {} clusters | verdict |\n|---|---|---|---|",
        n(small.shape.clusters),
        n(large.shape.clusters)
    );
    for g in goals() {
        let verdict = if (g.met)(large) {
            verdict(true).to_owned()
        } else {
            format!("{} ({})", verdict(false), (g.missed_by)(large))
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {verdict} |",
            g.what,
            (g.figure)(small),
            (g.figure)(large)
        );
    }
    let creates = large.creates.rps / small.creates.rps.max(1e-9);
    let _ = writeln!(
        md,
        "| creates per second within 10 % of the small size's | {:.0}/s | {:.0}/s ({:.2}×) | {} |",
        small.creates.rps,
        large.creates.rps,
        creates,
        if creates >= 0.9 && large.creates.clean() {
            verdict(true).to_owned()
        } else {
            format!(
                "{} ({:.0} % slower)",
                verdict(false),
                (1.0 - creates) * 100.0
            )
        }
    );
    let polls = |r: &SizeResult| match &r.long_polls {
        Some(l) => format!(
            "{} waiting: RSS {} MB; change to answer p99 {:.0} ms; {} failed",
            l.waiters,
            l.rss_waiting_kb.unwrap_or(0) / 1000,
            l.change_to_answer.p99_ms,
            l.failed.values().sum::<usize>()
        ),
        None => "not run".into(),
    };
    let polls_verdict = match &large.long_polls {
        Some(l) if l.waiters < results.settings.waiters as usize => format!(
            "**not measured**: this machine's open-files limit holds {} waiters in a process \
             ({} KB of RSS each over the idle server's at that count; p99 {:.0} ms)",
            n(l.waiters as u32),
            l.rss_waiting_kb
                .unwrap_or(0)
                .saturating_sub(l.rss_idle_kb.unwrap_or(0))
                / (l.waiters as u64).max(1),
            l.change_to_answer.p99_ms
        ),
        Some(l) => {
            let rss_mb = l.rss_waiting_kb.unwrap_or(u64::MAX) / 1000;
            let failed: usize = l.failed.values().sum();
            if rss_mb <= 800 && l.change_to_answer.p99_ms < 100.0 && failed == 0 {
                verdict(true).to_owned()
            } else {
                format!(
                    "{} (RSS {} MB of 800; p99 {:.0} ms of 100; {failed} failed)",
                    verdict(false),
                    rss_mb,
                    l.change_to_answer.p99_ms
                )
            }
        }
        None => "**open** (not run)".into(),
    };
    let _ = writeln!(
        md,
        "| {} state long-polls: ≤ 800 MB RSS, a change reaches each waiter with p99 < 100 ms | \
         {} | {} | {polls_verdict} |",
        n(results.settings.waiters),
        polls(small),
        polls(large)
    );
    let _ = writeln!(md, "\n## Each run\n");
    let _ = writeln!(
        md,
        "| size | what | requests/s | p50 ms | p99 ms | max ms | errors |\n|---|---|---|---|---|---|---|"
    );
    for r in &results.sizes {
        let size = n(r.shape.clusters);
        let mut rows = vec![("GET by id (random)".to_owned(), &r.get_by_id)];
        rows.extend(r.pages.iter().map(|(w, run)| (format!("page {w}"), run)));
        rows.extend(
            r.audit_pages
                .iter()
                .map(|(w, run)| (format!("audit page, {w}"), run)),
        );
        rows.push(("create (POST, new names)".to_owned(), &r.creates));
        for (what, w) in rows {
            let _ = writeln!(
                md,
                "| {size} | {what} | {:.0} | {:.2} | {:.2} | {:.1} | {} |",
                w.rps,
                w.p50_ms,
                w.p99_ms,
                w.max_ms,
                w.non_2xx + w.socket_errors
            );
        }
        let _ = writeln!(
            md,
            "| {size} | `pgbench -S` | {:.0} | | | | |",
            r.pgbench.tps
        );
    }
    let _ = writeln!(md, "\n## The big organization's first list\n");
    let _ = writeln!(
        md,
        "Its first page after the start reads the organization's whole list index from the \
         database into the watch cache; the page runs above start after it.\n"
    );
    for r in &results.sizes {
        let _ = writeln!(
            md,
            "- {} clusters ({} in the organization): {:.0} ms",
            n(r.shape.clusters),
            n(r.shape.big),
            r.first_list_ms
        );
    }
    let _ = writeln!(md, "\n## Making the data\n");
    for r in &results.sizes {
        let _ = writeln!(
            md,
            "- {} clusters: clusters, pools and operations in {:.0} s; {} audit events converted \
             to monthly partitions in {:.1} s while one writer wrote {} events, the longest in \
             {:.1} ms.",
            n(r.shape.clusters),
            r.seed_seconds,
            r.conversion.events,
            r.conversion.seconds,
            r.conversion.writes,
            r.conversion.longest_write_ms
        );
    }
    md
}
