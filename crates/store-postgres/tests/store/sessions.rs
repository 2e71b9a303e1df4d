//! Sessions ended early: one by its id, every one of a subject up to an instant, read back as
//! the gateway holds them, and forgotten once they would have expired anyway.

use super::*;
use domain::model::session::{SessionStanding, SessionSubject};
use domain::ports::storage::SessionStore;

fn standing(id: u128, who: &str, issued_at: DateTime<Utc>) -> SessionStanding {
    SessionStanding {
        id: Some(Uuid::from_u128(id)),
        subject: SessionSubject::console(who),
        issued_at,
        expires_at: issued_at + chrono::Duration::hours(8),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_ends_that_session_only_and_twice_is_once() {
    let db = TestDatabase::create();
    let store = store(&db);
    let t = now();
    let (mine, other) = (standing(1, "u1", t), standing(2, "u1", t));
    store
        .end_session(Uuid::from_u128(1), mine.expires_at)
        .await
        .unwrap();
    store
        .end_session(Uuid::from_u128(1), mine.expires_at)
        .await
        .unwrap();
    assert!(store.session_ended(&mine).await.unwrap());
    assert!(!store.session_ended(&other).await.unwrap());
    let r = store.session_revocations(t).await.unwrap();
    assert_eq!(r.ended.len(), 1);
    assert!(r.ends(&mine) && !r.ends(&other));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_everywhere_ends_what_came_before_and_never_moves_back() {
    let db = TestDatabase::create();
    let store = store(&db);
    let t = now();
    let subject = SessionSubject::console("u1");
    let later = t + chrono::Duration::seconds(10);
    store
        .end_sessions_of(&subject, later, later + chrono::Duration::hours(8))
        .await
        .unwrap();
    // A slower process recording an earlier instant does not bring older sessions back.
    store
        .end_sessions_of(&subject, t, t + chrono::Duration::hours(8))
        .await
        .unwrap();
    assert!(store.session_ended(&standing(1, "u1", t)).await.unwrap());
    assert!(
        store
            .session_ended(&standing(2, "u1", later))
            .await
            .unwrap()
    );
    let after = later + chrono::Duration::milliseconds(1);
    assert!(
        !store
            .session_ended(&standing(3, "u1", after))
            .await
            .unwrap()
    );
    assert!(!store.session_ended(&standing(4, "u2", t)).await.unwrap());
    let r = store.session_revocations(t).await.unwrap();
    assert_eq!(r.not_before.get(&subject), Some(&later));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_go_once_their_sessions_would_have_expired() {
    let db = TestDatabase::create();
    let store = store(&db);
    let t = now();
    let soon = t + chrono::Duration::hours(1);
    let late = t + chrono::Duration::hours(8);
    store.end_session(Uuid::from_u128(1), soon).await.unwrap();
    store.end_session(Uuid::from_u128(2), late).await.unwrap();
    store
        .end_sessions_of(&SessionSubject::console("u1"), t, soon)
        .await
        .unwrap();
    let past_soon = soon + chrono::Duration::seconds(1);
    assert_eq!(
        store
            .session_revocations(past_soon)
            .await
            .unwrap()
            .ended
            .len(),
        1
    );
    assert_eq!(store.purge_session_revocations(past_soon).await.unwrap(), 2);
    let left = store.session_revocations(t).await.unwrap();
    assert_eq!(
        left.ended.into_iter().collect::<Vec<_>>(),
        [Uuid::from_u128(2)]
    );
    assert!(left.not_before.is_empty());
}
