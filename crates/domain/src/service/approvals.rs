//! Approvals: a change a person's assistant asks for is checked (its input, and the person's
//! right to make it) and recorded; it runs only when the same person approves it, once, as that
//! person, under an idempotency key of its own; declined or expired, it never runs.

use serde_json::json;
use uuid::Uuid;

use super::idempotency::{Answer, Keyed, Record};
use super::node_pools::merge_patch;
use super::{Command, Scheduled, Services, Target, store_error};
use crate::access;
use crate::error::{Conflict, DomainError, Resource};
use crate::model::approval::{Approval, ApprovalOutcome, ApprovalStatus, ApprovedAction, LIST_MAX};
use crate::model::audit::{Actor, AuditAction, AuditEvent, AuditResource, Channel, Outcome};
use crate::model::cluster::Cluster;
use crate::model::idempotency::{Fingerprint, Replay};
use crate::model::identity::{Caller, ClientKind};
use crate::names::{IdempotencyKey, NodeName};
use crate::validation::Violations;

/// How many expired approvals one sweep records.
const EXPIRY_BATCH: u32 = 100;

impl Services {
    /// Asks `caller` (the person) to approve `action`, which their assistant wants. The
    /// action's input and the person's right to make it are checked first: a bad input is the
    /// same validation error the API gives, a missing role the same refusal, and nothing is
    /// recorded. Otherwise a pending approval is recorded, with its audit event.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn request_approval(
        &self,
        caller: &Caller,
        action: ApprovedAction,
    ) -> Result<Approval, DomainError> {
        let (organization_id, organization_slug, summary) =
            self.check_approvable(caller, &action).await?;
        let now = self.ports.clock.now();
        let approval = Approval {
            id: self.ports.ids.new_id(),
            organization_id,
            organization_slug,
            requested_by: Actor::of(caller),
            action,
            summary,
            status: ApprovalStatus::Pending,
            created_at: now,
            expires_at: now + self.approval_ttl,
            decided_at: None,
            outcome: None,
        };
        let audit = self.approval_event(caller, &approval, AuditAction::Requested);
        self.ports
            .approvals
            .insert_approval(approval.clone(), audit)
            .await
            .map_err(store_error)?;
        Ok(approval)
    }

    /// The assistant asks for `action` on behalf of `caller`, perhaps again: a client retries
    /// the same call once its person has decided. The newest of `caller`'s approvals for
    /// exactly this action, asked within the approval time, answers it (still waiting,
    /// approved with what became of the action, or declined); without one, a new approval is
    /// requested ([`Services::request_approval`]). So a retry never records a second
    /// approval, and an approved action runs once however often it is asked for.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn ask_approval(
        &self,
        caller: &Caller,
        action: ApprovedAction,
    ) -> Result<Asked, DomainError> {
        let now = self.ports.clock.now();
        let earlier = self
            .approvals(caller)
            .await?
            .into_iter()
            .find(|a| a.action == action && a.expires_at > now);
        match earlier {
            Some(a) if a.status == ApprovalStatus::Pending => Ok(Asked::Waiting(a)),
            Some(a) if a.status == ApprovalStatus::Approved => {
                Ok(Asked::Approved(self.approval_result(caller, a.id).await?))
            }
            Some(a) if a.status == ApprovalStatus::Declined => Ok(Asked::Declined(a)),
            _ => Ok(Asked::Requested(
                self.request_approval(caller, action).await?,
            )),
        }
    }

    /// One of `caller`'s approvals. Anybody else's is not found: nothing about it is told.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn approval(&self, caller: &Caller, id: Uuid) -> Result<Approval, DomainError> {
        let mut a = self
            .ports
            .approvals
            .approval(id)
            .await
            .map_err(store_error)?
            .filter(|a| a.requested_by.user_id == caller.user.id)
            .ok_or(DomainError::NotFound(Resource::Approval))?;
        a.status = a.status_at(self.ports.clock.now());
        Ok(a)
    }

    /// `caller`'s approvals, newest first.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn approvals(&self, caller: &Caller) -> Result<Vec<Approval>, DomainError> {
        let now = self.ports.clock.now();
        let mut all = self
            .ports
            .approvals
            .approvals_of(caller.user.id.clone(), LIST_MAX)
            .await
            .map_err(store_error)?;
        for a in &mut all {
            a.status = a.status_at(now);
        }
        Ok(all)
    }

    /// Approves one of `caller`'s pending approvals and runs its action, once, as `caller`
    /// (who must still have the right to make it): the answer holds what became of it. A
    /// second approval of the same one answers the same outcome and runs nothing again.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn approve(&self, caller: &Caller, id: Uuid) -> Result<Approval, DomainError> {
        // The assistant asks; it never decides, whatever token it holds.
        access::require_not_assistant(caller)?;
        let a = self.approval(caller, id).await?;
        match a.status {
            ApprovalStatus::Pending => {
                self.decide(caller, &a, ApprovalStatus::Approved, AuditAction::Approved)
                    .await?
            }
            ApprovalStatus::Approved => {}
            other => return Err(decided(other, "approved")),
        }
        self.run_approved(caller, id).await
    }

    /// Declines one of `caller`'s pending approvals: its action never runs. Declining one
    /// already declined changes nothing.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn decline(&self, caller: &Caller, id: Uuid) -> Result<Approval, DomainError> {
        access::require_not_assistant(caller)?;
        let a = self.approval(caller, id).await?;
        match a.status {
            ApprovalStatus::Pending => {
                self.decide(caller, &a, ApprovalStatus::Declined, AuditAction::Declined)
                    .await?;
                self.approval(caller, id).await
            }
            ApprovalStatus::Declined => Ok(a),
            other => Err(decided(other, "declined")),
        }
    }

    /// Moves pending approval `a` to `to` with its audit event. Decided meanwhile (another tab,
    /// the sweep) the same way, that is no error; any other way it is.
    async fn decide(
        &self,
        caller: &Caller,
        a: &Approval,
        to: ApprovalStatus,
        action: AuditAction,
    ) -> Result<(), DomainError> {
        let audit = self.approval_event(caller, a, action);
        let now = self.ports.clock.now();
        let moved = self
            .ports
            .approvals
            .decide_approval(a.id, ApprovalStatus::Pending, to, now, audit)
            .await
            .map_err(store_error)?;
        if !moved {
            let now_is = self.approval(caller, a.id).await?;
            if now_is.status != to {
                return Err(decided(now_is.status, to.as_str()));
            }
        }
        Ok(())
    }

    /// Where one of `caller`'s approvals stands, for the assistant asking again: once approved,
    /// what became of its action (running it if the run that followed the approval was cut
    /// short: under its key it still runs once).
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn approval_result(
        &self,
        caller: &Caller,
        id: Uuid,
    ) -> Result<Approval, DomainError> {
        let a = self.approval(caller, id).await?;
        if a.status == ApprovalStatus::Approved && a.outcome.is_none() {
            return self.run_approved(caller, id).await;
        }
        Ok(a)
    }

    /// Records the expiry of the pending approvals whose time ran out (their audit events
    /// say so); the count recorded.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn expire_approvals(&self) -> Result<u64, DomainError> {
        let now = self.ports.clock.now();
        let due = self
            .ports
            .approvals
            .expired_approvals(now, EXPIRY_BATCH)
            .await
            .map_err(store_error)?;
        let mut n = 0;
        for a in due {
            // The person's own event: nobody else acted, their approval ran out.
            let audit = AuditEvent {
                via: Channel::Assistant,
                ..self.audit_event_as(a.requested_by.clone(), &a, AuditAction::Expired)
            };
            let moved = self
                .ports
                .approvals
                .decide_approval(
                    a.id,
                    ApprovalStatus::Pending,
                    ApprovalStatus::Expired,
                    now,
                    audit,
                )
                .await
                .map_err(store_error)?;
            n += u64::from(moved);
        }
        Ok(n)
    }

    /// Runs an approved action under its approval's key, as `caller` through the assistant,
    /// and records what became of it. A failure of the service's own leaves the approval
    /// approved without an outcome, for the next ask to run again.
    async fn run_approved(&self, caller: &Caller, id: Uuid) -> Result<Approval, DomainError> {
        let a = self.approval(caller, id).await?;
        if a.outcome.is_some() {
            return Ok(a);
        }
        let key = IdempotencyKey::parse(&a.key())
            .ok_or_else(|| DomainError::Internal("an approval key out of pattern".into()))?;
        let fingerprint = Fingerprint::of(&["approval", &a.id.to_string(), a.action.kind()]);
        let services = Services {
            approval: Some(a.id),
            ..self.clone().via(Channel::Assistant)
        };
        let assistant = Caller {
            client: ClientKind::Assistant,
            ..caller.clone()
        };
        let ran = match a.action.clone() {
            ApprovedAction::CreateCluster { body } => {
                let record = Outcomes(|c: &Scheduled<Cluster>| done("cluster", c.id, c.id));
                let cmd = keyed(&assistant, &key, fingerprint, &record);
                settle(services.create_cluster(cmd, body).await, &record)
            }
            ApprovedAction::AddNodePool { cluster, body } => {
                let record = Outcomes(move |p: &Scheduled<crate::model::node_pool::NodePool>| {
                    done(
                        "node_pool",
                        format!("{cluster}/{}", p.name.as_str()),
                        cluster,
                    )
                });
                let cmd = keyed(&assistant, &key, fingerprint, &record);
                settle(services.create_node_pool(cmd, cluster, body).await, &record)
            }
            ApprovedAction::ScaleNodePool {
                cluster,
                pool,
                patch,
            } => {
                let record = Outcomes(move |p: &Scheduled<crate::model::node_pool::NodePool>| {
                    done(
                        "node_pool",
                        format!("{cluster}/{}", p.name.as_str()),
                        cluster,
                    )
                });
                let cmd = keyed(&assistant, &key, fingerprint, &record);
                let r = services
                    .patch_node_pool(cmd, cluster, &pool, patch, None)
                    .await;
                settle(r, &record)
            }
            ApprovedAction::DeleteNodePool { cluster, pool } => {
                let record = Outcomes(move |p: &Scheduled<crate::model::node_pool::NodePool>| {
                    done(
                        "node_pool",
                        format!("{cluster}/{}", p.name.as_str()),
                        cluster,
                    )
                });
                let cmd = keyed(&assistant, &key, fingerprint, &record);
                settle(
                    services.delete_node_pool(cmd, cluster, &pool, None).await,
                    &record,
                )
            }
            ApprovedAction::DeleteNode { cluster, node } => {
                let record = Outcomes(move |n: &Scheduled<crate::model::node::Node>| {
                    done("node", format!("{cluster}/{}", n.name.as_str()), cluster)
                });
                let cmd = keyed(&assistant, &key, fingerprint, &record);
                settle(services.delete_node(cmd, cluster, &node).await, &record)
            }
            ApprovedAction::DeleteCluster { cluster } => {
                let record = Outcomes(|c: &Scheduled<Cluster>| done("cluster", c.id, c.id));
                let cmd = keyed(&assistant, &key, fingerprint, &record);
                settle(services.delete_cluster(cmd, cluster, None).await, &record)
            }
            ApprovedAction::UpgradeCluster { cluster, body } => {
                let record = Outcomes(|c: &Scheduled<Cluster>| done("cluster", c.id, c.id));
                let cmd = keyed(&assistant, &key, fingerprint, &record);
                settle(
                    services.upgrade_cluster(cmd, cluster, body, None).await,
                    &record,
                )
            }
        };
        let outcome = ran?;
        self.ports
            .approvals
            .record_outcome(a.id, outcome.clone())
            .await
            .map_err(store_error)?;
        Ok(Approval {
            outcome: Some(outcome),
            ..a
        })
    }

    /// Checks what `action` needs before anybody is asked: its input, and `caller`'s right to
    /// make it where it would be made. Answers the organization and the words the person will
    /// read.
    async fn check_approvable(
        &self,
        caller: &Caller,
        action: &ApprovedAction,
    ) -> Result<(Uuid, String, String), DomainError> {
        if let ApprovedAction::CreateCluster { body } = action {
            let spec = body.validate()?;
            let org = access::resolve_create_org(
                self.ports.identity.as_ref(),
                caller,
                &spec.organization,
            )
            .await?;
            let pools: Vec<String> = spec
                .node_pools
                .iter()
                .map(|p| {
                    let nodes = if p.sizing.auto_scale {
                        format!(
                            "{} to {} nodes (autoscale)",
                            p.sizing.min_nodes,
                            p.sizing.max_nodes.unwrap_or(p.sizing.min_nodes)
                        )
                    } else {
                        format!("{} node{}", p.sizing.count, plural(p.sizing.count))
                    };
                    format!("node pool {} of {nodes} {}", p.name.as_str(), p.size)
                })
                .collect();
            let summary = format!(
                "Create the cluster {} in {} with {}.",
                spec.name.as_str(),
                org.slug,
                pools.join(", ")
            );
            return Ok((org.id, org.slug, summary));
        }
        let Some(cluster_id) = action.cluster() else {
            return Err(DomainError::Internal(
                "an action without its cluster".into(),
            ));
        };
        let c: Cluster = self.rights(caller, &Target::of(cluster_id)).await?;
        let summary = match action {
            ApprovedAction::AddNodePool { body, .. } => {
                let mut v = Violations::new();
                let spec = match body.validate(&mut v, "") {
                    Some(s) if v.is_empty() => s,
                    _ => return Err(DomainError::Validation(v)),
                };
                if c.pool(spec.name.as_str()).is_some() {
                    return Err(DomainError::Conflict(Conflict::NameTaken {
                        resource: Resource::NodePool,
                        name: spec.name.as_str().to_owned(),
                    }));
                }
                format!(
                    "Add the node pool {} of {} {} node{} to the cluster {}.",
                    spec.name.as_str(),
                    spec.sizing.count,
                    spec.size,
                    plural(spec.sizing.count),
                    c.name.as_str()
                )
            }
            ApprovedAction::ScaleNodePool { pool, patch, .. } => {
                patch.check_shape()?;
                let current = c
                    .pool(pool)
                    .ok_or(DomainError::NotFound(Resource::NodePool))?;
                let next = merge_patch(current, patch)?;
                let size = |p: &crate::model::node_pool::NodePool| {
                    if p.auto_scale {
                        format!(
                            "autoscale between {} and {} nodes",
                            p.min_nodes,
                            p.max_nodes.unwrap_or(p.min_nodes)
                        )
                    } else {
                        format!("{} node{}", p.count, plural(p.count))
                    }
                };
                // Every change the person approves is said, not only the size: a change of
                // taints or labels alone must not read as a resize to the same size.
                let mut parts = Vec::new();
                if size(current) != size(&next)
                    || (next.labels == current.labels && next.taints == current.taints)
                {
                    parts.push(format!("from {} to {}", size(current), size(&next)));
                }
                let listed = |items: Vec<String>| {
                    if items.is_empty() {
                        "none".to_owned()
                    } else {
                        items.join(", ")
                    }
                };
                if next.taints != current.taints {
                    parts.push(format!(
                        "its taints to {}",
                        listed(next.taints.iter().map(ToString::to_string).collect())
                    ));
                }
                if next.labels != current.labels {
                    parts.push(format!(
                        "its labels to {}",
                        listed(
                            next.labels
                                .iter()
                                .map(|(k, v)| format!("{k}={v}"))
                                .collect()
                        )
                    ));
                }
                format!(
                    "Change the node pool {} of the cluster {}: {}.",
                    pool,
                    c.name.as_str(),
                    parts.join("; ")
                )
            }
            ApprovedAction::DeleteNodePool { pool, .. } => {
                let current = c
                    .pool(pool)
                    .ok_or(DomainError::NotFound(Resource::NodePool))?;
                format!(
                    "Delete the node pool {} of the cluster {} and its {} node{}.",
                    pool,
                    c.name.as_str(),
                    current.count,
                    plural(current.count)
                )
            }
            ApprovedAction::DeleteNode { node, .. } => {
                let name =
                    NodeName::parse(node).map_err(|_| DomainError::NotFound(Resource::Node))?;
                let found = self
                    .ports
                    .clusters
                    .nodes(c.id, None)
                    .await
                    .map_err(store_error)?
                    .into_iter()
                    .find(|n| n.name == name)
                    .ok_or(DomainError::NotFound(Resource::Node))?;
                format!(
                    "Delete the node {} of the cluster {}; its pool {} replaces it with a new one.",
                    node,
                    c.name.as_str(),
                    found.pool
                )
            }
            ApprovedAction::DeleteCluster { .. } => {
                let nodes: u32 = c.live_pools().map(|p| p.count).sum();
                format!(
                    "Delete the cluster {} in {} and everything in it: {} node pool{}, {} node{}, its Elastic IPs and firewall rules.",
                    c.name.as_str(),
                    c.organization_slug,
                    c.live_pools().count(),
                    plural(c.live_pools().count() as u32),
                    nodes,
                    plural(nodes)
                )
            }
            ApprovedAction::UpgradeCluster { body, .. } => {
                let spec = body.validate()?;
                // Refused now, as it would be when it runs, rather than asked of a person.
                self.start_upgrade(&c, &spec.version, false)?;
                format!(
                    "Upgrade the cluster {} from Kubernetes {} to {}: the control plane first, then every node pool, replacing each node by a new one.",
                    c.name.as_str(),
                    c.version,
                    spec.version
                )
            }
            ApprovedAction::CreateCluster { .. } => String::new(),
        };
        Ok((c.organization_id, c.organization_slug.clone(), summary))
    }

    fn approval_event(&self, caller: &Caller, a: &Approval, action: AuditAction) -> AuditEvent {
        self.audit_event_as(Actor::of(caller), a, action)
    }

    /// An approval's own audit event: the action asked for and the words shown, never a
    /// secret (the actions carry none).
    fn audit_event_as(&self, actor: Actor, a: &Approval, action: AuditAction) -> AuditEvent {
        AuditEvent {
            id: self.ports.ids.new_id(),
            organization_id: a.organization_id,
            at: self.ports.clock.now(),
            actor,
            via: self.via,
            resource: AuditResource::Approval,
            resource_id: a.id.to_string(),
            parent: a.action.cluster().map(crate::model::audit::Parent::Cluster),
            action: action.as_str().to_owned(),
            changes: json!({"action": a.action.kind(), "summary": a.summary}),
            request_id: self.request_id.as_deref().map(str::to_owned),
            outcome: Outcome::Applied,
            approval: Some(a.id),
        }
    }
}

