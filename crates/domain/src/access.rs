//! The access policy: authenticating the bearer token, resolving the organization of a
//! request, and the member / project_admin / super_admin rights, with the rule that existence
//! is never revealed to someone who may not see it.

use uuid::Uuid;

use crate::error::{AuthFailure, DomainError, Forbidden, Resource};
use crate::model::identity::{Caller, ClientKind, OrgSummary, Organization};
use crate::model::secret::Secret;
use crate::names::OrgRef;
use crate::ports::identity::{IdentityError, IdentityProvider};

/// Maps the platform's answer about a token onto the caller's error
/// (`DomainError::Unauthorized` / `DomainError::AuthBackendUnavailable`).
pub fn identity_error(e: IdentityError) -> DomainError {
    match e {
        IdentityError::InvalidToken => DomainError::Unauthorized(AuthFailure::InvalidToken),
        IdentityError::Unavailable(_) => DomainError::AuthBackendUnavailable,
    }
}

/// Authenticates a bearer token: the caller it belongs to, as the platform says.
pub async fn authenticate(
    identity: &dyn IdentityProvider,
    token: &Secret,
) -> Result<Caller, DomainError> {
    identity.caller(token).await.map_err(identity_error)
}

/// Read or write: member rights or super_admin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

fn check_role(caller: &Caller, organization_id: &Uuid, access: Access) -> Result<(), DomainError> {
    let Some(role) = caller.role_in(organization_id) else {
        return Err(DomainError::Forbidden(Forbidden::NotMember));
    };
    match access {
        Access::Read if role.can_read() => Ok(()),
        Access::Read => Err(DomainError::Forbidden(Forbidden::NotMember)),
        Access::Write if role.can_write() => Ok(()),
        Access::Write => Err(DomainError::Forbidden(Forbidden::NotSuperAdmin)),
    }
}

/// Use cases on one object by its id: the object's organization decides; another
/// organization's object is `DomainError::Forbidden`, never `DomainError::NotFound`, so ids
/// cannot be probed for existence beyond that.
pub fn authorize_object(
    caller: &Caller,
    organization_id: &Uuid,
    access: Access,
) -> Result<(), DomainError> {
    acting_for(organization_id);
    check_role(caller, organization_id, access)
}

/// Names the organization a use case turned out to be about, so its log lines can be found by
/// organization: on the current span (each use case's span has the field; elsewhere this does
/// nothing), and in a note (target `kubesvc::note`) for a log that keeps requests without
/// spans. A log that does not read notes never enables them.
fn acting_for(organization_id: &Uuid) {
    tracing::Span::current().record("organization", tracing::field::display(organization_id));
    tracing::info!(target: "kubesvc::note", organization = %organization_id);
}

/// Writers who are super_admin nowhere get `DomainError::Forbidden` before anything is loaded.
pub fn require_writer_somewhere(caller: &Caller) -> Result<(), DomainError> {
    if caller.is_super_admin_anywhere() {
        Ok(())
    } else {
        Err(DomainError::Forbidden(Forbidden::NoWriteRights))
    }
}

/// The assistant may read Elastic IPs but not allocate or release them, nor change firewall
/// rules.
pub fn require_not_assistant(caller: &Caller) -> Result<(), DomainError> {
    if caller.client == ClientKind::Assistant {
        Err(DomainError::Forbidden(Forbidden::AssistantNotAllowed))
    } else {
        Ok(())
    }
}

/// The organization a collection read is about, as the request named it: by an id or slug,
/// or not at all, which means the caller's preferred organization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrgSelector {
    Named(String),
    Preferred,
}

impl OrgSelector {
    /// The first of `candidates` that names something (absent and blank ones do not), else
    /// the preferred organization. The caller decides which candidate wins by their order.
    pub fn first_named<'a>(candidates: impl IntoIterator<Item = Option<&'a str>>) -> Self {
        candidates
            .into_iter()
            .flatten()
            .map(str::trim)
            .find(|v| !v.is_empty())
            .map_or(OrgSelector::Preferred, |v| OrgSelector::Named(v.to_owned()))
    }
}

