//! `server --migrate`, what a deployment's migration Job runs: it brings an empty database to
//! the current schema, again is a no-op, and without DATABASE_URL it says so.

use super::*;

fn migrate(database_url: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new(blackbox::process::server_bin());
    cmd.env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .arg("--migrate");
    if let Some(url) = database_url {
        cmd.env("DATABASE_URL", url);
    }
    cmd.output().expect("the server binary runs")
}

#[test]
fn migrate_brings_an_empty_database_to_the_schema_and_again_changes_nothing() {
    let db = store_postgres::TestDatabase::create_empty();
    let migrations = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations"))
        .unwrap()
        .filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir()))
        .count() as i64;
    let applied = "SELECT count(*) AS n FROM __diesel_schema_migrations";
    for run in ["first", "second"] {
        let out = migrate(Some(&db.url));
        assert!(
            out.status.success(),
            "{run}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stdout).contains("schema is current"));
        assert_eq!(count(&db.url, applied), migrations, "{run}");
    }
    assert_eq!(count(&db.url, "SELECT count(*) AS n FROM clusters"), 0);
    let missing = migrate(None);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("DATABASE_URL"));
}
