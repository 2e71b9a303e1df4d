//! The one way every change is made. A write use case says what it changes (its target), on
//! which object a caller's precondition is checked, and how it decides; [`Services::mutate`]
//! (and [`Services::create`] for something new) does the rest, always in this order:
//!
//! 1. **authorize**: the caller may write in the target's organization (a writer who is
//!    super_admin nowhere is refused before anything is loaded, so existence is not revealed;
//!    the assistant is refused what it may not change), and the organization's write budget
//!    is spent;
//! 2. **claim the idempotency key** in that organization: a finished request with the same key
//!    and fingerprint replays its recorded answer, another request's key is refused, a key in
//!    use is in progress;
//! 3. **load** the target as current as the database, 4. **check the precondition** on the
//!    object the change is decided on, 5. **decide** with the pure rules;
//! 6. **commit** the change with its audit event, the operation that follows it when
//!    provisioning has work, and the recorded answer on the key, in one transaction; a
//!    concurrent change that won the race makes it load, check and decide again;
//! 7. **settle the key**: a refusal is recorded like an answer; a failure of the service's own
//!    releases the key, so a retry runs anew.

use async_trait::async_trait;
use tracing::Instrument;
use uuid::Uuid;

use super::idempotency::{Answer, Held, Keyed};
use super::{MAX_ATTEMPTS, OperationRef, Scheduled, Services};
use crate::access::{self, Access};
use crate::error::{Conflict, DomainError, Resource};
use crate::input::precondition::{Expect, check};
use crate::model::audit::{Audit, Outcome, Parent};
use crate::model::identity::Caller;
use crate::model::operation::{ClusterOperation, OperationKind};
use crate::names::OrgRef;
use crate::ports::storage::ZoneCapacity;

/// How a face asks for a change: who asks, and, when the face carries one, the idempotency
/// key with the request's fingerprint and how the face records its answer for replays.
pub struct Command<'a, T> {
    pub caller: &'a Caller,
    pub key: Option<Keyed<'a, T>>,
}

impl<'a, T> Command<'a, T> {
    /// A change without an idempotency key: each one is a new request.
    pub fn new(caller: &'a Caller) -> Command<'a, T> {
        Command { caller, key: None }
    }

    /// A change under `key`, when there is one.
    pub fn keyed(caller: &'a Caller, key: Option<Keyed<'a, T>>) -> Command<'a, T> {
        Command { caller, key }
    }
}

/// What a use case decided: the changes to commit, whether provisioning has work for them,
/// the zone capacity they must keep, what the audit trail says of them, and the answer.
pub(crate) struct Decision<C, T> {
    pub changes: Option<C>,
    pub reconcile: bool,
    /// The zone capacity the changes must keep, when they add nodes.
    pub zone_capacity: Option<ZoneCapacity>,
    /// Present whenever there are changes: every change someone asked for is audited.
    pub audit: Option<Audit>,
    pub answer: T,
}

impl<C, T> Decision<C, T> {
    /// Changes provisioning has work for (a new pool, a resize, a deletion…).
    pub fn schedule(changes: C, audit: Audit, answer: T) -> Self {
        Decision {
            changes: Some(changes),
            reconcile: true,
            zone_capacity: None,
            audit: Some(audit),
            answer,
        }
    }

    /// Changes that take effect as they are recorded (a description, an auth server).
    pub fn record(changes: C, audit: Audit, answer: T) -> Self {
        Decision {
            changes: Some(changes),
            reconcile: false,
            zone_capacity: None,
            audit: Some(audit),
            answer,
        }
    }

    /// Nothing to change: the answer alone.
    pub fn nothing(answer: T) -> Self {
        Decision {
            changes: None,
            reconcile: false,
            zone_capacity: None,
            audit: None,
            answer,
        }
    }

    /// The same changes, committed only while the zone keeps `capacity` (none: no limit).
    pub fn within(self, capacity: Option<ZoneCapacity>) -> Self {
        Decision {
            zone_capacity: capacity,
            ..self
        }
    }
}

