//! Reading `cluster_change_log`: where a change feed left off, the statement that reads on
//! from there, and the one that purges what every feed has read.
//!
//! Where a feed left off is the snapshot of its last read (`pg_current_snapshot()`: every
//! transaction below its `xmax` had begun, and all of those but the ones in its in-progress
//! list had ended). The next read takes exactly the rows that snapshot could not see: of
//! transactions from its `xmax` on, or in its in-progress list. Both are index lookups, however
//! old the oldest running transaction of the database is. A sequence number would not do: rows
//! of concurrent writers become visible in commit order, so a reader that saw number 10 may not
//! yet have seen 9; and reading from the snapshot's `xmin` would read everything since a
//! long-running transaction (a `pg_dump`) began, every second.
//!
//! Rows are purged once every feed has surely read them: rows of transactions that had ended
//! by a snapshot this process read [`RETAIN`] ago. Every other process's feed read a later
//! snapshot since (a feed that has not read for [`MAX_READ_GAP`] starts over, its cache
//! emptied), and a later snapshot sees every transaction an earlier one saw ended.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use uuid::Uuid;

use crate::listener::Rows;
use crate::watch_cache::Membership;

/// How long rows are kept after this process's feed read past them.
const RETAIN: Duration = Duration::from_secs(120);
/// How often this process purges.
const PURGE_EVERY: Duration = Duration::from_secs(10);
/// A feed that has not read the log for this long may have missed purged rows: it starts over.
pub(crate) const MAX_READ_GAP: Duration = Duration::from_secs(30);

/// The statement that starts a feed: the snapshot to read from.
pub(crate) const START: &str = "SELECT pg_current_snapshot()::text";

/// One row of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LoggedChange {
    pub cluster_id: Uuid,
    pub revision: i64,
    pub organization_id: Uuid,
    pub membership: Membership,
}

/// A snapshot, as `pg_current_snapshot()` writes it: `xmin:xmax:xip,xip,…`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Snapshot {
    xmax: u64,
    /// Transactions below `xmax` still running when it was taken.
    in_progress: Vec<u64>,
}

impl Snapshot {
    fn parse(text: &str) -> Result<Snapshot, String> {
        let bad = || format!("the database gave a bad snapshot: {text:?}");
        let mut parts = text.split(':');
        let (Some(xmin), Some(xmax), Some(xip), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let xmin: u64 = xmin.parse().map_err(|_| bad())?;
        let xmax: u64 = xmax.parse().map_err(|_| bad())?;
        let in_progress = xip
            .split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.parse::<u64>().map_err(|_| bad()))
            .collect::<Result<Vec<_>, _>>()?;
        if xmin > xmax || in_progress.iter().any(|x| *x < xmin || *x >= xmax) {
            return Err(bad());
        }
        Ok(Snapshot { xmax, in_progress })
    }

    /// `'{1,2}'::xid8[]`: numbers only, so nothing to quote.
    fn in_progress_array(&self) -> String {
        let list: Vec<String> = self.in_progress.iter().map(u64::to_string).collect();
        format!("'{{{}}}'::xid8[]", list.join(","))
    }

    /// Whether this snapshot is at least as late as `other` (a read may not move back).
    fn not_before(&self, other: &Snapshot) -> bool {
        self.xmax >= other.xmax
    }
}

/// Where a feed left off, and the older snapshots a purge may use.
#[derive(Debug)]
pub(crate) struct LogCursor {
    last: Snapshot,
    /// Snapshots read, oldest first, none older than [`RETAIN`] but one.
    history: VecDeque<(Instant, Snapshot)>,
    purged_at: Instant,
}

impl LogCursor {
    /// The cursor of a feed that starts now, from the answer to [`START`].
    pub fn new(rows: &Rows, now: Instant) -> Result<LogCursor, String> {
        let text = rows
            .first()
            .and_then(|r| r.first())
            .and_then(|v| v.as_deref())
            .ok_or("the database gave no snapshot")?;
        let last = Snapshot::parse(text)?;
        Ok(LogCursor {
            history: VecDeque::from([(now, last.clone())]),
            last,
            purged_at: now,
        })
    }

