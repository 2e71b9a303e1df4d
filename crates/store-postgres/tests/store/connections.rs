//! How the store lives with connections that die: killed while idle (a database restart, an
//! operator's `pg_terminate_backend`), or a database that is gone.

use super::*;

/// Ends every other session of the test's database, as a restart would, and waits until they
/// are gone so the next call meets a closed socket rather than racing the kill.
fn terminate_other_sessions(db: &TestDatabase) {
    #[derive(diesel::QueryableByName)]
    struct Pid {
        #[diesel(sql_type = diesel::sql_types::Integer)]
        pid: i32,
    }
    let mut killer = raw(db);
    let killed: Vec<Pid> = diesel::sql_query(
        // In the select list, so it runs only on the rows the filter kept (in WHERE the
        // planner may call it before `pid <> pg_backend_pid()`, killing this session).
        "SELECT pid, pg_terminate_backend(pid) AS terminated FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .load(&mut killer)
    .unwrap();
    let pids = killed
        .iter()
        .map(|p| p.pid.to_string())
        .collect::<Vec<_>>()
        .join(",");
    if pids.is_empty() {
        return;
    }
    for _ in 0..500 {
        if count(
            &mut killer,
            &format!("pg_stat_activity WHERE pid IN ({pids})"),
        ) == 0
        {
            // A backend leaves pg_stat_activity before its process has exited and closed its
            // socket: give the kernel a moment, or the next call races the close instead of
            // meeting it (the checkout check then sees a socket with no end yet).
            std::thread::sleep(Duration::from_millis(100));
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("the terminated sessions did not end");
}

/// Every connection of the pool is killed (as by a database restart): the next calls work.
#[tokio::test]
async fn the_store_recovers_when_its_connections_are_killed() {
    let db = TestDatabase::create();
    let store = store(&db);
    let c = cluster(Uuid::new_v4(), "c1");
    insert(&store, &c).await.unwrap();
    store.ping().await.unwrap();
    for round in 0..3 {
        terminate_other_sessions(&db);
        let read = store.cluster(c.id, Freshness::Latest).await;
        assert!(matches!(read, Ok(Some(_))), "round {round}: {read:?}");
        terminate_other_sessions(&db);
        // A create is one autocommit call (kubesvc_create_cluster): only the checkout check
        // saves it.
        let created = insert(&store, &cluster(c.organization_id, &format!("r{round}"))).await;
        assert_eq!(created, Ok(1), "round {round}");
        terminate_other_sessions(&db);
        // An autocommit write as the first statement: only the checkout check saves it.
        let key = format!("key-of-round-{round}");
        let claimed = store
            .claim(claim_record(c.organization_id, &key, Uuid::new_v4(), now()))
            .await;
        assert_eq!(claimed, Ok(ClaimOutcome::Claimed), "round {round}");
        terminate_other_sessions(&db);
        store.ping().await.unwrap();
    }
    assert!(store.pool_state().0 >= 1);
}

/// With the checkout check off, a killed connection reaches the work itself: a read and a
/// transaction run again on another connection, an autocommit write (a create, a claim) is not
/// re-run (the server might have committed it) and fails as unavailable, and nothing is written
/// twice.
#[tokio::test]
async fn work_that_met_a_dead_connection_first_runs_again_only_if_it_changed_nothing() {
    let db = TestDatabase::create();
    let store =
        PgStore::connect_without_checkout_check(&db.url, 1, Duration::from_secs(5)).unwrap();
    let org = Uuid::new_v4();
    let c = cluster(org, "c1");
    insert(&store, &c).await.unwrap();

    terminate_other_sessions(&db);
    let read = store.cluster(c.id, Freshness::Latest).await;
    assert!(matches!(read, Ok(Some(_))), "a read: {read:?}");

    terminate_other_sessions(&db);
    let mut renamed = c.clone();
    renamed.name = label("c1-renamed");
    let changed = store
        .commit(write(c.id, Some(1), vec![Change::UpdateCluster(renamed)]))
        .await;
    assert_eq!(changed, Ok(2), "a transaction");

    terminate_other_sessions(&db);
    let created = insert(&store, &cluster(org, "c2")).await;
    assert!(
        matches!(created, Err(StoreError::Unavailable(_))),
        "a create: {created:?}"
    );
    // The pool opens the dead connection's replacement in the background: wait for it, so
    // that the kill below reaches it rather than racing its start.
    store.ping().await.unwrap();

    terminate_other_sessions(&db);
    let claimed = store
        .claim(claim_record(org, "key-of-the-write", Uuid::new_v4(), now()))
        .await;
    assert!(
        matches!(claimed, Err(StoreError::Unavailable(_))),
        "an autocommit write: {claimed:?}"
    );
    // The dead connection was dropped, not handed out again.
    store.ping().await.unwrap();
    let mut conn = raw(&db);
    assert_eq!(count(&mut conn, "clusters"), 1);
    assert_eq!(count(&mut conn, "clusters WHERE name = 'c1-renamed'"), 1);
    assert_eq!(count(&mut conn, "idempotency_keys"), 0);
}

#[tokio::test]
async fn an_unreachable_database_is_unavailable_not_internal() {
    let db = TestDatabase::create();
    let store = PgStore::connect(&db.url, 2, Duration::from_secs(2)).unwrap();
    drop(db); // DROP DATABASE … WITH (FORCE): every connection of the pool dies.
    match store.cluster(Uuid::new_v4(), Freshness::Latest).await {
        Err(StoreError::Unavailable(_)) => {}
        other => panic!("expected Unavailable, got {other:?}"),
    }
}
