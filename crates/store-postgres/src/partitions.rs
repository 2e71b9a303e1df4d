//! Monthly partitions of the two tables that only grow: `audit_events` by `at` and
//! `cluster_operations` by `created_at`. Retention then drops a whole month (one `DROP TABLE`,
//! no dead rows, no vacuum debt) instead of deleting rows one by one.
//!
//! **The conversion** of a database made before partitioning runs at start, after the
//! migrations, under the same advisory lock, and holds no lock that stops writes for longer
//! than the final swap (a catalog change, bounded by `lock_timeout`). It cannot be a SQL
//! migration: a migration's file runs as one transaction, and the two steps that read the whole
//! table (a unique index built `CONCURRENTLY`, a `CHECK` validated after being added `NOT
//! VALID`) must each run in their own transaction so that writes go on meanwhile. Steps:
//!
//! 1. a partitioned table `<t>_partitioned` like `<t>`, with the same indexes, foreign keys and
//!    a primary key that includes the partition column (a partitioned table's keys must), a
//!    default partition and month partitions from the month after next;
//! 2. on `<t>`, a unique index on (`id`, column), built concurrently;
//! 3. `CHECK (column < bound)` added `NOT VALID` (instant), then validated (a scan that takes
//!    no lock writes wait for), where the bound is the first month of step 1;
//! 4. the swap, one short transaction: `<t>`'s primary key becomes the index of step 2, `<t>`
//!    becomes `<t>_legacy`, `<t>_partitioned` becomes `<t>`, and `<t>_legacy` is attached as
//!    its partition below the bound. The validated check proves the partition's bound, and the
//!    indexes match the parent's, so attaching scans and builds nothing.
//!
//! Every step can run again after an interruption: a step that finds its work done skips it.
//!
//! **New months** are made ahead of time (at start and hourly) by
//! `kubesvc_ensure_month_partitions`; a row past them lands in the default partition, never
//! in an error.
//!
//! **Retention** drops a month once its whole range is older than the cutoff (and, for
//! operations, once nothing in it is still running or finished after the cutoff): a row is kept
//! at least its retention, and at most a month beyond. The legacy and default partitions,
//! which are not months, are purged row by row as before.

use chrono::{DateTime, Utc};
use diesel::connection::SimpleConnection;
use diesel::pg::PgConnection;
use diesel::prelude::*;
use diesel::sql_types::{Nullable, Text, Timestamptz};

/// Months made ahead of the current one, at start and by the hourly housekeeping.
pub(crate) const MONTHS_AHEAD: i32 = 3;
/// How long one catalog change may wait for its lock before it gives up and tries later, so
/// that a long transaction on the table never makes writes queue behind the change.
const LOCK_TIMEOUT: &str = "1s";
/// How often the swap is tried when its lock is not granted in time.
const SWAP_ATTEMPTS: u32 = 20;

/// A table kept in monthly partitions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Partitioned {
    pub(crate) table: &'static str,
    /// The partition key: a `timestamptz NOT NULL` column.
    pub(crate) column: &'static str,
    /// What keeps a month that is old enough from being dropped: a condition on its rows.
    keep_month_if: Option<&'static str>,
    /// The rows the row-by-row purge of the legacy and default partitions takes (`$1` is the
    /// cutoff).
    purge_rows_if: &'static str,
}

pub(crate) const AUDIT_EVENTS: Partitioned = Partitioned {
    table: "audit_events",
    column: "at",
    keep_month_if: None,
    purge_rows_if: "at < $1",
};

pub(crate) const CLUSTER_OPERATIONS: Partitioned = Partitioned {
    table: "cluster_operations",
    column: "created_at",
    keep_month_if: Some("finished_at IS NULL OR finished_at >= $1"),
    purge_rows_if: "finished_at < $1",
};

pub(crate) const TABLES: [Partitioned; 2] = [AUDIT_EVENTS, CLUSTER_OPERATIONS];

