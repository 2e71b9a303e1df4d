//! The clock, the id source and the background chores of a server process.

use std::time::Duration;

use chrono::{DateTime, Utc};
use domain::ports::clock::{Clock, IdSource};
use domain::ports::storage::{AuditLog, IdempotencyStore, OperationLog, SessionStore};
use store_postgres::PgStore;
use uuid::Uuid;

/// The wall clock, to the microsecond: what PostgreSQL keeps, so an object answered at
/// create time reads back the same later.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        use chrono::SubsecRound;
        Utc::now().trunc_subsecs(6)
    }
}

/// Random (v4) UUIDs.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomIds;

impl IdSource for RandomIds {
    fn new_id(&self) -> Uuid {
        Uuid::new_v4()
    }
}

/// Deletes Idempotency-Keys older than their 24 h retention, hourly.
pub fn spawn_idempotency_purge(store: PgStore) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tick.tick().await;
            let cutoff =
                Utc::now() - chrono::Duration::hours(domain::model::idempotency::RETENTION_HOURS);
            match store.purge_created_before(cutoff).await {
                Ok(n) if n > 0 => tracing::info!(deleted = n, "expired idempotency keys purged"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "idempotency key purge failed"),
            }
        }
    });
}

/// Records the expiry of approvals whose time ran out, every 30 s (an approval reads as
/// expired at once either way; this writes its audit event).
pub fn spawn_approval_expiry(services: domain::service::Services) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(30));
        loop {
            tick.tick().await;
            match services.expire_approvals().await {
                Ok(n) if n > 0 => tracing::info!(expired = n, "approvals expired"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "approval expiry failed"),
            }
        }
    });
}

/// Starts the automatic upgrades that are due (owners who asked for them, inside their
/// maintenance windows), every minute: a four-hour window is never missed, and a replica
/// that loses the race to another on a cluster leaves it alone.
pub fn spawn_automatic_upgrades(services: domain::service::Services) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tick.tick().await;
            match services.start_automatic_upgrades().await {
                Ok(n) if n > 0 => tracing::info!(started = n, "automatic upgrades started"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "automatic upgrades failed"),
            }
        }
    });
}

/// Forgets sign-outs whose sessions would have expired by now anyway, hourly.
pub fn spawn_session_purge(store: PgStore) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tick.tick().await;
            match store.purge_session_revocations(Utc::now()).await {
                Ok(n) if n > 0 => tracing::info!(deleted = n, "expired sign-outs purged"),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "sign-out purge failed"),
            }
        }
    });
}

/// The hourly housekeeping of data that only grows: the coming months of the partitioned
/// tables made; audit events and finished operations older than `retention_days` removed (0:
/// never), by whole months (docs/operations.md); kubeconfig credentials that ended more than
/// `credential_grace_days` ago deleted (0: never).
pub fn spawn_housekeeping(store: PgStore, retention_days: u32, credential_grace_days: u32) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(3600));
        loop {
            tick.tick().await;
            if let Err(e) = store.ensure_partitions().await {
                tracing::warn!(error = %e, "making the coming months' partitions failed");
            }
            let days_ago = |days: u32| Utc::now() - chrono::Duration::days(i64::from(days));
            if retention_days > 0 {
                let cutoff = days_ago(retention_days);
                match store.purge_audit_before(cutoff).await {
                    Ok(n) if n > 0 => tracing::info!(deleted = n, "expired audit events purged"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "audit event purge failed"),
                }
                match store.purge_finished_before(cutoff).await {
                    Ok(n) if n > 0 => tracing::info!(deleted = n, "finished operations purged"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "finished operation purge failed"),
                }
            }
            if credential_grace_days > 0 {
                match store
                    .purge_credentials_ended_before(days_ago(credential_grace_days))
                    .await
                {
                    Ok(n) if n > 0 => tracing::info!(deleted = n, "ended credentials purged"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "ended credential purge failed"),
                }
            }
        }
    });
}
