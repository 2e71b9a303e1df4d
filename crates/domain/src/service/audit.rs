//! Reading the audit trail. Writing it is every change's own business: each decision names
//! its event, committed with the change (see `Decision` and the auth-server changes).

use crate::access;
use crate::error::DomainError;
use crate::input::audit::ListAuditEvents;
use crate::model::audit::{AuditCursor, AuditEvent, AuditQuery, PAGE_MAX};
use crate::model::identity::Caller;
use crate::service::{Services, store_error};

/// A page of the audit trail, newest first, and where the next one starts (none: this was
/// the last).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditPage {
    pub items: Vec<AuditEvent>,
    pub next: Option<AuditCursor>,
}

impl Services {
    /// One page of an organization's audit trail; any member may read it.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn audit_events(
        &self,
        caller: &Caller,
        request: ListAuditEvents,
    ) -> Result<AuditPage, DomainError> {
        let org =
            access::resolve_collection_org(self.ports.identity.as_ref(), caller, &request.org)
                .await?;
        let limit = request.limit.clamp(1, PAGE_MAX);
        // One more than asked says whether a next page exists without a count.
        let mut items = self
            .ports
            .audit
            .audit_events(AuditQuery {
                organization_id: org.id,
                filter: request.filter,
                after: request.after,
                limit: limit + 1,
            })
            .await
            .map_err(store_error)?;
        let more = items.len() > limit as usize;
        items.truncate(limit as usize);
        let next = if more {
            items.last().map(AuditCursor::after)
        } else {
            None
        };
        Ok(AuditPage { items, next })
    }
}
