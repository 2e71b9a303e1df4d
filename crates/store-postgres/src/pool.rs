//! The connection pool: r2d2 over diesel's `PgConnection`, with a checkout check that costs no
//! round trip and one retry of work whose first statement met a connection already gone.
//!
//! A pooled connection can die while it sits idle: the database restarts, an operator runs
//! `pg_terminate_backend`, an idle timeout ends the session. The server then sends a FATAL
//! message and closes the socket. A `SELECT 1` probe on every checkout finds that, but costs a
//! round trip on every call. Reading what is already in the socket finds it too, for free:
//! [`PgManager::is_valid`] asks libpq to consume pending input twice (the first read takes the
//! FATAL message, the second meets the end of the stream) and sends nothing.
//!
//! What that cannot see, a connection that dies between the check and the first statement, is
//! covered by [`Watch`]: when the very first statement of a checkout fails because the
//! connection is gone, and that statement was a `BEGIN` or a `SELECT`, nothing has taken
//! effect, so the work runs once more on another connection. A first statement that writes
//! (an `INSERT` in autocommit) is never re-run: the server might have committed it before the
//! connection broke.

use std::fmt::Write as _;

use diesel::Connection as _;
use diesel::connection::{CacheSize, Instrumentation, InstrumentationEvent};
use diesel::pg::PgConnection;
use diesel::r2d2::{ConnectionManager, ManageConnection};

use crate::error::is_connection_lost;

/// r2d2's manager for diesel's `PgConnection`, with a validity check that sends nothing.
#[derive(Debug)]
pub(crate) struct PgManager {
    inner: ConnectionManager<PgConnection>,
    /// Whether statements stay prepared on a connection for its next use (see
    /// `Database::statement_cache`).
    statement_cache: bool,
}

impl PgManager {
    pub(crate) fn new(database_url: String, statement_cache: bool) -> PgManager {
        PgManager {
            inner: ConnectionManager::new(database_url),
            statement_cache,
        }
    }
}

impl ManageConnection for PgManager {
    type Connection = PgConnection;
    type Error = diesel::r2d2::Error;

    fn connect(&self) -> Result<PgConnection, Self::Error> {
        let mut conn = self.inner.connect()?;
        conn.set_instrumentation(Watch::default());
        if !self.statement_cache {
            conn.set_prepared_statement_cache_size(CacheSize::Disabled);
        }
        Ok(conn)
    }

    fn is_valid(&self, conn: &mut PgConnection) -> Result<(), Self::Error> {
        // `notifications_iter` is libpq's PQconsumeInput + PQnotifies: it reads whatever the
        // socket holds without blocking and without writing. Pool connections never LISTEN,
        // so there is nothing to drain but a server's goodbye.
        for _ in 0..2 {
            for notification in conn.notifications_iter() {
                notification.map_err(diesel::r2d2::Error::QueryError)?;
            }
        }
        Ok(())
    }

    /// Asked as the connection goes back to the pool: one that met a closed connection is
    /// dropped there, so no later checkout draws it.
    fn has_broken(&self, conn: &mut PgConnection) -> bool {
        let lost = conn
            .instrumentation()
            .downcast_mut::<Watch>()
            .is_some_and(|watch| watch.lost);
        lost || self.inner.has_broken(conn)
    }
}

/// Watches the statements of one checkout, to tell whether failed work may run again.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    started: u32,
    first_met_closed_connection: bool,
    lost: bool,
}

impl Watch {
    /// Starts watching a connection just checked out of the pool.
    pub(crate) fn reset(conn: &mut PgConnection) {
        if let Some(watch) = conn.instrumentation().downcast_mut::<Watch>() {
            *watch = Watch::default();
        }
    }

    /// Whether the work on this checkout failed at its first statement, on a connection that
    /// was already gone, with a statement that changes nothing (`BEGIN` or `SELECT`).
    pub(crate) fn may_run_again(conn: &mut PgConnection) -> bool {
        conn.instrumentation()
            .downcast_mut::<Watch>()
            .is_some_and(|watch| watch.first_met_closed_connection)
    }
}

impl Instrumentation for Watch {
    fn on_connection_event(&mut self, event: InstrumentationEvent<'_>) {
        match event {
            InstrumentationEvent::StartQuery { .. } => self.started += 1,
            InstrumentationEvent::FinishQuery {
                query,
                error: Some(error),
                ..
            } if is_connection_lost(error) => {
                self.lost = true;
                self.first_met_closed_connection =
                    self.started == 1 && changes_nothing(&Prefix::of(query));
            }
            _ => {}
        }
    }
}

/// Whether a statement, by its first word, takes no effect on its own: `BEGIN` opens a
/// transaction, a `SELECT` in autocommit reads (the store's writes are `INSERT`, `UPDATE`,
/// `DELETE` or `WITH … UPDATE`, and its `pg_notify` calls run inside transactions). The one
/// exception is a `SELECT` of one of the schema's own functions (`kubesvc_…`): those may write
/// (`kubesvc_create_cluster_replayed`), so they count as writes.
fn changes_nothing(prefix: &Prefix) -> bool {
    let text = prefix.as_str().trim_start();
    let starts = |w: &str| {
        text.get(..w.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(w))
    };
    (starts("BEGIN") || starts("SELECT")) && !starts("SELECT kubesvc_")
}

/// The first bytes of a statement's text, written without allocating and without reading
/// past them: a query's `Display` also prints its bind values, which stay unread.
struct Prefix {
    bytes: [u8; 16],
    len: usize,
}

impl Prefix {
    fn of<Q: std::fmt::Display + ?Sized>(query: &Q) -> Prefix {
        let mut prefix = Prefix {
            bytes: [0; 16],
            len: 0,
        };
        // Stops with an error once the buffer is full; what was written is what is wanted.
        let _ = write!(prefix, "{query}");
        prefix
    }

    fn as_str(&self) -> &str {
        let bytes = &self.bytes[..self.len];
        match std::str::from_utf8(bytes) {
            Ok(s) => s,
            // A multi-byte character cut at the end: keep the whole ones.
            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
        }
    }
}

impl std::fmt::Write for Prefix {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.bytes.len() - self.len;
        let n = s.len().min(room);
        self.bytes[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        if n < s.len() {
            Err(std::fmt::Error)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_statements_that_change_nothing_may_run_again() {
        for (sql, again) in [
            ("BEGIN", true),
            ("BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ", true),
            (
                "SELECT \"clusters\".\"id\" FROM \"clusters\" -- binds: []",
                true,
            ),
            ("  select 1", true),
            ("INSERT INTO \"idempotency_keys\" (…)", false),
            ("UPDATE operations SET state = 'done'", false),
            ("DELETE FROM \"idempotency_keys\"", false),
            ("WITH next AS (SELECT 1) UPDATE operations", false),
            ("COMMIT", false),
            ("SELECT kubesvc_create_cluster($1, $2)", false),
            ("SELECT kubesvc_is_dns_label($1)", false),
            ("SELEC", false),
            ("", false),
        ] {
            assert_eq!(changes_nothing(&Prefix::of(&sql)), again, "{sql:?}");
        }
    }

    #[test]
    fn the_prefix_keeps_at_most_its_size_and_whole_characters() {
        assert_eq!(Prefix::of(&"SELECT 1").as_str(), "SELECT 1");
        assert_eq!(
            Prefix::of(&"SELECT a_long_column FROM t").as_str(),
            "SELECT a_long_co"
        );
        // 15 ASCII bytes then a two-byte character cut in half.
        assert_eq!(Prefix::of(&"SELECT 12345678é").as_str(), "SELECT 12345678");
    }
}
