//! The storage ports of the domain on PostgreSQL: diesel on an r2d2 pool, the migrations
//! embedded and run at start, the durable operations queue, the idempotency keys, and the
//! change feed (a log table read by every process, and notifications sent after each commit)
//! that keeps the watch cache exact and wakes state long-polls across server processes.
//!
//! Diesel is synchronous: every call goes through [`PgStore::run_blocking`], which waits
//! (asynchronously) for one of `pool_size` permits and then runs the closure on tokio's blocking
//! pool, so no async worker ever blocks on the database and no more threads wait than there are
//! connections.

mod approvals;
mod audit;
mod auth_server_changes;
mod auth_servers;
mod change_log;
mod cluster_operations;
mod clusters;
mod create;
mod error;
mod feed;
mod gateway;
mod idempotency;
mod kubeconfig_credentials;
mod listener;
mod maintenance;
mod notifier;
mod operations;
mod partitions;
mod pool;
mod rows;
mod schema;
mod sealed_values;
mod sessions;
#[cfg(feature = "test-support")]
mod test_support;
mod watch_cache;

use std::sync::Arc;
use std::time::Duration;

use diesel::pg::PgConnection;
use diesel::r2d2::Pool;
use diesel::{Connection, RunQueryDsl};
use diesel_migrations::{EmbeddedMigrations, MigrationHarness, embed_migrations};
use domain::ports::storage::StoreError;
use tokio::sync::Semaphore;

pub use auth_server_changes::{
    APPLICATION_NAME as GATEWAY_LISTENER_APPLICATION_NAME, AuthServerChanges,
    SessionRevocationChanges,
};
pub use error::StoreSetupError;
pub use feed::{APPLICATION_NAME as CHANGE_FEED_APPLICATION_NAME, PgChangeFeed};
pub use notifier::APPLICATION_NAME as NOTIFIER_APPLICATION_NAME;
pub use sealed_values::{SealedColumn, SealedValue, TOKEN_DIGEST_KEY, VaultSetupError};
#[cfg(feature = "test-support")]
pub use test_support::TestDatabase;
pub use watch_cache::{CacheStats, CachedStore, PREFILL_BATCH, Prefilled};

/// The migrations of `/migrations`, compiled into the binary.
pub const MIGRATIONS: EmbeddedMigrations = embed_migrations!("../../migrations");

/// The NOTIFY channel of cluster changes, sent after each write commits; payload
/// `<cluster uuid>:<revision>:<organization uuid>:<created|removed|changed>`. The same changes
/// are in the table `cluster_change_log`, written by the writes themselves.
pub const CLUSTER_CHANNEL: &str = "cluster_changes";
/// The NOTIFY channel of auth-server changes; payload `<auth server uuid>`.
pub const AUTH_SERVER_CHANNEL: &str = "auth_server_changes";
/// The NOTIFY channel of sessions ended early (no payload: a gateway reads every record in
/// force again).
pub const SESSION_CHANNEL: &str = "session_revocations";

type PgPool = Pool<pool::PgManager>;

/// Where the store connects, and how its pooled connections may be used.
///
/// `url` carries every query of the pool and the notifier. Each of those is one statement or
/// one transaction and leaves nothing behind on its session, so `url` may lead to a pooler in
/// transaction mode (PgBouncer's `pool_mode = transaction`), which hands a server session to a
/// client for one transaction only. `direct_url` is for what needs one server session for
/// longer: the change feed's LISTEN (a notification goes to the session that listens; the caller
/// hands it to [`PgChangeFeed::start`] or [`AuthServerChanges::start`]), and the migrations.
#[derive(Clone)]
pub struct Database {
    /// The pool's and the notifier's connections.
    pub url: String,
    /// The migrations' connection (and, passed on by the caller, the LISTEN connections).
    pub direct_url: String,
    /// Whether each pooled connection keeps its statements prepared for the next use
    /// (diesel's statement cache): a query is then planned once per connection instead of at
    /// every call. Off behind a pooler that does not keep prepared statements across
    /// transactions (PgBouncer in transaction mode before 1.21, or with
    /// `max_prepared_statements = 0`): each statement is then sent with its text and run in
    /// one exchange (libpq's PQsendQueryParams, an unnamed statement), which any pooler passes.
    pub statement_cache: bool,
}

impl Database {
    /// Every connection to `url`, directly to PostgreSQL, statements cached.
    pub fn direct(url: &str) -> Database {
        Database {
            url: url.to_owned(),
            direct_url: url.to_owned(),
            statement_cache: true,
        }
    }
}

impl std::fmt::Debug for Database {
    // The URLs may hold a password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("separate_direct_url", &(self.url != self.direct_url))
            .field("statement_cache", &self.statement_cache)
            .finish_non_exhaustive()
    }
}

