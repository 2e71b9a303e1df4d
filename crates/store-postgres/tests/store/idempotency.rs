//! Idempotency keys: claims, take-overs, completions and purges.

use super::*;

/// 50 requests with one key at once: exactly one holds it, none waits for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_claims_of_one_key_make_one_claim() {
    let db = TestDatabase::create();
    let store = store(&db);
    let org = Uuid::new_v4();
    let expires = now() + chrono::Duration::seconds(60);
    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .claim(claim_record(org, "same-key-1", Uuid::new_v4(), expires))
                    .await
            })
        })
        .collect();
    let mut claimed = 0;
    for t in tasks {
        match t.await.unwrap().unwrap() {
            ClaimOutcome::Claimed => claimed += 1,
            ClaimOutcome::Existing(r) => {
                assert!(matches!(r.state, IdempotencyState::InProgress { .. }))
            }
        }
    }
    assert_eq!(claimed, 1);
}

/// 50 create requests with one key: claim, and the one that holds it commits the cluster
/// with its answer. One cluster exists; every other request sees the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_creates_with_one_key_make_one_cluster() {
    let db = TestDatabase::create();
    let store = store(&db);
    let org = Uuid::new_v4();
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                let lease = Uuid::new_v4();
                let expires = now() + chrono::Duration::seconds(60);
                match store
                    .claim(claim_record(org, "create-key-1", lease, expires))
                    .await
                    .unwrap()
                {
                    ClaimOutcome::Claimed => {
                        // Each request would make its own cluster (own id, own name).
                        let c = cluster(org, &format!("made-{i}"));
                        let mut w = write(c.id, None, vec![Change::InsertCluster(c)]);
                        w.idempotency =
                            Some(completion(org, "create-key-1", lease, b"{\"made\":true}"));
                        w.reconcile = true;
                        store.commit(w).await.unwrap();
                        true
                    }
                    ClaimOutcome::Existing(_) => false,
                }
            })
        })
        .collect();
    let mut made = 0;
    for t in tasks {
        made += usize::from(t.await.unwrap());
    }
    assert_eq!(made, 1);
    let mut conn = raw(&db);
    assert_eq!(count(&mut conn, "clusters"), 1);
    assert_eq!(count(&mut conn, "operations WHERE state = 'pending'"), 1);
    // A replay reads the stored answer byte for byte.
    let again = store
        .claim(claim_record(org, "create-key-1", Uuid::new_v4(), now()))
        .await
        .unwrap();
    let ClaimOutcome::Existing(record) = again else {
        panic!("the key must exist")
    };
    let IdempotencyState::Completed { replay } = record.state else {
        panic!("the key must be completed")
    };
    assert_eq!(
        replay,
        completion(org, "create-key-1", Uuid::nil(), b"{\"made\":true}").replay
    );
}

#[tokio::test]
async fn leases_are_compared_and_set() {
    let db = TestDatabase::create();
    let store = store(&db);
    let org = Uuid::new_v4();
    let (first, second) = (Uuid::new_v4(), Uuid::new_v4());
    let past = now() - chrono::Duration::seconds(1);
    store
        .claim(claim_record(org, "lease-key-1", first, past))
        .await
        .unwrap();
    let later = now() + chrono::Duration::seconds(60);
    // Only the holder of the stale lease can be replaced, and only once.
    assert!(
        store
            .take_over(scope(org, "lease-key-1"), first, second, later)
            .await
            .unwrap()
    );
    assert!(
        !store
            .take_over(scope(org, "lease-key-1"), first, Uuid::new_v4(), later)
            .await
            .unwrap()
    );

    // The first request woke up late: its commit is refused and writes nothing.
    let c = cluster(org, "late");
    let mut w = write(c.id, None, vec![Change::InsertCluster(c.clone())]);
    w.idempotency = Some(completion(org, "lease-key-1", first, b"late"));
    assert_eq!(store.commit(w).await, Err(StoreError::LeaseLost));
    assert_eq!(store.cluster(c.id, Freshness::Latest).await.unwrap(), None);

    // A refusal is stored by `complete`; a second complete changes nothing.
    let refusal = completion(org, "lease-key-1", second, b"{\"status\":409}");
    store.complete(refusal.clone()).await.unwrap();
    store
        .complete(completion(org, "lease-key-1", second, b"other"))
        .await
        .unwrap();
    let ClaimOutcome::Existing(record) = store
        .claim(claim_record(org, "lease-key-1", Uuid::new_v4(), later))
        .await
        .unwrap()
    else {
        panic!("the key must exist")
    };
    assert_eq!(
        record.state,
        IdempotencyState::Completed {
            replay: refusal.replay
        }
    );

    // A released key can be claimed anew; a release with another lease does nothing.
    store
        .claim(claim_record(org, "release-key", first, later))
        .await
        .unwrap();
    store
        .release(scope(org, "release-key"), second)
        .await
        .unwrap();
    assert!(matches!(
        store
            .claim(claim_record(org, "release-key", second, later))
            .await
            .unwrap(),
        ClaimOutcome::Existing(_)
    ));
    store
        .release(scope(org, "release-key"), first)
        .await
        .unwrap();
    assert_eq!(
        store
            .claim(claim_record(org, "release-key", second, later))
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );

    // The same key in another organization is another key.
    assert_eq!(
        store
            .claim(claim_record(Uuid::new_v4(), "release-key", second, later))
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
    assert_eq!(
        store
            .purge_created_before(now() + chrono::Duration::seconds(1))
            .await
            .unwrap(),
        3
    );
    assert_eq!(store.purge_created_before(now()).await.unwrap(), 0);
}
