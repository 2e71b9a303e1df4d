//! The operations queue: claims, leases, retries.

use super::*;
use domain::ports::storage::OperationQueue;

async fn scheduled(store: &PgStore, n: usize) -> Vec<Uuid> {
    let mut ids = Vec::new();
    for i in 0..n {
        let c = cluster(Uuid::new_v4(), &format!("op-{i}"));
        let mut w = write(c.id, None, vec![Change::InsertCluster(c.clone())]);
        w.reconcile = true;
        store.commit(w).await.unwrap();
        ids.push(c.id);
    }
    ids
}

/// Workers claiming at once never share an operation, and all of them get claimed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_workers_never_claim_one_operation() {
    let db = TestDatabase::create();
    let store = store(&db);
    let ids = scheduled(&store, 10).await;
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                OperationQueue::claim(&store, format!("worker-{i}"), Duration::from_secs(60))
                    .await
                    .unwrap()
            })
        })
        .collect();
    let mut claimed = Vec::new();
    for t in tasks {
        if let Some(lease) = t.await.unwrap() {
            claimed.push(lease.operation.cluster_id);
        }
    }
    claimed.sort();
    let mut expected = ids;
    expected.sort();
    assert_eq!(claimed, expected, "each operation exactly once");
    assert_eq!(store.depth().await.unwrap(), 10);
    assert!(
        OperationQueue::claim(&store, "late".into(), Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn an_expired_lease_is_claimed_again_and_the_old_holder_cannot_finish() {
    let db = TestDatabase::create();
    let store = store(&db);
    scheduled(&store, 1).await;
    let dead = OperationQueue::claim(&store, "dead-worker".into(), Duration::from_millis(1))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(dead.operation.attempts, 1);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let next = OperationQueue::claim(&store, "live-worker".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.operation.cluster_id, dead.operation.cluster_id);
    assert_eq!(next.operation.attempts, 2);
    assert!(
        OperationQueue::claim(&store, "third".into(), Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
    // The first worker's late finish changes nothing; the holder's does.
    store.finish(dead).await.unwrap();
    assert_eq!(store.depth().await.unwrap(), 1);
    store.finish(next).await.unwrap();
    assert_eq!(store.depth().await.unwrap(), 0);
}

#[tokio::test]
async fn work_asked_while_running_leaves_the_operation_pending() {
    let db = TestDatabase::create();
    let store = store(&db);
    let id = scheduled(&store, 1).await[0];
    let lease = OperationQueue::claim(&store, "w".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    // More work is asked while the worker runs.
    let mut w = write(id, Some(1), vec![]);
    w.reconcile = true;
    store.commit(w).await.unwrap();
    assert!(
        OperationQueue::claim(&store, "other".into(), Duration::from_secs(60))
            .await
            .unwrap()
            .is_none(),
        "still leased"
    );
    store.finish(lease).await.unwrap();
    let again = OperationQueue::claim(&store, "w".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (again.operation.cluster_id, again.operation.generation),
        (id, 2)
    );
    store.finish(again).await.unwrap();
    assert_eq!(store.depth().await.unwrap(), 0);
}

#[tokio::test]
async fn a_retry_waits_until_its_time_and_records_the_error() {
    let db = TestDatabase::create();
    let store = store(&db);
    scheduled(&store, 1).await;
    let lease = OperationQueue::claim(&store, "w".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    store
        .retry(
            lease,
            "provider timed out".into(),
            now() + chrono::Duration::hours(1),
        )
        .await
        .unwrap();
    assert!(
        OperationQueue::claim(&store, "w".into(), Duration::from_secs(60))
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.depth().await.unwrap(), 1);
    let mut conn = raw(&db);
    diesel::sql_query("UPDATE operations SET run_after = now() - interval '1 second'")
        .execute(&mut conn)
        .unwrap();
    let again = OperationQueue::claim(&store, "w".into(), Duration::from_secs(60))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            again.operation.attempts,
            again.operation.last_error.as_deref()
        ),
        (2, Some("provider timed out"))
    );
}