/// Runs every pending migration on the database at `url`, then converts the tables that only
/// grow to monthly partitions, all under one session-level advisory lock: processes starting
/// together do it once, one after the other. That lock, and the conversion's several
/// transactions, need one server session throughout: `url` must lead straight to PostgreSQL
/// (or to a pooler in session mode), never to a pooler in transaction mode, where the unlock
/// could reach another server session than the lock did and leave it held.
pub fn run_migrations(url: &str) -> Result<(), StoreSetupError> {
    let mut conn = PgConnection::establish(&with_connect_timeout(url, Duration::from_secs(10)))
        .map_err(|e| StoreSetupError::Connect(e.to_string()))?;
    // Serialises concurrent starts of several server processes on one database.
    diesel::sql_query("SELECT pg_advisory_lock(4242001)")
        .execute(&mut conn)
        .map_err(|e| StoreSetupError::Migrations(e.to_string()))?;
    let result = conn
        .run_pending_migrations(MIGRATIONS)
        .map(|done| done.len())
        .map_err(|e| StoreSetupError::Migrations(e.to_string()))
        .and_then(|n| {
            if n > 0 {
                tracing::info!(applied = n, "database migrations applied");
            }
            convert_to_partitions(&mut conn)
        });
    let _ = diesel::sql_query("SELECT pg_advisory_unlock(4242001)").execute(&mut conn);
    result
}

/// The tables that only grow, in monthly partitions (see `partitions`): converted once, in
/// steps that let writes go on, and their coming months made.
fn convert_to_partitions(conn: &mut PgConnection) -> Result<(), StoreSetupError> {
    for table in partitions::TABLES {
        let done = partitions::convert(conn, table).map_err(|e| {
            StoreSetupError::Migrations(format!(
                "converting {} to monthly partitions: {e}",
                table.table
            ))
        })?;
        if done.converted {
            tracing::info!(
                table = table.table,
                swap_retries = done.swap_retries,
                "table converted to monthly partitions"
            );
        }
    }
    Ok(())
}

/// Adds libpq's `connect_timeout` (whole seconds, at least 1) unless the URL sets one: without
/// it a connection attempt to an unreachable host hangs for as long as TCP does.
pub(crate) fn with_connect_timeout(url: &str, timeout: Duration) -> String {
    with_param(
        url,
        "connect_timeout",
        &timeout.as_secs().max(1).to_string(),
    )
}

/// Adds a libpq parameter the connection string does not set yet, to a URL
/// (`postgres://…?k=v`) or to a key/value string (`host=… k=v`).
pub(crate) fn with_param(url: &str, key: &str, value: &str) -> String {
    if url.contains(&format!("{key}=")) {
        return url.to_owned();
    }
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return format!("{url} {key}={value}");
    }
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{key}={value}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_parameters_are_added_once_in_the_strings_own_syntax() {
        let t = Duration::from_millis(2500);
        assert_eq!(
            with_connect_timeout("postgres://h/db", t),
            "postgres://h/db?connect_timeout=2"
        );
        assert_eq!(
            with_connect_timeout("postgres://h/db?a=b", t),
            "postgres://h/db?a=b&connect_timeout=2"
        );
        assert_eq!(
            with_connect_timeout("postgres://h/db?connect_timeout=9", t),
            "postgres://h/db?connect_timeout=9"
        );
        assert_eq!(
            with_connect_timeout("host=h dbname=db", t),
            "host=h dbname=db connect_timeout=2"
        );
    }
}

/// The PostgreSQL store: implements `ClusterRepository`, `IdempotencyStore`, `OperationQueue`
/// and `AuthServerRepository`. Cheap to clone.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    permits: Arc<Semaphore>,
    wait: Duration,
    notifier: notifier::Notifier,
    reachability: Arc<pool::Reachability>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = self.pool.state();
        f.debug_struct("PgStore")
            .field("connections", &state.connections)
            .field("idle", &state.idle_connections)
            .finish()
    }
}

impl PgStore {
    /// Runs the pending migrations, then opens a pool of at most `pool_size` connections, every
    /// one directly to `database_url` ([`Database::direct`]). `connect_timeout` bounds both
    /// opening a connection and waiting for a free one. Blocks: call it at start, before serving.
    pub fn connect(
        database_url: &str,
        pool_size: u32,
        connect_timeout: Duration,
    ) -> Result<PgStore, StoreSetupError> {
        Self::connect_to(&Database::direct(database_url), pool_size, connect_timeout)
    }

    /// As [`PgStore::connect`], the migrations on `database.direct_url`, the pool and the
    /// notifier on `database.url`.
    pub fn connect_to(
        database: &Database,
        pool_size: u32,
        connect_timeout: Duration,
    ) -> Result<PgStore, StoreSetupError> {
        Self::open(database, pool_size, connect_timeout, true)
    }

