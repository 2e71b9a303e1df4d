//! Data that only grows, stopped: the audit events and operations in monthly partitions (a
//! populated database converted at start, nothing lost, later writes landing in months,
//! retention dropping whole months) and ended kubeconfig credentials purged.

use super::*;
use diesel::connection::SimpleConnection;
use diesel_migrations::MigrationHarness;
use domain::ports::storage::{AuditLog, OperationLog};
use store_postgres::MIGRATIONS;

/// The partitions of `table`, by name.
fn partitions_of(conn: &mut PgConnection, table: &str) -> Vec<String> {
    #[derive(diesel::QueryableByName)]
    struct P {
        #[diesel(sql_type = diesel::sql_types::Text)]
        name: String,
    }
    diesel::sql_query(format!(
        "SELECT c.relname::text AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
         WHERE i.inhparent = '{table}'::regclass ORDER BY 1"
    ))
    .load::<P>(conn)
    .unwrap()
    .into_iter()
    .map(|p| p.name)
    .collect()
}

fn relkind(conn: &mut PgConnection, table: &str) -> String {
    #[derive(diesel::QueryableByName)]
    struct K {
        #[diesel(sql_type = diesel::sql_types::Text)]
        k: String,
    }
    diesel::sql_query(format!(
        "SELECT relkind::text AS k FROM pg_class WHERE oid = '{table}'::regclass"
    ))
    .get_result::<K>(conn)
    .unwrap()
    .k
}

/// `n` audit events of `org`, `days` days from now (negative: in the past).
fn events(conn: &mut PgConnection, org: Uuid, n: u32, days: i32) {
    conn.batch_execute(&format!(
        "INSERT INTO audit_events (id, organization_id, actor, action, details, at, resource) \
         SELECT gen_random_uuid(), '{org}', 'u-1', 'created', '{{}}', \
                now() + interval '{days} days', 'cluster' \
         FROM generate_series(1, {n})"
    ))
    .unwrap();
}