/// Where an assistant's ask stands ([`Services::ask_approval`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Asked {
    /// Recorded now: the person has yet to decide.
    Requested(Approval),
    /// Asked before and still pending.
    Waiting(Approval),
    /// Approved: its outcome says what became of the action.
    Approved(Approval),
    /// Declined by the person: the action never runs.
    Declined(Approval),
}

/// How an approval's run records its answer: what became of the action, which the next ask
/// reads back (the assistant's retry, a second approval).
struct Outcomes<F>(F);

impl<T, F: Fn(&T) -> ApprovalOutcome + Send + Sync> Record<T> for Outcomes<F> {
    fn answer(&self, value: &T) -> Replay {
        Replay((self.0)(value).to_json().to_string().into_bytes())
    }

    fn refusal(&self, error: &DomainError) -> Replay {
        Replay(refused(error).to_json().to_string().into_bytes())
    }
}

fn keyed<'a, T>(
    caller: &'a Caller,
    key: &IdempotencyKey,
    fingerprint: Fingerprint,
    record: &'a dyn Record<T>,
) -> Command<'a, T> {
    Command::keyed(
        caller,
        Some(Keyed {
            key: key.clone(),
            fingerprint,
            record,
        }),
    )
}

/// What became of the run: the outcome its answer records, or a refusal of the caller's
/// (recorded as the outcome); a failure of the service's own is passed on.
fn settle<T, F: Fn(&T) -> ApprovalOutcome + Send + Sync>(
    ran: Result<Answer<T>, DomainError>,
    record: &Outcomes<F>,
) -> Result<ApprovalOutcome, DomainError> {
    match ran {
        Ok(Answer::Fresh(value)) => Ok((record.0)(&value)),
        Ok(Answer::Replayed(r)) => serde_json::from_slice(&r.0)
            .ok()
            .and_then(|v| ApprovalOutcome::from_json(&v))
            .ok_or_else(|| {
                DomainError::Internal("an approval's recorded outcome is unreadable".into())
            }),
        Err(e) if e.is_transient() => Err(e),
        Err(e) => Ok(refused(&e)),
    }
}

fn done(resource: &str, id: impl ToString, cluster_id: Uuid) -> ApprovalOutcome {
    ApprovalOutcome::Done {
        resource: resource.to_owned(),
        id: id.to_string(),
        cluster_id,
    }
}

fn refused(e: &DomainError) -> ApprovalOutcome {
    ApprovalOutcome::Refused {
        code: e.code().to_owned(),
        detail: e.public_detail(),
    }
}

fn decided(status: ApprovalStatus, operation: &'static str) -> DomainError {
    DomainError::Conflict(Conflict::InvalidState {
        resource: Resource::Approval,
        status: status.as_str(),
        operation,
    })
}

fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}
