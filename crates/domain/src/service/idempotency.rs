//! Idempotency key handling shared by every create, every deletion and the node-pool change:
//! the claim in its own short transaction, the answer committed with the change, replays byte
//! for byte, and release on a transient failure (`DomainError::is_transient`).

use std::sync::atomic::{AtomicBool, Ordering};

use chrono::Duration;
use uuid::Uuid;

use crate::error::{Conflict, DomainError};
use crate::model::idempotency::{
    Fingerprint, IdempotencyClaim, IdempotencyCompletion, IdempotencyDecision, IdempotencyRecord,
    IdempotencyScope, IdempotencyState, LEASE_SECONDS, Replay,
};
use crate::names::IdempotencyKey;
use crate::ports::storage::ClaimOutcome;
use crate::service::{Services, store_error};

/// How a face records an answer for replays: as bytes of its own making, which the service
/// stores and hands back without reading them. The face that serves a replay turns them into
/// the same answer the first request got.
pub trait Record<T>: Send + Sync {
    /// The answer to a change that was made.
    fn answer(&self, value: &T) -> Replay;
    /// The answer to a change that was refused for something the caller did.
    fn refusal(&self, error: &DomainError) -> Replay;
}

/// The idempotency key a request carries, with its fingerprint and how its face records
/// answers.
pub struct Keyed<'a, T> {
    pub key: IdempotencyKey,
    pub fingerprint: Fingerprint,
    pub record: &'a dyn Record<T>,
}

/// What a mutation answers: a fresh result, or the recorded answer of the first request with
/// the same key (marked to the client as a replay).
#[derive(Debug, Clone, PartialEq)]
pub enum Answer<T> {
    Fresh(T),
    Replayed(Replay),
}

impl<T> Answer<T> {
    pub fn fresh(self) -> Option<T> {
        match self {
            Answer::Fresh(t) => Some(t),
            Answer::Replayed(_) => None,
        }
    }
}

/// A key this request holds while it works.
pub(crate) struct Held<'a, T> {
    pub(crate) claim: IdempotencyClaim,
    record: &'a dyn Record<T>,
    /// Set once a write carrying the answer committed: settling then has nothing to store.
    answer_committed: AtomicBool,
}

impl<T> Held<'_, T> {
    /// The completion to commit together with the change this answer describes.
    pub(crate) fn completion(&self, value: &T) -> IdempotencyCompletion {
        IdempotencyCompletion {
            scope: self.claim.scope.clone(),
            lease_id: self.claim.lease_id,
            replay: self.record.answer(value),
        }
    }

    /// Records that a write carrying [`Held::completion`] committed.
    pub(crate) fn committed(&self) {
        self.answer_committed.store(true, Ordering::Relaxed);
    }
}

pub(crate) enum Begin<'a, T> {
    Replay(Replay),
    Proceed(Option<Held<'a, T>>),
}

impl Services {
    /// Runs `work` under the request's idempotency key for this organization: the stored answer
    /// of a finished request with the same key is replayed without running it; otherwise the
    /// key is claimed, `work` runs (given the claim, to commit its answer with its change), and
    /// the outcome is settled on the key.
    pub(crate) async fn idempotently<'a, T>(
        &self,
        organization_id: Uuid,
        request: Option<Keyed<'a, T>>,
        work: impl AsyncFnOnce(Option<&Held<'a, T>>) -> Result<T, DomainError>,
    ) -> Result<Answer<T>, DomainError> {
        let held = match self.begin(organization_id, request).await? {
            Begin::Replay(stored) => return Ok(Answer::Replayed(stored)),
            Begin::Proceed(held) => held,
        };
        let result = work(held.as_ref()).await;
        self.settle(held, result).await
    }

    /// Claims the key for this organization, or decides from the record already there.
    pub(crate) async fn begin<'a, T>(
        &self,
        organization_id: Uuid,
        request: Option<Keyed<'a, T>>,
    ) -> Result<Begin<'a, T>, DomainError> {
        let Some(request) = request else {
            return Ok(Begin::Proceed(None));
        };
        let now = self.ports.clock.now();
        let lease_id = self.ports.ids.new_id();
        let lease_expires_at = now + Duration::seconds(LEASE_SECONDS);
        let scope = IdempotencyScope {
            organization_id,
            key: request.key,
        };
        let record = IdempotencyRecord {
            scope: scope.clone(),
            fingerprint: request.fingerprint,
            state: IdempotencyState::InProgress {
                lease_id,
                lease_expires_at,
            },
            created_at: now,
        };
        let held = |scope: IdempotencyScope| Held {
            claim: IdempotencyClaim {
                scope,
                fingerprint: request.fingerprint,
                lease_id,
                lease_expires_at,
            },
            record: request.record,
            answer_committed: AtomicBool::new(false),
        };
        match self
            .ports
            .idempotency
            .claim(record)
            .await
            .map_err(store_error)?
        {
            ClaimOutcome::Claimed => Ok(Begin::Proceed(Some(held(scope)))),
            ClaimOutcome::Existing(existing) => match existing.decide(&request.fingerprint, now) {
                IdempotencyDecision::Replay(response) => Ok(Begin::Replay(response)),
                IdempotencyDecision::Reused => {
                    Err(DomainError::Conflict(Conflict::IdempotencyKeyReused))
                }
                IdempotencyDecision::InProgress => {
                    Err(DomainError::Conflict(Conflict::IdempotencyKeyInProgress))
                }
                IdempotencyDecision::TakeOver { stale_lease_id } => {
                    let taken = self
                        .ports
                        .idempotency
                        .take_over(scope.clone(), stale_lease_id, lease_id, lease_expires_at)
                        .await
                        .map_err(store_error)?;
                    if taken {
                        Ok(Begin::Proceed(Some(held(scope))))
                    } else {
                        // Another request took it over first.
                        Err(DomainError::Conflict(Conflict::IdempotencyKeyInProgress))
                    }
                }
            },
        }
    }

    /// Stores the answer on the key, unless the outcome was the service's failure rather than
    /// the request's (`DomainError::is_transient`): then the key is released so a retry runs
    /// anew. An answer already committed with its change is not changed: the store
    /// completes only keys still in progress under this lease.
    pub(crate) async fn settle<T>(
        &self,
        held: Option<Held<'_, T>>,
        result: Result<T, DomainError>,
    ) -> Result<Answer<T>, DomainError> {
        let Some(held) = held else {
            return result.map(Answer::Fresh);
        };
        // The usual success: the answer went in with the change, in one transaction.
        if result.is_ok() && held.answer_committed.load(Ordering::Relaxed) {
            return result.map(Answer::Fresh);
        }
        let scope = held.claim.scope.clone();
        let outcome = match &result {
            Err(e) if e.is_transient() => {
                self.ports
                    .idempotency
                    .release(scope, held.claim.lease_id)
                    .await
            }
            kept => {
                let replay = match kept {
                    Ok(value) => held.record.answer(value),
                    Err(e) => held.record.refusal(e),
                };
                self.ports
                    .idempotency
                    .complete(IdempotencyCompletion {
                        scope,
                        lease_id: held.claim.lease_id,
                        replay,
                    })
                    .await
            }
        };
        // A failure here leaves the key in progress until its lease runs out, after which a
        // retry takes it over: safe, so the answer itself still goes out; the failure is
        // logged on the request's span rather than dropped.
        if let Err(e) = outcome {
            tracing::warn!(
                error = %e,
                "the idempotency key could not be settled; a retry takes it over once its lease runs out"
            );
        }
        result.map(Answer::Fresh)
    }
}
