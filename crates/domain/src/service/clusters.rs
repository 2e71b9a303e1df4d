//! Cluster use cases: list, create, get, change (description and tags), change the exposure,
//! delete, wait for a state change, and the kubeconfig.

use std::time::Duration;

use serde_json::json;
use uuid::Uuid;

use crate::access::{self, Access};
use crate::error::{Conflict, DomainError, Resource};
use crate::input::cluster::{ClusterPatch, CreateClusterRequest, ExposurePatch, ListClusters};
use crate::input::precondition::Expect;
use crate::model::audit::{Audit, AuditAction, AuditResource};
use crate::model::cluster::{
    Cluster, ClusterPhase, ControlPlaneFirewall, Exposure, ExposureDecision, ExposureRefusal,
    FirewallDecision, PhaseEvent, Registration,
};
use crate::model::identity::Caller;
use crate::model::maintenance_window::format_start_time;
use crate::model::node_pool::{NodePool, PoolStatus};
use crate::ports::storage::{Change, Freshness, Page, Wake, ZoneCapacity};
use crate::service::idempotency::Answer;
use crate::service::{
    Command, Decision, Scheduled, Services, Target, require_changeable, store_error,
};

/// A page of clusters: `{items, page, size, total}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterPage {
    pub items: Vec<Cluster>,
    pub page: u32,
    pub size: u32,
    pub total: u64,
}

/// The outcome of an exposure change: whether a change started, or nothing had to.
#[derive(Debug, Clone, PartialEq)]
pub struct ExposureOutcome {
    pub cluster: Cluster,
    pub started: bool,
}

/// The answer of a wait for a state change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateAnswer {
    pub cluster_id: uuid::Uuid,
    pub version: i64,
    pub phase: ClusterPhase,
    pub changed: bool,
}

