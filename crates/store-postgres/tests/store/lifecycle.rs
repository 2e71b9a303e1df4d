//! Migrations and the change feed.

use super::*;
use diesel_migrations::MigrationHarness;
use domain::ports::storage::ChangeFeed;
use store_postgres::{MIGRATIONS, PgChangeFeed};

#[test]
fn migrations_run_up_down_and_up_again() {
    let db = TestDatabase::create_empty();
    store_postgres::run_migrations(&db.url).unwrap();
    let mut conn = raw(&db);
    let tables = |conn: &mut PgConnection| count(conn, "pg_tables WHERE schemaname = 'public'");
    let with_all = tables(&mut conn);
    assert!(with_all >= 11, "{with_all} tables");
    conn.revert_all_migrations(MIGRATIONS).unwrap();
    // Only diesel's own bookkeeping table is left.
    assert_eq!(tables(&mut conn), 1);
    assert_eq!(
        count(&mut conn, "pg_proc WHERE proname LIKE 'kubesvc_%'"),
        0
    );
    store_postgres::run_migrations(&db.url).unwrap();
    assert_eq!(tables(&mut conn), with_all);
    assert!(!conn.has_pending_migration(MIGRATIONS).unwrap());
}

/// A commit's NOTIFY wakes a long-poll waiting on that cluster (through the one LISTEN
/// connection), well before the wait's own timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_wakes_a_waiter_of_the_change_feed() {
    let db = TestDatabase::create();
    let store = store(&db);
    let feed = PgChangeFeed::start(&db.url, 1000);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !feed.is_listening() {
        assert!(
            std::time::Instant::now() < deadline,
            "the feed never listened"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let c = cluster(Uuid::new_v4(), "watched");
    insert(&store, &c).await.unwrap();
    let waiter = tokio::spawn({
        let feed = feed.clone();
        let store = store.clone();
        async move {
            // The long-poll loop of the domain: wait, re-read, until the revision moved.
            let deadline = std::time::Instant::now() + Duration::from_secs(120);
            loop {
                let (revision, _) = store.revision(c.id).await.unwrap().unwrap();
                if revision > 1 || std::time::Instant::now() > deadline {
                    return revision;
                }
                feed.wait(c.id, 1, Duration::from_secs(60)).await;
            }
        }
    });
    let mut next = c.clone();
    next.phase = ClusterPhase::Provisioning;
    store
        .commit(write(c.id, Some(1), vec![Change::UpdateCluster(next)]))
        .await
        .unwrap();
    assert_eq!(waiter.await.unwrap(), 2);
    // A wait for a revision the feed already saw returns at once.
    tokio::time::timeout(
        Duration::from_secs(60),
        feed.wait(c.id, 1, Duration::from_secs(3600)),
    )
    .await
    .expect("the feed remembers revision 2");
}

/// A process about to exit stops the feed: its thread ends (no libpq call left running while
/// the exit handlers run) and its session leaves the database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_feed_ends_its_thread_and_its_session() {
    let db = TestDatabase::create();
    let feed = PgChangeFeed::start(&db.url, 1000);
    let sessions = format!(
        "pg_stat_activity WHERE datname = '{}' AND application_name = '{}'",
        db.name,
        store_postgres::CHANGE_FEED_APPLICATION_NAME
    );
    let mut conn = raw(&db);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !feed.is_listening() || count(&mut conn, &sessions) != 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the feed never listened"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let stopping = feed.clone();
    tokio::task::spawn_blocking(move || stopping.stop())
        .await
        .unwrap();
    assert!(!feed.is_listening());
    // A backend leaves pg_stat_activity a moment after its client closed the socket.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while count(&mut conn, &sessions) != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the feed's session stayed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Stopping again (another clone, say) is nothing more.
    tokio::task::spawn_blocking(move || feed.stop())
        .await
        .unwrap();
}

/// The LISTEN connection is killed: the feed reconnects by itself and wakes its waiters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_change_feed_reconnects_and_wakes_every_waiter() {
    let db = TestDatabase::create();
    let feed = PgChangeFeed::start(&db.url, 1000);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !feed.is_listening() {
        assert!(
            std::time::Instant::now() < deadline,
            "the feed never listened"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let waiter = tokio::spawn({
        let feed = feed.clone();
        async move {
            feed.wait(Uuid::new_v4(), 0, Duration::from_secs(3600))
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut killer = raw(&db);
    diesel::sql_query(format!(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = '{}'",
        store_postgres::CHANGE_FEED_APPLICATION_NAME
    ))
    .execute(&mut killer)
    .unwrap();
    tokio::time::timeout(Duration::from_secs(120), waiter)
        .await
        .expect("woken after the reconnect")
        .unwrap();
    assert!(
        feed.is_listening(),
        "woken by the reconnect, so listening again"
    );
}
