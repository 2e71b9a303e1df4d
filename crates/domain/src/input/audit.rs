//! A read of the audit trail, as a face asks for it.

use crate::access::OrgSelector;
use crate::model::audit::{AuditCursor, AuditFilter};

/// Which events of an organization to answer, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListAuditEvents {
    pub org: OrgSelector,
    pub filter: AuditFilter,
    /// Where the previous page ended.
    pub after: Option<AuditCursor>,
    /// Events per page, 1 to [`crate::model::audit::PAGE_MAX`] (a larger one is cut to it).
    pub limit: u32,
}
