//! Upgrade use cases: which versions a cluster may move to, and starting an upgrade. The
//! reconciler carries the upgrade out (`reconcile::plan`): the control plane first, then each
//! pool in turn, node by node within the pool's surge settings.

use chrono::{DateTime, Utc};
use serde_json::json;
use uuid::Uuid;

use crate::access::{self, Access};
use crate::error::{Conflict, DomainError};
use crate::input::precondition::Expect;
use crate::input::upgrade::{UpgradeRequest, surge_or};
use crate::model::audit::{Audit, AuditAction, AuditResource};
use crate::model::audit::{Outcome, Parent};
use crate::model::catalog::KubernetesVersion;
use crate::model::cluster::{Cluster, UpgradeBlocker};
use crate::model::identity::{Caller, ClientKind, User};
use crate::model::maintenance_window::{MaintenanceWindow, open_windows};
use crate::model::operation::OperationKind;
use crate::model::upgrade::{
    UpgradeInFlight, UpgradeRefusal, auto_upgrade_due, check_upgrade, upgrade_targets,
};
use crate::ports::storage::{Change, ClusterWrite, Freshness, StoreError};
use crate::service::idempotency::Answer;
use crate::service::{
    Command, Decision, Scheduled, Services, Target, require_changeable, store_error,
};

/// `GET …/upgrades`: where the cluster stands and where it may go.
#[derive(Debug, Clone)]
pub struct UpgradeOptions {
    pub cluster_id: Uuid,
    /// The control plane's version.
    pub current_version: String,
    /// Newer versions, at most one minor ahead, oldest first.
    pub available: Vec<KubernetesVersion>,
    pub upgrade: Option<UpgradeInFlight>,
    pub maintenance_window: MaintenanceWindow,
    pub auto_upgrade: bool,
    /// The start of the window open now, or of the next one.
    pub next_window_start: DateTime<Utc>,
}