    /// As [`PgStore::connect`] without running migrations: for tools that must not change the
    /// schema as a side effect. Refuses a database that lacks migrations of this build.
    pub fn connect_migrated(
        database_url: &str,
        pool_size: u32,
        connect_timeout: Duration,
    ) -> Result<PgStore, StoreSetupError> {
        let mut conn =
            PgConnection::establish(&with_connect_timeout(database_url, connect_timeout))
                .map_err(|e| StoreSetupError::Connect(e.to_string()))?;
        match conn.has_pending_migration(MIGRATIONS) {
            Ok(false) => {}
            Ok(true) => return Err(StoreSetupError::Pending),
            Err(e) => return Err(StoreSetupError::Migrations(e.to_string())),
        }
        // No idle connection kept: r2d2 would open it on its own thread whenever the one in
        // use leaves none idle, and a short-lived tool that exits while libpq is connecting on
        // another thread can crash in the TLS library's exit handlers.
        Self::build(
            &Database::direct(database_url),
            pool_size,
            0,
            connect_timeout,
            true,
        )
    }

    /// As [`PgStore::connect`], without the checkout check: only the retry of
    /// [`PgStore::run_blocking`] stands between a dead connection and a request, which is what
    /// a test of that retry needs.
    #[cfg(feature = "test-support")]
    pub fn connect_without_checkout_check(
        database_url: &str,
        pool_size: u32,
        connect_timeout: Duration,
    ) -> Result<PgStore, StoreSetupError> {
        Self::open(
            &Database::direct(database_url),
            pool_size,
            connect_timeout,
            false,
        )
    }

    fn open(
        database: &Database,
        pool_size: u32,
        connect_timeout: Duration,
        check_on_checkout: bool,
    ) -> Result<PgStore, StoreSetupError> {
        run_migrations(&database.direct_url)?;
        Self::build(database, pool_size, 1, connect_timeout, check_on_checkout)
    }

    fn build(
        database: &Database,
        pool_size: u32,
        min_idle: u32,
        connect_timeout: Duration,
        check_on_checkout: bool,
    ) -> Result<PgStore, StoreSetupError> {
        let pool_size = pool_size.max(1);
        let manager = pool::PgManager::new(
            with_connect_timeout(&database.url, connect_timeout),
            database.statement_cache,
        );
        let reachability = Arc::new(pool::Reachability::default());
        let pool = Pool::builder()
            .max_size(pool_size)
            .min_idle(Some(min_idle))
            // No checkout waits on r2d2's own timeout (`pool::check_out` passes its own), so
            // this one only bounds how far apart r2d2's attempts to reconnect get (half of
            // it): while the database is away, one a second at least, so the service is back
            // within a second of a new primary accepting connections.
            .connection_timeout(2 * pool::RECONNECT_AT_MOST_EVERY)
            // A connection that died while idle (database restarted) is found and replaced on
            // checkout instead of failing the request that drew it. The check reads the
            // socket and sends nothing (see `pool`), so it costs no round trip.
            .test_on_check_out(check_on_checkout)
            .idle_timeout(Some(Duration::from_secs(300)))
            .error_handler(Box::new(pool::ConnectOutcomes(reachability.clone())))
            .event_handler(Box::new(pool::ConnectOutcomes(reachability.clone())))
            .build_unchecked(manager);
        // What `build` would do with the connect timeout: wait for the first connection, so
        // that a database that cannot be reached stops the start.
        if min_idle > 0 {
            pool::check_out(&pool, &reachability, connect_timeout)
                .map_err(|e| StoreSetupError::Connect(e.to_string()))?;
        }
        Ok(PgStore {
            pool,
            permits: Arc::new(Semaphore::new(pool_size as usize)),
            wait: connect_timeout,
            reachability,
            notifier: notifier::Notifier::start(&database.url),
        })
    }

    /// Ends the notifier's thread once it sent what is queued (blocking, at most a connect
    /// timeout): for a process about to exit. Every clone of this store stops notifying;
    /// the change feeds still read the change log. Blocks: call it off the async workers.
    pub fn close_notifier(&self) {
        self.notifier.close();
    }

