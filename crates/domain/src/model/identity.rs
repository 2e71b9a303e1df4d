//! Who is calling: the user, their memberships and roles, the kind of client, and the
//! organizations with their billing, as the account platform reports them.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::names::OrgRef;

/// A role in one organization. Unknown role words from the platform grant nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Member,
    ProjectAdmin,
    SuperAdmin,
    #[serde(other)]
    Unknown,
}

impl Role {
    /// Member rights: every read. project_admin has exactly these.
    pub fn can_read(self) -> bool {
        matches!(self, Role::Member | Role::ProjectAdmin | Role::SuperAdmin)
    }

    /// Every mutation.
    pub fn can_write(self) -> bool {
        self == Role::SuperAdmin
    }
}

/// The kind of client a session belongs to; absent means `api`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClientKind {
    #[default]
    Api,
    Console,
    Assistant,
    #[serde(other)]
    Other,
}

impl ClientKind {
    pub const ALL: [ClientKind; 4] = [
        ClientKind::Api,
        ClientKind::Console,
        ClientKind::Assistant,
        ClientKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClientKind::Api => "api",
            ClientKind::Console => "console",
            ClientKind::Assistant => "assistant",
            ClientKind::Other => "other",
        }
    }

    /// The kind a word names; an unknown word is `Other`, as from the platform.
    pub fn parse(word: &str) -> ClientKind {
        match word {
            "api" => ClientKind::Api,
            "console" => ClientKind::Console,
            "assistant" => ClientKind::Assistant,
            _ => ClientKind::Other,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgSummary {
    pub id: Uuid,
    pub slug: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Membership {
    pub organization: OrgSummary,
    pub role: Role,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    pub id: String,
    #[serde(default)]
    pub email: Option<String>,
}

/// The authenticated caller, as the account platform knows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Caller {
    pub user: User,
    #[serde(default)]
    pub preferred_organization: Option<Uuid>,
    #[serde(default)]
    pub memberships: Vec<Membership>,
    #[serde(default)]
    pub client: ClientKind,
}

impl Caller {
    /// The caller's membership in the organization with this id.
    pub fn membership(&self, organization_id: &Uuid) -> Option<&Membership> {
        self.memberships
            .iter()
            .find(|m| &m.organization.id == organization_id)
    }

    /// The caller's membership in the organization a reference names, if any.
    pub fn membership_by_ref(&self, r: &OrgRef) -> Option<&Membership> {
        self.memberships
            .iter()
            .find(|m| r.matches(&m.organization.id, &m.organization.slug))
    }

    pub fn role_in(&self, organization_id: &Uuid) -> Option<Role> {
        self.membership(organization_id).map(|m| m.role)
    }

    /// Whether the caller may write anywhere at all (a writer who is super_admin nowhere gets
    /// `DomainError::Forbidden` before anything is loaded).
    pub fn is_super_admin_anywhere(&self) -> bool {
        self.memberships.iter().any(|m| m.role.can_write())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Plan {
    Prepaid,
    Postpaid,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Billing {
    pub plan: Plan,
    #[serde(default)]
    pub credit_cents: i64,
}

impl Billing {
    /// Prepaid with `credit_cents <= 0` may not add nodes.
    pub fn may_add_nodes(&self) -> bool {
        match self.plan {
            Plan::Postpaid => true,
            Plan::Prepaid => self.credit_cents > 0,
        }
    }
}

/// An organization, with its billing, as the account platform knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Organization {
    pub id: Uuid,
    pub slug: String,
    pub billing: Billing,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_admin_has_exactly_member_rights() {
        assert_eq!(Role::ProjectAdmin.can_read(), Role::Member.can_read());
        assert_eq!(Role::ProjectAdmin.can_write(), Role::Member.can_write());
        assert!(!Role::Member.can_write());
        assert!(Role::SuperAdmin.can_read() && Role::SuperAdmin.can_write());
    }

    #[test]
    fn unknown_role_word_grants_nothing() {
        let role: Role = serde_json::from_str("\"owner\"").unwrap_or(Role::SuperAdmin);
        assert_eq!(role, Role::Unknown);
        assert!(!role.can_read() && !role.can_write());
    }

    #[test]
    fn prepaid_without_credit_may_not_add_nodes() {
        assert!(
            !Billing {
                plan: Plan::Prepaid,
                credit_cents: 0
            }
            .may_add_nodes()
        );
        assert!(
            !Billing {
                plan: Plan::Prepaid,
                credit_cents: -5
            }
            .may_add_nodes()
        );
        assert!(
            Billing {
                plan: Plan::Prepaid,
                credit_cents: 1
            }
            .may_add_nodes()
        );
        assert!(
            Billing {
                plan: Plan::Postpaid,
                credit_cents: 0
            }
            .may_add_nodes()
        );
    }

    #[test]
    fn absent_client_means_api() {
        let c: Result<Caller, _> = serde_json::from_str(r#"{"user":{"id":"u1"},"memberships":[]}"#);
        assert_eq!(c.map(|c| c.client).ok(), Some(ClientKind::Api));
    }
}
