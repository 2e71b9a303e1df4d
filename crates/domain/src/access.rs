//! The access policy of spec §5: reading the bearer token, resolving the organization of a
//! request, and the member / project_admin / super_admin rights, with the rule that existence
//! is never revealed to someone who may not see it.

use uuid::Uuid;

use crate::error::{AuthFailure, DomainError, Forbidden, Resource};
use crate::model::identity::{Caller, ClientKind, OrgSummary, Organization};
use crate::model::secret::Secret;
use crate::names::OrgRef;
use crate::ports::identity::{IdentityError, IdentityProvider};

/// Reads `Authorization: Bearer <token>` (spec §5, CONTRACT §12). The scheme matches without
/// regard to case; nothing or only spaces after it is an empty token.
pub fn bearer_token(header: Option<&str>) -> Result<Secret, AuthFailure> {
    let value = match header {
        None => return Err(AuthFailure::HeaderMissing),
        Some(v) if v.trim().is_empty() => return Err(AuthFailure::HeaderMissing),
        Some(v) => v.trim_start(),
    };
    let (scheme, rest) = match value.find(char::is_whitespace) {
        Some(i) => (&value[..i], &value[i..]),
        None => (value, ""),
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthFailure::SchemeNotBearer);
    }
    let token = rest.trim();
    if token.is_empty() {
        return Err(AuthFailure::TokenEmpty);
    }
    // A token never holds whitespace or control characters: refuse it here rather than
    // forward it to the platform.
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(AuthFailure::InvalidToken);
    }
    Ok(Secret::new(token))
}

/// Maps the platform's answer about a token onto the spec's statuses (401 / 502).
pub fn identity_error(e: IdentityError) -> DomainError {
    match e {
        IdentityError::InvalidToken => DomainError::Unauthorized(AuthFailure::InvalidToken),
        IdentityError::Unavailable(_) => DomainError::AuthBackendUnavailable,
    }
}

/// Authenticates a request: header → token → caller.
pub async fn authenticate(
    identity: &dyn IdentityProvider,
    header: Option<&str>,
) -> Result<Caller, DomainError> {
    let token = bearer_token(header).map_err(DomainError::Unauthorized)?;
    identity.caller(&token).await.map_err(identity_error)
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

/// By-id routes: the object's organization decides (spec §5 behaviour 3); another
/// organization's object is 403, never 404, so ids cannot be probed for existence beyond that.
pub fn authorize_object(
    caller: &Caller,
    organization_id: &Uuid,
    access: Access,
) -> Result<(), DomainError> {
    check_role(caller, organization_id, access)
}

/// Writers who are super_admin nowhere get 403 before anything is loaded (spec §5).
pub fn require_writer_somewhere(caller: &Caller) -> Result<(), DomainError> {
    if caller.is_super_admin_anywhere() {
        Ok(())
    } else {
        Err(DomainError::Forbidden(Forbidden::NoWriteRights))
    }
}

/// The assistant may read Elastic IPs but not allocate or release them, nor change firewall
/// rules (spec §1, CONTRACT §10).
pub fn require_not_assistant(caller: &Caller) -> Result<(), DomainError> {
    if caller.client == ClientKind::Assistant {
        Err(DomainError::Forbidden(Forbidden::AssistantNotAllowed))
    } else {
        Ok(())
    }
}

/// The first non-empty of query, header, preferred organization (spec §5).
pub fn collection_org_ref(
    caller: &Caller,
    query: Option<&str>,
    header: Option<&str>,
) -> Result<OrgRef, DomainError> {
    let given = [query, header]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|v| !v.is_empty());
    match given {
        Some(v) => Ok(OrgRef::classify(v)),
        None => caller
            .preferred_organization
            .map(|id| OrgRef::Id(id.to_string()))
            .ok_or(DomainError::OrganizationRequired),
    }
}

/// Unknown organization (404) or someone else's (403): asks the platform only when the
/// caller's own memberships do not already answer.
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
    query: Option<&str>,
    header: Option<&str>,
) -> Result<OrgSummary, DomainError> {
    let r = collection_org_ref(caller, query, header)?;
    match caller.membership_by_ref(&r) {
        Some(m) if m.role.can_read() => Ok(m.organization.clone()),
        Some(_) => Err(DomainError::Forbidden(Forbidden::NotMember)),
        None => Err(outsider(identity, &r).await),
    }
}

/// Resolves the organization named in a create body: super_admin there, or 403 (404 when
/// unknown). Returns the organization with its billing.
pub async fn resolve_create_org(
    identity: &dyn IdentityProvider,
    caller: &Caller,
    r: &OrgRef,
) -> Result<Organization, DomainError> {
    match caller.membership_by_ref(r) {
        None => Err(outsider(identity, r).await),
        Some(m) if !m.role.can_write() => Err(DomainError::Forbidden(Forbidden::NotSuperAdmin)),
        Some(m) => {
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

/// CONTRACT §10: prepaid without credit may not add nodes (402).
pub fn require_credit(org: &Organization) -> Result<(), DomainError> {
    if org.billing.may_add_nodes() {
        Ok(())
    } else {
        Err(DomainError::InsufficientCredit)
    }
}

/// The organization's billing, for by-id changes that add nodes.
pub async fn organization_by_id(
    identity: &dyn IdentityProvider,
    id: &Uuid,
) -> Result<Organization, DomainError> {
    identity
        .organization(&OrgRef::Id(id.to_string()))
        .await
        .map_err(identity_error)?
        .ok_or(DomainError::NotFound(Resource::Organization))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header_missing() {
        assert_eq!(bearer_token(None), Err(AuthFailure::HeaderMissing));
        assert_eq!(bearer_token(Some("")), Err(AuthFailure::HeaderMissing));
    }

    #[test]
    fn bearer_scheme_must_be_bearer_case_insensitive() {
        assert_eq!(
            bearer_token(Some("Basic dXNlcjpwYXNz")),
            Err(AuthFailure::SchemeNotBearer)
        );
        assert_eq!(
            bearer_token(Some("Token abc")),
            Err(AuthFailure::SchemeNotBearer)
        );
        assert_eq!(
            bearer_token(Some("Bearertoken")),
            Err(AuthFailure::SchemeNotBearer)
        );
        assert_eq!(
            bearer_token(Some("bearer abc")).map(|s| s.expose().to_owned()),
            Ok("abc".to_owned())
        );
        assert_eq!(
            bearer_token(Some("BEARER abc")).map(|s| s.expose().to_owned()),
            Ok("abc".to_owned())
        );
    }

    #[test]
    fn bearer_nothing_or_only_spaces_is_an_empty_token() {
        assert_eq!(bearer_token(Some("Bearer")), Err(AuthFailure::TokenEmpty));
        assert_eq!(bearer_token(Some("Bearer ")), Err(AuthFailure::TokenEmpty));
        assert_eq!(
            bearer_token(Some("Bearer     ")),
            Err(AuthFailure::TokenEmpty)
        );
    }

    #[test]
    fn bearer_token_with_inner_space_is_invalid() {
        assert_eq!(
            bearer_token(Some("Bearer a b")),
            Err(AuthFailure::InvalidToken)
        );
    }
}
