//! The development platform: a fixed demo directory of organizations, users and
//! tokens, served in process by [`DevAccountPlatform`] in `--dev` mode and over HTTP by the
//! `platform-stub` crate. Never used outside development mode and tests.

use std::fmt;

use async_trait::async_trait;
use domain::model::identity::{
    Billing, Caller, ClientKind, Membership, OrgSummary, Organization, Plan, Role, User,
};
use domain::model::secret::Secret;
use domain::names::OrgRef;
use domain::ports::identity::{IdentityError, IdentityProvider};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Fixed so demo data, docs and tests can name them.
pub const ACME_ID: Uuid = Uuid::from_u128(0x0a0c_0e00_0000_4000_8000_0000_0000_0001);
pub const GLOBEX_ID: Uuid = Uuid::from_u128(0x0910_be00_0000_4000_8000_0000_0000_0002);
pub const INITECH_ID: Uuid = Uuid::from_u128(0x0141_7ec0_0000_4000_8000_0000_0000_0003);

/// The demo tokens: long so they pass any length check, and unmistakably not production ones.
pub const TOKEN_ACME_SUPER_ADMIN: &str = "dev-only-token-acme-super-admin-7c1f0e9a4b2d4c8e9f3a6b5d";
pub const TOKEN_ACME_MEMBER: &str = "dev-only-token-acme-member-3e8b2a1c9d7f4e6a8b0c2d4e";
pub const TOKEN_ACME_PROJECT_ADMIN: &str = "dev-only-token-acme-project-admin-5a9c7e3b1d2f4a6c8e0b";
pub const TOKEN_TWO_ORGS: &str = "dev-only-token-globex-super-admin-acme-member-9d4b6f2a8c1e3";
pub const TOKEN_INITECH_SUPER_ADMIN: &str =
    "dev-only-token-initech-super-admin-2f6d8b0a4c9e1b3d5f7a";
pub const TOKEN_ACME_ASSISTANT: &str = "dev-only-token-acme-assistant-super-admin-8e2c4a6b0d9f1e3";

/// A user the directory knows, with the bearer token that authenticates them.
#[derive(Clone, Serialize, Deserialize)]
pub struct DirectoryUser {
    /// What this user is for, printed beside the token at start.
    pub description: String,
    pub token: String,
    pub caller: Caller,
}

impl fmt::Debug for DirectoryUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DirectoryUser")
            .field("description", &self.description)
            .field("token", &"***")
            .field("caller", &self.caller)
            .finish()
    }
}

/// Organizations and users, as plain data (also the `--directory` JSON file of the stub).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Directory {
    #[serde(default)]
    pub organizations: Vec<Organization>,
    #[serde(default)]
    pub users: Vec<DirectoryUser>,
}

/// A demo token and whom it belongs to, for the server to print at start.
#[derive(Clone, PartialEq, Eq)]
pub struct DemoToken {
    pub description: String,
    pub token: String,
}

impl fmt::Debug for DemoToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DemoToken")
            .field("description", &self.description)
            .finish_non_exhaustive()
    }
}

fn summary(id: Uuid, slug: &str) -> OrgSummary {
    OrgSummary {
        id,
        slug: slug.to_owned(),
    }
}

fn member_of(id: Uuid, slug: &str, role: Role) -> Membership {
    Membership {
        organization: summary(id, slug),
        role,
    }
}

