//! Elastic IP use cases: list, get, allocate and release.

use serde_json::json;
use uuid::Uuid;

use crate::access::{self, Access};
use crate::error::{Capacity, Conflict, DomainError, Resource};
use crate::input::elastic_ip::CreateElasticIpRequest;
use crate::input::precondition::Expect;
use crate::model::audit::{Audit, AuditAction, AuditResource};
use crate::model::cluster::{Cluster, Exposure};
use crate::model::elastic_ip::{ElasticIp, ElasticIpEvent, ElasticIpStatus, ElasticIpView};
use crate::model::identity::Caller;
use crate::ports::storage::Change;
use crate::service::idempotency::Answer;
use crate::service::pipeline::Seen;
use crate::service::{
    Command, Decision, Scheduled, Services, Target, require_changeable, store_error,
};

impl Services {
    async fn alive_elastic_ips(&self, cluster: &Cluster) -> Result<Vec<ElasticIp>, DomainError> {
        let all = self
            .ports
            .clusters
            .elastic_ips(cluster.id)
            .await
            .map_err(store_error)?;
        Ok(all.into_iter().filter(|e| e.status.is_alive()).collect())
    }

    pub fn elastic_ip_view(&self, eip: &ElasticIp) -> ElasticIpView {
        eip.view(&self.settings.annotation_domain)
    }

    /// Lists a cluster's Elastic IPs (the assistant may read these).
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn list_elastic_ips(
        &self,
        caller: &Caller,
        id: Uuid,
    ) -> Result<Vec<ElasticIpView>, DomainError> {
        let cluster = self.live_cluster(id).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        Ok(self
            .alive_elastic_ips(&cluster)
            .await?
            .iter()
            .map(|e| self.elastic_ip_view(e))
            .collect())
    }

    /// Gets one Elastic IP of a cluster.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn get_elastic_ip(
        &self,
        caller: &Caller,
        id: Uuid,
        eip: Uuid,
    ) -> Result<ElasticIpView, DomainError> {
        let cluster = self.live_cluster(id).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        let found = self
            .alive_elastic_ips(&cluster)
            .await?
            .into_iter()
            .find(|e| e.id == eip);
        found
            .map(|e| self.elastic_ip_view(&e))
            .ok_or(DomainError::NotFound(Resource::ElasticIp))
    }

    /// Allocates an Elastic IP: answers with it `Pending`. Its address is reserved now, so an
    /// exhausted pool fails at once (`DomainError::CapacityExhausted`).
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn create_elastic_ip(
        &self,
        cmd: Command<'_, Scheduled<ElasticIpView>>,
        id: Uuid,
        body: CreateElasticIpRequest,
    ) -> Result<Answer<Scheduled<ElasticIpView>>, DomainError> {
        let spec = body.validate()?;
        let name = spec
            .name
            .as_ref()
            .map(|n| n.as_str().to_owned())
            .unwrap_or_default();
        self.mutate(
            cmd,
            Target::of(id)
                .not_by_assistant()
                .naming(Resource::ElasticIp, name),
            None,
            async |c: &Cluster| Ok(c.clone()),
            async |_, c: Cluster| {
                require_changeable(&c)?;
                let allowed = c.network_mode.elastic_ip_exposure();
                let exposure = spec.exposure.unwrap_or(allowed);
                if exposure != allowed {
                    return Err(DomainError::Conflict(Conflict::ExposureMismatch {
                        network_mode: c.network_mode.as_str(),
                        allowed: allowed.as_str(),
                    }));
                }
                let zone_public_pool = self
                    .catalog
                    .zone(&c.zone)
                    .is_some_and(|z| z.zone.public_elastic_ip_pool_enabled);
                let pool = match self.ports.cloud.address_pool(exposure) {
                    Some(p) if exposure == Exposure::Private || zone_public_pool => p,
                    _ if exposure == Exposure::Public => {
                        return Err(DomainError::CapacityExhausted(Capacity::PublicPoolDisabled));
                    }
                    _ => {
                        return Err(DomainError::CapacityExhausted(Capacity::AddressPool {
                            exposure: exposure.as_str(),
                        }));
                    }
                };
                if let Some(n) = &spec.name
                    && self
                        .alive_elastic_ips(&c)
                        .await?
                        .iter()
                        .any(|e| e.name.as_ref() == Some(n))
                {
                    return Err(DomainError::Conflict(Conflict::NameTaken {
                        resource: Resource::ElasticIp,
                        name: n.as_str().to_owned(),
                    }));
                }
                let used = self
                    .ports
                    .clusters
                    .addresses_in_use(exposure)
                    .await
                    .map_err(store_error)?;
                let address = pool
                    .first_free(&used)
                    .ok_or(DomainError::CapacityExhausted(Capacity::AddressPool {
                        exposure: exposure.as_str(),
                    }))?;
                let now = self.ports.clock.now();
                let eip = ElasticIp {
                    id: self.ports.ids.new_id(),
                    cluster_id: c.id,
                    name: spec.name.clone(),
                    exposure,
                    status: ElasticIpStatus::Pending,
                    address,
                    failure_reason: None,
                    created_at: now,
                    updated_at: now,
                };
                let view = self.elastic_ip_view(&eip);
                let audit = Audit::new(
                    AuditResource::ElasticIp,
                    eip.id,
                    AuditAction::Allocated,
                    json!({
                        "name": eip.name.as_ref().map(|n| n.as_str()),
                        "exposure": eip.exposure.as_str(),
                        "address": eip.address.to_string(),
                    }),
                );
                Ok(Decision::schedule(
                    vec![Change::InsertElasticIp(eip)],
                    audit,
                    view,
                ))
            },
        )
        .await
    }

    /// Releases an Elastic IP, only from `Ready` or `Failed` (`Conflict::InvalidState`
    /// otherwise).
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn release_elastic_ip(
        &self,
        cmd: Command<'_, Scheduled<ElasticIpView>>,
        id: Uuid,
        eip: Uuid,
        expect: Expect<'_, ElasticIpView>,
    ) -> Result<Answer<Scheduled<ElasticIpView>>, DomainError> {
        self.mutate(
            cmd,
            Target::of(id).not_by_assistant(),
            expect,
            async |c: &Cluster| {
                self.alive_elastic_ips(c)
                    .await?
                    .into_iter()
                    .find(|e| e.id == eip)
                    .map(|e| Seen {
                        view: self.elastic_ip_view(&e),
                        value: e,
                    })
                    .ok_or(DomainError::NotFound(Resource::ElasticIp))
            },
            async |c: &Cluster, located: Seen<ElasticIpView, ElasticIp>| {
                require_changeable(c)?;
                let current = located.value;
                let status = current.status.apply(ElasticIpEvent::Release).map_err(|_| {
                    DomainError::Conflict(Conflict::InvalidState {
                        resource: Resource::ElasticIp,
                        status: current.status.as_str(),
                        operation: "released",
                    })
                })?;
                let mut next = current;
                next.status = status;
                next.updated_at = self.ports.clock.now();
                let view = self.elastic_ip_view(&next);
                let audit = Audit::new(
                    AuditResource::ElasticIp,
                    next.id,
                    AuditAction::ReleaseStarted,
                    json!({"address": next.address.to_string()}),
                );
                Ok(Decision::schedule(
                    vec![Change::UpdateElasticIp(next)],
                    audit,
                    view,
                ))
            },
        )
        .await
    }
}