    /// For `/readyz`: the database answers and every migration of this build is applied.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.run_blocking(|conn| {
            diesel::sql_query("SELECT 1")
                .execute(conn)
                .map_err(error::map)?;
            match conn.has_pending_migration(MIGRATIONS) {
                Ok(false) => Ok(()),
                Ok(true) => Err(StoreError::Unavailable(
                    "database migrations are pending".into(),
                )),
                Err(e) => Err(StoreError::Unavailable(format!(
                    "cannot read the migrations: {e}"
                ))),
            }
        })
        .await
    }

    /// `(connections, idle connections)` of the pool, for metrics.
    pub fn pool_state(&self) -> (u32, u32) {
        let s = self.pool.state();
        (s.connections, s.idle_connections)
    }

    /// Runs `f` with a pooled connection on tokio's blocking pool, carrying the caller's
    /// tracing span; re-raises a panic of `f` in the caller. Waiting for a connection happens
    /// on the async side (a semaphore as large as the pool), so waiters hold no thread.
    ///
    /// `f` runs a second time, on another connection, when its first statement met a
    /// connection already closed and could not have changed anything (see `pool`): a
    /// connection that died unseen costs no failed call.
    pub(crate) async fn run_blocking<T, F>(&self, mut f: F) -> Result<T, StoreError>
    where
        F: FnMut(&mut PgConnection) -> Result<T, StoreError> + Send + 'static,
        T: Send + 'static,
    {
        let permit =
            match tokio::time::timeout(self.wait, self.permits.clone().acquire_owned()).await {
                Ok(Ok(permit)) => permit,
                Ok(Err(_)) => {
                    return Err(StoreError::Internal(
                        "the store's semaphore was closed".into(),
                    ));
                }
                Err(_) => {
                    return Err(StoreError::Unavailable(
                        "no database connection free in time".into(),
                    ));
                }
            };
        let pool = self.pool.clone();
        let reachability = self.reachability.clone();
        let wait = self.wait;
        // The lines logged on the blocking thread carry the request's fields: its span, or the
        // request kept without one (`telemetry::scope`).
        let span = tracing::Span::current();
        let request = telemetry::scope::current();
        // A span per query at `debug` (off at `info`, where its cost is one check): the
        // store's function that ran, e.g. `clusters::cluster`.
        let query = tracing::debug_span!(parent: &span, "query", name = query_name::<F>());
        let task = tokio::task::spawn_blocking(move || {
            telemetry::scope::in_request(request, || {
                let _entered = span.enter();
                let _query = query.enter();
                let _permit = permit;
                let checkout = || {
                    let mut conn = pool::check_out(&pool, &reachability, wait)?;
                    pool::Watch::reset(&mut conn);
                    Ok::<_, StoreError>(conn)
                };
                let mut conn = checkout()?;
                match f(&mut conn) {
                    Err(StoreError::Unavailable(reason))
                        if pool::Watch::may_run_again(&mut conn) =>
                    {
                        tracing::debug!(%reason, "the connection was gone before the first statement; running again on another");
                        drop(conn);
                        f(&mut *checkout()?)
                    }
                    done => done,
                }
            })
        });
        match task.await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(StoreError::Internal(format!(
                "database task cancelled: {e}"
            ))),
        }
    }
}

/// The store function a query closure belongs to, from its type's name
/// (`store_postgres::clusters::<impl …>::cluster::{{closure}}` reads `clusters::cluster`).
fn query_name<F>() -> String {
    let full = std::any::type_name::<F>();
    let mut rest = full;
    while let Some(r) = rest.strip_suffix("::{{closure}}") {
        rest = r;
    }
    let function = rest.rsplit("::").next().unwrap_or(rest);
    let module = full
        .strip_prefix("store_postgres::")
        .and_then(|m| m.split("::").next())
        .unwrap_or("store");
    format!("{module}::{function}")
}

#[cfg(test)]
mod query_names {
    fn name_of<F>(_: &F) -> String {
        super::query_name::<F>()
    }

    #[test]
    fn a_query_is_named_by_its_module_and_function() {
        let query = |n: u8| n;
        assert_eq!(
            name_of(&query),
            "query_names::a_query_is_named_by_its_module_and_function"
        );
        let nested = || || 1;
        assert_eq!(
            name_of(&nested()),
            "query_names::a_query_is_named_by_its_module_and_function"
        );
    }
}

#[cfg(test)]
mod carried_request {
    use std::time::Duration;

    /// A request kept without a span (how the plain-text log keeps them) reaches the blocking
    /// thread that runs its query, so a line logged there carries the request's fields.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_query_runs_inside_the_request_it_serves() {
        let db = crate::TestDatabase::create();
        let store = crate::PgStore::connect(&db.url, 2, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{e}"));
        let seen = || {
            store.run_blocking(|_conn| {
                Ok(telemetry::scope::current().map(|r| r.request_id().to_owned()))
            })
        };
        let request = telemetry::scope::Request::new("GET", "/v1/a", "req-7", 1);
        let inside = request
            .serve(seen())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(inside.as_deref(), Some("req-7"));
        let outside = seen().await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(outside, None);
    }
}