/// What one conversion did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Conversion {
    /// Whether the table was converted now (false: it already was partitioned).
    pub converted: bool,
    /// How many times the swap's lock was not granted within the timeout.
    pub swap_retries: u32,
}

#[derive(QueryableByName)]
struct One {
    #[diesel(sql_type = Text)]
    v: String,
}

#[derive(QueryableByName)]
struct Partition {
    #[diesel(sql_type = Text)]
    name: String,
    /// The exclusive upper bound; `None` for the default partition.
    #[diesel(sql_type = Nullable<Timestamptz>)]
    upper: Option<DateTime<Utc>>,
}

fn texts(conn: &mut PgConnection, sql: &str) -> QueryResult<Vec<String>> {
    Ok(diesel::sql_query(sql)
        .load::<One>(conn)?
        .into_iter()
        .map(|r| r.v)
        .collect())
}

fn text(conn: &mut PgConnection, sql: &str) -> QueryResult<Option<String>> {
    Ok(texts(conn, sql)?.into_iter().next())
}

/// A SQL string literal.
fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Whether `table` is partitioned already.
fn is_partitioned(conn: &mut PgConnection, table: &str) -> QueryResult<bool> {
    let kind = text(
        conn,
        &format!(
            "SELECT relkind::text AS v FROM pg_class WHERE oid = to_regclass({})",
            literal(table)
        ),
    )?;
    Ok(kind.as_deref() == Some("p"))
}

/// Converts `t` into a partitioned table if it is not one yet; then makes sure the coming
/// months exist.
pub(crate) fn convert(conn: &mut PgConnection, t: Partitioned) -> QueryResult<Conversion> {
    let mut done = Conversion::default();
    if !is_partitioned(conn, t.table)? {
        done.swap_retries = convert_now(conn, t)?;
        done.converted = true;
    }
    ensure_months(conn, t, MONTHS_AHEAD)?;
    Ok(done)
}

