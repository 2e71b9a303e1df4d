//! Storage ports. Each write is one call and one transaction: the use case decides with pure
//! rules, then hands the whole change to [`ClusterRepository::commit`], which applies it
//! atomically or not at all. Optimistic concurrency on the cluster's revision keeps concurrent
//! changes from losing each other; the database's unique indexes catch every name race.

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::approval::{Approval, ApprovalOutcome, ApprovalStatus};
use crate::model::audit::{AuditEvent, AuditQuery};
use crate::model::auth_server::AuthServer;
use crate::model::cluster::{Cluster, Exposure};
use crate::model::elastic_ip::ElasticIp;
use crate::model::firewall::FirewallRule;
use crate::model::idempotency::{IdempotencyCompletion, IdempotencyRecord, IdempotencyScope};
use crate::model::kubeconfig::{IssuedCredential, SealedCredentials};
use crate::model::node::Node;
use crate::model::node_pool::NodePool;
use crate::model::operation::{ClusterOperation, OperationKind, OperationStatus, Settled};
use crate::model::secret::{SealedSecret, TokenDigest};
use crate::model::session::{SessionRevocations, SessionStanding, SessionSubject};
use crate::names::{DnsLabel, NodeName};

/// The unique rule a write broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UniqueRule {
    ClusterName,
    PoolName,
    ElasticIpName,
    ElasticIpAddress,
    FirewallRuleName,
    AuthServerName,
    CredentialName,
}

/// Errors of every storage port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// A unique rule would be broken; nothing was written.
    #[error("unique rule {0:?} would be broken")]
    Duplicate(UniqueRule),
    /// The cluster (or auth server) changed since it was read; nothing was written.
    #[error("the record changed since it was read")]
    RevisionMismatch,
    /// The idempotency key is no longer held by this request; nothing was written.
    #[error("the idempotency lease was lost")]
    LeaseLost,
    /// The write's [`ZoneCapacity`] would be passed; nothing was written.
    #[error("the zone has no room for the nodes the write adds")]
    CapacityExhausted,
    /// The database cannot be reached or the pool is exhausted: `DomainError::ServiceUnavailable`,
    /// retry later.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// Anything else: a bug or a broken invariant.
    #[error("storage failure: {0}")]
    Internal(String),
}

/// A page request: `page` from 1, `size` 1-100.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub page: u32,
    pub size: u32,
}

impl PageRequest {
    pub fn offset(&self) -> u64 {
        u64::from(self.page.saturating_sub(1)) * u64::from(self.size)
    }
}

/// How current a read of clusters must be.
///
/// Every read a write decides on is `Latest`. The API's reads are `Recent` unless the client
/// asks for the database, so a process may answer them from a cache kept current by the change
/// feed. The promise of `Recent`: never older than a write the same process committed (a
/// client sees its own writes), and another process's write shows once the change feed
/// delivered it to this process (milliseconds; measured by the benchmarks). When the feed
/// cannot vouch for the cache (its connection was lost, or its heartbeat is late), `Recent`
/// reads the database like `Latest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Freshness {
    /// What the database holds when the read runs.
    #[default]
    Latest,
    /// `Latest`, or a cached copy the change feed keeps current (see the type's comment).
    Recent,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
}

/// One change inside a [`ClusterWrite`].
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A new cluster with its pools (revision 1).
    InsertCluster(Cluster),
    /// The cluster's own columns (not its pools).
    UpdateCluster(Cluster),
    /// Deletion finished: the cluster becomes a tombstone and everything under it is removed,
    /// its Elastic IP addresses returning to their pools.
    RemoveCluster,
    InsertPool(NodePool),
    UpdatePool(NodePool),
    DeletePool(DnsLabel),
    InsertNode(Node),
    UpdateNode(Node),
    DeleteNode(NodeName),
    InsertElasticIp(ElasticIp),
    UpdateElasticIp(ElasticIp),
    DeleteElasticIp(Uuid),
    InsertFirewallRule(FirewallRule),
    UpdateFirewallRule(FirewallRule),
    DeleteFirewallRule(Uuid),
    SetCredentials(SealedCredentials),
}

