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

/// What makes two requests "the same": method, path and the canonical body (key order and
/// whitespace do not matter).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestFingerprint {
    pub method: String,
    pub path: String,
    /// Hex SHA-256 of the canonical JSON body (of `null` when there is none).
    pub body_sha256: String,
}

impl RequestFingerprint {
    pub fn new(method: &str, path: &str, body: Option<&Value>) -> Self {
        let canonical = canonical_json(body.unwrap_or(&Value::Null));
        let digest = Sha256::digest(canonical.as_bytes());
        let body_sha256 = digest.iter().map(|b| format!("{b:02x}")).collect();
        Self {
            method: method.to_ascii_uppercase(),
            path: path.to_owned(),
            body_sha256,
        }
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

/// The answer kept for replays, byte for byte, as the adapter that speaks to clients rendered
/// it (see `service::Render`). The domain carries it between the renderer and the store and
/// never reads it: whether an outcome is kept is decided from the outcome itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The renderer's outcome code, replayed as it is.
    pub status: u16,
    /// The name/value pairs the renderer wrote beside the body, replayed as they are.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

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
        response: StoredResponse,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub scope: IdempotencyScope,
    pub fingerprint: RequestFingerprint,
    pub state: IdempotencyState,
    pub created_at: DateTime<Utc>,
}

/// What a request whose key already exists gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyDecision {
    /// Same request, finished: the stored answer, marked as a replay.
    Replay(StoredResponse),
    /// Different method, path or body: `Conflict::IdempotencyKeyReused`.
    Reused,
    /// Same key still being worked on within its lease: `Conflict::IdempotencyKeyInProgress`.
    InProgress,
    /// The first request died (its lease ran out): this one takes the key over and runs anew.
    TakeOver { stale_lease_id: Uuid },
}

impl IdempotencyRecord {
    pub fn decide(
        &self,
        fingerprint: &RequestFingerprint,
        now: DateTime<Utc>,
    ) -> IdempotencyDecision {
        if &self.fingerprint != fingerprint {
            return IdempotencyDecision::Reused;
        }
        match &self.state {
            IdempotencyState::Completed { response } => {
                IdempotencyDecision::Replay(response.clone())
            }
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
    pub fingerprint: RequestFingerprint,
    pub lease_id: Uuid,
    pub lease_expires_at: DateTime<Utc>,
}

/// The answer to store on a claimed key, committed with the change it describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyCompletion {
    pub scope: IdempotencyScope,
    pub lease_id: Uuid,
    pub response: StoredResponse,
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
            fingerprint: RequestFingerprint::new(
                "POST",
                "/v1/public/clusters",
                Some(&json!({"a": 1})),
            ),
            state,
            created_at: at(0),
        }
    }

    #[test]
    fn idempotency_body_hash_ignores_key_order_and_whitespace() {
        let a: Value =
            serde_json::from_str(r#"{"b": [1, {"y": 2, "x": 1}], "a": "s"}"#).unwrap_or_default();
        let b: Value =
            serde_json::from_str(r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#).unwrap_or_default();
        assert_eq!(
            RequestFingerprint::new("POST", "/p", Some(&a)),
            RequestFingerprint::new("post", "/p", Some(&b))
        );
        assert_eq!(canonical_json(&a), r#"{"a":"s","b":[1,{"x":1,"y":2}]}"#);
        let c = json!({"a": "s", "b": [{"x": 1, "y": 2}, 1]});
        assert_ne!(
            RequestFingerprint::new("POST", "/p", Some(&a)),
            RequestFingerprint::new("POST", "/p", Some(&c))
        );
    }

    #[test]
    fn idempotency_same_request_completed_replays_the_stored_answer() {
        let response = StoredResponse {
            status: 201,
            headers: vec![("Location".into(), "/x".into())],
            body: b"{}".to_vec(),
        };
        let r = record(IdempotencyState::Completed {
            response: response.clone(),
        });
        assert_eq!(
            r.decide(&r.fingerprint.clone(), at(10)),
            IdempotencyDecision::Replay(response)
        );
    }

    #[test]
    fn idempotency_different_body_method_or_path_is_reused() {
        let r = record(IdempotencyState::Completed {
            response: StoredResponse {
                status: 201,
                headers: vec![],
                body: vec![],
            },
        });
        let other_body =
            RequestFingerprint::new("POST", "/v1/public/clusters", Some(&json!({"a": 2})));
        let other_method =
            RequestFingerprint::new("DELETE", "/v1/public/clusters", Some(&json!({"a": 1})));
        let other_path =
            RequestFingerprint::new("POST", "/v1/public/clusters/x", Some(&json!({"a": 1})));
        for fp in [other_body, other_method, other_path] {
            assert_eq!(r.decide(&fp, at(10)), IdempotencyDecision::Reused);
        }
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