fn convert_now(conn: &mut PgConnection, t: Partitioned) -> QueryResult<u32> {
    let Partitioned { table, column, .. } = t;
    let staged = format!("{table}_partitioned");
    let check = format!("{table}_before_partitions");
    let key_index = format!("{table}_id_{column}_key");
    // The first month of the new partitions: the month after next, so that no write made
    // while the conversion runs (or its clock) reaches past the check of step 3.
    let bound = text(
        conn,
        "SELECT to_char(date_trunc('month', now() AT TIME ZONE 'UTC') + interval '2 months', \
         'YYYY-MM-DD') || ' 00:00:00+00' AS v",
    )?
    .unwrap_or_default();

    // 1. The partitioned table, made again from scratch if an earlier attempt left one.
    conn.batch_execute(&format!(
        "DROP TABLE IF EXISTS {staged} CASCADE; \
         CREATE TABLE {staged} (LIKE {table} INCLUDING DEFAULTS INCLUDING CONSTRAINTS) \
             PARTITION BY RANGE ({column}); \
         ALTER TABLE {staged} DROP CONSTRAINT IF EXISTS {check}; \
         ALTER TABLE {staged} ADD CONSTRAINT {staged}_pkey PRIMARY KEY (id, {column}); \
         CREATE TABLE {table}_default PARTITION OF {staged} DEFAULT;"
    ))?;
    // The same secondary indexes, named `<name>_p` until the swap gives them the names.
    let indexes = texts(
        conn,
        &format!(
            "SELECT c.relname::text AS v FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid \
             WHERE i.indrelid = {}::regclass AND NOT i.indisprimary ORDER BY 1",
            literal(table)
        ),
    )?;
    for index in &indexes {
        let def = text(
            conn,
            &format!("SELECT pg_get_indexdef({}::regclass) AS v", literal(index)),
        )?
        .unwrap_or_default();
        let def = def
            .replacen(
                &format!("INDEX {index} ON public.{table} "),
                &format!("INDEX {index}_p ON public.{staged} "),
                1,
            )
            .replacen(
                &format!("INDEX {index} ON {table} "),
                &format!("INDEX {index}_p ON {staged} "),
                1,
            );
        conn.batch_execute(&def)?;
    }
    // The foreign keys (the operations' cluster, cascading its delete).
    let foreign_keys = texts(
        conn,
        &format!(
            "SELECT conname || ' ' || pg_get_constraintdef(oid) AS v FROM pg_constraint \
             WHERE conrelid = {}::regclass AND contype = 'f' ORDER BY 1",
            literal(table)
        ),
    )?;
    for fk in &foreign_keys {
        conn.batch_execute(&format!("ALTER TABLE {staged} ADD CONSTRAINT {fk}"))?;
    }
    conn.batch_execute(&format!(
        "SELECT kubesvc_ensure_month_partitions({}, {}, {}::timestamptz, {})",
        literal(&staged),
        literal(table),
        literal(&bound),
        MONTHS_AHEAD + 2
    ))?;

    // 2. The future primary key's index, built while writes go on. An earlier attempt may
    //    have left it invalid.
    conn.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {key_index}"))?;
    conn.batch_execute(&format!(
        "CREATE UNIQUE INDEX CONCURRENTLY {key_index} ON {table} (id, {column})"
    ))?;

    // 3. The bound, proved without a lock that stops writes.
    with_lock_timeout(
        conn,
        &format!(
            "ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {check}; \
         ALTER TABLE {table} ADD CONSTRAINT {check} CHECK ({column} < {}) NOT VALID;",
            literal(&bound)
        ),
    )
    .or_else(|_| {
        // Once more, with the wait forgiven: the table is idle enough by now or never.
        conn.batch_execute(&format!(
            "ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {check}; \
             ALTER TABLE {table} ADD CONSTRAINT {check} CHECK ({column} < {}) NOT VALID;",
            literal(&bound)
        ))
    })?;
    conn.batch_execute(&format!("ALTER TABLE {table} VALIDATE CONSTRAINT {check}"))?;

    // 4. The swap.
    let mut renames = String::new();
    for index in &indexes {
        renames.push_str(&format!(
            "ALTER INDEX {index} RENAME TO {index}_legacy; \
             ALTER INDEX {index}_p RENAME TO {index}; "
        ));
    }
    let swap = format!(
        "LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE; \
         ALTER TABLE {table} DROP CONSTRAINT {table}_pkey; \
         ALTER TABLE {table} ADD CONSTRAINT {table}_legacy_pkey PRIMARY KEY USING INDEX {key_index}; \
         ALTER TABLE {table} RENAME TO {table}_legacy; \
         {renames}\
         ALTER TABLE {staged} RENAME TO {table}; \
         ALTER TABLE {table} RENAME CONSTRAINT {staged}_pkey TO {table}_pkey; \
         ALTER TABLE {table} ATTACH PARTITION {table}_legacy FOR VALUES FROM (MINVALUE) TO ({});",
        literal(&bound)
    );
    let mut retries = 0;
    loop {
        match with_lock_timeout(conn, &swap) {
            Ok(()) => return Ok(retries),
            Err(e) if retries + 1 < SWAP_ATTEMPTS && is_lock_timeout(&e) => {
                retries += 1;
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Runs `sql` in one transaction whose locks wait at most [`LOCK_TIMEOUT`].
fn with_lock_timeout(conn: &mut PgConnection, sql: &str) -> QueryResult<()> {
    conn.transaction(|conn| {
        conn.batch_execute(&format!("SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'; {sql}"))
    })
}

fn is_lock_timeout(e: &diesel::result::Error) -> bool {
    // SQLSTATE 55P03 (lock_not_available); diesel has no kind for it, its message says it.
    matches!(e, diesel::result::Error::DatabaseError(_, info)
        if info.message().contains("lock timeout"))
}

/// Makes the current month and the `ahead` next ones, where missing.
pub(crate) fn ensure_months(
    conn: &mut PgConnection,
    t: Partitioned,
    ahead: i32,
) -> QueryResult<()> {
    conn.batch_execute(&format!(
        "SELECT kubesvc_ensure_month_partitions({}, {}, now(), {})",
        literal(t.table),
        literal(t.table),
        ahead + 1
    ))
}

/// The partitions of `t` with their upper bounds, oldest first (the default last).
fn partitions(conn: &mut PgConnection, t: Partitioned) -> QueryResult<Vec<Partition>> {
    diesel::sql_query(format!(
        "SELECT c.relname::text AS name, \
                substring(pg_get_expr(c.relpartbound, c.oid) from 'TO \\(''([^'']+)''\\)')::timestamptz \
                    AS upper \
         FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = {}::regclass \
         ORDER BY upper NULLS LAST",
        literal(t.table)
    ))
    .load(conn)
}

/// What a purge removed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Purged {
    /// Months dropped whole.
    pub months: u64,
    /// Rows gone, in the months dropped and row by row.
    pub rows: u64,
}

/// Drops every month of `t` older than `cutoff` that nothing keeps, then deletes the rows
/// older than it from the partitions that are not months.
pub(crate) fn purge_before(
    conn: &mut PgConnection,
    t: Partitioned,
    cutoff: DateTime<Utc>,
) -> QueryResult<Purged> {
    let mut purged = Purged::default();
    if !is_partitioned(conn, t.table)? {
        let n = diesel::sql_query(format!("DELETE FROM {} WHERE {}", t.table, t.purge_rows_if))
            .bind::<Timestamptz, _>(cutoff)
            .execute(conn)?;
        purged.rows = n as u64;
        return Ok(purged);
    }
    let legacy = format!("{}_legacy", t.table);
    for p in partitions(conn, t)? {
        let is_month = p.name != legacy && p.upper.is_some();
        // The legacy partition is dropped whole too, once all of it is past the cutoff.
        if p.upper.is_some_and(|upper| upper <= cutoff) {
            let kept = match t.keep_month_if {
                Some(condition) => diesel::sql_query(format!(
                    "SELECT 'kept' AS v FROM {} WHERE {condition} LIMIT 1",
                    p.name
                ))
                .bind::<Timestamptz, _>(cutoff)
                .load::<One>(conn)?
                .into_iter()
                .next()
                .is_some(),
                None => false,
            };
            if !kept {
                let rows = text(conn, &format!("SELECT count(*)::text AS v FROM {}", p.name))?
                    .and_then(|n| n.parse::<u64>().ok())
                    .unwrap_or(0);
                match with_lock_timeout(conn, &format!("DROP TABLE {}", p.name)) {
                    Ok(()) => {
                        purged.months += 1;
                        purged.rows += rows;
                        continue;
                    }
                    // Busy now: the next purge drops it.
                    Err(e) if is_lock_timeout(&e) => continue,
                    Err(e) => return Err(e),
                }
            }
        }
        if !is_month {
            let n = diesel::sql_query(format!("DELETE FROM {} WHERE {}", p.name, t.purge_rows_if))
                .bind::<Timestamptz, _>(cutoff)
                .execute(conn)?;
            purged.rows += n as u64;
        }
    }
    Ok(purged)
}

impl crate::PgStore {
    /// Makes the coming months of every partitioned table, where missing (hourly
    /// housekeeping; the start made them too).
    pub async fn ensure_partitions(&self) -> Result<(), domain::ports::storage::StoreError> {
        self.run_blocking(|conn| {
            for table in TABLES {
                if is_partitioned(conn, table.table).map_err(crate::error::map)? {
                    ensure_months(conn, table, MONTHS_AHEAD).map_err(crate::error::map)?;
                }
            }
            Ok(())
        })
        .await
    }
}
