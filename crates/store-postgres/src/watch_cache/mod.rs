//! The watch cache: `CachedStore` answers `Freshness::Recent` reads of clusters from memory,
//! kept exact by the change feed, the way the Kubernetes API server answers reads from a cache
//! fed by etcd's watch.
//!
//! The consistency model (docs/performance.md says it for users):
//! - a read on the process that committed a write shows that write: a commit through this
//!   store drops the cluster's copy before the commit returns;
//! - a write of another process shows once the change feed delivered it: its notification,
//!   sent after the commit, normally (the feed's delivery lag, measured by `make bench`), or
//!   the feed's read of the change log within a second when no notification came;
//! - while the feed cannot vouch for the cache (connection lost, heartbeat late), reads go to
//!   the database; when it is back the cache starts empty;
//! - `Freshness::Latest` always reads the database.
//!
//! Authorization is not the cache's business: the use cases check the organization of every
//! cluster they are given, cached or not, and a list is indexed per organization.

mod entry;
mod index;
mod state;

use std::collections::{HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use domain::model::cluster::{Cluster, ClusterPhase, Exposure};
use domain::model::elastic_ip::ElasticIp;
use domain::model::firewall::FirewallRule;
use domain::model::kubeconfig::SealedCredentials;
use domain::model::maintenance_window::OpenWindows;
use domain::model::node::Node;
use domain::ports::storage::{
    ClusterRepository, ClusterWrite, Freshness, Page, PageRequest, StoreError,
};
use uuid::Uuid;

pub(crate) use index::OrgIndex;
use state::BulkTicket;
pub use state::CacheStats;
pub(crate) use state::{Membership, WatchState};

use crate::{PgChangeFeed, PgStore};

/// Clusters the prefill reads per statement: large enough that a million-cluster fleet takes
/// a few hundred statements, small enough that one holds a pooled connection briefly.
pub const PREFILL_BATCH: u32 = 5_000;

/// What a prefill pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prefilled {
    /// Live clusters read.
    pub read: u64,
    /// Of those, kept (the rest were notified meanwhile, already held, or past the size).
    pub kept: u64,
}

/// A bulk read's window, closed when dropped: a prefill abandoned halfway (its task
/// cancelled, a read failed) does not leave notifications collecting in it.
struct Window<'a> {
    state: &'a WatchState,
    ticket: Option<BulkTicket>,
}

impl Window<'_> {
    fn finish(mut self, read: &[Cluster]) -> usize {
        match self.ticket.take() {
            Some(ticket) => self.state.finish_bulk(ticket, read),
            None => 0,
        }
    }
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.state.finish_bulk(ticket, &[]);
        }
    }
}

/// How many times a list tries to settle its organization's pending changes before it reads
/// the page from the database instead.
const LIST_ATTEMPTS: usize = 3;

/// `ClusterRepository` over [`PgStore`], answering `Recent` reads from the watch cache of
/// the process's change feed. Every other call goes to the store.
#[derive(Clone)]
pub struct CachedStore {
    store: PgStore,
    state: Arc<WatchState>,
    feed: PgChangeFeed,
}

impl std::fmt::Debug for CachedStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedStore")
            .field("store", &self.store)
            .field("state", &self.state)
            .finish()
    }
}

impl CachedStore {
    /// The store, cached by the feed's watch cache (sized when the feed was started).
    pub fn new(store: PgStore, feed: &PgChangeFeed) -> CachedStore {
        CachedStore {
            store,
            state: feed.watch(),
            feed: feed.clone(),
        }
    }

    /// Hits, misses and bypasses so far, and the clusters held now.
    pub fn stats(&self) -> CacheStats {
        self.state.stats()
    }

    /// How long ago this process's change feed last proved that it had applied every committed
    /// change; it does once a second while it listens, whatever the cache's size.
    pub fn feed_heartbeat_age(&self) -> Duration {
        self.state.heartbeat_age(Instant::now())
    }

    /// Reads every live cluster with its pools, `batch` at a time in id order, and keeps them
    /// up to the cache's size, without ever keeping a copy a notification overtook (the rule
    /// "Bulk reads" in `state.rs`). `None` when the cache stopped being trusted or the feed
    /// reconnected meanwhile: what was kept went with the reconnect.
    pub async fn prefill(&self, batch: u32) -> Result<Option<Prefilled>, StoreError> {
        Ok(self
            .prefill_with(batch, || async {})
            .await?
            .map(|(done, _)| done))
    }