impl Services {
    /// Lists the resolved organization's clusters, one page.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn list_clusters(
        &self,
        caller: &Caller,
        query: ListClusters,
    ) -> Result<ClusterPage, DomainError> {
        let ListClusters {
            org,
            zone,
            page: request,
            freshness,
        } = query;
        let org =
            access::resolve_collection_org(self.ports.identity.as_ref(), caller, &org).await?;
        let zone = match zone {
            None => None,
            Some(z) if z.is_empty() => None,
            Some(z) if self.catalog.zone(&z).is_some() => Some(z),
            Some(z) => return Err(DomainError::UnknownZone(z)),
        };
        let Page { items, total } = self
            .ports
            .clusters
            .list_clusters(org.id, zone, request, freshness)
            .await
            .map_err(store_error)?;
        Ok(ClusterPage {
            items,
            page: request.page,
            size: request.size,
            total,
        })
    }

    /// Creates a cluster: the organization is the one the create request names, never taken
    /// from anywhere else.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn create_cluster(
        &self,
        cmd: Command<'_, Scheduled<Cluster>>,
        body: CreateClusterRequest,
    ) -> Result<Answer<Scheduled<Cluster>>, DomainError> {
        let spec = body.validate()?;
        let naming = (Resource::Cluster, spec.name.as_str().to_owned());
        self.create::<Cluster, _>(cmd, &spec.organization, Some(naming), async |org| {
            let zone = match &spec.zone {
                None => self.catalog.default_zone(),
                Some(z) => self
                    .catalog
                    .zone(z)
                    .ok_or_else(|| DomainError::UnknownZone(z.clone()))?,
            };
            let version = match &spec.version {
                None => zone.recommended_version(),
                Some(v) => zone
                    .version(v)
                    .ok_or_else(|| DomainError::UnknownVersion(v.clone()))?,
            };
            let mut pools = Vec::with_capacity(spec.node_pools.len());
            let now = self.ports.clock.now();
            for (i, p) in spec.node_pools.iter().enumerate() {
                let tier = zone
                    .tier(&p.size)
                    .ok_or_else(|| DomainError::UnknownMachineTier {
                        field: format!("node_pools[{i}].size"),
                        value: p.size.clone(),
                    })?;
                pools.push(NodePool {
                    name: p.name.clone(),
                    size: p.size.clone(),
                    count: p.sizing.count,
                    auto_scale: p.sizing.auto_scale,
                    min_nodes: p.sizing.min_nodes,
                    max_nodes: p.sizing.max_nodes,
                    labels: p.labels.clone(),
                    taints: p.taints.clone(),
                    tags: p.tags.clone(),
                    root_volume_size_gib: tier.disk_gib,
                    version: version.id.clone(),
                    surge: p.surge,
                    status: PoolStatus::Provisioning,
                    created_at: now,
                    updated_at: now,
                });
            }
            let exposure = spec.exposure.unwrap_or(zone.defaults.exposure_mode);
            if exposure == Exposure::Public && !zone.zone.public_exposure_enabled {
                return Err(DomainError::PublicExposureUnavailable(zone.zone.id.clone()));
            }
            access::require_credit(self.ports.identity.as_ref(), &org.id).await?;
            let id = self.ports.ids.new_id();
            // "null unless public": a public cluster's hostname is known from the start.
            let public_hostname = (exposure == Exposure::Public).then(|| {
                crate::model::cluster::public_hostname(
                    spec.name.as_str(),
                    id,
                    &self.settings.public_hostname_suffix,
                )
            });
            let cluster = Cluster {
                id,
                organization_id: org.id,
                organization_slug: org.slug.clone(),
                name: spec.name.clone(),
                description: spec.description.clone(),
                tags: spec.tags.clone(),
                zone: zone.zone.id.clone(),
                version: version.id.clone(),
                control_plane_option_id: zone.active_control_plane_option_id.clone(),
                exposure,
                network_mode: spec.network_mode.unwrap_or(zone.defaults.network_mode),
                phase: ClusterPhase::Pending,
                failure_reason: None,
                public_hostname,
                api_endpoint: None,
                node_pools: pools,
                hub_registration: Registration::PENDING,
                default_environment: Registration::PENDING,
                exposure_change: None,
                upgrade: None,
                maintenance_window: spec.maintenance_window,
                auto_upgrade: spec.auto_upgrade,
                last_auto_upgrade_window: None,
                control_plane_firewall: spec.control_plane_firewall.clone(),
                control_plane_firewall_change: None,
                created_at: now,
                updated_at: now,
                revision: 1,
                deleted_at: None,
            };
            let audit = Audit::new(
                AuditResource::Cluster,
                cluster.id,
                AuditAction::Created,
                created(&cluster),
            );
            let capacity = self.zone_capacity(&cluster.zone, cluster.node_demand());
            Ok(
                Decision::schedule(vec![Change::InsertCluster(cluster.clone())], audit, cluster)
                    .within(capacity),
            )
        })
        .await
    }

    /// The limit a write that adds `adds` nodes to `zone` must keep; none when it adds none.
    /// The store checks it with the write (`StoreError::CapacityExhausted`, answered as
    /// `DomainError::CapacityExhausted`).
    pub(crate) fn zone_capacity(&self, zone: &str, adds: u64) -> Option<ZoneCapacity> {
        (adds > 0).then(|| ZoneCapacity {
            zone: zone.to_owned(),
            adds,
            capacity: self.ports.cloud.zone_capacity(zone),
        })
    }

    /// Gets one cluster, as current as asked (`Freshness`).
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn get_cluster(
        &self,
        caller: &Caller,
        id: Uuid,
        freshness: Freshness,
    ) -> Result<Cluster, DomainError> {
        let cluster = self.live_cluster_as(id, freshness).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        Ok(cluster)
    }

    /// Changes a cluster's description, tags and maintenance policy (only while it is as
    /// `expect` says).
    /// Changes a cluster's description, tags and control-plane firewall (only while it is as
    /// `expect` says). Description and tags take effect as they are recorded; a new firewall
    /// is handed to provisioning (an operation), enforced once the API server applied it.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn patch_cluster(
        &self,
        cmd: Command<'_, Scheduled<Cluster>>,
        id: Uuid,
        body: ClusterPatch,
        expect: Expect<'_, Cluster>,
    ) -> Result<Answer<Scheduled<Cluster>>, DomainError> {
        let changes = body.validate()?;
        let now = self.ports.clock.now();
        self.mutate(
            cmd,
            Target::of(id),
            expect,
            async |c: &Cluster| Ok(c.clone()),
            async |_, c: Cluster| {
                require_changeable(&c)?;
                let mut next = c.clone();
                let mut changed = serde_json::Map::new();
                if let Some(d) = &changes.description {
                    next.description = d.clone();
                    changed.insert("description".into(), json!(d));
                }
                if let Some(t) = &changes.tags {
                    next.tags = t.clone();
                    changed.insert("tags".into(), json!(t));
                }
                if changes.maintenance_window.is_some() {
                    next.maintenance_window = changes.window(c.maintenance_window);
                    let w = next.maintenance_window;
                    changed.insert(
                        "maintenance_window".into(),
                        json!({"day": w.day.as_str(), "start_time": format_start_time(w.start_time)}),
                    );
                }
                if let Some(a) = changes.auto_upgrade {
                    next.auto_upgrade = a;
                    changed.insert("auto_upgrade".into(), json!(a));
                }

                let mut firewall_started = false;
                if let Some(change) = &changes.control_plane_firewall {
                    let to =
                        change.applied_to(&c.control_plane_firewall, "control_plane_firewall")?;
                    let decision = c.request_control_plane_firewall(to).map_err(|r| match r {
                        ExposureRefusal::ChangeInFlight => {
                            DomainError::Conflict(Conflict::FirewallChangeInFlight)
                        }
                        other => refused(other),
                    })?;
                    match decision {
                        FirewallDecision::Unchanged => {}
                        FirewallDecision::Start(to) => {
                            changed.insert(
                                "control_plane_firewall".into(),
                                json!({
                                    "from": firewall_json(&c.control_plane_firewall),
                                    "to": firewall_json(&to),
                                }),
                            );
                            next.control_plane_firewall_change = Some(to);
                            firewall_started = true;
                        }
                    }
                }
                if changed.is_empty() {
                    return Ok(Decision::nothing(c));
                }
                next.updated_at = now;
                let changes = vec![Change::UpdateCluster(next.clone())];
                Ok(if firewall_started {
                    let audit = Audit::new(
                        AuditResource::Cluster,
                        c.id,
                        AuditAction::ControlPlaneFirewallChangeStarted,
                        changed.into(),
                    );
                    Decision::schedule(changes, audit, next)
                } else {
                    let audit = Audit::new(
                        AuditResource::Cluster,
                        c.id,
                        AuditAction::Updated,
                        changed.into(),
                    );
                    Decision::record(changes, audit, next)
                })
            },
        )
        .await
    }

    /// Changes a cluster's exposure (only while it is as `expect` says).
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn change_exposure(
        &self,
        cmd: Command<'_, Scheduled<ExposureOutcome>>,
        id: Uuid,
        body: ExposurePatch,
        expect: Expect<'_, Cluster>,
    ) -> Result<Answer<Scheduled<ExposureOutcome>>, DomainError> {
        let now = self.ports.clock.now();
        self.mutate(
            cmd,
            Target::of(id),
            expect,
            async |c: &Cluster| Ok(c.clone()),
            async |_, c: Cluster| match c.request_exposure(body.exposure) {
                Err(refusal) => Err(refused(refusal)),
                Ok(ExposureDecision::Unchanged) => Ok(Decision::nothing(ExposureOutcome {
                    cluster: c.clone(),
                    started: false,
                })),
                Ok(ExposureDecision::Start(change)) => {
                    let public_ok = self
                        .catalog
                        .zone(&c.zone)
                        .is_some_and(|z| z.zone.public_exposure_enabled);
                    if change.to == Exposure::Public && !public_ok {
                        return Err(DomainError::PublicExposureUnavailable(c.zone.clone()));
                    }
                    let audit = Audit::new(
                        AuditResource::Cluster,
                        c.id,
                        AuditAction::ExposureChangeStarted,
                        json!({"exposure": {"from": c.exposure.as_str(), "to": change.to.as_str()}}),
                    );
                    let mut next = c.clone();
                    next.exposure_change = Some(change);
                    next.updated_at = now;
                    Ok(Decision::schedule(
                        vec![Change::UpdateCluster(next.clone())],
                        audit,
                        ExposureOutcome {
                            cluster: next,
                            started: true,
                        },
                    ))
                }
            },
        )
        .await
    }

    /// Deletes a cluster: answers with the cluster in `Deleting`; a second deletion answers
    /// with the cluster as it is. Only while it is as `expect` says.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn delete_cluster(
        &self,
        cmd: Command<'_, Scheduled<Cluster>>,
        id: Uuid,
        expect: Expect<'_, Cluster>,
    ) -> Result<Answer<Scheduled<Cluster>>, DomainError> {
        let now = self.ports.clock.now();
        self.mutate(
            cmd,
            Target::of(id).with_tombstones(),
            expect,
            async |c: &Cluster| Ok(c.clone()),
            async |_, c: Cluster| {
                if c.phase == ClusterPhase::Deleting {
                    return Ok(Decision::nothing(c));
                }
                let mut next = c.clone();
                next.phase = c
                    .phase
                    .apply(PhaseEvent::Delete)
                    .map_err(|e| DomainError::Internal(e.to_string()))?;
                next.updated_at = now;
                Ok(Decision::schedule(
                    vec![Change::UpdateCluster(next.clone())],
                    Audit::new(
                        AuditResource::Cluster,
                        c.id,
                        AuditAction::DeletionStarted,
                        json!({"name": c.name.as_str()}),
                    ),
                    next,
                ))
            },
        )
        .await
    }

    /// Waits for a cluster's state to change: answers at once when the cluster's version is
    /// past `since`, otherwise waits for a change or `timeout_seconds`.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn cluster_state(
        &self,
        caller: &Caller,
        id: Uuid,
        since: i64,
        timeout_seconds: u32,
    ) -> Result<StateAnswer, DomainError> {
        // Only what the answer needs is kept: a waiter holds it for up to a minute, and there
        // may be tens of thousands of them.
        let (cluster_id, mut version, mut phase) = {
            let cluster = self.live_cluster(id).await?;
            access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
            (cluster.id, cluster.revision, cluster.phase)
        };
        let answer = |version: i64, phase: ClusterPhase, changed: bool| StateAnswer {
            cluster_id,
            version,
            phase,
            changed,
        };
        if version > since {
            return Ok(answer(version, phase, true));
        }
        let deadline =
            self.ports.clock.now() + chrono::Duration::seconds(i64::from(timeout_seconds));
        loop {
            let remaining = (deadline - self.ports.clock.now())
                .to_std()
                .unwrap_or(Duration::ZERO);
            if remaining.is_zero() {
                return Ok(answer(version, phase, false));
            }
            let wake = self.ports.changes.wait(cluster_id, since, remaining).await;
            match self
                .ports
                .clusters
                .revision(cluster_id)
                .await
                .map_err(store_error)?
            {
                None => return Err(DomainError::NotFound(Resource::Cluster)),
                Some((v, p)) => {
                    (version, phase) = (v, p);
                    if v > since {
                        return Ok(answer(v, p, true));
                    }
                    // The process is stopping: the client gets the version there is now and
                    // asks again (another process answers), rather than a cut connection.
                    if wake == Wake::Closing {
                        return Ok(answer(v, p, false));
                    }
                }
            }
        }
    }
}

