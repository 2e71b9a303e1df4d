//! Idempotency keys: claim, replay, conflicts, and what is never remembered.

use super::*;

fn key() -> IdempotencyKey {
    IdempotencyKey::parse("create-0001").unwrap()
}

fn fingerprint() -> Fingerprint {
    Fingerprint::of(&["create acme", "a=1"])
}

/// Creates a cluster in acme under `key()` with `fingerprint()`, as the super_admin.
fn keyed_create(
    m: Mocks,
) -> Result<Answer<crate::service::Scheduled<crate::model::cluster::Cluster>>, DomainError> {
    let render = JsonRender(201);
    let req = Keyed {
        key: key(),
        fingerprint: fingerprint(),
        record: &render,
    };
    block_on(
        m.services()
            .create_cluster(Command::keyed(&super_admin_a(), Some(req)), cluster_body()),
    )
}

#[test]
fn idempotent_create_commits_the_answer_with_the_cluster() {
    let mut m = create_ready();
    m.idempotency
        .expect_claim()
        .times(1)
        .returning(|_| Ok(ClaimOutcome::Claimed));
    m.clusters.checkpoint();
    m.clusters
        .expect_commit()
        .withf(|w: &ClusterWrite| {
            w.idempotency.as_ref().is_some_and(|c| {
                c.replay.0.starts_with(b"201 ") && c.scope.organization_id == ORG_A
            })
        })
        .times(1)
        .returning(|_| Ok(1));
    // The answer went in with the cluster: nothing is left to store afterwards.
    m.idempotency.expect_complete().never();
    let a = keyed_create(m);
    assert!(matches!(a, Ok(Answer::Fresh(_))));
}

/// A keyed change whose write lost a race and then found nothing left to change commits no
/// answer with a change: the answer is stored on the key on its own.
#[test]
fn an_answer_that_no_commit_carried_is_stored_on_the_key() {
    let mut m = Mocks::new();
    let before = cluster(ORG_A, ClusterPhase::Provisioned);
    let mut after = before.clone();
    after.revision += 1;
    after.phase = ClusterPhase::Deleting;
    let mut reads = 0;
    m.clusters.expect_cluster().returning(move |_, _| {
        reads += 1;
        Ok(Some(if reads == 1 {
            before.clone()
        } else {
            after.clone()
        }))
    });
    // Another deletion commits first; this one then finds the cluster already Deleting.
    m.clusters
        .expect_commit()
        .times(1)
        .returning(|_| Err(StoreError::RevisionMismatch));
    m.idempotency
        .expect_claim()
        .returning(|_| Ok(ClaimOutcome::Claimed));
    m.idempotency
        .expect_complete()
        .withf(|c| c.replay.0.starts_with(b"202 "))
        .times(1)
        .returning(|_| Ok(()));
    let render = JsonRender(202);
    let req = Keyed {
        key: key(),
        fingerprint: fingerprint(),
        record: &render,
    };
    let answer = block_on(m.services().delete_cluster(
        Command::keyed(&super_admin_a(), Some(req)),
        CLUSTER_1,
        None,
    ));
    assert_eq!(
        answer.unwrap().fresh().map(|c| c.phase),
        Some(ClusterPhase::Deleting)
    );
}

#[test]
fn idempotent_same_key_same_body_replays_the_stored_answer() {
    let stored = Replay(b"the first answer, as its face recorded it".to_vec());
    let mut m = create_ready();
    let record = IdempotencyRecord {
        scope: IdempotencyScope {
            organization_id: ORG_A,
            key: key(),
        },
        fingerprint: fingerprint(),
        state: IdempotencyState::Completed {
            replay: stored.clone(),
        },
        created_at: at(0),
    };
    m.idempotency
        .expect_claim()
        .returning(move |_| Ok(ClaimOutcome::Existing(record.clone())));
    m.clusters.checkpoint();
    m.clusters.expect_commit().never();
    let a = keyed_create(m);
    assert_eq!(a, Ok(Answer::Replayed(stored)));
}

