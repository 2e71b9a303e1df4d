//! `WatchState`: what the watch cache holds, and the rules that keep every answer exact.
//!
//! The rules, each enforced below:
//! - **Trust.** The cache answers only while the change feed listens and proved itself alive
//!   within [`STALE_AFTER`] (its heartbeat reads the change log on the LISTEN connection, so
//!   every change committed before it was applied). Otherwise every read goes to the database.
//! - **Epoch.** Losing or regaining the LISTEN connection raises the epoch and drops what was
//!   cached. A read from the database is kept only if the epoch did not move while it ran:
//!   notifications missed meanwhile can never leave a stale copy behind.
//! - **Revisions.** Each cluster the cache holds or is loading has a slot with the highest
//!   revision seen for it, from notifications and from this process's own commits. A copy
//!   older than that is dropped, and a load that comes back older is not kept. A slot exists
//!   before its load starts, so a notification that arrives during the load is never missed.
//! - **Births.** Each slot is numbered when it is made, never twice, and a load keeps what it
//!   read only in the slot it started with. Dropping a slot (an eviction, an uncertain commit)
//!   therefore strands only the loads of that slot: a notification that came while no slot
//!   existed was not recorded anywhere, and a later slot (seen 0) must not take a read made
//!   before it. That is why an eviction does not move the epoch: it drops slots, every load of
//!   a slot that survives stays valid, and the loads of a dropped one can no longer land.
//! - **Bulk reads.** A read of many clusters that had no slot before it started (the prefill)
//!   opens a window first; every cluster notified while it is open is left out of what the read
//!   keeps, and the epoch moving discards all of it. A change committed after the read's
//!   snapshot is notified after the window opened, so it is either in the window or arrives
//!   once the copy has a slot, whose revision it then overtakes.
//! - **Lists.** An organization's index changes only when a cluster is created or removed; the
//!   ids those notifications name wait in `pending` and are read again before the next page.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use domain::model::cluster::Cluster;
use uuid::Uuid;

use super::entry::{self, Vocabulary};
use super::index::OrgIndex;

/// How long a heartbeat vouches for the feed: three missed beats and the cache stops answering.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(3);
const SHARDS: usize = 16;
/// Organizations whose list is indexed at once; past it every index is dropped and rebuilt on
/// demand.
const MAX_ORGS: usize = 10_000;

/// What a change did to the list of its organization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Membership {
    Created,
    Removed,
    /// The cluster stays where it is in its organization's list.
    Unchanged,
    /// Not said (a notification from an older server): any list may have changed.
    Unknown,
}

/// Counters for the metrics page.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Reads that went to the database while the cache was trusted (and were then kept).
    pub misses: u64,
    /// Reads that went to the database because the cache could not vouch for an answer.
    pub bypasses: u64,
    /// Clusters held now.
    pub entries: u64,
}

/// Proof that a load started while the cache was trusted, in this epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    epoch: u64,
    /// The birth of the slot the load started with.
    born: u64,
}

/// Proof that a bulk read started while the cache was trusted, with its window open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BulkTicket {
    pub epoch: u64,
    window: u64,
}

#[derive(Debug)]
struct Slot {
    /// The highest revision this process knows the cluster has reached.
    seen: i64,
    /// When the slot was made (`WatchState::births`): the loads it admits.
    born: u64,
    /// A copy at revision `seen`, when one is held: the cluster's compact encoding
    /// (`entry`), shared so a hit decodes it outside the shard's lock.
    value: Option<Arc<[u8]>>,
}

#[derive(Debug)]
struct OrgSlot {
    generation: u64,
    index: Option<OrgIndex>,
    pending: HashSet<Uuid>,
}

/// A handle on an organization's index, valid while its generation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OrgHandle {
    pub generation: u64,
    pub built: bool,
}