/// A limit a write keeps: the nodes the live clusters of `zone` ask for (as
/// [`ClusterRepository::zone_node_demand`] counts them), read in the write's own transaction,
/// plus `adds` stay within `capacity`; otherwise nothing is written. Checked with the write
/// rather than by a read before it, so the check and the write see the same database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneCapacity {
    pub zone: String,
    pub adds: u64,
    pub capacity: u64,
}

impl ZoneCapacity {
    /// Whether `adds` more nodes fit beside `demand`.
    pub fn admits(&self, demand: u64) -> bool {
        demand.saturating_add(self.adds) <= self.capacity
    }
}

/// Everything one request or one provisioning step changes under one cluster, applied in one
/// transaction that also raises the cluster's revision (and notifies long-polls).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterWrite {
    pub cluster_id: Uuid,
    /// The revision the change was decided on; `None` only for `InsertCluster`.
    pub expected_revision: Option<i64>,
    pub changes: Vec<Change>,
    /// Schedule a reconcile of the cluster (the provisioning work).
    pub reconcile: bool,
    /// The zone capacity the write must keep, when it adds nodes.
    pub zone_capacity: Option<ZoneCapacity>,
    /// The answer to store on the request's idempotency key, committed with the change.
    pub idempotency: Option<IdempotencyCompletion>,
    /// The request that decided the change (its id), kept on the work it schedules so the
    /// provisioning that follows can be traced back to it; `None` for the reconciler's own.
    pub cause: Option<String>,
    /// The audit event of the change, for a change someone asked for (`None` for the
    /// reconciler's own writes, which the cluster's operations record).
    pub audit: Option<AuditEvent>,
    /// The operation clients follow for this change, when it hands work to provisioning
    /// (`reconcile` is then true); the store files it under the generation of work the
    /// write schedules.
    pub operation: Option<ClusterOperation>,
    pub at: DateTime<Utc>,
}

impl ClusterWrite {
    /// `changes` on the revision they were decided on, and nothing beside them: no
    /// provisioning, no audit event, no idempotency key, no cause. The writes that need more
    /// name it over this (`ClusterWrite { reconcile: true, ..ClusterWrite::plain(…) }`).
    pub fn plain(
        cluster_id: Uuid,
        expected_revision: Option<i64>,
        changes: Vec<Change>,
        at: DateTime<Utc>,
    ) -> ClusterWrite {
        ClusterWrite {
            cluster_id,
            expected_revision,
            changes,
            reconcile: false,
            zone_capacity: None,
            idempotency: None,
            cause: None,
            audit: None,
            operation: None,
            at,
        }
    }

    /// A new cluster as it is, at its creation time: how seeds and tests fill a store.
    pub fn insert(cluster: Cluster) -> ClusterWrite {
        let (id, at) = (cluster.id, cluster.created_at);
        ClusterWrite::plain(id, None, vec![Change::InsertCluster(cluster)], at)
    }
}

