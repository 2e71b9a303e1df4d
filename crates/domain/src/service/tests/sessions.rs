//! Signing out: one session, or every session of a person.

use super::*;
use crate::model::session::{SessionStanding, SessionSubject};
use uuid::Uuid;

fn standing(id: Option<Uuid>) -> SessionStanding {
    SessionStanding {
        id,
        subject: SessionSubject::console("u1"),
        issued_at: at(100),
        expires_at: at(100 + 8 * 3600),
    }
}

#[test]
fn signing_out_records_the_session_until_it_would_have_expired() {
    let mut m = Mocks::new();
    m.sessions
        .expect_end_session()
        .with(eq(Uuid::from_u128(7)), eq(at(100 + 8 * 3600)))
        .times(1)
        .returning(|_, _| Ok(()));
    let s = m.services();
    assert_eq!(
        block_on(s.sign_out(&standing(Some(Uuid::from_u128(7))))),
        Ok(())
    );
}

#[test]
fn a_session_without_an_id_has_nothing_to_record() {
    let mut m = Mocks::new();
    m.sessions.expect_end_session().never();
    assert_eq!(block_on(m.services().sign_out(&standing(None))), Ok(()));
}

#[test]
fn signing_out_everywhere_ends_what_was_issued_until_now_for_the_longest_lifetime() {
    let mut m = Mocks::new();
    let now = at(0);
    m.sessions
        .expect_end_sessions_of()
        .with(
            eq(SessionSubject::console("u1")),
            eq(now),
            eq(now + chrono::Duration::hours(8)),
        )
        .times(1)
        .returning(|_, _, _| Ok(()));
    let s = m.services();
    let ended =
        block_on(s.sign_out_everywhere(&SessionSubject::console("u1"), chrono::Duration::hours(8)));
    assert_eq!(ended, Ok(now));
}

#[test]
fn a_store_that_cannot_answer_is_the_services_failure() {
    let mut m = Mocks::new();
    m.sessions
        .expect_session_ended()
        .returning(|_| Err(StoreError::Unavailable("down".into())));
    let e = block_on(m.services().session_ended(&standing(None)));
    assert!(matches!(e, Err(ref e) if e.is_transient()), "{e:?}");
}