    /// [`Self::prefill`], running `between` after each batch was read and before it is kept:
    /// for tests to commit a change in that gap.
    #[cfg(feature = "test-support")]
    #[doc(hidden)]
    pub async fn prefill_racing<F, Fut>(
        &self,
        batch: u32,
        between: F,
    ) -> Result<Option<Prefilled>, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        Ok(self
            .prefill_with(batch, between)
            .await?
            .map(|(done, _)| done))
    }

    /// The pass, and the epoch it filled.
    async fn prefill_with<F, Fut>(
        &self,
        batch: u32,
        mut between: F,
    ) -> Result<Option<(Prefilled, u64)>, StoreError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        let batch = batch.max(1);
        let mut done = Prefilled::default();
        let mut epoch = None;
        let mut after = None;
        while self.state.has_room() {
            let Some(ticket) = self.state.begin_bulk(Instant::now()) else {
                return Ok(None);
            };
            let window = Window {
                state: &self.state,
                ticket: Some(ticket),
            };
            if *epoch.get_or_insert(ticket.epoch) != ticket.epoch {
                return Ok(None);
            }
            let read = self.store.live_clusters_after(after, batch).await?;
            between().await;
            let kept = window.finish(&read);
            if self.state.epoch() != ticket.epoch {
                return Ok(None);
            }
            done.read += read.len() as u64;
            done.kept += kept as u64;
            match read.last() {
                Some(last) if read.len() >= batch as usize => after = Some(last.id),
                _ => break,
            }
        }
        // No batch at all: the cache was full already, which fills this epoch too.
        Ok(Some((done, epoch.unwrap_or_else(|| self.state.epoch()))))
    }

    /// Keeps the cache filled in the background: a prefill pass once the feed listens, and
    /// again after every reconnect (the cache starts empty then). Reads go on meanwhile; the
    /// pass only saves the misses. Ends when the feed is stopped.
    pub async fn keep_filled(self, batch: u32) {
        const IDLE: Duration = Duration::from_millis(250);
        const AFTER_FAILURE: Duration = Duration::from_secs(5);
        let mut filled = None;
        while !self.feed.is_stopped() {
            if filled == Some(self.state.epoch()) || !self.state.trusted(Instant::now()) {
                tokio::time::sleep(IDLE).await;
                continue;
            }
            let started = Instant::now();
            match self.prefill_with(batch, || async {}).await {
                Ok(Some((done, epoch))) => {
                    filled = Some(epoch);
                    tracing::info!(
                        read = done.read,
                        kept = done.kept,
                        ms = started.elapsed().as_millis() as u64,
                        "watch cache prefilled"
                    );
                }
                // Not trusted any more, or a reconnect: the next turn decides.
                Ok(None) => tokio::time::sleep(IDLE).await,
                Err(error) => {
                    tracing::warn!(%error, "watch cache prefill failed; trying again");
                    tokio::time::sleep(AFTER_FAILURE).await;
                }
            }
        }
    }

    /// Reads clusters, from the cache where it holds them and in one statement for the rest,
    /// keeping what it read. In the order of `ids`; an unknown id is absent.
    async fn clusters(&self, ids: &[Uuid]) -> Result<HashMap<Uuid, Cluster>, StoreError> {
        let now = Instant::now();
        let mut found = HashMap::with_capacity(ids.len());
        let mut tickets = HashMap::new();
        for &id in ids {
            match self.state.cached(id, now) {
                Some(c) => {
                    found.insert(id, c);
                }
                None => {
                    tickets.insert(id, self.state.begin_load(id, now));
                }
            }
        }
        if tickets.is_empty() {
            return Ok(found);
        }
        let read = self
            .store
            .clusters_by_ids(tickets.keys().copied().collect())
            .await?;
        for cluster in read {
            if let Some(Some(ticket)) = tickets.get(&cluster.id) {
                self.state.finish_load(*ticket, &cluster);
            }
            found.insert(cluster.id, cluster);
        }
        Ok(found)
    }

    /// A page from the organization's index; `None` when the cache cannot answer it.
    async fn cached_page(
        &self,
        org: Uuid,
        zone: Option<&str>,
        page: PageRequest,
    ) -> Result<Option<Page<Cluster>>, StoreError> {
        let Some(handle) = self.state.org(org, Instant::now()) else {
            return Ok(None);
        };
        if !handle.built {
            match self.store.org_index(org).await {
                Ok(index) => self.state.install(org, handle, index),
                Err(e) => {
                    self.state.drop_org(org, handle);
                    return Err(e);
                }
            }
        }
        for _ in 0..LIST_ATTEMPTS {
            let pending = self.state.take_pending(org, handle);
            if !pending.is_empty() {
                match self.clusters(&pending).await {
                    Ok(read) => {
                        let read: Vec<(Uuid, Option<&Cluster>)> =
                            pending.iter().map(|id| (*id, read.get(id))).collect();
                        self.state.resolve(org, handle, &read);
                    }
                    Err(e) => {
                        self.state.drop_org(org, handle);
                        return Err(e);
                    }
                }
            }
            let Some((ids, total)) = self.state.page(org, handle, zone, page) else {
                continue;
            };
            let mut found = self.clusters(&ids).await?;
            let mut items = Vec::with_capacity(ids.len());
            for id in &ids {
                match found.remove(id) {
                    // The index is behind a removal the feed has not delivered yet, but this
                    // read saw: the database answers the whole page instead.
                    Some(c) if c.organization_id == org && !c.is_gone() => {
                        items.push(c);
                    }
                    _ => return Ok(None),
                }
            }
            return Ok(Some(Page { items, total }));
        }
        Ok(None)
    }
}