impl Directory {
    /// The demo directory: `acme` (postpaid), `globex` (prepaid with credit), `initech` (prepaid,
    /// no credit) and one user per role worth trying.
    pub fn demo() -> Self {
        let acme = |role| member_of(ACME_ID, "acme", role);
        let organizations = vec![
            Organization {
                id: ACME_ID,
                slug: "acme".into(),
                billing: Billing {
                    plan: Plan::Postpaid,
                    credit_cents: 0,
                },
            },
            Organization {
                id: GLOBEX_ID,
                slug: "globex".into(),
                billing: Billing {
                    plan: Plan::Prepaid,
                    credit_cents: 50_000,
                },
            },
            Organization {
                id: INITECH_ID,
                slug: "initech".into(),
                billing: Billing {
                    plan: Plan::Prepaid,
                    credit_cents: 0,
                },
            },
        ];
        let user = |description: &str,
                    token: &str,
                    id: &str,
                    preferred: Option<Uuid>,
                    memberships: Vec<Membership>,
                    client: ClientKind| DirectoryUser {
            description: description.into(),
            token: token.into(),
            caller: Caller {
                user: User {
                    id: id.into(),
                    email: Some(format!("{id}@example.com")),
                },
                preferred_organization: preferred,
                memberships,
                client,
            },
        };
        let users = vec![
            user(
                "super_admin of acme (postpaid)",
                TOKEN_ACME_SUPER_ADMIN,
                "alice",
                Some(ACME_ID),
                vec![acme(Role::SuperAdmin)],
                ClientKind::Api,
            ),
            user(
                "member of acme (read-only)",
                TOKEN_ACME_MEMBER,
                "bob",
                Some(ACME_ID),
                vec![acme(Role::Member)],
                ClientKind::Api,
            ),
            user(
                "project_admin of acme (member rights; no preferred organization)",
                TOKEN_ACME_PROJECT_ADMIN,
                "carol",
                None,
                vec![acme(Role::ProjectAdmin)],
                ClientKind::Api,
            ),
            user(
                "super_admin of globex (prepaid, credit) and member of acme; prefers globex",
                TOKEN_TWO_ORGS,
                "dave",
                Some(GLOBEX_ID),
                vec![
                    member_of(GLOBEX_ID, "globex", Role::SuperAdmin),
                    acme(Role::Member),
                ],
                ClientKind::Api,
            ),
            user(
                "super_admin of initech (prepaid, no credit: 402 on adding nodes)",
                TOKEN_INITECH_SUPER_ADMIN,
                "erin",
                Some(INITECH_ID),
                vec![member_of(INITECH_ID, "initech", Role::SuperAdmin)],
                ClientKind::Api,
            ),
            user(
                "the assistant client, super_admin of acme",
                TOKEN_ACME_ASSISTANT,
                "frank",
                Some(ACME_ID),
                vec![acme(Role::SuperAdmin)],
                ClientKind::Assistant,
            ),
        ];
        Self {
            organizations,
            users,
        }
    }

    /// The caller a token belongs to. Exact match: this is development data, not a credential
    /// store, so constant-time comparison buys nothing.
    pub fn caller(&self, token: &str) -> Option<&Caller> {
        self.users
            .iter()
            .find(|u| u.token == token)
            .map(|u| &u.caller)
    }

    pub fn organization(&self, r: &OrgRef) -> Option<&Organization> {
        self.organizations
            .iter()
            .find(|o| r.matches(&o.id, &o.slug))
    }

    /// Adds a user, replacing any with the same token.
    pub fn add_user(&mut self, user: DirectoryUser) {
        self.users.retain(|u| u.token != user.token);
        self.users.push(user);
    }

    /// Adds an organization, replacing any with the same id or slug.
    pub fn add_organization(&mut self, org: Organization) {
        self.organizations
            .retain(|o| o.id != org.id && o.slug != org.slug);
        self.organizations.push(org);
    }

    pub fn tokens(&self) -> Vec<DemoToken> {
        self.users
            .iter()
            .map(|u| DemoToken {
                description: u.description.clone(),
                token: u.token.clone(),
            })
            .collect()
    }
}

/// The demo tokens of [`Directory::demo`], in a stable order.
pub fn demo_tokens() -> Vec<DemoToken> {
    Directory::demo().tokens()
}

/// The identity port answered from a [`Directory`] in process.
#[derive(Debug, Clone)]
pub struct DevAccountPlatform {
    directory: Directory,
}

impl DevAccountPlatform {
    pub fn new(directory: Directory) -> Self {
        Self { directory }
    }

    pub fn demo() -> Self {
        Self::new(Directory::demo())
    }

    pub fn directory(&self) -> &Directory {
        &self.directory
    }
}