impl Services {
    /// The versions a cluster may be upgraded to.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn list_upgrades(
        &self,
        caller: &Caller,
        id: Uuid,
        freshness: Freshness,
    ) -> Result<UpgradeOptions, DomainError> {
        let cluster = self.live_cluster_as(id, freshness).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        let available = self
            .catalog
            .zone(&cluster.zone)
            .map(|z| {
                upgrade_targets(&cluster.version, z)
                    .into_iter()
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        Ok(UpgradeOptions {
            cluster_id: cluster.id,
            current_version: cluster.version.clone(),
            available,
            upgrade: cluster.upgrade.clone(),
            maintenance_window: cluster.maintenance_window,
            auto_upgrade: cluster.auto_upgrade,
            next_window_start: cluster
                .maintenance_window
                .next_start(self.ports.clock.now()),
        })
    }

    /// Starts an upgrade to `body.version` (only while the cluster is as `expect` says): the
    /// answer is the cluster with its upgrade in flight.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn upgrade_cluster(
        &self,
        cmd: Command<'_, Scheduled<Cluster>>,
        id: Uuid,
        body: UpgradeRequest,
        expect: Expect<'_, Cluster>,
    ) -> Result<Answer<Scheduled<Cluster>>, DomainError> {
        let spec = body.validate()?;
        let now = self.ports.clock.now();
        self.mutate(
            cmd,
            Target::of(id),
            expect,
            async |c: &Cluster| Ok(c.clone()),
            async |_, c: Cluster| {
                let mut next = self.start_upgrade(&c, &spec.version, false)?;
                next.updated_at = now;
                let mut changes = Vec::new();
                // The surge given for this upgrade stays each pool's own for later ones.
                for pool in &mut next.node_pools {
                    let surge = surge_or(pool.surge, spec.max_surge, spec.max_unavailable);
                    if surge != pool.surge {
                        pool.surge = surge;
                        pool.updated_at = now;
                        changes.push(Change::UpdatePool(pool.clone()));
                    }
                }
                changes.insert(0, Change::UpdateCluster(next.clone()));
                let audit = upgrade_audit(&c, &spec.version, false);
                Ok(Decision::schedule(changes, audit, next))
            },
        )
        .await
    }

    /// Starts the automatic upgrades due now (`model::upgrade::auto_upgrade_due`), each as the
    /// same upgrade a person asks for, its operation and audit event naming the maintenance
    /// policy as who asked. Meant to run every minute or so on every replica: a cluster
    /// another replica upgraded meanwhile loses the race on its revision and is left alone.
    /// Answers how many started.
    #[tracing::instrument(skip_all)]
    pub async fn start_automatic_upgrades(&self) -> Result<usize, DomainError> {
        let now = self.ports.clock.now();
        let ids = self
            .ports
            .clusters
            .auto_upgrade_candidates(&open_windows(now), AUTO_UPGRADE_BATCH)
            .await
            .map_err(store_error)?;
        let mut started = 0;
        for id in ids {
            let cluster = self
                .ports
                .clusters
                .cluster(id, Freshness::Latest)
                .await
                .map_err(store_error)?;
            let Some(c) = cluster.filter(|c| !c.is_gone()) else {
                continue;
            };
            let Some((to, window)) = self
                .catalog
                .zone(&c.zone)
                .and_then(|zone| auto_upgrade_due(&c, zone, now))
            else {
                continue;
            };
            let Ok(mut next) = self.start_upgrade(&c, &to, true) else {
                continue;
            };
            next.last_auto_upgrade_window = Some(window);
            next.updated_at = now;
            let policy = maintenance_policy();
            let audit = upgrade_audit(&c, &to, true);
            let operation = self.new_operation(
                &policy,
                c.id,
                c.organization_id,
                OperationKind::Upgrade,
                &audit,
            );
            let event = self.audit_event(
                &policy,
                c.organization_id,
                Some(Parent::Cluster(c.id)),
                audit,
                Outcome::Accepted,
            );
            let write = ClusterWrite {
                reconcile: true,
                audit: Some(event),
                operation: Some(operation),
                ..ClusterWrite::plain(
                    c.id,
                    Some(c.revision),
                    vec![Change::UpdateCluster(next)],
                    now,
                )
            };
            match self.ports.clusters.commit(write).await {
                Ok(_) => started += 1,
                // Changed meanwhile: the next sweep decides again on what won.
                Err(StoreError::RevisionMismatch) => {}
                Err(e) => return Err(store_error(e)),
            }
        }
        Ok(started)
    }

    /// The cluster with an upgrade to `to` in flight, or why it cannot start.
    pub(crate) fn start_upgrade(
        &self,
        c: &Cluster,
        to: &str,
        automatic: bool,
    ) -> Result<Cluster, DomainError> {
        require_changeable(c)?;
        match c.upgrade_blocker() {
            Some(UpgradeBlocker::NotProvisioned(phase)) => {
                return Err(DomainError::Conflict(Conflict::ClusterNotProvisioned {
                    phase: phase.as_str(),
                }));
            }
            Some(UpgradeBlocker::ChangeInFlight) => {
                return Err(DomainError::Conflict(Conflict::ClusterBusy));
            }
            None => {}
        }
        let zone = self
            .catalog
            .zone(&c.zone)
            .ok_or_else(|| DomainError::UnknownVersion(to.to_owned()))?;
        match check_upgrade(&c.version, to, zone) {
            Ok(_) => {}
            Err(UpgradeRefusal::NotOffered) => {
                return Err(DomainError::UnknownVersion(to.to_owned()));
            }
            Err(refusal) => {
                return Err(DomainError::UpgradeRefused {
                    to: to.to_owned(),
                    refusal,
                });
            }
        }
        let mut next = c.clone();
        next.upgrade = Some(UpgradeInFlight {
            from: c.version.clone(),
            to: to.to_owned(),
            automatic,
        });
        Ok(next)
    }
}

/// How many clusters one sweep of automatic upgrades looks at; the rest wait for the next.
const AUTO_UPGRADE_BATCH: u32 = 500;

/// Who the audit trail and the operation say asked for an automatic upgrade: the service,
/// on the owner's standing request.
pub fn maintenance_policy() -> Caller {
    Caller {
        user: User {
            id: "maintenance-policy".into(),
            email: None,
        },
        preferred_organization: None,
        memberships: Vec::new(),
        client: ClientKind::Other,
    }
}

/// What the audit trail says of an upgrade that starts.
pub(crate) fn upgrade_audit(c: &Cluster, to: &str, automatic: bool) -> Audit {
    Audit::new(
        AuditResource::Cluster,
        c.id,
        AuditAction::UpgradeStarted,
        json!({"version": {"from": c.version, "to": to}, "automatic": automatic}),
    )
}