/// What an existing target's change needs of its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rights {
    /// super_admin of the organization.
    Write,
    /// super_admin, and not through the assistant (Elastic IPs and firewall rules): a member
    /// of the organization using the assistant is told so whatever the role.
    WriteNotAssistant,
}

/// What a change is made to, and what else the pipeline needs to know of it.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub id: Uuid,
    pub rights: Rights,
    /// Loaded even once gone, so the replay of a deletion finds its key's organization; the
    /// change itself still finds nothing.
    pub tombstones: bool,
    /// What a duplicate name the store finds in the change is about, and the name.
    pub naming: Option<(Resource, String)>,
}

impl Target {
    pub fn of(id: Uuid) -> Target {
        Target {
            id,
            rights: Rights::Write,
            tombstones: false,
            naming: None,
        }
    }

    pub fn not_by_assistant(self) -> Target {
        Target {
            rights: Rights::WriteNotAssistant,
            ..self
        }
    }

    pub fn with_tombstones(self) -> Target {
        Target {
            tombstones: true,
            ..self
        }
    }

    pub fn naming(self, resource: Resource, name: impl Into<String>) -> Target {
        Target {
            naming: Some((resource, name.into())),
            ..self
        }
    }
}

/// The object a change is decided on, with what a caller's precondition is checked on: the
/// object as the faces show it.
pub(crate) trait Located: Send + Sync {
    type Shown: ?Sized;
    fn shown(&self) -> &Self::Shown;
}

/// An object whose faces show a view of it (an Elastic IP, an auth server).
pub(crate) struct Seen<V, T> {
    pub view: V,
    pub value: T,
}

impl<V: Send + Sync, T: Send + Sync> Located for Seen<V, T> {
    type Shown = V;
    fn shown(&self) -> &V {
        &self.view
    }
}

/// Objects shown as they are.
macro_rules! shown_as_is {
    ($($t:ty),+ $(,)?) => {$(
        impl Located for $t {
            type Shown = $t;
            fn shown(&self) -> &$t {
                self
            }
        }
    )+};
}

shown_as_is!(
    crate::model::cluster::Cluster,
    crate::model::node_pool::NodePool,
    crate::model::node::Node,
    crate::model::firewall::FirewallRule,
);

/// One change ready to commit, as the pipeline hands it to its aggregate.
pub(crate) struct Commit<'a, A: Aggregate> {
    /// The aggregate as it was loaded; `None` for a create.
    pub current: Option<&'a A>,
    pub changes: A::Changes,
    pub reconcile: bool,
    pub zone_capacity: Option<ZoneCapacity>,
    pub audit: Option<crate::model::audit::AuditEvent>,
    pub operation: Option<ClusterOperation>,
    pub completion: Option<crate::model::idempotency::IdempotencyCompletion>,
    pub naming: &'a Option<(Resource, String)>,
}

/// How a commit ended when it did not.
pub(crate) enum Refused {
    /// A concurrent change won the race: decide again on what won it.
    Raced,
    Failed(DomainError),
}

/// What a change is made to and committed on whole: a cluster with everything under it, or an
/// auth server with its credentials.
#[async_trait]
pub(crate) trait Aggregate: Clone + Send + Sync + Sized + 'static {
    /// What a decision on it changes.
    type Changes: Send;
    /// What "not found" names.
    const RESOURCE: Resource;

    fn organization_id(&self) -> Uuid;
    /// Gone already (a deleted cluster kept as a tombstone).
    fn is_gone(&self) -> bool {
        false
    }
    /// What its audit events hang under.
    fn parent(id: Uuid) -> Parent;
    /// Whether provisioning works on it (a cluster) or its changes take effect as they commit
    /// (an auth server).
    const PROVISIONED: bool;
    /// As current as the database; `None` when there is no such thing.
    async fn load(s: &Services, id: Uuid) -> Result<Option<Self>, DomainError>;
    /// The aggregate a change is decided on: itself, or (an auth server) stamped with the
    /// time the change will carry, so the answer shows what a read will show next.
    fn for_decision(&self, _s: &Services) -> Self {
        self.clone()
    }
    /// The id of the aggregate these changes are made to (a create's: the new one's).
    fn subject(current: Option<&Self>, changes: &Self::Changes) -> Uuid;
    /// Commits one change in one transaction.
    async fn commit(s: &Services, commit: Commit<'_, Self>) -> Result<(), Refused>;
}

