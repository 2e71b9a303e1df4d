//! Signed-in sessions (the console's, and the gateway's OpenID Connect ones) and how one ends
//! before its time. A session lives in a sealed cookie, so nothing on the server knows it until
//! it ends early: signing out records its id, and "sign out everywhere" records, for its
//! subject, the instant before which every session of that subject is over. Both records are
//! kept only until the sessions they end would have expired anyway.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// Whose sessions these are: a console user (by the account platform's user id) or a gateway
/// user (by a digest of the issuer and `sub`, so the tenant's user ids are not stored).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionSubject(String);

impl SessionSubject {
    pub fn console(user_id: &str) -> SessionSubject {
        SessionSubject(format!("console:{user_id}"))
    }

    pub fn gateway(issuer: &str, sub: &str) -> SessionSubject {
        let mut h = Sha256::new();
        for part in [issuer, sub] {
            h.update((part.len() as u64).to_be_bytes());
            h.update(part.as_bytes());
        }
        let hex: String = h.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        SessionSubject(format!("gateway:{hex}"))
    }

    /// As stored.
    pub fn from_stored(s: String) -> SessionSubject {
        SessionSubject(s)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What a session says of itself when it is presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStanding {
    /// Sessions sealed before sessions had ids have none: only "sign out everywhere" (or
    /// their expiry) ends them.
    pub id: Option<Uuid>,
    pub subject: SessionSubject,
    pub issued_at: DateTime<Utc>,
    /// When it ends by itself.
    pub expires_at: DateTime<Utc>,
}

/// Every early end still in force, as a gateway keeps them in memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionRevocations {
    pub ended: HashSet<Uuid>,
    /// Per subject: sessions issued at or before this instant are over.
    pub not_before: HashMap<SessionSubject, DateTime<Utc>>,
}

impl SessionRevocations {
    /// Whether `session` has been ended early.
    pub fn ends(&self, session: &SessionStanding) -> bool {
        session.id.is_some_and(|id| self.ended.contains(&id))
            || self
                .not_before
                .get(&session.subject)
                .is_some_and(|at| session.issued_at <= *at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(s, 0).single().unwrap_or_default()
    }

    fn session(id: Option<u128>, who: &str, issued: i64) -> SessionStanding {
        SessionStanding {
            id: id.map(Uuid::from_u128),
            subject: SessionSubject::console(who),
            issued_at: at(issued),
            expires_at: at(issued + 3600),
        }
    }

    #[test]
    fn a_signed_out_session_and_everything_before_a_sign_out_everywhere_end() {
        let mut r = SessionRevocations::default();
        r.ended.insert(Uuid::from_u128(1));
        r.not_before.insert(SessionSubject::console("u2"), at(100));
        assert!(r.ends(&session(Some(1), "u1", 50)));
        assert!(!r.ends(&session(Some(2), "u1", 50)));
        assert!(
            r.ends(&session(Some(3), "u2", 100)),
            "issued at the instant"
        );
        assert!(
            r.ends(&session(None, "u2", 99)),
            "older sessions have no id"
        );
        assert!(
            !r.ends(&session(Some(4), "u2", 101)),
            "signed in again after"
        );
        assert!(!r.ends(&session(None, "u3", 10)));
    }

    #[test]
    fn gateway_subjects_hide_who_and_differ_by_issuer() {
        let a = SessionSubject::gateway("https://idp.example", "alice");
        assert!(!a.as_str().contains("alice"));
        assert_ne!(a, SessionSubject::gateway("https://other.example", "alice"));
        assert_ne!(a, SessionSubject::console("alice"));
        // Length-prefixed parts: moving a character between issuer and sub is another subject.
        assert_ne!(
            SessionSubject::gateway("ab", "c"),
            SessionSubject::gateway("a", "bc")
        );
    }
}
