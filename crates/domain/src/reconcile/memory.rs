//! An in-memory [`ClusterRepository`] holding one cluster, applying writes as the database
//! does (revision check, one change list at a time), for tests of reconciliation without
//! PostgreSQL (feature `mocks`).

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use uuid::Uuid;

use crate::model::cluster::{Cluster, ClusterPhase, Exposure};
use crate::model::elastic_ip::ElasticIp;
use crate::model::firewall::FirewallRule;
use crate::model::kubeconfig::SealedCredentials;
use crate::model::node::Node;
use crate::ports::storage::{
    Change, ClusterRepository, ClusterWrite, Freshness, Page, PageRequest, StoreError,
};
use crate::reconcile::ClusterState;

/// What the store holds, open to tests.
#[derive(Debug, Default)]
pub struct MemoryDb {
    pub cluster: Option<Cluster>,
    pub nodes: Vec<Node>,
    pub elastic_ips: Vec<ElasticIp>,
    pub firewall_rules: Vec<FirewallRule>,
    pub credentials: Option<SealedCredentials>,
    /// Every write applied, in order.
    pub commits: Vec<ClusterWrite>,
    /// How many further commits to refuse with `RevisionMismatch` (a concurrent change won).
    pub lose_races: usize,
    /// Every read and write answers `Unavailable` while set.
    pub unavailable: bool,
}

impl MemoryDb {
    /// A user's change made outside the reconciler: applied as is, raising the revision.
    pub fn user_change(&mut self, f: impl FnOnce(&mut MemoryDb)) {
        f(self);
        if let Some(c) = self.cluster.as_mut() {
            c.revision += 1;
        }
    }
}

/// One cluster in memory.
#[derive(Debug, Default)]
pub struct MemoryClusters(Mutex<MemoryDb>);

impl MemoryClusters {
    pub fn new(state: ClusterState) -> Self {
        MemoryClusters(Mutex::new(MemoryDb {
            cluster: Some(state.cluster),
            nodes: state.nodes,
            elastic_ips: state.elastic_ips,
            firewall_rules: state.firewall_rules,
            ..MemoryDb::default()
        }))
    }

    /// The stored data; a test's panic while holding it leaves it usable.
    pub fn db(&self) -> MutexGuard<'_, MemoryDb> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn read(&self) -> Result<MutexGuard<'_, MemoryDb>, StoreError> {
        let db = self.db();
        if db.unavailable {
            Err(StoreError::Unavailable(
                "the memory store is switched off".into(),
            ))
        } else {
            Ok(db)
        }
    }
}

fn missing(what: &str) -> StoreError {
    StoreError::Internal(format!("{what} not found"))
}

fn replace<T>(
    items: &mut [T],
    same: impl Fn(&T) -> bool,
    with: T,
    what: &str,
) -> Result<(), StoreError> {
    let slot = items
        .iter_mut()
        .find(|x| same(x))
        .ok_or_else(|| missing(what))?;
    *slot = with;
    Ok(())
}

fn apply(
    db: &mut MemoryDb,
    at: chrono::DateTime<chrono::Utc>,
    change: Change,
) -> Result<(), StoreError> {
    let c = db.cluster.as_mut().ok_or_else(|| missing("cluster"))?;
    match change {
        Change::InsertCluster(_) => return Err(StoreError::Internal("the cluster exists".into())),
        Change::UpdateCluster(next) => {
            // The cluster's own columns only: its pools are written by their own changes.
            let pools = std::mem::take(&mut c.node_pools);
            *c = Cluster {
                node_pools: pools,
                revision: c.revision,
                deleted_at: c.deleted_at,
                ..next
            };
        }
        Change::RemoveCluster => {
            c.deleted_at = Some(at);
            c.node_pools.clear();
            db.nodes.clear();
            db.elastic_ips.clear();
            db.firewall_rules.clear();
            db.credentials = None;
        }
        Change::InsertPool(p) => c.node_pools.push(p),
        Change::UpdatePool(p) => {
            let name = p.name.clone();
            replace(&mut c.node_pools, |x| x.name == name, p, "node pool")?;
        }
        Change::DeletePool(name) => {
            c.node_pools.retain(|p| p.name != name);
            db.nodes.retain(|n| n.pool != name);
        }
        Change::InsertNode(n) => {
            if db.nodes.iter().any(|x| x.name == n.name) {
                return Err(StoreError::Internal(format!("node {} exists", n.name)));
            }
            db.nodes.push(n);
        }
        Change::UpdateNode(n) => {
            let name = n.name.clone();
            replace(&mut db.nodes, |x| x.name == name, n, "node")?;
        }
        Change::DeleteNode(name) => db.nodes.retain(|n| n.name != name),
        Change::InsertElasticIp(e) => db.elastic_ips.push(e),
        Change::UpdateElasticIp(e) => {
            let id = e.id;
            replace(&mut db.elastic_ips, |x| x.id == id, e, "Elastic IP")?;
        }
        Change::DeleteElasticIp(id) => db.elastic_ips.retain(|e| e.id != id),
        Change::InsertFirewallRule(r) => db.firewall_rules.push(r),
        Change::UpdateFirewallRule(r) => {
            let id = r.id;
            replace(&mut db.firewall_rules, |x| x.id == id, r, "firewall rule")?;
        }
        Change::DeleteFirewallRule(id) => db.firewall_rules.retain(|r| r.id != id),
        Change::SetCredentials(s) => db.credentials = Some(s),
    }
    Ok(())
}