    /// Reads the rows the last snapshot could not see, with the snapshot of this read (on the
    /// first row; a row of NULLs but that when there is nothing new).
    pub fn read(&self) -> String {
        format!(
            "SELECT s.snapshot::text, l.cluster_id::text, l.revision::text, \
                    l.organization_id::text, l.membership \
             FROM (SELECT pg_current_snapshot() AS snapshot) AS s \
             LEFT JOIN cluster_change_log AS l \
                 ON l.xid >= '{}'::xid8 OR l.xid = ANY ({})",
            self.last.xmax,
            self.last.in_progress_array()
        )
    }

    /// Takes the answer to [`Self::read`]: the changes, the cursor moved on.
    pub fn advance(&mut self, rows: &Rows, now: Instant) -> Result<Vec<LoggedChange>, String> {
        let mut changes = Vec::with_capacity(rows.len());
        let mut snapshot = None;
        for row in rows {
            let [Some(text), cluster, revision, org, membership] = row.as_slice() else {
                return Err("the log read answered an unexpected row".into());
            };
            if snapshot.is_none() {
                snapshot = Some(Snapshot::parse(text)?);
            }
            if let (Some(cluster), Some(revision), Some(org), Some(membership)) =
                (cluster, revision, org, membership)
            {
                changes.push(parse(cluster, revision, org, membership)?);
            }
        }
        let snapshot = snapshot.ok_or("the log read answered no row")?;
        if !snapshot.not_before(&self.last) {
            return Err("the log read answered an older snapshot than the last one".into());
        }
        self.history.push_back((now, snapshot.clone()));
        self.last = snapshot;
        while self
            .history
            .get(1)
            .is_some_and(|(at, _)| now.duration_since(*at) >= RETAIN)
        {
            self.history.pop_front();
        }
        Ok(changes)
    }

    /// The purge that is due now, if one is: rows of transactions that had ended by the
    /// snapshot this feed read [`RETAIN`] ago.
    pub fn purge(&mut self, now: Instant) -> Option<String> {
        if now.duration_since(self.purged_at) < PURGE_EVERY {
            return None;
        }
        let (at, snapshot) = self.history.front()?;
        if now.duration_since(*at) < RETAIN {
            return None;
        }
        let sql = purge_ended_by(snapshot);
        self.purged_at = now;
        Some(sql)
    }
}

/// Deletes the rows of transactions that had ended by `snapshot`, skipping rows another
/// process is deleting at the same moment (two purges never wait for each other).
fn purge_ended_by(snapshot: &Snapshot) -> String {
    format!(
        "DELETE FROM cluster_change_log WHERE ctid = ANY (ARRAY( \
             SELECT ctid FROM cluster_change_log \
             WHERE xid < '{}'::xid8 AND xid <> ALL ({}) \
             FOR UPDATE SKIP LOCKED))",
        snapshot.xmax,
        snapshot.in_progress_array()
    )
}