impl Services {
    /// Makes a change to an existing `target` through every stage of the pipeline: `locate`
    /// finds the object the change is decided on (the precondition `expect` is checked on it),
    /// `decide` decides the change on the current aggregate and that object.
    pub(crate) async fn mutate<A, O, T>(
        &self,
        cmd: Command<'_, Scheduled<T>>,
        target: Target,
        expect: Expect<'_, O::Shown>,
        locate: impl AsyncFn(&A) -> Result<O, DomainError>,
        mut decide: impl AsyncFnMut(&A, O) -> Result<Decision<A::Changes, T>, DomainError>,
    ) -> Result<Answer<Scheduled<T>>, DomainError>
    where
        A: Aggregate,
        O: Located,
        T: Send + Sync,
    {
        let caller = cmd.caller;
        // 1. authorize.
        let mut current: A = self.authorized(caller, &target).await?;
        let org = current.organization_id();
        let span = change_span(org, Some(target.id));
        // 2. claim the key; 7. settle it.
        let answer = self
            .idempotently(org, cmd.key, async |held| {
                if current.is_gone() {
                    return Err(DomainError::NotFound(A::RESOURCE));
                }
                for attempt in 0..MAX_ATTEMPTS {
                    // 3. load (again, after a lost race).
                    if attempt > 0 {
                        current = A::load(self, target.id)
                            .await?
                            .filter(|a| !a.is_gone())
                            .ok_or(DomainError::NotFound(A::RESOURCE))?;
                    }
                    // 4. the precondition, on the object as it is stored.
                    let object = locate(&current).await?;
                    check(expect, object.shown())?;
                    // 5. decide.
                    let decided_on = current.for_decision(self);
                    let decision = decide(&decided_on, object).await?;
                    // 6. commit.
                    match self
                        .commit(caller, org, Some(&current), decision, held, &target.naming)
                        .await
                    {
                        Ok(answer) => return Ok(answer),
                        Err(Refused::Raced) => continue,
                        Err(Refused::Failed(e)) => return Err(e),
                    }
                }
                Err(DomainError::Conflict(Conflict::ConcurrentModification))
            })
            .instrument(span.clone())
            .await;
        record_operation(&span, &answer);
        answer
    }

    /// Stage 1 of a change to `target`: the aggregate, once `caller` is known to be allowed to
    /// change it ([`Services::rights`]), with the organization's write budget spent.
    pub(crate) async fn authorized<A: Aggregate>(
        &self,
        caller: &Caller,
        target: &Target,
    ) -> Result<A, DomainError> {
        let current: A = self.rights(caller, target).await?;
        self.spend_write(&current.organization_id())?;
        Ok(current)
    }

    /// Whether `caller` may change `target`: refused before anything is loaded for a writer
    /// who is super_admin nowhere (so existence is not revealed), then by the role in the
    /// target's organization; the aggregate when allowed. Spends nothing.
    pub(crate) async fn rights<A: Aggregate>(
        &self,
        caller: &Caller,
        target: &Target,
    ) -> Result<A, DomainError> {
        access::require_writer_somewhere(caller)?;
        let current = A::load(self, target.id)
            .await?
            .filter(|a| target.tombstones || !a.is_gone())
            .ok_or(DomainError::NotFound(A::RESOURCE))?;
        let org = current.organization_id();
        if target.rights == Rights::WriteNotAssistant {
            access::authorize_object(caller, &org, Access::Read)?;
            access::require_not_assistant(caller)?;
        }
        access::authorize_object(caller, &org, Access::Write)?;
        Ok(current)
    }