/// The answer to a change of the exposure or the control-plane firewall the cluster refuses.
fn refused(refusal: ExposureRefusal) -> DomainError {
    match refusal {
        ExposureRefusal::Deleting => DomainError::Conflict(Conflict::ClusterDeleting),
        ExposureRefusal::Failed => DomainError::Conflict(Conflict::ClusterFailed),
        ExposureRefusal::NotProvisioned(phase) => DomainError::PhaseNotProvisioned(phase.as_str()),
        ExposureRefusal::ChangeInFlight => DomainError::Conflict(Conflict::ChangeInFlight),
    }
}

/// A control-plane firewall as the audit trail writes it.
pub(crate) fn firewall_json(f: &ControlPlaneFirewall) -> serde_json::Value {
    json!({
        "enabled": f.enabled,
        "allowed_addresses": f.allowed_addresses.iter().map(ToString::to_string).collect::<Vec<_>>(),
    })
}

/// What the audit trail says of a new cluster: what was asked, never a secret (a create
/// carries none).
fn created(c: &Cluster) -> serde_json::Value {
    json!({
        "name": c.name.as_str(),
        "zone": c.zone,
        "version": c.version,
        "exposure": c.exposure.as_str(),
        "control_plane_firewall": firewall_json(&c.control_plane_firewall),
        "node_pools": c.node_pools.iter().map(|p| json!({
            "name": p.name.as_str(),
            "size": p.size,
            "count": p.count,
        })).collect::<Vec<_>>(),
    })
}