pub(crate) struct WatchState {
    capacity: usize,
    listening: AtomicBool,
    base: Instant,
    /// Milliseconds after `base` of the last proof that the feed is alive.
    beat: AtomicU64,
    epoch: AtomicU64,
    shards: Vec<Mutex<HashMap<Uuid, Slot>>>,
    orgs: Mutex<HashMap<Uuid, OrgSlot>>,
    generations: AtomicU64,
    /// The last slot birth given.
    births: AtomicU64,
    vocabulary: Vocabulary,
    /// Open bulk-read windows, each with the clusters notified since it opened.
    windows: Mutex<Vec<(u64, HashSet<Uuid>)>>,
    /// How many windows are open: a notification looks at `windows` only when some are.
    open_windows: AtomicUsize,
    window_numbers: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    bypasses: AtomicU64,
    /// Slots holding a copy, kept as they change (under their shard's lock) so that the
    /// metric never walks a million slots.
    held: AtomicU64,
}

impl std::fmt::Debug for WatchState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchState")
            .field("capacity", &self.capacity)
            .field("listening", &self.listening.load(Ordering::SeqCst))
            .field("epoch", &self.epoch.load(Ordering::SeqCst))
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the maps consistent, so a panic inside one does not
    // poison what they hold.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl WatchState {
    /// A cache of at most `capacity` clusters; 0 turns it off (every read goes to the
    /// database).
    pub fn new(capacity: usize) -> WatchState {
        WatchState {
            capacity,
            listening: AtomicBool::new(false),
            base: Instant::now(),
            beat: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            orgs: Mutex::default(),
            generations: AtomicU64::new(0),
            births: AtomicU64::new(0),
            vocabulary: Vocabulary::default(),
            windows: Mutex::default(),
            open_windows: AtomicUsize::new(0),
            window_numbers: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            bypasses: AtomicU64::new(0),
            held: AtomicU64::new(0),
        }
    }

    /// Gives `slot` a copy, or none, keeping `held` true.
    fn set_value(&self, slot: &mut Slot, value: Option<Arc<[u8]>>) {
        match (slot.value.is_some(), value.is_some()) {
            (false, true) => self.held.fetch_add(1, Ordering::Relaxed),
            (true, false) => self.held.fetch_sub(1, Ordering::Relaxed),
            _ => 0,
        };
        slot.value = value;
    }

    /// A slot left its shard: its copy, if any, is no longer held.
    fn removed(&self, slot: Option<Slot>) {
        if slot.is_some_and(|s| s.value.is_some()) {
            self.held.fetch_sub(1, Ordering::Relaxed);
        }
    }

    fn shard(&self, id: Uuid) -> MutexGuard<'_, HashMap<Uuid, Slot>> {
        let n = (id.as_u128() % SHARDS as u128) as usize;
        lock(&self.shards[n])
    }

    /// Clusters one shard may hold.
    fn shard_capacity(&self) -> usize {
        self.capacity.div_ceil(SHARDS)
    }

    /// A new slot, holding no copy yet.
    fn slot(&self, seen: i64) -> Slot {
        Slot {
            seen,
            born: self.births.fetch_add(1, Ordering::SeqCst) + 1,
            value: None,
        }
    }

    fn millis(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.base).as_millis()).unwrap_or(u64::MAX)
    }

    /// Drops everything and starts a new epoch: loads in flight will not be kept.
    fn forget_all(&self) {
        self.epoch.fetch_add(1, Ordering::SeqCst);
        for shard in &self.shards {
            for (_, slot) in lock(shard).drain() {
                self.removed(Some(slot));
            }
        }
        lock(&self.orgs).clear();
    }

    /// The feed is listening again: what changed while it was not is unknown.
    pub fn connected(&self, now: Instant) {
        self.forget_all();
        self.beat.store(self.millis(now), Ordering::SeqCst);
        self.listening.store(true, Ordering::SeqCst);
    }

    /// The feed lost its connection: nothing cached can be vouched for any more.
    pub fn lost(&self) {
        self.listening.store(false, Ordering::SeqCst);
        self.forget_all();
    }

    /// The feed proved itself alive: every change committed before `now` was applied.
    pub fn beat(&self, now: Instant) {
        self.beat.store(self.millis(now), Ordering::SeqCst);
    }

    /// How long ago the feed last proved that every committed change was applied (since the
    /// cache was made, if it never did): what a read here may lag behind the database.
    pub fn heartbeat_age(&self, now: Instant) -> Duration {
        Duration::from_millis(
            self.millis(now)
                .saturating_sub(self.beat.load(Ordering::SeqCst)),
        )
    }

    /// Whether the cache may answer now.
    pub fn trusted(&self, now: Instant) -> bool {
        self.capacity > 0
            && self.listening.load(Ordering::SeqCst)
            && self
                .millis(now)
                .saturating_sub(self.beat.load(Ordering::SeqCst))
                < STALE_AFTER.as_millis() as u64
    }

    /// Moves on every reconnect (rule "Epoch").
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::SeqCst)
    }

    /// A read the cache could not vouch for went to the database.
    pub fn bypassed(&self) {
        self.bypasses.fetch_add(1, Ordering::Relaxed);
    }

    /// The cached copy of a cluster, when the cache is trusted and holds a current one.
    pub fn cached(&self, id: Uuid, now: Instant) -> Option<Cluster> {
        if !self.trusted(now) {
            return None;
        }
        let bytes = self.shard(id).get(&id).and_then(|s| s.value.clone())?;
        // Bytes this module did not write never get in, so this is always `Some`; were it
        // not, the read goes to the database like any miss.
        let cluster = entry::decode(id, &bytes, &self.vocabulary)?;
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(cluster)
    }

    /// Before reading a cluster from the database to keep it: the slot that will collect
    /// notifications during the read, and the ticket that must still be valid after it.
    /// `None` when the cache is not trusted (the read is not kept).
    pub fn begin_load(&self, id: Uuid, now: Instant) -> Option<Ticket> {
        if !self.trusted(now) {
            return None;
        }
        let mut shard = self.shard(id);
        if !shard.contains_key(&id) && shard.len() >= self.shard_capacity() {
            drop(shard);
            self.evict(id);
            shard = self.shard(id);
        }
        let epoch = self.epoch.load(Ordering::SeqCst);
        let born = match shard.get(&id) {
            Some(slot) => slot.born,
            None => {
                let slot = self.slot(0);
                let born = slot.born;
                shard.insert(id, slot);
                born
            }
        };
        self.misses.fetch_add(1, Ordering::Relaxed);
        Some(Ticket { epoch, born })
    }

    /// Keeps what a load read, unless the epoch moved, its slot was dropped, or a newer
    /// revision was seen meanwhile.
    pub fn finish_load(&self, ticket: Ticket, cluster: &Cluster) {
        if self.epoch.load(Ordering::SeqCst) != ticket.epoch {
            return;
        }
        // Encoded before the lock is taken: other reads of the shard do not wait for it.
        let bytes = entry::encode(cluster, &self.vocabulary);
        let mut shard = self.shard(cluster.id);
        if self.epoch.load(Ordering::SeqCst) != ticket.epoch {
            return;
        }
        let Some(slot) = shard.get_mut(&cluster.id) else {
            return;
        };
        if slot.born == ticket.born && cluster.revision >= slot.seen {
            slot.seen = cluster.revision;
            self.set_value(slot, Some(bytes));
        }
    }

    /// Makes room in the shard of `id`: half of it goes (whichever come first in the map's
    /// order). The epoch stays: a load of a dropped slot cannot land (rule "Births").
    fn evict(&self, id: Uuid) {
        let mut shard = self.shard(id);
        let drop_n = shard.len() / 2 + 1;
        let victims: Vec<Uuid> = shard.keys().take(drop_n).copied().collect();
        for victim in victims {
            self.removed(shard.remove(&victim));
        }
    }

    /// A cluster reached `revision` (a notification, or a commit of this process).
    pub fn changed(&self, id: Uuid, revision: i64, org: Option<Uuid>, membership: Membership) {
        if self.open_windows.load(Ordering::SeqCst) > 0 {
            for (_, notified) in lock(&self.windows).iter_mut() {
                notified.insert(id);
            }
        }
        if let Some(slot) = self.shard(id).get_mut(&id)
            && revision > slot.seen
        {
            slot.seen = revision;
            self.set_value(slot, None);
        }
        if membership == Membership::Unchanged {
            return;
        }
        let mut orgs = lock(&self.orgs);
        match org {
            Some(org) => {
                if let Some(slot) = orgs.get_mut(&org) {
                    slot.pending.insert(id);
                }
            }
            None => {
                for slot in orgs.values_mut() {
                    slot.pending.insert(id);
                }
            }
        }
    }

    /// Drops what is known of a cluster whose state is uncertain (a commit without a clear
    /// outcome): a load in flight for it will not be kept, and its list is read again.
    pub fn forget(&self, id: Uuid) {
        let slot = self.shard(id).remove(&id);
        self.removed(slot);
        self.changed(id, 0, None, Membership::Unknown);
    }

    /// Whether some shard has room for a cluster it does not hold yet.
    pub fn has_room(&self) -> bool {
        let capacity = self.shard_capacity();
        self.shards.iter().any(|s| lock(s).len() < capacity)
    }

    /// Before a bulk read of clusters (the prefill): opens its window. `None` when the cache is
    /// not trusted (nothing read would be kept).
    pub fn begin_bulk(&self, now: Instant) -> Option<BulkTicket> {
        if !self.trusted(now) {
            return None;
        }
        let window = self.window_numbers.fetch_add(1, Ordering::SeqCst) + 1;
        {
            let mut windows = lock(&self.windows);
            windows.push((window, HashSet::new()));
            self.open_windows.store(windows.len(), Ordering::SeqCst);
        }
        // Read after the window is open: a reconnect from here on moves it past the ticket's.
        let epoch = self.epoch.load(Ordering::SeqCst);
        Some(BulkTicket { epoch, window })
    }

    /// Closes the window and keeps what the bulk read found, as far as there is room: not the
    /// clusters notified while it was open, not a copy older than a revision seen, nothing if
    /// the epoch moved. Clusters already held stay as they are. How many it kept.
    pub fn finish_bulk(&self, ticket: BulkTicket, read: &[Cluster]) -> usize {
        let notified = {
            let mut windows = lock(&self.windows);
            let at = windows.iter().position(|(w, _)| *w == ticket.window);
            let notified = at.map(|at| windows.swap_remove(at).1);
            self.open_windows.store(windows.len(), Ordering::SeqCst);
            notified
        };
        let Some(notified) = notified else {
            return 0;
        };
        let capacity = self.shard_capacity();
        let mut kept = 0;
        for cluster in read {
            if notified.contains(&cluster.id) || cluster.is_gone() {
                continue;
            }
            if self.epoch.load(Ordering::SeqCst) != ticket.epoch {
                return kept;
            }
            let bytes = entry::encode(cluster, &self.vocabulary);
            let mut shard = self.shard(cluster.id);
            if self.epoch.load(Ordering::SeqCst) != ticket.epoch {
                return kept;
            }
            let room = shard.len() < capacity;
            match shard.get_mut(&cluster.id) {
                Some(slot) if slot.value.is_none() && cluster.revision >= slot.seen => {
                    slot.seen = cluster.revision;
                    self.set_value(slot, Some(bytes));
                    kept += 1;
                }
                Some(_) => {}
                None if room => {
                    let mut slot = self.slot(cluster.revision);
                    self.set_value(&mut slot, Some(bytes));
                    shard.insert(cluster.id, slot);
                    kept += 1;
                }
                None => {}
            }
        }
        kept
    }

    /// The organization's index slot, made when missing; `None` when the cache is not trusted.
    pub fn org(&self, org: Uuid, now: Instant) -> Option<OrgHandle> {
        if !self.trusted(now) {
            return None;
        }
        let mut orgs = lock(&self.orgs);
        if !orgs.contains_key(&org) {
            let indexed: usize = orgs
                .values()
                .map(|s| s.index.as_ref().map_or(0, OrgIndex::len))
                .sum();
            if orgs.len() >= MAX_ORGS || indexed >= self.capacity {
                orgs.clear();
            }
        }
        let slot = orgs.entry(org).or_insert_with(|| OrgSlot {
            generation: self.generations.fetch_add(1, Ordering::SeqCst) + 1,
            index: None,
            pending: HashSet::new(),
        });
        Some(OrgHandle {
            generation: slot.generation,
            built: slot.index.is_some(),
        })
    }

    /// Installs an index read from the database after [`Self::org`] made its slot (so the
    /// creations and removals notified during the read wait in `pending`).
    pub fn install(&self, org: Uuid, handle: OrgHandle, index: OrgIndex) {
        let mut orgs = lock(&self.orgs);
        if let Some(slot) = orgs.get_mut(&org)
            && slot.generation == handle.generation
            && slot.index.is_none()
        {
            slot.index = Some(index);
        }
    }

    /// Takes the ids whose membership must be read again before the next page.
    pub fn take_pending(&self, org: Uuid, handle: OrgHandle) -> Vec<Uuid> {
        let mut orgs = lock(&self.orgs);
        match orgs.get_mut(&org) {
            Some(slot) if slot.generation == handle.generation => slot.pending.drain().collect(),
            _ => Vec::new(),
        }
    }

    /// Applies what was read for taken ids: live clusters of this organization are in its
    /// list, anything else (another organization's, a tombstone, unknown) is not.
    pub fn resolve(&self, org: Uuid, handle: OrgHandle, read: &[(Uuid, Option<&Cluster>)]) {
        let mut orgs = lock(&self.orgs);
        let Some(slot) = orgs.get_mut(&org) else {
            return;
        };
        if slot.generation != handle.generation {
            return;
        }
        let Some(index) = slot.index.as_mut() else {
            slot.pending.extend(read.iter().map(|&(id, _)| id));
            return;
        };
        for &(id, cluster) in read {
            match cluster {
                Some(c) if c.organization_id == org && !c.is_gone() => {
                    index.insert(id, c.created_at, &c.zone);
                }
                _ => index.remove(id),
            }
        }
    }

    /// Forgets an organization's index (a read it depended on failed): the next list builds
    /// it again.
    pub fn drop_org(&self, org: Uuid, handle: OrgHandle) {
        let mut orgs = lock(&self.orgs);
        if orgs
            .get(&org)
            .is_some_and(|s| s.generation == handle.generation)
        {
            orgs.remove(&org);
        }
    }

    /// One page of the organization's list, when its index is built and nothing is pending.
    pub fn page(
        &self,
        org: Uuid,
        handle: OrgHandle,
        zone: Option<&str>,
        page: domain::ports::storage::PageRequest,
    ) -> Option<(Vec<Uuid>, u64)> {
        let orgs = lock(&self.orgs);
        let slot = orgs.get(&org)?;
        if slot.generation != handle.generation || !slot.pending.is_empty() {
            return None;
        }
        slot.index.as_ref().map(|index| index.page(zone, page))
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            bypasses: self.bypasses.load(Ordering::Relaxed),
            entries: self.held.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use domain::model::cluster::ClusterPhase;
    use domain::ports::storage::PageRequest;
    use domain::testing::{ORG_A, ORG_B, cluster};

    use super::*;

    fn listening(capacity: usize) -> (WatchState, Instant) {
        let state = WatchState::new(capacity);
        let now = Instant::now();
        state.connected(now);
        (state, now)
    }

    fn at_revision(revision: i64) -> Cluster {
        Cluster {
            revision,
            ..cluster(ORG_A, ClusterPhase::Provisioned)
        }
    }

    fn revision_held(state: &WatchState, id: Uuid, now: Instant) -> Option<i64> {
        state.cached(id, now).map(|c| c.revision)
    }

    #[test]
    fn a_load_is_kept_and_answers_until_a_newer_revision_is_seen() {
        let (state, now) = listening(100);
        let c = at_revision(5);
        let ticket = state.begin_load(c.id, now);
        state.finish_load(ticket.unwrap_or(Ticket { epoch: 99, born: 0 }), &c);
        assert_eq!(revision_held(&state, c.id, now), Some(5));
        // An echo of an older or the same revision changes nothing.
        state.changed(c.id, 5, Some(ORG_A), Membership::Unchanged);
        assert_eq!(revision_held(&state, c.id, now), Some(5));
        state.changed(c.id, 6, Some(ORG_A), Membership::Unchanged);
        assert_eq!(revision_held(&state, c.id, now), None);
    }

    #[test]
    fn a_load_that_a_notification_overtook_is_not_kept() {
        let (state, now) = listening(100);
        let old = at_revision(5);
        let ticket = state.begin_load(old.id, now);
        // Committed and notified while the read of revision 5 was on its way back.
        state.changed(old.id, 6, Some(ORG_A), Membership::Unchanged);
        state.finish_load(ticket.unwrap_or(Ticket { epoch: 99, born: 0 }), &old);
        assert_eq!(revision_held(&state, old.id, now), None);
        // The next load (revision 6) is kept.
        let ticket = state.begin_load(old.id, now);
        state.finish_load(
            ticket.unwrap_or(Ticket { epoch: 99, born: 0 }),
            &at_revision(6),
        );
        assert_eq!(revision_held(&state, old.id, now), Some(6));
    }

    #[test]
    fn a_lost_or_regained_connection_drops_everything_and_loads_in_flight() {
        let (state, now) = listening(100);
        let c = at_revision(5);
        for break_it in [
            &(|s: &WatchState, now| s.connected(now)) as &dyn Fn(&WatchState, Instant),
            &|s: &WatchState, _| s.lost(),
        ] {
            state.connected(now);
            let ticket = state.begin_load(c.id, now);
            break_it(&state, now);
            state.connected(now);
            state.finish_load(ticket.unwrap_or(Ticket { epoch: 99, born: 0 }), &c);
            assert_eq!(revision_held(&state, c.id, now), None);
        }
        let ticket = state.begin_load(c.id, now);
        state.finish_load(ticket.unwrap_or(Ticket { epoch: 99, born: 0 }), &c);
        assert_eq!(revision_held(&state, c.id, now), Some(5));
        state.lost();
        assert_eq!(revision_held(&state, c.id, now), None);
        assert_eq!(state.begin_load(c.id, now), None);
    }

    #[test]
    fn without_a_recent_heartbeat_nothing_is_answered_or_kept() {
        let (state, now) = listening(100);
        let c = at_revision(5);
        let ticket = state.begin_load(c.id, now);
        state.finish_load(ticket.unwrap_or(Ticket { epoch: 99, born: 0 }), &c);
        let late = now + STALE_AFTER;
        assert!(!state.trusted(late));
        assert_eq!(revision_held(&state, c.id, late), None);
        assert_eq!(state.begin_load(c.id, late), None);
        state.beat(late);
        assert_eq!(revision_held(&state, c.id, late), Some(5));
    }

    #[test]
    fn the_heartbeat_age_counts_from_the_last_proof_even_while_the_feed_is_lost() {
        let (state, now) = listening(100);
        let second = Duration::from_secs(1);
        assert_eq!(state.heartbeat_age(now), Duration::ZERO);
        assert_eq!(state.heartbeat_age(now + 5 * second), 5 * second);
        state.beat(now + 5 * second);
        assert_eq!(state.heartbeat_age(now + 6 * second), second);
        // A lost connection proves nothing: the age keeps growing until the feed is back.
        state.lost();
        assert_eq!(state.heartbeat_age(now + 9 * second), 4 * second);
        state.connected(now + 9 * second);
        assert_eq!(state.heartbeat_age(now + 9 * second), Duration::ZERO);
    }

    #[test]
    fn a_cache_of_size_zero_answers_nothing() {
        let (state, now) = listening(0);
        assert!(!state.trusted(now));
        assert_eq!(state.begin_load(CLUSTER, now), None);
    }

    const CLUSTER: Uuid = Uuid::from_u128(7);

    #[test]
    fn the_cache_stays_within_its_size() {
        let (state, now) = listening(64);
        for n in 0..1_000u128 {
            let c = Cluster {
                id: Uuid::from_u128(n),
                ..at_revision(1)
            };
            if let Some(ticket) = state.begin_load(c.id, now) {
                state.finish_load(ticket, &c);
            }
        }
        let held = state.stats().entries;
        assert!((1..=64).contains(&held), "{held} clusters held");
    }

    /// The copies held, counted slot by slot (what `held` keeps without the walk).
    fn walked(state: &WatchState) -> u64 {
        state
            .shards
            .iter()
            .map(|s| lock(s).values().filter(|slot| slot.value.is_some()).count() as u64)
            .sum()
    }

    #[test]
    fn the_count_of_copies_held_follows_every_way_a_copy_comes_and_goes() {
        let (state, now) = listening(2 * SHARDS);
        let clusters: Vec<Cluster> = (0..4 * SHARDS as u128)
            .map(|n| Cluster {
                id: Uuid::from_u128(n),
                ..at_revision(1)
            })
            .collect();
        let steps: [(&str, &dyn Fn()); 6] = [
            ("loads, some evicting", &|| {
                for c in &clusters {
                    if let Some(ticket) = state.begin_load(c.id, now) {
                        state.finish_load(ticket, c);
                    }
                }
            }),
            ("changes", &|| {
                for c in clusters.iter().step_by(3) {
                    state.changed(c.id, 2, Some(ORG_A), Membership::Unchanged);
                }
            }),
            ("forgets", &|| {
                for c in clusters.iter().step_by(5) {
                    state.forget(c.id);
                }
            }),
            ("a bulk read", &|| {
                if let Some(ticket) = state.begin_bulk(now) {
                    state.finish_bulk(ticket, &clusters);
                }
            }),
            ("a lost feed", &|| state.lost()),
            ("a bulk read after reconnecting", &|| {
                state.connected(now);
                if let Some(ticket) = state.begin_bulk(now) {
                    state.finish_bulk(ticket, &clusters);
                }
            }),
        ];
        for (what, step) in steps {
            step();
            assert_eq!(state.stats().entries, walked(&state), "after {what}");
        }
        assert!(state.stats().entries > 0);
    }

    /// Clusters `n` of shard 0: ids that are multiples of the shard count.
    fn in_shard_zero(n: u128, revision: i64) -> Cluster {
        Cluster {
            id: Uuid::from_u128(n * SHARDS as u128),
            ..at_revision(revision)
        }
    }

    #[test]
    fn a_load_racing_an_eviction_never_leaves_a_stale_copy() {
        // One cluster per shard: every new load in shard 0 evicts the one before.
        let (state, now) = listening(SHARDS);
        let (old, other) = (in_shard_zero(1, 5), in_shard_zero(2, 1));
        let first = state.begin_load(old.id, now);
        // Another load evicts its slot; the change to revision 6 is then notified with no slot
        // to record it, and a second load of the cluster starts on a fresh slot.
        assert!(state.begin_load(other.id, now).is_some());
        state.changed(old.id, 6, Some(ORG_A), Membership::Unchanged);
        let second = state.begin_load(old.id, now);
        // The first load comes back with revision 5, read before the change: not kept.
        state.finish_load(first.unwrap_or(Ticket { epoch: 99, born: 0 }), &old);
        assert_eq!(revision_held(&state, old.id, now), None);
        let new = in_shard_zero(1, 6);
        state.finish_load(second.unwrap_or(Ticket { epoch: 99, born: 0 }), &new);
        assert_eq!(revision_held(&state, old.id, now), Some(6));
    }

    #[test]
    fn an_eviction_keeps_the_loads_of_the_slots_it_spares() {
        // Four clusters per shard: the fifth load in shard 0 drops three slots, keeps one.
        let (state, now) = listening(4 * SHARDS);
        let clusters: Vec<Cluster> = (1..=5).map(|n| in_shard_zero(n, 1)).collect();
        let tickets: Vec<Option<Ticket>> = clusters
            .iter()
            .map(|c| state.begin_load(c.id, now))
            .collect();
        for (c, ticket) in clusters.iter().zip(tickets) {
            state.finish_load(ticket.unwrap_or(Ticket { epoch: 99, born: 0 }), c);
        }
        // The spared slot's load and the fifth are kept: the epoch did not move.
        let held: Vec<bool> = clusters
            .iter()
            .map(|c| revision_held(&state, c.id, now).is_some())
            .collect();
        assert_eq!(held.iter().filter(|h| **h).count(), 2, "{held:?}");
        assert!(held[4]);
    }

    #[test]
    fn a_bulk_read_keeps_nothing_notified_while_its_window_was_open() {
        let (state, now) = listening(100);
        let (a, b) = (
            Cluster {
                id: Uuid::from_u128(1),
                ..at_revision(5)
            },
            Cluster {
                id: Uuid::from_u128(2),
                ..at_revision(5)
            },
        );
        let ticket = state.begin_bulk(now);
        // `a` changed after the read's snapshot, and was notified before the read ended.
        state.changed(a.id, 6, Some(ORG_A), Membership::Unchanged);
        let kept = ticket.map(|t| state.finish_bulk(t, &[a.clone(), b.clone()]));
        assert_eq!(kept, Some(1));
        assert_eq!(revision_held(&state, a.id, now), None);
        assert_eq!(revision_held(&state, b.id, now), Some(5));
        // Once the window is closed, a later change finds the copy's slot and drops it.
        state.changed(b.id, 6, Some(ORG_A), Membership::Unchanged);
        assert_eq!(revision_held(&state, b.id, now), None);
        // A reconnect while the read ran discards all of it.
        let ticket = state.begin_bulk(now);
        state.lost();
        state.connected(now);
        let kept = ticket.map(|t| state.finish_bulk(t, std::slice::from_ref(&a)));
        assert_eq!(kept, Some(0));
        assert_eq!(revision_held(&state, a.id, now), None);
        // Not trusted: no bulk read starts.
        state.lost();
        assert_eq!(state.begin_bulk(now), None);
    }

    #[test]
    fn a_bulk_read_fills_up_to_the_size_and_leaves_held_copies_alone() {
        let (state, now) = listening(SHARDS);
        let held = in_shard_zero(1, 7);
        let ticket = state.begin_load(held.id, now);
        state.finish_load(ticket.unwrap_or(Ticket { epoch: 99, born: 0 }), &held);
        let read: Vec<Cluster> = (0..40u128)
            .map(|n| Cluster {
                id: Uuid::from_u128(n),
                ..at_revision(1)
            })
            .chain([in_shard_zero(1, 3)])
            .collect();
        assert!(state.has_room());
        let kept = state.begin_bulk(now).map(|t| state.finish_bulk(t, &read));
        // One per shard, shard 0 already full.
        assert_eq!(kept, Some(SHARDS - 1));
        assert_eq!(state.stats().entries, SHARDS as u64);
        assert!(!state.has_room());
        assert_eq!(revision_held(&state, held.id, now), Some(7));
    }

    #[test]
    fn a_list_waits_for_creations_and_removals_to_be_read_again() {
        let (state, now) = listening(100);
        let page = PageRequest { page: 1, size: 10 };
        let handle = state.org(ORG_A, now).unwrap_or(OrgHandle {
            generation: 0,
            built: true,
        });
        assert!(!handle.built);
        let first = at_revision(1);
        let mut index = OrgIndex::default();
        index.insert(first.id, first.created_at, &first.zone);
        // A creation notified while the index was read from the database.
        let created = Cluster {
            id: Uuid::from_u128(2),
            created_at: first.created_at + chrono::Duration::seconds(1),
            ..at_revision(1)
        };
        state.changed(created.id, 1, Some(ORG_A), Membership::Created);
        // Another organization's creation and a plain change do not concern this list.
        state.changed(Uuid::from_u128(3), 1, Some(ORG_B), Membership::Created);
        state.changed(first.id, 2, Some(ORG_A), Membership::Unchanged);
        state.install(ORG_A, handle, index);
        assert_eq!(state.page(ORG_A, handle, None, page), None);
        assert_eq!(state.take_pending(ORG_A, handle), vec![created.id]);
        state.resolve(ORG_A, handle, &[(created.id, Some(&created))]);
        assert_eq!(
            state.page(ORG_A, handle, None, page),
            Some((vec![first.id, created.id], 2))
        );
        // Removed: read again, it is a tombstone.
        state.changed(first.id, 3, None, Membership::Removed);
        let tombstone = Cluster {
            deleted_at: Some(first.created_at),
            ..first.clone()
        };
        assert_eq!(state.take_pending(ORG_A, handle), vec![first.id]);
        state.resolve(ORG_A, handle, &[(first.id, Some(&tombstone))]);
        assert_eq!(
            state.page(ORG_A, handle, None, page),
            Some((vec![created.id], 1))
        );
        // A lost connection drops the index: the handle no longer answers.
        state.lost();
        state.connected(now);
        assert_eq!(state.page(ORG_A, handle, None, page), None);
    }
}
