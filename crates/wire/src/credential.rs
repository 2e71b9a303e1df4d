//! A kubeconfig credential of a download's own, as answered: never its token.

use chrono::{DateTime, Utc};
use domain::model::kubeconfig as k;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::audit::AuditActor;
use crate::enums;

/// A credential a download asked for with a lifetime.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct IssuedCredential {
    pub id: Uuid,
    pub cluster_id: Uuid,
    /// Who downloaded it: they, or a super_admin, may revoke it.
    pub issued_to: AuditActor,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    #[schema(value_type = enums::CredentialStatus)]
    pub status: String,
    pub revoked_at: Option<DateTime<Utc>>,
    /// The user id of who revoked it.
    pub revoked_by: Option<String>,
}

impl IssuedCredential {
    /// The credential as it stands at `now`.
    pub fn at(c: &k::IssuedCredential, now: DateTime<Utc>) -> Self {
        IssuedCredential {
            id: c.id,
            cluster_id: c.cluster_id,
            issued_to: AuditActor::from(&c.issued_to),
            created_at: c.created_at,
            expires_at: c.expires_at,
            status: c.status(now).as_str().to_owned(),
            revoked_at: c.revoked_at,
            revoked_by: c.revoked_by.clone(),
        }
    }
}

/// A cluster's credentials of their own, newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CredentialList {
    pub items: Vec<IssuedCredential>,
}

/// What a rotation did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Rotation {
    /// Credentials of their own revoked by it (the standing credential is always replaced).
    pub revoked: u64,
}