/// Clusters and everything under them.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait ClusterRepository: Send + Sync {
    /// The cluster with its pools, deleted ones (tombstones) included: callers check
    /// [`Cluster::is_gone`].
    async fn cluster(&self, id: Uuid, freshness: Freshness) -> Result<Option<Cluster>, StoreError>;
    /// Live clusters of an organization, ordered by `created_at`, then `id`; MUST take a
    /// constant number of queries whatever the page size.
    async fn list_clusters(
        &self,
        organization_id: Uuid,
        zone: Option<String>,
        page: PageRequest,
        freshness: Freshness,
    ) -> Result<Page<Cluster>, StoreError>;
    /// The revision and phase only (the state long-poll's cheap read).
    async fn revision(
        &self,
        id: Uuid,
    ) -> Result<Option<(i64, crate::model::cluster::ClusterPhase)>, StoreError>;
    /// Nodes of a cluster, or of one pool, ordered by name.
    async fn nodes(&self, cluster_id: Uuid, pool: Option<String>) -> Result<Vec<Node>, StoreError>;
    async fn elastic_ips(&self, cluster_id: Uuid) -> Result<Vec<ElasticIp>, StoreError>;
    async fn firewall_rules(&self, cluster_id: Uuid) -> Result<Vec<FirewallRule>, StoreError>;
    /// Live clusters whose owners asked for automatic upgrades and that are `Provisioned` with
    /// no upgrade in flight, whose maintenance window one of `open` admits and that had no
    /// automatic upgrade in that window yet: at most `limit`, the least recently changed
    /// first. (Selecting by the open windows keeps clusters whose windows are closed from
    /// filling the batch: at scale they would starve the others.)
    async fn auto_upgrade_candidates(
        &self,
        open: &[crate::model::maintenance_window::OpenWindows],
        limit: u32,
    ) -> Result<Vec<Uuid>, StoreError>;
    /// Addresses held by alive Elastic IPs of this exposure, across all clusters.
    async fn addresses_in_use(&self, exposure: Exposure) -> Result<HashSet<Ipv4Addr>, StoreError>;
    /// Nodes the live clusters of a zone ask for (sum of pool targets).
    async fn zone_node_demand(&self, zone: String) -> Result<u64, StoreError>;
    async fn credentials(&self, cluster_id: Uuid) -> Result<Option<SealedCredentials>, StoreError>;
    /// Applies a write atomically. MUST return `RevisionMismatch` when the cluster's revision
    /// is not `expected_revision`, `Duplicate` when a unique rule would break, `LeaseLost` when
    /// the idempotency completion's lease is no longer held, `CapacityExhausted` when the
    /// write's [`ZoneCapacity`] does not admit it; in each case nothing is written.
    /// Returns the new revision.
    async fn commit(&self, write: ClusterWrite) -> Result<i64, StoreError>;
}

/// Outcome of trying to claim an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    Claimed,
    Existing(IdempotencyRecord),
}

/// The idempotency keys.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Inserts the key as in progress with this lease, in its own short transaction, unless it
    /// exists; MUST never wait on another request holding the same key.
    async fn claim(&self, record: IdempotencyRecord) -> Result<ClaimOutcome, StoreError>;
    /// Takes over an expired claim: succeeds only if the key is still held by `stale_lease_id`.
    async fn take_over(
        &self,
        scope: IdempotencyScope,
        stale_lease_id: Uuid,
        new_lease_id: Uuid,
        lease_expires_at: DateTime<Utc>,
    ) -> Result<bool, StoreError>;
    /// Stores an answer on a key still in progress under `completion.lease_id`; does nothing
    /// when the key is already completed (its answer was committed with the change) or held by
    /// another lease.
    async fn complete(&self, completion: IdempotencyCompletion) -> Result<(), StoreError>;
    /// Gives the key up (a transient failure, `DomainError::is_transient`): a retry runs anew.
    async fn release(&self, scope: IdempotencyScope, lease_id: Uuid) -> Result<(), StoreError>;
    /// Deletes keys created before `before`; returns how many.
    async fn purge_created_before(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;
}

/// A unit of provisioning work: reconcile one cluster toward what was asked of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub id: Uuid,
    pub cluster_id: Uuid,
    /// Raised each time more work is asked while the operation is pending or running; a worker
    /// that finishes an older generation leaves the operation pending.
    pub generation: i64,
    pub attempts: i32,
    pub last_error: Option<String>,
    /// What last scheduled work on the cluster, as [`cause`] writes it: the request's id and,
    /// when the request was traced, its trace context.
    pub request_id: Option<String>,
}