#[async_trait]
impl IdentityProvider for DevAccountPlatform {
    async fn caller(&self, token: &Secret) -> Result<Caller, IdentityError> {
        self.directory
            .caller(token.expose())
            .cloned()
            .ok_or(IdentityError::InvalidToken)
    }

    async fn organization(&self, org: &OrgRef) -> Result<Option<Organization>, IdentityError> {
        Ok(self.directory.organization(org).cloned())
    }

    /// The directory is in memory: always fresh.
    async fn organization_fresh(
        &self,
        org: &OrgRef,
    ) -> Result<Option<Organization>, IdentityError> {
        self.organization(org).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        use std::task::{Context, Poll, Waker};
        let mut f = std::pin::pin!(f);
        let mut cx = Context::from_waker(Waker::noop());
        match f.as_mut().poll(&mut cx) {
            Poll::Ready(v) => v,
            Poll::Pending => panic!("the dev platform never waits"),
        }
    }

    #[test]
    fn demo_covers_every_role_and_plan() {
        let d = Directory::demo();
        let roles: Vec<Role> = d
            .users
            .iter()
            .flat_map(|u| u.caller.memberships.iter().map(|m| m.role))
            .collect();
        for r in [Role::SuperAdmin, Role::Member, Role::ProjectAdmin] {
            assert!(roles.contains(&r), "{r:?} missing");
        }
        let plans: Vec<_> = d.organizations.iter().map(|o| o.billing).collect();
        assert!(plans.iter().any(|b| b.plan == Plan::Postpaid));
        assert!(
            plans
                .iter()
                .any(|b| b.plan == Plan::Prepaid && b.may_add_nodes())
        );
        assert!(
            plans
                .iter()
                .any(|b| b.plan == Plan::Prepaid && !b.may_add_nodes())
        );
        assert!(d.users.iter().any(|u| u.caller.memberships.len() == 2));
        assert!(
            d.users
                .iter()
                .any(|u| u.caller.client == ClientKind::Assistant)
        );
    }

    #[test]
    fn demo_tokens_are_unique_long_and_clearly_for_development() {
        let tokens = demo_tokens();
        assert_eq!(tokens.len(), Directory::demo().users.len());
        for t in &tokens {
            assert!(t.token.starts_with("dev-only-") && t.token.len() >= 40);
            assert_eq!(tokens.iter().filter(|o| o.token == t.token).count(), 1);
            assert!(!format!("{t:?}").contains(&t.token));
        }
    }

    #[test]
    fn dev_platform_answers_known_tokens_and_rejects_others() {
        let p = DevAccountPlatform::demo();
        let c = block_on(p.caller(&Secret::new(TOKEN_TWO_ORGS)));
        let c = c.ok().map(|c| (c.role_in(&GLOBEX_ID), c.role_in(&ACME_ID)));
        assert_eq!(c, Some((Some(Role::SuperAdmin), Some(Role::Member))));
        let bad = block_on(p.caller(&Secret::new("nope")));
        assert_eq!(bad, Err(IdentityError::InvalidToken));
    }

    #[test]
    fn dev_platform_finds_organizations_by_slug_and_id() {
        let p = DevAccountPlatform::demo();
        let by_slug = block_on(p.organization(&OrgRef::classify("globex")));
        let by_id = block_on(p.organization(&OrgRef::classify(&GLOBEX_ID.to_string())));
        assert_eq!(by_slug, by_id);
        assert_eq!(
            by_slug.ok().flatten().map(|o| o.billing.credit_cents),
            Some(50_000)
        );
        assert_eq!(
            block_on(p.organization(&OrgRef::classify("umbrella"))),
            Ok(None)
        );
    }

    #[test]
    fn directory_round_trips_as_json() {
        let d = Directory::demo();
        let json = serde_json::to_string(&d).unwrap_or_default();
        let back: Result<Directory, _> = serde_json::from_str(&json);
        assert_eq!(back.map(|b| b.users.len()).ok(), Some(d.users.len()));
    }
}
