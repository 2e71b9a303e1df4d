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
//!
//! While the database takes no new connections (it is down, or a failover has no primary yet),
//! [`check_out`] answers at once instead of waiting for a connection that is not coming: see
//! [`Reachability`].

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use diesel::Connection as _;
use diesel::connection::{CacheSize, Instrumentation, InstrumentationEvent};
use diesel::pg::PgConnection;
use diesel::r2d2::{ConnectionManager, ManageConnection, Pool, PooledConnection};
use domain::ports::storage::StoreError;

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

/// Whether the database takes new connections, as the pool's own connection attempts found
/// last. A failed attempt sets "unreachable"; only a connection made clears it.
///
/// r2d2 keeps trying in the background after a failure (its delay doubles up to
/// [`RECONNECT_AT_MOST_EVERY`]), and a request that finds no idle connection waits for
/// one of those attempts to succeed: `Pool::get` is woken by a connection made, never by an
/// attempt that failed, so during an outage it waits its whole timeout (5 s) for a 503. A
/// window of "failed a moment ago" does not cure that: it lapses between two background
/// attempts once they are seconds apart. The state here does not lapse: as long as the last
/// attempt failed, a checkout takes an idle connection if one is there and otherwise answers
/// at once; requests never connect themselves, and r2d2's retries (one always follows a
/// failure) are what find the database back.
#[derive(Debug, Default)]
pub(crate) struct Reachability {
    unreachable: AtomicBool,
}

impl Reachability {
    pub(crate) fn unreachable(&self) -> bool {
        self.unreachable.load(Ordering::Acquire)
    }

    fn failed(&self) {
        self.unreachable.store(true, Ordering::Release);
    }

    fn reached(&self) {
        self.unreachable.store(false, Ordering::Release);
    }
}

/// r2d2's hooks on its connection attempts, recording their outcome in [`Reachability`] and
/// logging failures through tracing (r2d2 would print them through `log`).
#[derive(Debug)]
pub(crate) struct ConnectOutcomes(pub(crate) Arc<Reachability>);

impl diesel::r2d2::HandleError<diesel::r2d2::Error> for ConnectOutcomes {
    fn handle_error(&self, error: diesel::r2d2::Error) {
        // Two kinds come here: an attempt to connect that failed, and an idle connection the
        // checkout check found closed (`is_valid`, a query error). Only the first says the
        // database takes no connections; one session ended (`pg_terminate_backend`) does not.
        // Nor does an attempt whose new session was ended during its start-up (the server
        // answered, then an administrator's termination, or a restart's, took the session):
        // the next attempt follows within a second, and a refused one marks the database
        // away then.
        if let diesel::r2d2::Error::ConnectionError(e) = &error
            && !ended_while_starting(&e.to_string())
        {
            self.0.failed();
        }
        tracing::warn!(%error, "database connection failed");
    }
}

/// Whether a failed connection attempt reached a server that then ended the session.
fn ended_while_starting(message: &str) -> bool {
    message.contains("terminating connection due to administrator command")
        || message.contains("server closed the connection unexpectedly")
}

impl diesel::r2d2::HandleEvent for ConnectOutcomes {
    /// A connection was made (r2d2 calls this for each one it opens).
    fn handle_acquire(&self, _: diesel::r2d2::event::AcquireEvent) {
        self.0.reached();
    }
}

/// The longest r2d2 waits between two attempts to connect while they fail (its delay doubles
/// from 0.4 s up to half its connection timeout, which `PgStore` sets from this).
pub(crate) const RECONNECT_AT_MOST_EVERY: Duration = Duration::from_secs(1);

/// How often a checkout waiting for a new connection looks whether an attempt failed
/// meanwhile: r2d2 wakes it only when a connection is made.
const WAIT_SLICE: Duration = Duration::from_millis(50);