impl Operation {
    /// The request id and the trace context (W3C `traceparent` text, opaque here) of what last
    /// scheduled this work.
    pub fn cause(&self) -> (Option<&str>, Option<&str>) {
        match self.request_id.as_deref() {
            None => (None, None),
            Some(text) => match text.split_once(' ') {
                Some((id, trace)) => (Some(id).filter(|id| *id != "-"), Some(trace)),
                None => (Some(text), None),
            },
        }
    }
}

/// The cause a change records for the provisioning work it schedules: the request id, then a
/// space and the trace context when there is one. One text, so that the work queue keeps it in
/// the column it always had; a request id never holds a space.
pub fn cause(request_id: Option<&str>, trace: Option<&str>) -> Option<String> {
    match (request_id, trace) {
        (Some(id), Some(trace)) => Some(format!("{id} {trace}")),
        (Some(id), None) => Some(id.to_owned()),
        // Work a trace asked for without a request id is still part of the trace.
        (None, Some(trace)) => Some(format!("- {trace}")),
        (None, None) => None,
    }
}

/// An operation claimed by one worker until `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationLease {
    pub operation: Operation,
    pub lease_id: Uuid,
    pub expires_at: DateTime<Utc>,
}

/// The durable operations queue shared by every server process.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait OperationQueue: Send + Sync {
    /// Claims the oldest runnable operation (pending and due, or running with an expired lease),
    /// skipping ones other workers hold; MUST never hand one operation to two workers.
    async fn claim(
        &self,
        worker: String,
        lease: Duration,
    ) -> Result<Option<OperationLease>, StoreError>;
    /// Finished: done, unless more work was asked meanwhile (then pending again).
    async fn finish(&self, lease: OperationLease) -> Result<(), StoreError>;
    /// Failed transiently: pending again after `retry_at`, with the attempt and error recorded.
    async fn retry(
        &self,
        lease: OperationLease,
        error: String,
        retry_at: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// Gives a lease back with work remaining (the lease ran short, or the worker is stopping):
    /// pending again at once, no error recorded, and the attempts reset since the work
    /// progressed. Does nothing when the lease was lost.
    async fn requeue(&self, lease: OperationLease) -> Result<(), StoreError>;
    /// Operations not yet done.
    async fn depth(&self) -> Result<u64, StoreError>;
}

/// Why a wait of the [`ChangeFeed`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The revision may have moved, or the time ran out: read it again.
    Maybe,
    /// The process is stopping: answer with what is there now rather than wait on.
    Closing,
}

/// Wakes state long-polls when a cluster's revision moves, across server processes.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait ChangeFeed: Send + Sync {
    /// Resolves when the cluster's revision may have moved past `since`, or after `timeout`
    /// (`Wake::Maybe`), or at once once the process is stopping (`Wake::Closing`, from then on
    /// for every wait). MUST hold no database connection while waiting. Spurious wake-ups are
    /// allowed: the caller reads the revision again.
    async fn wait(&self, cluster_id: Uuid, since: i64, timeout: Duration) -> Wake;
}