fn parse(
    cluster: &str,
    revision: &str,
    org: &str,
    membership: &str,
) -> Result<LoggedChange, String> {
    let bad = |what: &str| format!("the log holds a bad {what}");
    Ok(LoggedChange {
        cluster_id: cluster.parse().map_err(|_| bad("cluster id"))?,
        revision: revision.parse().map_err(|_| bad("revision"))?,
        organization_id: org.parse().map_err(|_| bad("organization id"))?,
        membership: match membership {
            "created" => Membership::Created,
            "removed" => Membership::Removed,
            "changed" => Membership::Unchanged,
            _ => Membership::Unknown,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(values: &[Option<&str>]) -> Vec<Option<String>> {
        values.iter().map(|v| v.map(str::to_owned)).collect()
    }

    fn start(snapshot: &str, at: Instant) -> LogCursor {
        LogCursor::new(&vec![row(&[Some(snapshot)])], at).unwrap_or_else(|e| panic!("{e}"))
    }

    fn nothing_new(snapshot: &str) -> Rows {
        vec![row(&[Some(snapshot), None, None, None, None])]
    }

    #[test]
    fn snapshots_are_read_as_postgresql_writes_them_and_others_refused() {
        let ok = [("10:10:", 10, vec![]), ("10:15:10,12", 15, vec![10, 12])];
        for (text, xmax, in_progress) in ok {
            assert_eq!(
                Snapshot::parse(text),
                Ok(Snapshot { xmax, in_progress }),
                "{text}"
            );
        }
        for text in [
            "", "10", "10:15", "x:15:", "10:9:", "10:15:16", "10:15:9", "10:15:1a", "1:2:3:4",
        ] {
            assert!(Snapshot::parse(text).is_err(), "{text:?}");
        }
    }

    #[test]
    fn a_read_gives_the_changes_and_moves_past_what_its_snapshot_saw() {
        let t0 = Instant::now();
        let mut cursor = start("100:104:100,102", t0);
        let read = cursor.read();
        assert!(
            read.contains("l.xid >= '104'::xid8 OR l.xid = ANY ('{100,102}'::xid8[])"),
            "{read}"
        );
        let (id, org) = (
            Uuid::from_u128(1).to_string(),
            Uuid::from_u128(2).to_string(),
        );
        let rows = vec![
            row(&[
                Some("102:106:102"),
                Some(&id),
                Some("3"),
                Some(&org),
                Some("created"),
            ]),
            row(&[
                Some("102:106:102"),
                Some(&id),
                Some("4"),
                Some(&org),
                Some("changed"),
            ]),
        ];
        let changes = cursor.advance(&rows, t0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            changes
                .iter()
                .map(|c| (c.revision, c.membership))
                .collect::<Vec<_>>(),
            vec![(3, Membership::Created), (4, Membership::Unchanged)]
        );
        assert!(
            cursor
                .read()
                .contains("l.xid >= '106'::xid8 OR l.xid = ANY ('{102}'::xid8[])")
        );
        // Nothing new: one row of NULLs but the snapshot.
        let none = cursor
            .advance(&nothing_new("106:106:"), t0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(none.is_empty());
        assert!(
            cursor
                .read()
                .contains("l.xid >= '106'::xid8 OR l.xid = ANY ('{}'::xid8[])")
        );
    }

    #[test]
    fn answers_that_are_not_the_logs_are_refused() {
        let t0 = Instant::now();
        let mut cursor = start("10:20:", t0);
        let id = Uuid::from_u128(1).to_string();
        for rows in [
            vec![],
            nothing_new("x"),
            nothing_new("5:9:"),
            vec![row(&[None, None, None, None, None])],
            vec![row(&[
                Some("20:21:"),
                Some("not-a-uuid"),
                Some("1"),
                Some(&id),
                Some("changed"),
            ])],
            vec![row(&[
                Some("20:21:"),
                Some(&id),
                Some("one"),
                Some(&id),
                Some("changed"),
            ])],
            vec![row(&[Some("20:21:"), Some(&id)])],
        ] {
            assert!(cursor.advance(&rows, t0).is_err(), "{rows:?}");
        }
        assert!(LogCursor::new(&vec![], t0).is_err());
    }

    #[test]
    fn a_purge_takes_only_transactions_ended_by_a_snapshot_read_long_enough_ago() {
        let t0 = Instant::now();
        let mut cursor = start("10:10:", t0);
        // Read once a second for a while, xmax growing by ten each time, one transaction
        // (number 5 + 10·s) still running at each snapshot.
        for s in 1..=200u64 {
            let at = t0 + Duration::from_secs(s);
            let snapshot = format!("{0}:{1}:{0}", 5 + 10 * s, 10 + 10 * s);
            cursor
                .advance(&nothing_new(&snapshot), at)
                .unwrap_or_else(|e| panic!("{e}"));
            let Some(sql) = cursor.purge(at) else {
                assert!(
                    s < RETAIN.as_secs() || s % 10 != 0,
                    "at {s} s a purge was due"
                );
                continue;
            };
            assert!(
                s >= RETAIN.as_secs(),
                "at {s} s nothing was read {RETAIN:?} ago"
            );
            // The bound is the snapshot of RETAIN ago (or just before it), never newer.
            let newest_allowed = 10 + 10 * (s - RETAIN.as_secs());
            let bound: u64 = sql
                .split("xid < '")
                .nth(1)
                .and_then(|r| r.split('\'').next())
                .and_then(|b| b.parse().ok())
                .unwrap_or_else(|| panic!("{sql}"));
            assert!(
                bound <= newest_allowed,
                "at {s} s the bound {bound} is too new"
            );
            assert!(
                bound + 20 >= newest_allowed,
                "at {s} s the bound {bound} lags"
            );
            // What was still running at that snapshot stays (the first one had nothing).
            let kept = if bound == 10 {
                String::new()
            } else {
                (bound - 5).to_string()
            };
            assert!(
                sql.contains(&format!("xid <> ALL ('{{{kept}}}'::xid8[])")),
                "{sql}"
            );
        }
        // Not more often than every PURGE_EVERY.
        let at = t0 + Duration::from_secs(400);
        cursor
            .advance(&nothing_new("9000:9000:"), at)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(cursor.purge(at).is_some());
        assert!(cursor.purge(at + Duration::from_secs(1)).is_none());
    }

    /// The statements against a real database: what a read returns and moves past (a
    /// transaction still open included), and what a purge leaves.
    #[cfg(feature = "test-support")]
    #[test]
    fn reads_and_purges_on_the_migrated_schema() {
        use crate::listener::Listener;
        let db = crate::TestDatabase::create();
        let timeout = Duration::from_secs(10);
        let connect = || Listener::connect(&db.url).unwrap_or_else(|e| panic!("{e}"));
        let run = |conn: &mut Listener, sql: &str| {
            conn.query(sql, timeout)
                .unwrap_or_else(|e| panic!("{sql}: {e}"))
                .0
        };
        let log = |n: i64| {
            format!(
                "INSERT INTO cluster_change_log (cluster_id, revision, organization_id, membership) \
                 VALUES ('{}', {n}, '{}', 'changed')",
                Uuid::from_u128(1),
                Uuid::from_u128(2)
            )
        };
        let revisions = |changes: Vec<LoggedChange>| -> Vec<i64> {
            let mut r: Vec<i64> = changes.iter().map(|c| c.revision).collect();
            r.sort_unstable();
            r
        };
        let (mut feed, mut open) = (connect(), connect());
        let t0 = Instant::now();
        let mut cursor =
            LogCursor::new(&run(&mut feed, START), t0).unwrap_or_else(|e| panic!("{e}"));
        run(&mut open, "BEGIN");
        run(&mut open, &log(1));
        run(&mut feed, &log(2));
        let read = |feed: &mut Listener, cursor: &mut LogCursor| {
            let rows = run(feed, &cursor.read());
            revisions(cursor.advance(&rows, t0).unwrap_or_else(|e| panic!("{e}")))
        };
        assert_eq!(read(&mut feed, &mut cursor), vec![2]);
        let saw_two = cursor.last.clone();
        assert_eq!(
            read(&mut feed, &mut cursor),
            Vec::<i64>::new(),
            "nothing read twice"
        );
        run(&mut open, "COMMIT");
        assert_eq!(
            read(&mut feed, &mut cursor),
            vec![1],
            "the transaction that was open"
        );
        // A purge by the snapshot that saw 2 but not 1 (still open then) takes 2 only.
        run(&mut feed, &purge_ended_by(&saw_two));
        let left = run(&mut feed, "SELECT revision::text FROM cluster_change_log");
        assert_eq!(left, vec![vec![Some("1".to_owned())]]);
    }
}