#[async_trait]
impl ClusterRepository for MemoryClusters {
    async fn cluster(&self, id: Uuid, _: Freshness) -> Result<Option<Cluster>, StoreError> {
        Ok(self.read()?.cluster.clone().filter(|c| c.id == id))
    }

    async fn list_clusters(
        &self,
        organization_id: Uuid,
        _: Option<String>,
        _: PageRequest,
        _: Freshness,
    ) -> Result<Page<Cluster>, StoreError> {
        let items: Vec<Cluster> = self
            .read()?
            .cluster
            .clone()
            .into_iter()
            .filter(|c| c.organization_id == organization_id && !c.is_gone())
            .collect();
        Ok(Page {
            total: items.len() as u64,
            items,
        })
    }

    async fn revision(&self, id: Uuid) -> Result<Option<(i64, ClusterPhase)>, StoreError> {
        Ok(self
            .read()?
            .cluster
            .as_ref()
            .filter(|c| c.id == id && !c.is_gone())
            .map(|c| (c.revision, c.phase)))
    }

    async fn nodes(&self, _: Uuid, pool: Option<String>) -> Result<Vec<Node>, StoreError> {
        let mut nodes: Vec<Node> = self
            .read()?
            .nodes
            .iter()
            .filter(|n| pool.as_deref().is_none_or(|p| n.pool.as_str() == p))
            .cloned()
            .collect();
        nodes.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(nodes)
    }

    async fn elastic_ips(&self, _: Uuid) -> Result<Vec<ElasticIp>, StoreError> {
        Ok(self.read()?.elastic_ips.clone())
    }

    async fn auto_upgrade_candidates(
        &self,
        open: &[crate::model::maintenance_window::OpenWindows],
        _: u32,
    ) -> Result<Vec<Uuid>, StoreError> {
        Ok(self
            .read()?
            .cluster
            .iter()
            .filter(|c| {
                c.auto_upgrade
                    && !c.is_gone()
                    && c.phase == crate::model::cluster::ClusterPhase::Provisioned
                    && c.upgrade.is_none()
                    && open.iter().any(|o| {
                        o.admits(&c.maintenance_window)
                            && c.last_auto_upgrade_window
                                .is_none_or(|last| last < o.start_of(&c.maintenance_window))
                    })
            })
            .map(|c| c.id)
            .collect())
    }

    async fn firewall_rules(&self, _: Uuid) -> Result<Vec<FirewallRule>, StoreError> {
        Ok(self.read()?.firewall_rules.clone())
    }

    async fn addresses_in_use(&self, exposure: Exposure) -> Result<HashSet<Ipv4Addr>, StoreError> {
        Ok(self
            .read()?
            .elastic_ips
            .iter()
            .filter(|e| e.exposure == exposure && e.status.is_alive())
            .map(|e| e.address)
            .collect())
    }

    async fn zone_node_demand(&self, zone: String) -> Result<u64, StoreError> {
        Ok(self
            .read()?
            .cluster
            .as_ref()
            .filter(|c| c.zone == zone && !c.is_gone())
            .map_or(0, Cluster::node_demand))
    }

    async fn credentials(&self, _: Uuid) -> Result<Option<SealedCredentials>, StoreError> {
        Ok(self.read()?.credentials.clone())
    }

    async fn commit(&self, write: ClusterWrite) -> Result<i64, StoreError> {
        let mut db = self.read()?;
        let current = db.cluster.as_ref().map(|c| c.revision);
        if db.lose_races > 0 || write.expected_revision != current {
            db.lose_races = db.lose_races.saturating_sub(1);
            return Err(StoreError::RevisionMismatch);
        }
        if let Some(limit) = &write.zone_capacity {
            let demand = db
                .cluster
                .as_ref()
                .filter(|c| c.zone == limit.zone && !c.is_gone())
                .map_or(0, Cluster::node_demand);
            if !limit.admits(demand) {
                return Err(StoreError::CapacityExhausted);
            }
        }
        // All or nothing, like the database's transaction.
        let snapshot = (
            db.cluster.clone(),
            db.nodes.clone(),
            db.elastic_ips.clone(),
            db.firewall_rules.clone(),
            db.credentials.clone(),
        );
        for change in write.changes.iter().cloned() {
            if let Err(e) = apply(&mut db, write.at, change) {
                (
                    db.cluster,
                    db.nodes,
                    db.elastic_ips,
                    db.firewall_rules,
                    db.credentials,
                ) = snapshot;
                return Err(e);
            }
        }
        let c = db.cluster.as_mut().ok_or_else(|| missing("cluster"))?;
        c.revision += 1;
        let revision = c.revision;
        db.commits.push(write);
        Ok(revision)
    }
}