#[async_trait]
impl ClusterRepository for CachedStore {
    async fn cluster(&self, id: Uuid, freshness: Freshness) -> Result<Option<Cluster>, StoreError> {
        let now = Instant::now();
        if freshness == Freshness::Latest {
            return self.store.cluster(id, Freshness::Latest).await;
        }
        if let Some(c) = self.state.cached(id, now) {
            return Ok(Some(c));
        }
        let ticket = self.state.begin_load(id, now);
        if ticket.is_none() {
            self.state.bypassed();
        }
        let read = self.store.cluster(id, Freshness::Latest).await?;
        if let (Some(ticket), Some(c)) = (ticket, &read) {
            self.state.finish_load(ticket, c);
        }
        Ok(read)
    }

    async fn list_clusters(
        &self,
        organization_id: Uuid,
        zone: Option<String>,
        page: PageRequest,
        freshness: Freshness,
    ) -> Result<Page<Cluster>, StoreError> {
        if freshness == Freshness::Recent {
            if let Some(page) = self
                .cached_page(organization_id, zone.as_deref(), page)
                .await?
            {
                return Ok(page);
            }
            self.state.bypassed();
        }
        self.store
            .list_clusters(organization_id, zone, page, Freshness::Latest)
            .await
    }

    async fn revision(&self, id: Uuid) -> Result<Option<(i64, ClusterPhase)>, StoreError> {
        self.store.revision(id).await
    }

    async fn nodes(&self, cluster_id: Uuid, pool: Option<String>) -> Result<Vec<Node>, StoreError> {
        self.store.nodes(cluster_id, pool).await
    }

    async fn elastic_ips(&self, cluster_id: Uuid) -> Result<Vec<ElasticIp>, StoreError> {
        self.store.elastic_ips(cluster_id).await
    }

    async fn firewall_rules(&self, cluster_id: Uuid) -> Result<Vec<FirewallRule>, StoreError> {
        self.store.firewall_rules(cluster_id).await
    }

    async fn auto_upgrade_candidates(
        &self,
        open: &[OpenWindows],
        limit: u32,
    ) -> Result<Vec<Uuid>, StoreError> {
        self.store.auto_upgrade_candidates(open, limit).await
    }

    async fn addresses_in_use(&self, exposure: Exposure) -> Result<HashSet<Ipv4Addr>, StoreError> {
        self.store.addresses_in_use(exposure).await
    }

    async fn zone_node_demand(&self, zone: String) -> Result<u64, StoreError> {
        self.store.zone_node_demand(zone).await
    }

    async fn credentials(&self, cluster_id: Uuid) -> Result<Option<SealedCredentials>, StoreError> {
        self.store.credentials(cluster_id).await
    }

    /// Read-your-writes: the cluster's copy is dropped (and its organization's list told)
    /// before the commit returns, without waiting for the feed to echo the notification; then
    /// this process's long-polls of the cluster wake. A
    /// commit that failed without a clear answer (the connection broke) may have landed: the
    /// copy goes too.
    async fn commit(&self, write: ClusterWrite) -> Result<i64, StoreError> {
        let id = write.cluster_id;
        match self.store.commit_write(write).await {
            Ok(c) => {
                self.state
                    .changed(id, c.revision, Some(c.organization_id), c.membership);
                self.feed.committed(id, c.revision);
                Ok(c.revision)
            }
            Err(e) => {
                if matches!(e, StoreError::Unavailable(_) | StoreError::Internal(_)) {
                    self.state.forget(id);
                }
                Err(e)
            }
        }
    }
}
