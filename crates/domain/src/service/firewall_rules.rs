//! Firewall rule use cases: list, get, create (cluster must be Provisioned) and delete.

use serde_json::json;
use uuid::Uuid;

use crate::access::{self, Access};
use crate::error::{Conflict, DomainError, Resource};
use crate::input::firewall::CreateFirewallRuleRequest;
use crate::input::precondition::Expect;
use crate::model::audit::{Audit, AuditAction, AuditResource};
use crate::model::cluster::{Cluster, ClusterPhase};
use crate::model::firewall::{FirewallEvent, FirewallRule, FirewallRuleStatus};
use crate::model::identity::Caller;
use crate::ports::storage::Change;
use crate::service::idempotency::Answer;
use crate::service::{
    Command, Decision, Scheduled, Services, Target, require_changeable, store_error,
};

impl Services {
    /// Lists a cluster's firewall rules.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn list_firewall_rules(
        &self,
        caller: &Caller,
        id: Uuid,
    ) -> Result<Vec<FirewallRule>, DomainError> {
        let cluster = self.live_cluster(id).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        self.ports
            .clusters
            .firewall_rules(cluster.id)
            .await
            .map_err(store_error)
    }

    /// Gets one firewall rule of a cluster.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn get_firewall_rule(
        &self,
        caller: &Caller,
        id: Uuid,
        rule: Uuid,
    ) -> Result<FirewallRule, DomainError> {
        let cluster = self.live_cluster(id).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        let rules = self
            .ports
            .clusters
            .firewall_rules(cluster.id)
            .await
            .map_err(store_error)?;
        rules
            .into_iter()
            .find(|r| r.id == rule)
            .ok_or(DomainError::NotFound(Resource::FirewallRule))
    }

    /// Creates a firewall rule, only on a `Provisioned` cluster: answers with the rule `Pending`.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn create_firewall_rule(
        &self,
        cmd: Command<'_, Scheduled<FirewallRule>>,
        id: Uuid,
        body: CreateFirewallRuleRequest,
    ) -> Result<Answer<Scheduled<FirewallRule>>, DomainError> {
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
                .naming(Resource::FirewallRule, name),
            None,
            async |c: &Cluster| Ok(c.clone()),
            async |_, c: Cluster| {
                require_changeable(&c)?;
                if c.phase != ClusterPhase::Provisioned {
                    return Err(DomainError::Conflict(Conflict::ClusterNotProvisioned {
                        phase: c.phase.as_str(),
                    }));
                }
                if let Some(n) = &spec.name {
                    let rules = self
                        .ports
                        .clusters
                        .firewall_rules(c.id)
                        .await
                        .map_err(store_error)?;
                    if rules.iter().any(|r| r.name.as_ref() == Some(n)) {
                        return Err(DomainError::Conflict(Conflict::NameTaken {
                            resource: Resource::FirewallRule,
                            name: n.as_str().to_owned(),
                        }));
                    }
                }
                let now = self.ports.clock.now();
                let rule = FirewallRule {
                    id: self.ports.ids.new_id(),
                    cluster_id: c.id,
                    name: spec.name.clone(),
                    description: spec.description.clone(),
                    direction: spec.direction,
                    protocol: spec.protocol,
                    source_cidrs: spec.source_cidrs.clone(),
                    port_range: spec.port_range,
                    status: FirewallRuleStatus::Pending,
                    failure_reason: None,
                    created_at: now,
                    updated_at: now,
                };
                let audit = Audit::new(
                    AuditResource::FirewallRule,
                    rule.id,
                    AuditAction::Created,
                    json!({
                        "name": rule.name.as_ref().map(|n| n.as_str()),
                        "protocol": rule.protocol.as_str(),
                        "source_cidrs": rule.source_cidrs,
                        "port_range": rule.port_range.map(|p| json!({"from": p.from, "to": p.to})),
                    }),
                );
                Ok(Decision::schedule(
                    vec![Change::InsertFirewallRule(rule.clone())],
                    audit,
                    rule,
                ))
            },
        )
        .await
    }

    /// Deletes a firewall rule: answers with the rule `Deleting`.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn delete_firewall_rule(
        &self,
        cmd: Command<'_, Scheduled<FirewallRule>>,
        id: Uuid,
        rule: Uuid,
        expect: Expect<'_, FirewallRule>,
    ) -> Result<Answer<Scheduled<FirewallRule>>, DomainError> {
        self.mutate(
            cmd,
            Target::of(id).not_by_assistant(),
            expect,
            async |c: &Cluster| {
                self.ports
                    .clusters
                    .firewall_rules(c.id)
                    .await
                    .map_err(store_error)?
                    .into_iter()
                    .find(|r| r.id == rule)
                    .ok_or(DomainError::NotFound(Resource::FirewallRule))
            },
            async |c: &Cluster, current: FirewallRule| {
                require_changeable(c)?;
                let status = current.status.apply(FirewallEvent::Delete).map_err(|_| {
                    DomainError::Conflict(Conflict::InvalidState {
                        resource: Resource::FirewallRule,
                        status: current.status.as_str(),
                        operation: "deleted",
                    })
                })?;
                let mut next = current;
                next.status = status;
                next.updated_at = self.ports.clock.now();
                let audit = Audit::new(
                    AuditResource::FirewallRule,
                    next.id,
                    AuditAction::DeletionStarted,
                    json!({"name": next.name.as_ref().map(|n| n.as_str())}),
                );
                Ok(Decision::schedule(
                    vec![Change::UpdateFirewallRule(next.clone())],
                    audit,
                    next,
                ))
            },
        )
        .await
    }
}