    /// Makes something new in the organization `organization` names: the same stages without
    /// a load or a precondition. `decide` runs once the key is held.
    pub(crate) async fn create<A, T>(
        &self,
        cmd: Command<'_, Scheduled<T>>,
        organization: &OrgRef,
        naming: Option<(Resource, String)>,
        decide: impl AsyncFnOnce(
            &crate::model::identity::Organization,
        ) -> Result<Decision<A::Changes, T>, DomainError>,
    ) -> Result<Answer<Scheduled<T>>, DomainError>
    where
        A: Aggregate,
        T: Send + Sync,
    {
        let caller = cmd.caller;
        let org =
            access::resolve_create_org(self.ports.identity.as_ref(), caller, organization).await?;
        self.spend_write(&org.id)?;
        let span = change_span(org.id, None);
        let answer = self
            .idempotently(org.id, cmd.key, async |held| {
                let decision = decide(&org).await?;
                match self
                    .commit::<A, T>(caller, org.id, None, decision, held, &naming)
                    .await
                {
                    Ok(answer) => Ok(answer),
                    // Nothing existed to race with: a duplicate is the only way a create loses.
                    Err(Refused::Raced) => {
                        Err(DomainError::Conflict(Conflict::ConcurrentModification))
                    }
                    Err(Refused::Failed(e)) => Err(e),
                }
            })
            .instrument(span.clone())
            .await;
        record_operation(&span, &answer);
        answer
    }

    /// Stage 6: the decision committed with its audit event, its operation and the answer on
    /// the key.
    async fn commit<A, T>(
        &self,
        caller: &Caller,
        organization_id: Uuid,
        current: Option<&A>,
        decision: Decision<A::Changes, T>,
        held: Option<&Held<'_, Scheduled<T>>>,
        naming: &Option<(Resource, String)>,
    ) -> Result<Scheduled<T>, Refused>
    where
        A: Aggregate,
        T: Send + Sync,
    {
        let Decision {
            changes,
            reconcile,
            zone_capacity,
            audit,
            answer,
        } = decision;
        let Some(changes) = changes else {
            return Ok(Scheduled {
                value: answer,
                operation: None,
            });
        };
        let subject = A::subject(current, &changes);
        let operation = match &audit {
            Some(a) if reconcile && A::PROVISIONED => OperationKind::of(a.resource, a.action)
                .map(|kind| self.new_operation(caller, subject, organization_id, kind, a)),
            _ => None,
        };
        let value = Scheduled {
            value: answer,
            operation: operation.as_ref().map(|o| OperationRef {
                cluster_id: o.cluster_id,
                id: o.id,
            }),
        };
        let outcome = if reconcile {
            Outcome::Accepted
        } else {
            Outcome::Applied
        };
        let parent = Some(A::parent(subject));
        let audit = audit.map(|a| self.audit_event(caller, organization_id, parent, a, outcome));
        let commit = Commit {
            current,
            changes,
            reconcile,
            zone_capacity,
            audit,
            operation,
            completion: held.map(|h| h.completion(&value)),
            naming,
        };
        A::commit(self, commit).await?;
        held.inspect(|h| h.committed());
        Ok(value)
    }
}

/// The span of one change inside its use case's: the organization and the object it is decided
/// on (ids only: names are customer-written), and the operation it starts once committed.
fn change_span(organization: Uuid, object: Option<Uuid>) -> tracing::Span {
    tracing::info_span!(
        "change",
        organization = %organization,
        object = object.map(tracing::field::display),
        operation = tracing::field::Empty,
    )
}

fn record_operation<T>(span: &tracing::Span, answer: &Result<Answer<Scheduled<T>>, DomainError>) {
    if let Ok(Answer::Fresh(Scheduled {
        operation: Some(op),
        ..
    })) = answer
    {
        span.record("operation", tracing::field::display(op.id));
    }
}