/// A connection of the pool, waiting at most `wait` for one to be made, and answering
/// `Unavailable` at once while the database cannot be reached and none is idle.
pub(crate) fn check_out(
    pool: &Pool<PgManager>,
    reachability: &Reachability,
    wait: Duration,
) -> Result<PooledConnection<PgManager>, StoreError> {
    let deadline = Instant::now() + wait;
    loop {
        if reachability.unreachable() {
            return pool.try_get().ok_or_else(|| {
                StoreError::Unavailable(
                    "the database cannot be reached; the pool keeps trying to connect".into(),
                )
            });
        }
        let left = deadline.saturating_duration_since(Instant::now());
        match pool.get_timeout(left.min(WAIT_SLICE)) {
            Ok(conn) => return Ok(conn),
            Err(e) if left <= WAIT_SLICE => {
                return Err(StoreError::Unavailable(format!(
                    "no database connection: {e}"
                )));
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP relay from a port of its own to `to`, started when the test says: the database
    /// "comes back" on an address the pool already tried in vain.
    struct Relay {
        port: u16,
    }

    impl Relay {
        fn reserve() -> Relay {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .unwrap_or_else(|e| panic!("no free port: {e}"));
            Relay { port }
        }

        fn open(&self, to: String) {
            let listener = std::net::TcpListener::bind(("127.0.0.1", self.port))
                .unwrap_or_else(|e| panic!("bind {}: {e}", self.port));
            std::thread::spawn(move || {
                for client in listener.incoming().flatten() {
                    let Ok(server) = std::net::TcpStream::connect(&to) else {
                        continue;
                    };
                    let (Ok(mut c2), Ok(mut s2)) = (client.try_clone(), server.try_clone()) else {
                        continue;
                    };
                    let (mut c, mut s) = (client, server);
                    std::thread::spawn(move || std::io::copy(&mut c, &mut s));
                    std::thread::spawn(move || std::io::copy(&mut s2, &mut c2));
                }
            });
        }
    }

    /// The test server's address (`TEST_DATABASE_URL`'s host and port) and its URL with
    /// that address replaced by `port` on loopback.
    fn database_through(port: u16) -> (String, String) {
        let url = std::env::var("TEST_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
        let Some((scheme, rest)) = url.split_once("://") else {
            panic!("TEST_DATABASE_URL is not a URL: {url}");
        };
        let (user, rest) = rest.rsplit_once('@').map_or(("", rest), |(u, r)| (u, r));
        let (address, path) = rest.split_once('/').unwrap_or((rest, "postgres"));
        let address = if address.contains(':') {
            address.to_owned()
        } else {
            format!("{address}:5432")
        };
        let at = if user.is_empty() {
            String::new()
        } else {
            format!("{user}@")
        };
        let through = format!("{scheme}://{at}127.0.0.1:{port}/{path}");
        (address, crate::with_param(&through, "sslmode", "disable"))
    }

    #[test]
    fn while_connections_fail_a_checkout_answers_at_once_and_serves_once_one_is_made() {
        let relay = Relay::reserve();
        let (address, url) = database_through(relay.port);
        let reachability = Arc::new(Reachability::default());
        // A wait far longer than the bound below: answering within the bound is only possible
        // by not waiting for a connection at all.
        let wait = Duration::from_secs(30);
        let pool = Pool::builder()
            .max_size(2)
            .min_idle(Some(0))
            .connection_timeout(2 * RECONNECT_AT_MOST_EVERY)
            .test_on_check_out(true)
            .error_handler(Box::new(ConnectOutcomes(reachability.clone())))
            .event_handler(Box::new(ConnectOutcomes(reachability.clone())))
            .build_unchecked(PgManager::new(
                crate::with_connect_timeout(&url, wait),
                true,
            ));

        // Nothing listens: the first checkout starts an attempt, which is refused.
        let started = Instant::now();
        let Err(StoreError::Unavailable(reason)) = check_out(&pool, &reachability, wait) else {
            panic!("a checkout with nothing listening succeeded");
        };
        assert!(reason.contains("cannot be reached"), "{reason}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the checkout waited {:?} for its answer",
            started.elapsed()
        );
        assert!(reachability.unreachable());
        // The next ones do not even wait for an attempt of their own.
        for _ in 0..3 {
            let started = Instant::now();
            assert!(check_out(&pool, &reachability, wait).is_err());
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "{:?}",
                started.elapsed()
            );
        }

        // The database comes back: r2d2's next background attempt gets through and the pool
        // serves again, with no checkout having connected itself.
        relay.open(address);
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut conn = loop {
            match check_out(&pool, &reachability, wait) {
                Ok(conn) => break conn,
                Err(e) => assert!(Instant::now() < deadline, "never served again: {e:?}"),
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(!reachability.unreachable());
        use diesel::RunQueryDsl as _;
        diesel::sql_query("SELECT 1")
            .execute(&mut *conn)
            .unwrap_or_else(|e| panic!("a query on the connection: {e}"));
    }

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
