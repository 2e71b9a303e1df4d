//! The watch cache through two "processes" (each its own pool, change feed and cache) on one
//! database: the consistency model of `Freshness::Recent`, end to end.

use super::*;
use domain::ports::storage::{Page, PageRequest};
use store_postgres::{CHANGE_FEED_APPLICATION_NAME, CachedStore, PgChangeFeed};

struct Process {
    cache: CachedStore,
    feed: PgChangeFeed,
}

async fn process(db: &TestDatabase) -> Process {
    let feed = PgChangeFeed::start(&db.url, 1000);
    let cache = CachedStore::new(store(db), &feed);
    eventually("the feed listens", || async { feed.is_listening() }).await;
    Process { cache, feed }
}

/// Waits for `ready`, failing after a minute (never a timing assertion: only a hang guard).
async fn eventually<F, Fut>(what: &str, ready: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !ready().await {
        assert!(std::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn recent(p: &Process, id: Uuid) -> Cluster {
    p.cache
        .cluster(id, Freshness::Recent)
        .await
        .unwrap()
        .unwrap()
}

async fn describe(p: &Process, c: &Cluster, text: &str) -> i64 {
    let changed = Cluster {
        description: Some(text.into()),
        ..c.clone()
    };
    p.cache
        .commit(write(
            c.id,
            Some(c.revision),
            vec![Change::UpdateCluster(changed)],
        ))
        .await
        .unwrap()
}

fn in_zone(org: Uuid, name: &str, zone: &str) -> Cluster {
    Cluster {
        zone: zone.into(),
        ..cluster(org, name)
    }
}

async fn list(
    p: &Process,
    org: Uuid,
    zone: Option<&str>,
    page: u32,
    f: Freshness,
) -> Page<Cluster> {
    let page = PageRequest { page, size: 3 };
    p.cache
        .list_clusters(org, zone.map(str::to_owned), page, f)
        .await
        .unwrap()
}

/// Every page, in every zone and each zone, answered from memory as the database answers it.
async fn lists_match_the_database(p: &Process, org: Uuid) {
    for zone in [None, Some("zone-1"), Some("zone-2"), Some("zone-9")] {
        for page in 1..=4 {
            let from_memory = list(p, org, zone, page, Freshness::Recent).await;
            let from_db = list(p, org, zone, page, Freshness::Latest).await;
            assert_eq!(from_memory, from_db, "zone {zone:?}, page {page}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_writes_show_at_once_and_reads_are_then_served_from_memory() {
    let db = TestDatabase::create();
    let p = process(&db).await;
    let c = cluster(Uuid::new_v4(), "mine");
    p.cache
        .commit(write(c.id, None, vec![Change::InsertCluster(c.clone())]))
        .await
        .unwrap();
    let mut current = recent(&p, c.id).await;
    let hits = p.cache.stats().hits;
    assert_eq!(recent(&p, c.id).await, current);
    assert_eq!(p.cache.stats().hits, hits + 1, "the second read is a hit");
    for n in 0..20 {
        let text = format!("change {n}");
        let revision = describe(&p, &current, &text).await;
        current = recent(&p, c.id).await;
        assert_eq!(
            (current.revision, current.description.as_deref()),
            (revision, Some(text.as_str()))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_process_write_shows_once_notified_and_at_once_without_the_cache() {
    let db = TestDatabase::create();
    let (p, q) = (process(&db).await, process(&db).await);
    let c = cluster(Uuid::new_v4(), "shared");
    insert(&store(&db), &c).await.unwrap();
    let cached = recent(&p, c.id).await;
    let revision = describe(&q, &cached, "changed by q").await;
    let latest = p
        .cache
        .cluster(c.id, Freshness::Latest)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(latest.revision, revision);
    eventually("p's cache shows q's write", || async {
        recent(&p, c.id).await.revision == revision
    })
    .await;
    assert_eq!(recent(&p, c.id).await, latest);
}

/// The feed's connection is killed, and a write lands that no notification announces: when
/// the feed is back, the cache must have forgotten what it held, or it would hide the
/// write for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_the_feed_missed_while_its_connection_was_down_is_never_hidden() {
    let db = TestDatabase::create();
    let p = process(&db).await;
    let c = cluster(Uuid::new_v4(), "behind");
    insert(&store(&db), &c).await.unwrap();
    assert_eq!(recent(&p, c.id).await.revision, 1);
    let listener_pid = |conn: &mut PgConnection| -> Vec<i32> {
        #[derive(diesel::QueryableByName)]
        struct Pid {
            #[diesel(sql_type = diesel::sql_types::Integer)]
            pid: i32,
        }
        diesel::sql_query(format!(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
             AND application_name = '{CHANGE_FEED_APPLICATION_NAME}'"
        ))
        .load::<Pid>(conn)
        .unwrap()
        .into_iter()
        .map(|p| p.pid)
        .collect()
    };
    let mut conn = raw(&db);
    let before = listener_pid(&mut conn);
    assert_eq!(before.len(), 1);
    // One round trip, so the write lands while the feed is still away (it waits at least
    // 100 ms before connecting again).
    diesel::connection::SimpleConnection::batch_execute(
        &mut conn,
        &format!(
            "SELECT pg_terminate_backend({}); \
             UPDATE clusters SET description = 'behind the feed', revision = revision + 1 \
             WHERE id = '{}'",
            before[0], c.id
        ),
    )
    .unwrap();
    eventually("the feed has a new connection", || {
        let now = listener_pid(&mut raw(&db));
        let fresh = now.len() == 1 && now != before;
        async move { fresh }
    })
    .await;
    eventually("the feed listens again", || async { p.feed.is_listening() }).await;
    let read = recent(&p, c.id).await;
    assert_eq!(
        (read.revision, read.description.as_deref()),
        (2, Some("behind the feed"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_from_memory_are_the_database_pages_and_follow_both_processes() {
    let db = TestDatabase::create();
    let (p, q) = (process(&db).await, process(&db).await);
    let (org, other_org) = (Uuid::new_v4(), Uuid::new_v4());
    let mut mine = Vec::new();
    for n in 0..7 {
        let zone = if n % 3 == 0 { "zone-2" } else { "zone-1" };
        let c = in_zone(org, &format!("c{n}"), zone);
        p.cache
            .commit(write(c.id, None, vec![Change::InsertCluster(c.clone())]))
            .await
            .unwrap();
        mine.push(c);
    }
    insert(&store(&db), &cluster(other_org, "c0"))
        .await
        .unwrap();
    lists_match_the_database(&p, org).await;

    // This process's own creation and removal show at once.
    let created = in_zone(org, "made-by-p", "zone-2");
    p.cache
        .commit(write(
            created.id,
            None,
            vec![Change::InsertCluster(created.clone())],
        ))
        .await
        .unwrap();
    let removed = &mine[1];
    p.cache
        .commit(write(removed.id, Some(1), vec![Change::RemoveCluster]))
        .await
        .unwrap();
    let first = list(&p, org, None, 1, Freshness::Recent).await;
    assert_eq!(first.total, 7);
    assert!(first.items.iter().all(|c| c.id != removed.id));
    lists_match_the_database(&p, org).await;

    // Another process's creation shows once notified.
    let by_q = in_zone(org, "made-by-q", "zone-1");
    q.cache
        .commit(write(
            by_q.id,
            None,
            vec![Change::InsertCluster(by_q.clone())],
        ))
        .await
        .unwrap();
    eventually("p's list shows q's creation", || async {
        list(&p, org, None, 3, Freshness::Recent).await.total == 8
    })
    .await;
    lists_match_the_database(&p, org).await;

    // The other organization's cluster never shows in this list, nor this one's in its.
    let theirs = list(&p, other_org, None, 1, Freshness::Recent).await;
    assert_eq!(theirs.total, 1);
    assert!(theirs.items.iter().all(|c| c.organization_id == other_org));
}

/// A write as another process's store makes it, minus the notification it sends after the
/// commit (that process died first, or the notification was lost): the change and its row in
/// the change log, in one statement.
fn describe_without_notifying(conn: &mut PgConnection, id: Uuid, text: &str) {
    diesel::connection::SimpleConnection::batch_execute(
        conn,
        &format!(
            "WITH u AS (UPDATE clusters SET description = '{text}', revision = revision + 1 \
                 WHERE id = '{id}' RETURNING id, revision, organization_id) \
             INSERT INTO cluster_change_log (cluster_id, revision, organization_id, membership) \
             SELECT id, revision, organization_id, 'changed' FROM u"
        ),
    )
    .unwrap();
}

async fn described(p: &Process, id: Uuid) -> Option<String> {
    recent(p, id).await.description
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_nobody_notified_is_read_from_the_change_log() {
    let db = TestDatabase::create();
    let p = process(&db).await;
    let c = cluster(Uuid::new_v4(), "unannounced");
    insert(&store(&db), &c).await.unwrap();
    assert_eq!(recent(&p, c.id).await.revision, 1);
    describe_without_notifying(&mut raw(&db), c.id, "never notified");
    eventually("p's cache shows the write", || async {
        described(&p, c.id).await.as_deref() == Some("never notified")
    })
    .await;
}

/// Writers become visible in the order they commit, not the order they began: the feed must
/// not step past a transaction that was still open when it read a later one's change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_commits_after_a_later_one_is_still_read() {
    use diesel::connection::SimpleConnection;
    let db = TestDatabase::create();
    let p = process(&db).await;
    let (slow, fast) = (
        cluster(Uuid::new_v4(), "slow"),
        cluster(Uuid::new_v4(), "fast"),
    );
    for c in [&slow, &fast] {
        insert(&store(&db), c).await.unwrap();
        assert_eq!(recent(&p, c.id).await.revision, 1);
    }
    let mut first = raw(&db);
    first.batch_execute("BEGIN").unwrap();
    describe_without_notifying(&mut first, slow.id, "began first, committed last");
    describe_without_notifying(&mut raw(&db), fast.id, "began last, committed first");
    eventually("p's cache shows the later write", || async {
        described(&p, fast.id).await.as_deref() == Some("began last, committed first")
    })
    .await;
    // Nothing notified it: the feed read the later write from the log while the first was
    // still open. A cursor that moved past it now would never read the first.
    assert_eq!(
        described(&p, slow.id).await,
        slow.description,
        "not committed yet"
    );
    first.batch_execute("COMMIT").unwrap();
    eventually("p's cache shows the write that committed last", || async {
        described(&p, slow.id).await.as_deref() == Some("began first, committed last")
    })
    .await;
}

/// The notification each write sends after its commit, as a listener of another program sees
/// it: the cluster, its revision, its organization and what the write did to its list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_write_is_notified_with_its_revision_and_organization() {
    use diesel::connection::SimpleConnection;
    let db = TestDatabase::create();
    let mut listener = raw(&db);
    listener.batch_execute("LISTEN cluster_changes").unwrap();
    let c = cluster(Uuid::new_v4(), "announced");
    insert(&store(&db), &c).await.unwrap();
    let expected = format!("{}:1:{}:created", c.id, c.organization_id);
    let mut heard = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !heard.contains(&expected) {
        assert!(
            std::time::Instant::now() < deadline,
            "never notified; heard {heard:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
        heard.extend(listener.notifications_iter().map(|n| n.unwrap().payload));
    }
}

/// Clusters in two organizations, one of them then deleted (a prefill reads live ones only).
async fn fleet(db: &TestDatabase, n: usize) -> Vec<Cluster> {
    let orgs = [Uuid::new_v4(), Uuid::new_v4()];
    let mut live = Vec::new();
    for i in 0..=n {
        let c = cluster(orgs[i % 2], &format!("fleet-{i}"));
        insert(&store(db), &c).await.unwrap();
        live.push(c);
    }
    let gone = live.pop().unwrap();
    diesel::connection::SimpleConnection::batch_execute(
        &mut raw(db),
        &format!(
            "UPDATE clusters SET deleted_at = now() WHERE id = '{}'",
            gone.id
        ),
    )
    .unwrap();
    live
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_prefill_every_live_cluster_is_a_hit_and_shows_what_the_database_holds() {
    let db = TestDatabase::create();
    let live = fleet(&db, 7).await;
    let p = process(&db).await;
    // Three at a time: three batches, the last one short.
    let done = p.cache.prefill(3).await.unwrap();
    assert_eq!(done, Some(store_postgres::Prefilled { read: 7, kept: 7 }));
    assert_eq!(p.cache.stats().entries, 7);
    let before = p.cache.stats();
    for c in &live {
        let latest = p.cache.cluster(c.id, Freshness::Latest).await.unwrap();
        assert_eq!(Some(recent(&p, c.id).await), latest);
    }
    let after = p.cache.stats();
    assert_eq!(
        (after.hits - before.hits, after.misses - before.misses),
        (7, 0),
        "every read after the prefill is a hit"
    );
    // A second pass finds them held and leaves them.
    assert_eq!(
        p.cache.prefill(100).await.unwrap(),
        Some(store_postgres::Prefilled { read: 7, kept: 0 })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_committed_while_a_prefill_batch_is_read_is_never_served_stale() {
    let db = TestDatabase::create();
    let live = fleet(&db, 4).await;
    let (p, q) = (process(&db).await, process(&db).await);
    let (mine, theirs) = (live[0].clone(), live[1].clone());
    // After the batch was read and before it is kept: a commit of this process, and one of
    // another process that this process's feed has delivered.
    let done = p
        .cache
        .prefill_racing(100, || {
            let (p_cache, q_cache, p_feed) = (p.cache.clone(), q.cache.clone(), p.feed.clone());
            let (mine, theirs) = (mine.clone(), theirs.clone());
            async move {
                for (cache, c, text) in [(&p_cache, &mine, "by p"), (&q_cache, &theirs, "by q")] {
                    let changed = Cluster {
                        description: Some(text.into()),
                        ..c.clone()
                    };
                    cache
                        .commit(write(
                            c.id,
                            Some(c.revision),
                            vec![Change::UpdateCluster(changed)],
                        ))
                        .await
                        .unwrap();
                }
                // Returns once p's feed applied q's change (a minute is only a hang guard).
                use domain::ports::storage::ChangeFeed;
                p_feed
                    .wait(theirs.id, theirs.revision, Duration::from_secs(60))
                    .await;
            }
        })
        .await
        .unwrap();
    assert_eq!(done, Some(store_postgres::Prefilled { read: 4, kept: 2 }));
    assert_eq!(described(&p, mine.id).await.as_deref(), Some("by p"));
    assert_eq!(described(&p, theirs.id).await.as_deref(), Some("by q"));
    for c in &live[2..] {
        let latest = p.cache.cluster(c.id, Freshness::Latest).await.unwrap();
        assert_eq!(Some(recent(&p, c.id).await), latest);
    }
}
