//! `AuditLog`: the audit trail in `audit_events`. Events are inserted by the writes they tell
//! about, in their transactions ([`insert_in`], and the create's one call with [`to_json`]);
//! this module also reads them back, newest first, and purges the old ones.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::pg::PgConnection;
use diesel::prelude::*;
use domain::model::audit::{
    Actor, AuditEvent, AuditQuery, AuditResource, Channel, Outcome, Parent,
};
use domain::model::identity::ClientKind;
use domain::ports::storage::{AuditLog, StoreError};
use uuid::Uuid;

use crate::PgStore;
use crate::error::{TxError, map};
use crate::schema::audit_events as a;

/// A row of `audit_events`, as written and as read.
#[derive(Debug, Insertable, Queryable, Selectable, serde::Serialize)]
#[diesel(table_name = a)]
struct AuditRow {
    id: Uuid,
    organization_id: Uuid,
    auth_server_id: Option<Uuid>,
    /// The actor's user id.
    actor: String,
    action: String,
    /// The changed fields.
    details: serde_json::Value,
    at: DateTime<Utc>,
    resource: String,
    resource_id: Option<String>,
    cluster_id: Option<Uuid>,
    actor_email: Option<String>,
    actor_client: String,
    via: String,
    request_id: Option<String>,
    outcome: String,
    approval_id: Option<Uuid>,
}

impl AuditRow {
    fn from_domain(e: &AuditEvent) -> AuditRow {
        AuditRow {
            id: e.id,
            organization_id: e.organization_id,
            auth_server_id: e.auth_server_id(),
            actor: e.actor.user_id.clone(),
            action: e.action.clone(),
            details: e.changes.clone(),
            at: e.at,
            resource: e.resource.as_str().to_owned(),
            resource_id: Some(e.resource_id.clone()),
            cluster_id: e.cluster_id(),
            actor_email: e.actor.email.clone(),
            actor_client: e.actor.client.as_str().to_owned(),
            via: e.via.as_str().to_owned(),
            request_id: e.request_id.clone(),
            outcome: e.outcome.as_str().to_owned(),
            approval_id: e.approval,
        }
    }

    fn into_domain(self) -> Result<AuditEvent, StoreError> {
        let word = |column: &str, value: &str| {
            StoreError::Internal(format!("audit_events.{column} holds {value:?}"))
        };
        let resource =
            AuditResource::parse(&self.resource).ok_or_else(|| word("resource", &self.resource))?;
        let parent = match (self.cluster_id, self.auth_server_id) {
            (Some(c), _) => Some(Parent::Cluster(c)),
            (None, Some(s)) => Some(Parent::AuthServer(s)),
            (None, None) => None,
        };
        Ok(AuditEvent {
            id: self.id,
            organization_id: self.organization_id,
            at: self.at,
            actor: Actor {
                user_id: self.actor,
                email: self.actor_email,
                client: ClientKind::parse(&self.actor_client),
            },
            via: Channel::parse(&self.via).ok_or_else(|| word("via", &self.via))?,
            resource,
            // An event of a release before every change was audited names its auth server only.
            resource_id: self
                .resource_id
                .or(self.auth_server_id.map(|s| s.to_string()))
                .unwrap_or_default(),
            parent,
            action: self.action,
            changes: self.details,
            request_id: self.request_id,
            outcome: Outcome::parse(&self.outcome).ok_or_else(|| word("outcome", &self.outcome))?,
            approval: self.approval_id,
        })
    }
}

/// Writes an event in the caller's transaction.
pub(crate) fn insert_in(conn: &mut PgConnection, event: &AuditEvent) -> Result<(), TxError> {
    diesel::insert_into(a::table)
        .values(AuditRow::from_domain(event))
        .execute(conn)?;
    Ok(())
}

/// An event as the JSON of its row, for SQL that inserts it with `jsonb_populate_record`.
pub(crate) fn to_json(event: &AuditEvent) -> Result<serde_json::Value, StoreError> {
    serde_json::to_value(AuditRow::from_domain(event))
        .map_err(|e| StoreError::Internal(format!("audit row to JSON: {e}")))
}

#[async_trait]
impl AuditLog for PgStore {
    async fn audit_events(&self, query: AuditQuery) -> Result<Vec<AuditEvent>, StoreError> {
        self.run_blocking(move |conn| {
            let mut q = a::table
                .filter(a::organization_id.eq(query.organization_id))
                .into_boxed();
            let f = &query.filter;
            if let Some(r) = f.resource {
                q = q.filter(a::resource.eq(r.as_str()));
            }
            if let Some(id) = &f.resource_id {
                q = q.filter(a::resource_id.eq(id.clone()));
            }
            if let Some(c) = f.cluster_id {
                q = q.filter(a::cluster_id.eq(c));
            }
            if let Some(actor) = &f.actor {
                q = q.filter(a::actor.eq(actor.clone()));
            }
            if let Some(since) = f.since {
                q = q.filter(a::at.ge(since));
            }
            if let Some(until) = f.until {
                q = q.filter(a::at.lt(until));
            }
            if let Some(c) = query.after {
                q = q.filter(a::at.lt(c.at).or(a::at.eq(c.at).and(a::id.lt(c.id))));
            }
            let rows: Vec<AuditRow> = q
                .order((a::at.desc(), a::id.desc()))
                .limit(i64::from(query.limit))
                .select(AuditRow::as_select())
                .load(conn)
                .map_err(map)?;
            rows.into_iter().map(AuditRow::into_domain).collect()
        })
        .await
    }

    async fn purge_audit_before(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        self.run_blocking(move |conn| {
            crate::partitions::purge_before(conn, crate::partitions::AUDIT_EVENTS, before)
                .map(|purged| purged.rows)
                .map_err(map)
        })
        .await
    }
}