/// An operation of `cluster`, created `days` days from now, finished then unless `running`.
fn operation(conn: &mut PgConnection, cluster: &Cluster, days: i32, running: bool) {
    let (status, finished) = if running {
        ("running", "NULL".to_owned())
    } else {
        ("succeeded", format!("now() + interval '{days} days'"))
    };
    conn.batch_execute(&format!(
        "INSERT INTO cluster_operations (id, cluster_id, organization_id, kind, resource, \
             resource_id, requested_by, requested_by_client, generation, status, created_at, \
             updated_at, finished_at) \
         VALUES (gen_random_uuid(), '{}', '{}', 'create', 'cluster', '{}', 'u-1', 'api', 1, \
             '{status}', now() + interval '{days} days', now() + interval '{days} days', {finished})",
        cluster.id, cluster.organization_id, cluster.id
    ))
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_populated_database_is_converted_and_later_writes_land_in_months() {
    let db = TestDatabase::create_empty();
    let mut conn = raw(&db);
    // The schema of the release before partitions, with rows in it.
    conn.run_pending_migrations(MIGRATIONS).unwrap();
    assert_eq!(relkind(&mut conn, "audit_events"), "r");
    let org = Uuid::new_v4();
    events(&mut conn, org, 300, -400);
    events(&mut conn, org, 200, 0);
    let store = store(&db); // runs the start's conversion
    let c = cluster(org, "converted");
    insert(&store, &c).await.unwrap();
    operation(&mut conn, &c, -100, false);

    for table in ["audit_events", "cluster_operations"] {
        assert_eq!(relkind(&mut conn, table), "p", "{table} is partitioned");
        let parts = partitions_of(&mut conn, table);
        for part in [format!("{table}_legacy"), format!("{table}_default")] {
            assert!(parts.contains(&part), "{table}: {parts:?}");
        }
        let months = parts
            .iter()
            .filter(|p| p.starts_with(&format!("{table}_p")))
            .count();
        assert!(months >= 4, "{table} has its coming months: {parts:?}");
        assert!(
            !parts.iter().any(|p| p.ends_with("_partitioned")),
            "{parts:?}"
        );
        // Attaching reused the old table's indexes and foreign key instead of building more.
        for (what, of) in [
            ("indexes", "pg_index WHERE indrelid"),
            (
                "foreign keys",
                "pg_constraint WHERE contype = 'f' AND conrelid",
            ),
        ] {
            assert_eq!(
                count(&mut conn, &format!("{of} = '{table}_legacy'::regclass")),
                count(&mut conn, &format!("{of} = '{table}'::regclass")),
                "{table}: the legacy partition has as many {what} as its parent"
            );
        }
    }
    // Nothing lost, and the rows still read through the store.
    assert_eq!(count(&mut conn, "audit_events"), 500);
    assert_eq!(count(&mut conn, "audit_events_legacy"), 500);
    // Later writes go to their months, or far ahead to the default partition.
    events(&mut conn, org, 10, 95);
    events(&mut conn, org, 1, 3650);
    assert_eq!(count(&mut conn, "audit_events"), 511);
    assert_eq!(count(&mut conn, "audit_events_default"), 1);
    assert_eq!(count(&mut conn, "ONLY audit_events_legacy"), 500);
    // The primary key still refuses a second row with the same id and time.
    let dup = conn.batch_execute(
        "INSERT INTO audit_events SELECT * FROM audit_events WHERE at > now() + interval '90 days' \
         LIMIT 1",
    );
    assert!(dup.is_err(), "a duplicate event was accepted");
    // A second start finds the work done.
    drop(store);
    let again = super::store(&db);
    assert_eq!(count(&mut conn, "audit_events"), 511);
    drop(again);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_drops_whole_months_and_keeps_a_month_with_work_in_it() {
    let db = TestDatabase::create();
    let store = store(&db);
    let mut conn = raw(&db);
    let org = Uuid::new_v4();
    let c = cluster(org, "retained");
    insert(&store, &c).await.unwrap();
    let first_month = |conn: &mut PgConnection| {
        partitions_of(conn, "audit_events")
            .into_iter()
            .find(|p| p.starts_with("audit_events_p"))
            .unwrap()
    };
    let month = first_month(&mut conn);
    // The template's months start at most two months ahead: events and operations there.
    events(&mut conn, org, 50, 5);
    events(&mut conn, org, 40, 70);
    operation(&mut conn, &c, 70, true);
    operation(&mut conn, &c, 70, false);
    let before = count(&mut conn, "audit_events");

    // A cutoff four months ahead: everything but the default partition is old enough.
    let cutoff = Utc::now() + chrono::Duration::days(125);
    let purged = store.purge_audit_before(cutoff).await.unwrap();
    assert_eq!(purged as i64, before - count(&mut conn, "audit_events"));
    assert!(purged >= 90, "{purged} events purged");
    assert!(
        !partitions_of(&mut conn, "audit_events").contains(&month),
        "{month} was dropped whole"
    );
    assert!(partitions_of(&mut conn, "audit_events").contains(&"audit_events_default".into()));

    // A month holding a running operation stays, its finished ones with it.
    let ops = count(&mut conn, "cluster_operations");
    store.purge_finished_before(cutoff).await.unwrap();
    assert!(count(&mut conn, "cluster_operations WHERE status = 'running'") == 1);
    assert!(count(&mut conn, "cluster_operations") >= 2, "of {ops}");
    // Once it finished, the month goes.
    conn.batch_execute(
        "UPDATE cluster_operations SET status = 'succeeded', finished_at = updated_at \
         WHERE status = 'running'",
    )
    .unwrap();
    store.purge_finished_before(cutoff).await.unwrap();
    assert_eq!(
        count(
            &mut conn,
            "cluster_operations WHERE created_at > now() + interval '60 days'"
        ),
        0
    );
    // The coming months are made again where missing.
    store.ensure_partitions().await.unwrap();
    assert!(partitions_of(&mut conn, "audit_events").len() >= 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_that_ended_before_the_grace_are_purged_and_no_other() {
    let db = TestDatabase::create();
    let store = store(&db);
    let mut conn = raw(&db);
    let c = cluster(Uuid::new_v4(), "credentials");
    insert(&store, &c).await.unwrap();
    // (created, expires, revoked) in days from now.
    let credentials = [
        ("expired-long-ago", -90, -60, None),
        ("revoked-long-ago", -90, 300, Some(-45)),
        ("expired-lately", -20, -5, None),
        ("revoked-lately", -20, 300, Some(-2)),
        ("in-force", -1, 30, None),
    ];
    for (name, created, expires, revoked) in credentials {
        let revoked_at = revoked.map_or("NULL".to_owned(), |d| {
            format!("now() + interval '{d} days'")
        });
        let revoked_by = if revoked.is_some() { "'u-1'" } else { "NULL" };
        conn.batch_execute(&format!(
            "INSERT INTO kubeconfig_credentials (id, cluster_id, organization_id, token_digest, \
                 issued_to, issued_to_client, created_at, expires_at, revoked_at, revoked_by) \
             VALUES (gen_random_uuid(), '{}', '{}', '{name}', 'u-1', 'api', \
                 now() + interval '{created} days', now() + interval '{expires} days', \
                 {revoked_at}, {revoked_by})",
            c.id, c.organization_id
        ))
        .unwrap();
    }
    let purged = store
        .purge_credentials_ended_before(Utc::now() - chrono::Duration::days(30))
        .await
        .unwrap();
    assert_eq!(purged, 2);
    #[derive(diesel::QueryableByName)]
    struct D {
        #[diesel(sql_type = diesel::sql_types::Text)]
        token_digest: String,
    }
    let mut left: Vec<String> =
        diesel::sql_query("SELECT token_digest FROM kubeconfig_credentials ORDER BY token_digest")
            .load::<D>(&mut conn)
            .unwrap()
            .into_iter()
            .map(|d| d.token_digest)
            .collect();
    left.sort();
    assert_eq!(left, ["expired-lately", "in-force", "revoked-lately"]);
}
