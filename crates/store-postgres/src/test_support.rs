//! `TestDatabase`: a fresh database per test, cloned from a template migrated once per set of
//! migrations, so tests run in parallel (each with its own NOTIFY channels) and start fast.
//! Only databases named `kubesvc_test_*` and `kubesvc_tpl_*` are ever created or dropped.

use std::sync::OnceLock;

use diesel::pg::PgConnection;
use diesel::{Connection, RunQueryDsl};
use sha2::{Digest, Sha256};
use uuid::Uuid;

const DEFAULT_SERVER_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// Serialises template builds across test processes (nextest runs one per test).
const TEMPLATE_LOCK: i64 = 4_242_002;

/// A database of its own for one test; dropped (with `FORCE`) when this value is dropped.
#[derive(Debug)]
pub struct TestDatabase {
    /// The URL of the test's database.
    pub url: String,
    /// Its name: `kubesvc_test_<uuid>`.
    pub name: String,
    server_url: String,
}

/// `TEST_DATABASE_URL`, without TLS unless it asks for it. A test process ends while the
/// threads of the servers it started still reconnect to a database just dropped (the pool, the
/// change feed); over TLS such a thread can be inside the TLS library when the process's exit
/// handlers tear that library down, and the process dies of SIGSEGV or SIGABRT after its test
/// passed (CI saw two in one run). The tests are about the service, not PostgreSQL's TLS.
fn server_url() -> String {
    let url = std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| DEFAULT_SERVER_URL.to_owned());
    crate::with_param(&url, "sslmode", "disable")
}

/// The server URL with another database name (the path of the URL, before any query).
fn url_of(server_url: &str, database: &str) -> String {
    let (base, query) = match server_url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (server_url, None),
    };
    let authority_end = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_end..].find('/') {
        Some(slash) => &base[..authority_end + slash],
        None => base,
    };
    match query {
        Some(q) => format!("{base}/{database}?{q}"),
        None => format!("{base}/{database}"),
    }
}

/// Hash of every migration's SQL, so a changed migration gets a template of its own.
fn migrations_hash() -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../migrations");
    let mut files: Vec<_> = walk(&dir);
    files.sort();
    let mut hasher = Sha256::new();
    for f in files {
        hasher.update(f.to_string_lossy().as_bytes());
        hasher.update(std::fs::read(&f).unwrap_or_default());
    }
    hasher
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| {
            let p = e.path();
            if p.is_dir() { walk(&p) } else { vec![p] }
        })
        .collect()
}

fn admin(server_url: &str) -> PgConnection {
    PgConnection::establish(server_url).unwrap_or_else(|e| {
        panic!("cannot connect to the test PostgreSQL server (TEST_DATABASE_URL): {e}")
    })
}

fn exec(conn: &mut PgConnection, sql: &str) {
    diesel::sql_query(sql)
        .execute(conn)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

fn database_exists(conn: &mut PgConnection, name: &str) -> bool {
    use diesel::sql_types::{BigInt, Text};
    #[derive(diesel::QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }
    let found: Count =
        diesel::sql_query("SELECT count(*) AS n FROM pg_database WHERE datname = $1")
            .bind::<Text, _>(name)
            .get_result(conn)
            .unwrap_or_else(|e| panic!("cannot read pg_database: {e}"));
    found.n > 0
}

/// The migrated template's name, built once per process and shared by every process that
/// runs the same migrations.
fn template(server_url: &str) -> &'static str {
    static TEMPLATE: OnceLock<String> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let name = format!("kubesvc_tpl_{}", migrations_hash());
        let mut conn = admin(server_url);
        exec(
            &mut conn,
            &format!("SELECT pg_advisory_lock({TEMPLATE_LOCK})"),
        );
        if !database_exists(&mut conn, &name) {
            // Built under another name and renamed when complete, so a process that died
            // half-way never leaves a half-migrated template behind.
            let building = format!("{name}_building");
            exec(
                &mut conn,
                &format!("DROP DATABASE IF EXISTS {building} WITH (FORCE)"),
            );
            exec(&mut conn, &format!("CREATE DATABASE {building}"));
            crate::run_migrations(&url_of(server_url, &building))
                .unwrap_or_else(|e| panic!("migrating the template database: {e}"));
            exec(
                &mut conn,
                &format!("ALTER DATABASE {building} RENAME TO {name}"),
            );
        }
        exec(
            &mut conn,
            &format!("SELECT pg_advisory_unlock({TEMPLATE_LOCK})"),
        );
        name
    })
}