/// What one auth-server request changes, in one transaction.
#[derive(Debug, Clone, PartialEq)]
pub enum AuthServerChange {
    Insert(AuthServer),
    /// Replaces the stored server (credentials included) if its `updated_at` is still
    /// `expected_updated_at`.
    Update {
        server: AuthServer,
        expected_updated_at: DateTime<Utc>,
    },
    Delete(Uuid),
    /// Deletes the server only if its `updated_at` is still `expected_updated_at`
    /// (`RevisionMismatch` otherwise): a conditional delete.
    DeleteIfUnchanged {
        id: Uuid,
        expected_updated_at: DateTime<Utc>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct AuthServerWrite {
    pub change: AuthServerChange,
    pub audit: AuditEvent,
    pub idempotency: Option<IdempotencyCompletion>,
}

/// Gateway auth servers and their credentials.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait AuthServerRepository: Send + Sync {
    async fn auth_server(&self, id: Uuid) -> Result<Option<AuthServer>, StoreError>;
    /// An organization's servers, optionally of one environment, ordered by `created_at`.
    async fn list_auth_servers(
        &self,
        organization_id: Uuid,
        environment: Option<String>,
    ) -> Result<Vec<AuthServer>, StoreError>;
    /// Applies a change with its audit entry; MUST return `Duplicate(AuthServerName)` for a
    /// name taken in the organization and environment, `RevisionMismatch` for a lost race.
    async fn write_auth_server(&self, write: AuthServerWrite) -> Result<(), StoreError>;
}

/// The audit trail of every organization. Events are written by the repositories, in the
/// transaction of the change they tell about; this port reads and expires them.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait AuditLog: Send + Sync {
    /// The organization's events the query asks for, newest first (`at`, then `id`, both
    /// descending), at most `query.limit`; MUST take one query whatever the filters.
    async fn audit_events(&self, query: AuditQuery) -> Result<Vec<AuditEvent>, StoreError>;
    /// Removes events older than `before`, never a younger one; returns how many. A store may
    /// remove old events by whole periods (PostgreSQL's drops whole months), so an event can
    /// outlive `before` until all of its period has.
    async fn purge_audit_before(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;
}

/// The operations clients follow: one per change that handed work to provisioning, written
/// with the change (`ClusterWrite::operation`), settled when provisioning finishes.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait OperationLog: Send + Sync {
    /// A cluster's operations, newest first (`created_at`, then `id`), one page.
    async fn cluster_operations(
        &self,
        cluster_id: Uuid,
        status: Option<OperationStatus>,
        page: PageRequest,
    ) -> Result<Page<ClusterOperation>, StoreError>;
    async fn cluster_operation(
        &self,
        cluster_id: Uuid,
        id: Uuid,
    ) -> Result<Option<ClusterOperation>, StoreError>;
    /// The cluster's running operations scheduled with work of `generation` or before.
    async fn open_operations(
        &self,
        cluster_id: Uuid,
        generation: i64,
    ) -> Result<Vec<ClusterOperation>, StoreError>;
    /// Ends these operations (those still running; one settled already stays as it is).
    async fn settle_operations(
        &self,
        cluster_id: Uuid,
        settled: Vec<Settled>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// A failed attempt of the cluster's provisioning work: each of its running operations
    /// records the attempt count and the reason, in a customer's words.
    async fn record_attempt(
        &self,
        cluster_id: Uuid,
        attempts: i32,
        error: String,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// A step provisioning took: the cluster's running operations of `kind` show it as their
    /// progress, in a customer's words.
    async fn record_progress(
        &self,
        cluster_id: Uuid,
        kind: OperationKind,
        progress: String,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// Removes operations that finished before `before`, never a running one or one that
    /// finished later; returns how many. As with audit events, a store may remove them by
    /// whole periods, so some outlive `before` for a while.
    async fn purge_finished_before(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;
}

/// What a revocation ends: one download's credential, or all of a cluster's (a rotation,
/// which also replaces the standing token with `rotated`).
#[derive(Debug, Clone, PartialEq)]
pub enum Revoke {
    One(Uuid),
    All { rotated: SealedSecret },
}

/// A revocation, applied in one transaction with its audit event.
#[derive(Debug, Clone, PartialEq)]
pub struct Revocation {
    pub cluster_id: Uuid,
    pub revoke: Revoke,
    pub at: DateTime<Utc>,
    /// The user id of who revoked.
    pub by: String,
    pub audit: AuditEvent,
}

/// The credentials downloads asked for with a lifetime: recorded by the digest of their token,
/// never the token.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait KubeconfigCredentials: Send + Sync {
    /// Records a new credential with its audit event, in one transaction.
    async fn issue_credential(
        &self,
        credential: IssuedCredential,
        digest: TokenDigest,
        audit: AuditEvent,
    ) -> Result<(), StoreError>;
    /// A cluster's credentials, newest first.
    async fn issued_credentials(
        &self,
        cluster_id: Uuid,
    ) -> Result<Vec<IssuedCredential>, StoreError>;
    /// The credential whose token has this digest, whatever its cluster or status.
    async fn credential_by_digest(
        &self,
        digest: TokenDigest,
    ) -> Result<Option<IssuedCredential>, StoreError>;
    /// Revokes what the revocation names (credentials already revoked stay as they were) and
    /// writes its audit event; returns how many were revoked. A rotation also replaces the
    /// cluster's standing token.
    async fn revoke_credentials(&self, revocation: Revocation) -> Result<u64, StoreError>;
}

/// Sessions ended before their time (the sessions themselves live in sealed cookies).
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Records that the session `id` ended; the record is kept until `expires_at`, when the
    /// session would have ended anyway. Recording it twice is one record.
    async fn end_session(&self, id: Uuid, expires_at: DateTime<Utc>) -> Result<(), StoreError>;
    /// Ends every session of `subject` issued at or before `at`; kept until `expires_at`. A
    /// later call moves the instant forward, never back.
    async fn end_sessions_of(
        &self,
        subject: &SessionSubject,
        at: DateTime<Utc>,
        expires_at: DateTime<Utc>,
    ) -> Result<(), StoreError>;
    /// Whether `session` was ended by either record.
    async fn session_ended(&self, session: &SessionStanding) -> Result<bool, StoreError>;
    /// Every record still in force at `now`.
    async fn session_revocations(
        &self,
        now: DateTime<Utc>,
    ) -> Result<SessionRevocations, StoreError>;
    /// Forgets the records whose sessions are over by `now`; returns how many went.
    async fn purge_session_revocations(&self, now: DateTime<Utc>) -> Result<u64, StoreError>;
}

/// Approvals: what a person's assistant asked for, until the person decides.
#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait ApprovalStore: Send + Sync {
    /// Records a new approval with its audit event, in one transaction.
    async fn insert_approval(
        &self,
        approval: Approval,
        audit: AuditEvent,
    ) -> Result<(), StoreError>;
    async fn approval(&self, id: Uuid) -> Result<Option<Approval>, StoreError>;
    /// The approvals `user_id`'s assistant asked for, newest first, at most `limit`.
    async fn approvals_of(&self, user_id: String, limit: u32) -> Result<Vec<Approval>, StoreError>;
    /// Moves an approval from `from` to `to` with its audit event, in one transaction, only if
    /// it is still `from`; `false` (and nothing written) otherwise.
    async fn decide_approval(
        &self,
        id: Uuid,
        from: ApprovalStatus,
        to: ApprovalStatus,
        at: DateTime<Utc>,
        audit: AuditEvent,
    ) -> Result<bool, StoreError>;
    /// Records what became of an approved action (once: a later record changes nothing).
    async fn record_outcome(&self, id: Uuid, outcome: ApprovalOutcome) -> Result<(), StoreError>;
    /// Pending approvals whose time ran out by `now`, at most `limit`.
    async fn expired_approvals(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Approval>, StoreError>;
}

#[cfg(test)]
mod cause_tests {
    use super::*;

    #[test]
    fn a_cause_keeps_the_request_id_and_the_trace_apart() {
        const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let cases: [(Option<&str>, Option<&str>); 4] = [
            (Some("req-1"), Some(TRACE)),
            (Some("req-1"), None),
            (None, Some(TRACE)),
            (None, None),
        ];
        for (request_id, trace) in cases {
            let op = Operation {
                id: Uuid::nil(),
                cluster_id: Uuid::nil(),
                generation: 1,
                attempts: 0,
                last_error: None,
                request_id: cause(request_id, trace),
            };
            assert_eq!(op.cause(), (request_id, trace));
        }
    }
}
