//! The identity port: the account platform that knows tokens, users,
//! memberships and organizations. The service mints nothing.

use async_trait::async_trait;

use crate::model::identity::{Caller, Organization};
use crate::model::secret::Secret;
use crate::names::OrgRef;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    /// The platform rejected the token (`AuthFailure::InvalidToken`).
    #[error("the token was rejected")]
    InvalidToken,
    /// Refused, timed out, failed on the platform's side or an unreadable answer
    /// (`DomainError::AuthBackendUnavailable`). The text never holds a token.
    #[error("the account platform is unavailable: {0}")]
    Unavailable(String),
}

#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
#[async_trait]
pub trait IdentityProvider: Send + Sync {
    /// The caller a bearer token belongs to, as the account platform knows them.
    async fn caller(&self, token: &Secret) -> Result<Caller, IdentityError>;
    /// An organization with its billing, by id or slug; `None` when the platform does not
    /// know it.
    async fn organization(&self, org: &OrgRef) -> Result<Option<Organization>, IdentityError>;
    /// The same, asked of the platform now and never answered from a cache: what a change that
    /// adds nodes reads, so an organization whose credit ran out is refused at once, not when a
    /// cached copy expires. (An implementation may refresh its cache with the answer.)
    async fn organization_fresh(&self, org: &OrgRef)
    -> Result<Option<Organization>, IdentityError>;
}