/// The organization a selector names, or the caller's preferred one.
pub fn collection_org_ref(caller: &Caller, org: &OrgSelector) -> Result<OrgRef, DomainError> {
    match org {
        OrgSelector::Named(v) => Ok(OrgRef::classify(v)),
        OrgSelector::Preferred => caller
            .preferred_organization
            .map(|id| OrgRef::Id(id.to_string()))
            .ok_or(DomainError::OrganizationRequired),
    }
}

/// Unknown organization (`DomainError::NotFound`) or someone else's (`DomainError::Forbidden`):
/// asks the platform only when the caller's own memberships do not already answer.
async fn outsider(identity: &dyn IdentityProvider, r: &OrgRef) -> DomainError {
    if !r.is_well_formed() {
        return DomainError::NotFound(Resource::Organization);
    }
    match identity.organization(r).await {
        Ok(None) => DomainError::NotFound(Resource::Organization),
        Ok(Some(_)) => DomainError::Forbidden(Forbidden::NotMember),
        Err(e) => identity_error(e),
    }
}

/// Resolves the organization of a collection read and checks member rights.
pub async fn resolve_collection_org(
    identity: &dyn IdentityProvider,
    caller: &Caller,
    org: &OrgSelector,
) -> Result<OrgSummary, DomainError> {
    let r = collection_org_ref(caller, org)?;
    match caller.membership_by_ref(&r) {
        Some(m) if m.role.can_read() => {
            acting_for(&m.organization.id);
            Ok(m.organization.clone())
        }
        Some(_) => Err(DomainError::Forbidden(Forbidden::NotMember)),
        None => Err(outsider(identity, &r).await),
    }
}

/// Resolves the organization named in a create request: super_admin there, or
/// `DomainError::Forbidden` (`DomainError::NotFound` when unknown). Returns the organization
/// with its billing.
pub async fn resolve_create_org(
    identity: &dyn IdentityProvider,
    caller: &Caller,
    r: &OrgRef,
) -> Result<Organization, DomainError> {
    match caller.membership_by_ref(r) {
        None => Err(outsider(identity, r).await),
        Some(m) if !m.role.can_write() => Err(DomainError::Forbidden(Forbidden::NotSuperAdmin)),
        Some(m) => {
            acting_for(&m.organization.id);
            let by_id = OrgRef::Id(m.organization.id.to_string());
            match identity
                .organization(&by_id)
                .await
                .map_err(identity_error)?
            {
                Some(org) => Ok(org),
                None => Err(DomainError::NotFound(Resource::Organization)),
            }
        }
    }
}

/// A change that adds nodes (a new cluster or pool, a higher count or max_nodes) needs the
/// organization's billing to allow it: a prepaid organization without credit may not
/// (`DomainError::InsufficientCredit`).
/// The billing is read fresh from the platform, never from a cache: credit that ran out a
/// second ago must refuse the next node, while reads may go on using cached organizations.
pub async fn require_credit(identity: &dyn IdentityProvider, id: &Uuid) -> Result<(), DomainError> {
    let org = identity
        .organization_fresh(&OrgRef::Id(id.to_string()))
        .await
        .map_err(identity_error)?
        .ok_or(DomainError::NotFound(Resource::Organization))?;
    if org.billing.may_add_nodes() {
        Ok(())
    } else {
        Err(DomainError::InsufficientCredit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_candidate_that_names_something_wins() {
        let named = |v: &str| OrgSelector::Named(v.into());
        for (candidates, want) in [
            ([Some("acme"), Some("globex")], named("acme")),
            ([Some(""), Some("globex")], named("globex")),
            ([Some("  "), Some(" globex ")], named("globex")),
            ([None, Some("acme")], named("acme")),
            ([None, None], OrgSelector::Preferred),
            ([Some(""), Some(" ")], OrgSelector::Preferred),
        ] {
            assert_eq!(OrgSelector::first_named(candidates), want, "{candidates:?}");
        }
    }
}
