//! `ApprovalStore`: what a person's assistant asked for, in `approvals`. Each decision is a
//! compare-and-set on the status, written with its audit event in one transaction, so two
//! decisions of one approval never both take effect.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use diesel::prelude::*;
use domain::model::approval::{Approval, ApprovalOutcome, ApprovalStatus, ApprovedAction};
use domain::model::audit::{Actor, AuditEvent};
use domain::model::identity::ClientKind;
use domain::ports::storage::{ApprovalStore, StoreError};
use uuid::Uuid;

use crate::PgStore;
use crate::error::{TxError, corrupt, map};
use crate::schema::approvals as ap;

#[derive(Debug, Insertable, Queryable, Selectable)]
#[diesel(table_name = ap)]
struct ApprovalRow {
    id: Uuid,
    organization_id: Uuid,
    organization_slug: String,
    requested_by: String,
    requested_by_email: Option<String>,
    action_kind: String,
    action: serde_json::Value,
    summary: String,
    status: String,
    created_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
    decided_at: Option<DateTime<Utc>>,
    outcome: Option<serde_json::Value>,
}

impl ApprovalRow {
    fn from_domain(a: &Approval) -> ApprovalRow {
        ApprovalRow {
            id: a.id,
            organization_id: a.organization_id,
            organization_slug: a.organization_slug.clone(),
            requested_by: a.requested_by.user_id.clone(),
            requested_by_email: a.requested_by.email.clone(),
            action_kind: a.action.kind().to_owned(),
            action: a.action.arguments(),
            summary: a.summary.clone(),
            status: a.status.as_str().to_owned(),
            created_at: a.created_at,
            expires_at: a.expires_at,
            decided_at: a.decided_at,
            outcome: a.outcome.as_ref().map(ApprovalOutcome::to_json),
        }
    }

    fn into_domain(self) -> Result<Approval, StoreError> {
        let action = ApprovedAction::from_stored(&self.action_kind, &self.action)
            .ok_or_else(|| corrupt("approval action", &self.id.to_string()))?;
        let status = ApprovalStatus::parse(&self.status)
            .ok_or_else(|| corrupt("approval status", &self.status))?;
        let outcome = match &self.outcome {
            None => None,
            Some(v) => Some(
                ApprovalOutcome::from_json(v)
                    .ok_or_else(|| corrupt("approval outcome", &self.id.to_string()))?,
            ),
        };
        Ok(Approval {
            id: self.id,
            organization_id: self.organization_id,
            organization_slug: self.organization_slug,
            requested_by: Actor {
                user_id: self.requested_by,
                email: self.requested_by_email,
                client: ClientKind::Assistant,
            },
            action,
            summary: self.summary,
            status,
            created_at: self.created_at,
            expires_at: self.expires_at,
            decided_at: self.decided_at,
            outcome,
        })
    }
}

#[async_trait]
impl ApprovalStore for PgStore {
    async fn insert_approval(
        &self,
        approval: Approval,
        audit: AuditEvent,
    ) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            conn.transaction(|conn| {
                diesel::insert_into(ap::table)
                    .values(ApprovalRow::from_domain(&approval))
                    .execute(conn)?;
                crate::audit::insert_in(conn, &audit)
            })
            .map_err(StoreError::from)
        })
        .await
    }

    async fn approval(&self, id: Uuid) -> Result<Option<Approval>, StoreError> {
        self.run_blocking(move |conn| {
            ap::table
                .find(id)
                .select(ApprovalRow::as_select())
                .first(conn)
                .optional()
                .map_err(map)?
                .map(ApprovalRow::into_domain)
                .transpose()
        })
        .await
    }

    async fn approvals_of(&self, user_id: String, limit: u32) -> Result<Vec<Approval>, StoreError> {
        self.run_blocking(move |conn| {
            let rows: Vec<ApprovalRow> = ap::table
                .filter(ap::requested_by.eq(&user_id))
                .order((ap::created_at.desc(), ap::id.desc()))
                .limit(i64::from(limit))
                .select(ApprovalRow::as_select())
                .load(conn)
                .map_err(map)?;
            rows.into_iter().map(ApprovalRow::into_domain).collect()
        })
        .await
    }

    async fn decide_approval(
        &self,
        id: Uuid,
        from: ApprovalStatus,
        to: ApprovalStatus,
        at: DateTime<Utc>,
        audit: AuditEvent,
    ) -> Result<bool, StoreError> {
        self.run_blocking(move |conn| {
            conn.transaction(|conn| {
                let mut q = diesel::update(ap::table)
                    .filter(ap::id.eq(id))
                    .filter(ap::status.eq(from.as_str()))
                    .into_boxed();
                // An approval is approved only within its time, however late the sweep is.
                if to == ApprovalStatus::Approved {
                    q = q.filter(ap::expires_at.gt(at));
                }
                let moved = q
                    .set((ap::status.eq(to.as_str()), ap::decided_at.eq(Some(at))))
                    .execute(conn)?;
                if moved == 1 {
                    crate::audit::insert_in(conn, &audit)?;
                }
                Ok::<_, TxError>(moved == 1)
            })
            .map_err(StoreError::from)
        })
        .await
    }

    async fn record_outcome(&self, id: Uuid, outcome: ApprovalOutcome) -> Result<(), StoreError> {
        self.run_blocking(move |conn| {
            diesel::update(ap::table)
                .filter(ap::id.eq(id))
                .filter(ap::status.eq(ApprovalStatus::Approved.as_str()))
                .filter(ap::outcome.is_null())
                .set(ap::outcome.eq(Some(outcome.to_json())))
                .execute(conn)
                .map(|_| ())
                .map_err(map)
        })
        .await
    }

    async fn expired_approvals(
        &self,
        now: DateTime<Utc>,
        limit: u32,
    ) -> Result<Vec<Approval>, StoreError> {
        self.run_blocking(move |conn| {
            let rows: Vec<ApprovalRow> = ap::table
                .filter(ap::status.eq(ApprovalStatus::Pending.as_str()))
                .filter(ap::expires_at.le(now))
                .order(ap::expires_at.asc())
                .limit(i64::from(limit))
                .select(ApprovalRow::as_select())
                .load(conn)
                .map_err(map)?;
            rows.into_iter().map(ApprovalRow::into_domain).collect()
        })
        .await
    }
}
