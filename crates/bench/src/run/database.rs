//! The run's own databases on the admin URL's server: `kubesvc_bench_<run>` (the service's) and
//! `kubesvc_bench_<run>_pgbench` (pgbench's scratch). Only names of that shape are ever created
//! or dropped, and every one created is dropped at the end, whatever happened.

use std::sync::Mutex;

use anyhow::{Context, bail};
use diesel::pg::PgConnection;
use diesel::sql_types::Text;
use diesel::{Connection, QueryableByName, RunQueryDsl};

/// `url` with its database (the path) replaced by `db`; the query string is kept.
pub fn with_database(url: &str, db: &str) -> anyhow::Result<String> {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base
        .find("://")
        .with_context(|| "the admin URL must be a postgres:// URL")?
        + 3;
    let authority_end = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| scheme_end + i);
    let mut out = format!("{}/{db}", &base[..authority_end]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    Ok(out)
}

/// Whether `name` is one of the run databases' names (so one this program may drop).
pub fn is_bench_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("kubesvc_bench_") else {
        return false;
    };
    let run = rest.strip_suffix("_pgbench").unwrap_or(rest);
    !run.is_empty() && run.chars().all(|c| c.is_ascii_hexdigit())
}

#[derive(QueryableByName)]
struct TextRow {
    #[diesel(sql_type = Text)]
    value: String,
}

async fn on<T: Send + 'static>(
    url: String,
    f: impl FnOnce(&mut PgConnection) -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(move || {
        let mut conn = PgConnection::establish(&url).context("connecting to PostgreSQL")?;
        f(&mut conn)
    })
    .await
    .context("database task")?
}

/// The databases of one run, on the server of `admin_url`.
#[derive(Debug)]
pub struct Databases {
    admin_url: String,
    run_id: String,
    created: Mutex<Vec<String>>,
}

impl Databases {
    pub fn new(admin_url: &str, run_id: &str) -> Databases {
        Databases {
            admin_url: admin_url.to_owned(),
            run_id: run_id.to_owned(),
            created: Mutex::new(Vec::new()),
        }
    }

    /// `kubesvc_bench_<run>` plus `suffix`.
    pub fn name(&self, suffix: &str) -> String {
        format!("kubesvc_bench_{}{suffix}", self.run_id)
    }

    /// Creates the database `name` (one of [`Databases::name`]'s) and returns its URL.
    pub async fn create(&self, name: &str) -> anyhow::Result<String> {
        if !is_bench_name(name) {
            bail!("{name} is not a bench database name");
        }
        let sql = format!("CREATE DATABASE {name}");
        on(self.admin_url.clone(), move |c| {
            diesel::sql_query(sql).execute(c)?;
            Ok(())
        })
        .await
        .with_context(|| format!("creating the database {name}"))?;
        if let Ok(mut created) = self.created.lock() {
            created.push(name.to_owned());
        }
        with_database(&self.admin_url, name)
    }

    /// Drops a database this run created; sessions still on it are ended.
    pub async fn drop(&self, name: &str) -> anyhow::Result<()> {
        let mine = self
            .created
            .lock()
            .map(|c| c.iter().any(|n| n == name))
            .unwrap_or(false);
        if !mine || !is_bench_name(name) {
            bail!("{name} was not created by this run: not dropping it");
        }
        let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
        on(self.admin_url.clone(), move |c| {
            diesel::sql_query(sql).execute(c)?;
            Ok(())
        })
        .await
        .with_context(|| format!("dropping the database {name}"))?;
        if let Ok(mut created) = self.created.lock() {
            created.retain(|n| n != name);
        }
        Ok(())
    }

    /// Drops every database this run created and still has.
    pub async fn drop_all(&self) -> anyhow::Result<()> {
        let names = self.created.lock().map(|c| c.clone()).unwrap_or_default();
        let mut failed = Vec::new();
        for name in names {
            if let Err(e) = self.drop(&name).await {
                failed.push(format!("{e:#}"));
            }
        }
        if !failed.is_empty() {
            bail!("{}", failed.join("; "));
        }
        Ok(())
    }

    /// The server's version (`SHOW server_version`).
    pub async fn server_version(&self) -> anyhow::Result<String> {
        on(self.admin_url.clone(), |c| {
            let row: TextRow =
                diesel::sql_query("SELECT current_setting('server_version') AS value")
                    .get_result(c)?;
            Ok(row.value)
        })
        .await
    }
}

/// `ANALYZE` of the database at `url`, so the planner knows the seeded tables' sizes.
pub async fn analyze(url: &str) -> anyhow::Result<()> {
    on(url.to_owned(), |c| {
        diesel::sql_query("ANALYZE").execute(c)?;
        Ok(())
    })
    .await
    .context("ANALYZE")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn replaces_only_the_database() {
        let admin = "postgres://postgres@127.0.0.1:5432/postgres";
        assert_eq!(
            with_database(admin, "kubesvc_bench_ab").unwrap(),
            "postgres://postgres@127.0.0.1:5432/kubesvc_bench_ab"
        );
        assert_eq!(
            with_database("postgres://u:p@h:1/db?sslmode=disable", "x").unwrap(),
            "postgres://u:p@h:1/x?sslmode=disable"
        );
        assert_eq!(
            with_database("postgres://h:1", "x").unwrap(),
            "postgres://h:1/x"
        );
        assert!(with_database("host=h dbname=x", "y").is_err());
    }

    #[test]
    fn only_run_names_may_be_dropped() {
        assert!(is_bench_name("kubesvc_bench_0a1b2c"));
        assert!(is_bench_name("kubesvc_bench_0a1b2c_pgbench"));
        for other in [
            "postgres",
            "kubesvc_dev",
            "kubesvc_bench_",
            "kubesvc_bench_x; DROP",
            "kubesvc_test_0a1b",
        ] {
            assert!(!is_bench_name(other), "{other}");
        }
        let dbs = Databases::new("postgres://h/postgres", "0a1b");
        assert_eq!(dbs.name(""), "kubesvc_bench_0a1b");
        assert_eq!(dbs.name("_pgbench"), "kubesvc_bench_0a1b_pgbench");
    }
}
