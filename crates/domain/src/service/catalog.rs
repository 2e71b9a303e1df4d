//! The catalog: what a zone offers, and the constraints.

use crate::access;
use crate::access::OrgSelector;
use crate::error::DomainError;
use crate::model::catalog::CatalogView;
use crate::model::identity::Caller;
use crate::service::Services;

impl Services {
    /// The catalog of a zone (default zone when none is given). Resolves its organization like
    /// a collection read: `DomainError::OrganizationRequired` when none.
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn catalog(
        &self,
        caller: &Caller,
        org: &OrgSelector,
        zone: Option<&str>,
    ) -> Result<CatalogView, DomainError> {
        access::resolve_collection_org(self.ports.identity.as_ref(), caller, org).await?;
        let offer = match zone {
            None | Some("") => self.catalog.default_zone(),
            Some(z) => self
                .catalog
                .zone(z)
                .ok_or_else(|| DomainError::UnknownZone(z.to_owned()))?,
        };
        Ok(offer.view())
    }
}