#[test]
fn idempotent_same_key_different_body_is_409_reused() {
    let mut m = create_ready();
    let record = IdempotencyRecord {
        scope: IdempotencyScope {
            organization_id: ORG_A,
            key: key(),
        },
        fingerprint: Fingerprint::of(&["create acme", "a=2"]),
        state: IdempotencyState::Completed {
            replay: Replay(Vec::new()),
        },
        created_at: at(0),
    };
    m.idempotency
        .expect_claim()
        .returning(move |_| Ok(ClaimOutcome::Existing(record.clone())));
    let r = keyed_create(m);
    assert_eq!(code(r), "idempotency_key_reused");
}

#[test]
fn idempotent_key_in_progress_is_409_in_progress() {
    let mut m = create_ready();
    let record = IdempotencyRecord {
        scope: IdempotencyScope {
            organization_id: ORG_A,
            key: key(),
        },
        fingerprint: fingerprint(),
        state: IdempotencyState::InProgress {
            lease_id: uuid::Uuid::nil(),
            lease_expires_at: at(30),
        },
        created_at: at(0),
    };
    m.idempotency
        .expect_claim()
        .returning(move |_| Ok(ClaimOutcome::Existing(record.clone())));
    let r = keyed_create(m);
    assert_eq!(code(r), "idempotency_key_in_progress");
}

#[test]
fn idempotent_expired_claim_is_taken_over_and_run_anew() {
    let mut m = create_ready();
    let record = IdempotencyRecord {
        scope: IdempotencyScope {
            organization_id: ORG_A,
            key: key(),
        },
        fingerprint: fingerprint(),
        state: IdempotencyState::InProgress {
            lease_id: uuid::Uuid::from_u128(9),
            lease_expires_at: at(-1),
        },
        created_at: at(-100),
    };
    m.idempotency
        .expect_claim()
        .returning(move |_| Ok(ClaimOutcome::Existing(record.clone())));
    m.idempotency
        .expect_take_over()
        .withf(|_, stale, _, _| *stale == uuid::Uuid::from_u128(9))
        .times(1)
        .returning(|_, _, _, _| Ok(true));
    m.idempotency.expect_complete().returning(|_| Ok(()));
    let r = keyed_create(m);
    assert!(matches!(r, Ok(Answer::Fresh(_))));
}

#[test]
fn idempotent_refusal_is_stored_but_a_5xx_releases_the_key() {
    // A refusal of the request (no credit) is stored on the key...
    let mut m = create_ready();
    m.idempotency
        .expect_claim()
        .returning(|_| Ok(ClaimOutcome::Claimed));
    m.idempotency
        .expect_complete()
        .withf(|c| c.replay.0 == b"201 insufficient_credit")
        .times(1)
        .returning(|_| Ok(()));
    m.idempotency.expect_release().never();
    let who = caller(&[(ORG_B, Role::SuperAdmin)]);
    let render = JsonRender(201);
    let req = Keyed {
        key: key(),
        fingerprint: fingerprint(),
        record: &render,
    };
    assert_eq!(
        code(block_on(m.services().create_cluster(
            Command::keyed(&who, Some(req)),
            cluster_in("globex")
        ))),
        "insufficient_credit"
    );
    // ...a failure of the service (capacity) is not: the key is released so a retry runs anew.
    let mut m = create_ready();
    m.idempotency
        .expect_claim()
        .returning(|_| Ok(ClaimOutcome::Claimed));
    m.clusters.checkpoint();
    m.clusters
        .expect_commit()
        .returning(|_| Err(StoreError::CapacityExhausted));
    m.idempotency
        .expect_release()
        .times(1)
        .returning(|_, _| Ok(()));
    m.idempotency.expect_complete().never();
    let req = Keyed {
        key: key(),
        fingerprint: fingerprint(),
        record: &render,
    };
    assert_eq!(
        code(block_on(m.services().create_cluster(
            Command::keyed(&super_admin_a(), Some(req)),
            cluster_body()
        ))),
        "capacity_exhausted"
    );
}

#[test]
fn without_a_key_every_call_is_a_new_request() {
    let mut m = create_ready();
    m.idempotency.expect_claim().never();
    m.clusters.checkpoint();
    m.clusters.expect_commit().times(2).returning(|_| Ok(1));
    let s = m.services();
    let a = block_on(s.create_cluster(Command::new(&super_admin_a()), cluster_body()))
        .unwrap()
        .fresh()
        .unwrap();
    let b = block_on(s.create_cluster(Command::new(&super_admin_a()), cluster_body()))
        .unwrap()
        .fresh()
        .unwrap();
    assert_ne!(a.id, b.id);
}
