//! The idempotency record (Stripe's design; docs/api.md, "Idempotency"): claimed → completed, and the decision
//! a later request with the same key gets (replay, reused key, in progress, take over).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::names::IdempotencyKey;

/// How long a claim holds before another request may take the key over.
pub const LEASE_SECONDS: i64 = 60;
/// How long a completed answer is replayed.
pub const RETENTION_HOURS: i64 = 24;

/// What makes two requests "the same", as the face that served them says: a digest of what it
/// counts (the API: method, path and canonical body; the console: the form and its fields).
/// The service compares digests and never reads what went into them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// The SHA-256 of `parts`, each followed by one space (a part cannot end where the next
    /// begins unnoticed: faces put fixed words and digests in them).
    pub fn of(parts: &[&str]) -> Fingerprint {
        let mut h = Sha256::new();
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                h.update(b" ");
            }
            h.update(p.as_bytes());
        }
        Fingerprint(h.finalize().into())
    }

    /// The hex SHA-256 of a JSON value's canonical form (key order and whitespace do not
    /// matter), for faces that fingerprint a body.
    pub fn body_digest(body: Option<&Value>) -> String {
        let canonical = canonical_json(body.unwrap_or(&Value::Null));
        Sha256::digest(canonical.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// JSON with object keys sorted at every level, written without whitespace. Done by hand so
/// the result does not depend on how `serde_json` is configured elsewhere in the build.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The answer kept for replays, as the face that served the request encoded it: the service
/// carries it between the face and the store and never reads it. Whether an outcome is kept
/// is decided from the outcome itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replay(pub Vec<u8>);

/// Keys are scoped to the organization.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyScope {
    pub organization_id: Uuid,
    pub key: IdempotencyKey,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyState {
    InProgress {
        lease_id: Uuid,
        lease_expires_at: DateTime<Utc>,
    },
    Completed {
        replay: Replay,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub scope: IdempotencyScope,
    pub fingerprint: Fingerprint,
    pub state: IdempotencyState,
    pub created_at: DateTime<Utc>,
}

/// What a request whose key already exists gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyDecision {
    /// Same request, finished: the stored answer, marked as a replay.
    Replay(Replay),
    /// Another request (another fingerprint): `Conflict::IdempotencyKeyReused`.
    Reused,
    /// Same key still being worked on within its lease: `Conflict::IdempotencyKeyInProgress`.
    InProgress,
    /// The first request died (its lease ran out): this one takes the key over and runs anew.
    TakeOver { stale_lease_id: Uuid },
}

impl IdempotencyRecord {
    pub fn decide(&self, fingerprint: &Fingerprint, now: DateTime<Utc>) -> IdempotencyDecision {
        if &self.fingerprint != fingerprint {
            return IdempotencyDecision::Reused;
        }
        match &self.state {
            IdempotencyState::Completed { replay } => IdempotencyDecision::Replay(replay.clone()),
            IdempotencyState::InProgress {
                lease_expires_at, ..
            } if *lease_expires_at > now => IdempotencyDecision::InProgress,
            IdempotencyState::InProgress { lease_id, .. } => IdempotencyDecision::TakeOver {
                stale_lease_id: *lease_id,
            },
        }
    }
}

/// A key this request holds: it either completes it with its answer or releases it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyClaim {
    pub scope: IdempotencyScope,
    pub fingerprint: Fingerprint,
    pub lease_id: Uuid,
    pub lease_expires_at: DateTime<Utc>,
}

/// The answer to store on a claimed key, committed with the change it describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyCompletion {
    pub scope: IdempotencyScope,
    pub lease_id: Uuid,
    pub replay: Replay,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn at(s: i64) -> DateTime<Utc> {
        Utc.timestamp_opt(1_700_000_000 + s, 0)
            .single()
            .unwrap_or_default()
    }

    fn record(state: IdempotencyState) -> IdempotencyRecord {
        IdempotencyRecord {
            scope: IdempotencyScope {
                organization_id: Uuid::nil(),
                key: IdempotencyKey::parse("key-0001").unwrap_or_else(|| panic!("valid key")),
            },
            fingerprint: Fingerprint::of(&["one request"]),
            state,
            created_at: at(0),
        }
    }

    #[test]
    fn a_body_digest_ignores_key_order_and_whitespace() {
        let a: Value =
            serde_json::from_str(r#"{"b": [1, {"y": 2, "x": 1}], "a": "s"}"#).unwrap_or_default();
        let b: Value =
            serde_json::from_str(r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#).unwrap_or_default();
        assert_eq!(
            Fingerprint::body_digest(Some(&a)),
            Fingerprint::body_digest(Some(&b))
        );
        assert_eq!(canonical_json(&a), r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#);
        let c = json!({"a": "s", "b": [{"x": 1, "y": 2}, 1]});
        assert_ne!(
            Fingerprint::body_digest(Some(&a)),
            Fingerprint::body_digest(Some(&c))
        );
    }

    #[test]
    fn a_fingerprint_tells_its_parts_apart() {
        assert_eq!(Fingerprint::of(&["a", "b"]), Fingerprint::of(&["a", "b"]));
        assert_ne!(Fingerprint::of(&["a", "b"]), Fingerprint::of(&["b", "a"]));
        // The formula the migration that introduced fingerprints used on the rows it found:
        // SHA-256 of the parts joined by single spaces.
        let joined: [u8; 32] = Sha256::digest(b"POST /v1/public/clusters 00ff").into();
        assert_eq!(
            Fingerprint::of(&["POST", "/v1/public/clusters", "00ff"]),
            Fingerprint(joined)
        );
    }

    #[test]
    fn idempotency_same_request_completed_replays_the_stored_answer() {
        let replay = Replay(b"the first answer".to_vec());
        let r = record(IdempotencyState::Completed {
            replay: replay.clone(),
        });
        assert_eq!(
            r.decide(&r.fingerprint.clone(), at(10)),
            IdempotencyDecision::Replay(replay)
        );
    }

    #[test]
    fn idempotency_another_fingerprint_is_reused() {
        let r = record(IdempotencyState::Completed {
            replay: Replay(Vec::new()),
        });
        assert_eq!(
            r.decide(&Fingerprint::of(&["another request"]), at(10)),
            IdempotencyDecision::Reused
        );
    }

    #[test]
    fn idempotency_in_progress_within_lease_is_in_progress() {
        let r = record(IdempotencyState::InProgress {
            lease_id: Uuid::nil(),
            lease_expires_at: at(60),
        });
        assert_eq!(
            r.decide(&r.fingerprint.clone(), at(59)),
            IdempotencyDecision::InProgress
        );
    }

    #[test]
    fn idempotency_in_progress_past_lease_is_taken_over() {
        let lease = Uuid::from_u128(7);
        let r = record(IdempotencyState::InProgress {
            lease_id: lease,
            lease_expires_at: at(60),
        });
        assert_eq!(
            r.decide(&r.fingerprint.clone(), at(60)),
            IdempotencyDecision::TakeOver {
                stale_lease_id: lease
            }
        );
    }
}