impl TestDatabase {
    /// A new, migrated, empty database. Blocks for a few tens of milliseconds; fine to call
    /// from `#[tokio::test]`. Panics when the server cannot be reached: a test cannot run.
    pub fn create() -> TestDatabase {
        let server_url = server_url();
        let template = template(&server_url);
        let name = format!("kubesvc_test_{}", Uuid::new_v4().simple());
        let mut conn = admin(&server_url);
        exec(
            &mut conn,
            &format!("CREATE DATABASE {name} TEMPLATE {template}"),
        );
        TestDatabase {
            url: url_of(&server_url, &name),
            name,
            server_url,
        }
    }

    /// Ends the sessions on this database whose `application_name` is `name` (as an operator's
    /// `pg_terminate_backend` or a lost network would) and waits until they are gone; returns
    /// how many there were.
    pub fn terminate_sessions_of(&self, name: &str) -> usize {
        #[derive(diesel::QueryableByName)]
        struct Pid {
            #[diesel(sql_type = diesel::sql_types::Integer)]
            pid: i32,
        }
        let mut conn = admin(&self.server_url);
        let pids: Vec<Pid> = diesel::sql_query(
            "SELECT pid, pg_terminate_backend(pid) AS terminated FROM pg_stat_activity \
             WHERE datname = $1 AND application_name = $2",
        )
        .bind::<diesel::sql_types::Text, _>(&self.name)
        .bind::<diesel::sql_types::Text, _>(name)
        .load(&mut conn)
        .unwrap_or_else(|e| panic!("terminate {name}: {e}"));
        let pids: Vec<i32> = pids.into_iter().map(|p| p.pid).collect();
        for _ in 0..500 {
            #[derive(diesel::QueryableByName)]
            struct Left {
                #[diesel(sql_type = diesel::sql_types::BigInt)]
                n: i64,
            }
            let left: Left =
                diesel::sql_query("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ANY($1)")
                    .bind::<diesel::sql_types::Array<diesel::sql_types::Integer>, _>(&pids)
                    .get_result(&mut conn)
                    .unwrap_or_else(|e| panic!("{e}"));
            if left.n == 0 {
                return pids.len();
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        panic!("the sessions of {name} did not end");
    }

    /// How many sessions on this database have `application_name` `name`.
    pub fn sessions_of(&self, name: &str) -> usize {
        #[derive(diesel::QueryableByName)]
        struct Count {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let counted: Count = diesel::sql_query(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = $2",
        )
        .bind::<diesel::sql_types::Text, _>(&self.name)
        .bind::<diesel::sql_types::Text, _>(name)
        .get_result(&mut admin(&self.server_url))
        .unwrap_or_else(|e| panic!("count {name}: {e}"));
        usize::try_from(counted.n).unwrap_or(0)
    }

    /// A new database with nothing in it, not even the migrations (for migration tests).
    pub fn create_empty() -> TestDatabase {
        let server_url = server_url();
        let name = format!("kubesvc_test_{}", Uuid::new_v4().simple());
        let mut conn = admin(&server_url);
        exec(&mut conn, &format!("CREATE DATABASE {name}"));
        TestDatabase {
            url: url_of(&server_url, &name),
            name,
            server_url,
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if !self.name.starts_with("kubesvc_test_") {
            return;
        }
        match PgConnection::establish(&self.server_url) {
            Ok(mut conn) => {
                let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
                if let Err(e) = diesel::sql_query(&sql).execute(&mut conn) {
                    eprintln!("cannot drop test database {}: {e}", self.name);
                }
            }
            Err(e) => eprintln!("cannot drop test database {}: {e}", self.name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::url_of;

    #[test]
    fn url_of_swaps_only_the_database_name() {
        assert_eq!(
            url_of("postgres://u@h:5432/postgres", "x"),
            "postgres://u@h:5432/x"
        );
        assert_eq!(url_of("postgres://u@h:5432", "x"), "postgres://u@h:5432/x");
        assert_eq!(
            url_of("postgres://u@h/db?sslmode=disable", "x"),
            "postgres://u@h/x?sslmode=disable"
        );
    }
}
