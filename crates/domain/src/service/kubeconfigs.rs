//! The kubeconfig and the credentials it carries: the cluster's standing credential (the same
//! on every download until rotated), or, when a download asks for a lifetime, a credential of
//! its own, recorded and revocable; the list, a revocation, a rotation; and the review the
//! cluster's API server asks for before it accepts a token.

use std::net::IpAddr;

use chrono::Duration;
use serde_json::json;
use uuid::Uuid;

use crate::access::{self, Access};
use crate::error::{Conflict, DomainError, Forbidden, Resource};
use crate::model::audit::Actor;
use crate::model::audit::{Audit, AuditAction, AuditResource, Outcome, Parent};
use crate::model::cluster::{Cluster, ClusterPhase};
use crate::model::identity::Caller;
use crate::model::kubeconfig::{
    self, ClusterCredentials, CredentialStatus, IssuedCredential, Lifetime, MIN_EXPIRY_SECONDS,
};
use crate::model::secret::Secret;
use crate::ports::storage::{Freshness, Revocation, Revoke};
use crate::rules::KUBECONFIG_RETRY_AFTER_SECONDS;
use crate::service::{Services, Target, store_error};

/// The most active credentials of its own a cluster may have at once; more downloads with a
/// lifetime are refused until some expire or are revoked.
pub const MAX_ACTIVE_CREDENTIALS: usize = 1000;

/// What a download asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KubeconfigRequest {
    /// A lifetime for a credential of its own; `None`: the operator's default (if any), else
    /// the cluster's standing credential.
    pub expiry_seconds: Option<u32>,
}

/// The kubeconfig, or a retry hint while the control plane is not up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeconfigAnswer {
    Ready {
        cluster_id: Uuid,
        yaml: String,
        /// The download's own credential, when it has one.
        credential: Option<Box<IssuedCredential>>,
    },
    NotReady {
        phase: ClusterPhase,
        retry_after_seconds: u32,
    },
}

/// What the cluster's API server learns of a token it was shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reviewed {
    /// The cluster's standing credential.
    Standing,
    /// A download's own credential, active now.
    Issued(IssuedCredential),
    /// Not a credential of this cluster, or revoked, or expired.
    Refused,
    /// The caller's address is outside the cluster's enabled control-plane firewall: refused
    /// whatever the token, which is not even looked at (an outsider learns nothing of it).
    Blocked,
}

impl Services {
    /// The cluster's kubeconfig: ready from `ControlPlaneReady` on, `NotReady` before (with the
    /// delay to wait before asking again). With a lifetime, its credential is new, its own.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn kubeconfig(
        &self,
        caller: &Caller,
        id: Uuid,
        request: KubeconfigRequest,
    ) -> Result<KubeconfigAnswer, DomainError> {
        let cluster = self.live_cluster(id).await?;
        access::authorize_object(caller, &cluster.organization_id, self.download_access())?;
        let lifetime = request
            .expiry_seconds
            .or(self.settings.kubeconfig_expiry_default_seconds)
            .map(|s| self.check_expiry(s))
            .transpose()?;
        let not_ready = || KubeconfigAnswer::NotReady {
            phase: cluster.phase,
            retry_after_seconds: KUBECONFIG_RETRY_AFTER_SECONDS,
        };
        match cluster.phase {
            ClusterPhase::Failed => return Err(DomainError::Conflict(Conflict::ClusterFailed)),
            ClusterPhase::Deleting => return Err(DomainError::Conflict(Conflict::ClusterDeleting)),
            p if !p.serves_kubeconfig() => return Ok(not_ready()),
            _ => {}
        }
        let (Some(endpoint), Some(sealed)) = (
            cluster.api_endpoint.as_deref(),
            self.ports
                .clusters
                .credentials(cluster.id)
                .await
                .map_err(store_error)?,
        ) else {
            return Ok(not_ready());
        };
        let (token, issued) = match lifetime {
            None => (
                self.ports
                    .vault
                    .open(&sealed.token)
                    .map_err(|e| DomainError::Internal(e.to_string()))?,
                None,
            ),
            Some(seconds) => {
                let (token, issued) = self.issue(caller, &cluster, seconds).await?;
                (token, Some(issued))
            }
        };
        let credentials = ClusterCredentials {
            ca_certificate_pem: sealed.ca_certificate_pem,
            token,
        };
        let named = issued.as_ref().map(|c| Lifetime {
            credential_id: c.id,
            expires_at: c.expires_at,
        });
        Ok(KubeconfigAnswer::Ready {
            cluster_id: cluster.id,
            yaml: kubeconfig::render(
                cluster.name.as_str(),
                endpoint,
                &credentials,
                named.as_ref(),
                &self.settings.annotation_domain,
            ),
            credential: issued.map(Box::new),
        })
    }

    /// Who may download: members, unless the operator requires super_admin.
    fn download_access(&self) -> Access {
        if self.settings.kubeconfig_requires_super_admin {
            Access::Write
        } else {
            Access::Read
        }
    }

    /// A lifetime within the bounds (at least a minute, at most the operator's maximum).
    fn check_expiry(&self, seconds: u32) -> Result<u32, DomainError> {
        let max = self.settings.kubeconfig_expiry_max_seconds;
        if (MIN_EXPIRY_SECONDS..=max).contains(&seconds) {
            Ok(seconds)
        } else {
            Err(DomainError::validation(
                "expiry_seconds",
                format!("must be between {MIN_EXPIRY_SECONDS} and {max}"),
            ))
        }
    }

    /// A new credential for one download: a fresh random token, recorded by its digest with
    /// the audit event, in one transaction.
    async fn issue(
        &self,
        caller: &Caller,
        cluster: &Cluster,
        seconds: u32,
    ) -> Result<(Secret, IssuedCredential), DomainError> {
        let now = self.ports.clock.now();
        let active = self
            .ports
            .credentials
            .issued_credentials(cluster.id)
            .await
            .map_err(store_error)?
            .iter()
            .filter(|c| c.accepts(now))
            .count();
        if active >= MAX_ACTIVE_CREDENTIALS {
            return Err(DomainError::validation(
                "expiry_seconds",
                format!(
                    "this cluster already has {MAX_ACTIVE_CREDENTIALS} active credentials of their own, the most it may; revoke some first"
                ),
            ));
        }
        let token = self.new_token();
        let issued = IssuedCredential {
            id: self.ports.ids.new_id(),
            cluster_id: cluster.id,
            organization_id: cluster.organization_id,
            issued_to: Actor::of(caller),
            created_at: now,
            expires_at: now + Duration::seconds(i64::from(seconds)),
            revoked_at: None,
            revoked_by: None,
        };
        let audit = self.credential_event(
            caller,
            cluster,
            issued.id,
            AuditAction::Created,
            json!({"expires_at": issued.expires_at, "expiry_seconds": seconds}),
        );
        self.ports
            .credentials
            .issue_credential(issued.clone(), self.ports.vault.digest_token(&token), audit)
            .await
            .map_err(store_error)?;
        Ok((token, issued))
    }

    /// The audit event of a change of one of `cluster`'s kubeconfig credentials (or of all of
    /// them, named by the cluster's id): it takes effect as it commits.
    fn credential_event(
        &self,
        caller: &Caller,
        cluster: &Cluster,
        id: Uuid,
        action: AuditAction,
        changes: serde_json::Value,
    ) -> crate::model::audit::AuditEvent {
        self.audit_event(
            caller,
            cluster.organization_id,
            Some(Parent::Cluster(cluster.id)),
            Audit::new(AuditResource::KubeconfigCredential, id, action, changes),
            Outcome::Applied,
        )
    }

    /// A bearer token of 256 random bits (two random ids), hex.
    fn new_token(&self) -> Secret {
        let (a, b) = (self.ports.ids.new_id(), self.ports.ids.new_id());
        Secret::new(format!("kc-{}{}", a.simple(), b.simple()))
    }

    /// A cluster's credentials of their own, newest first; any member may list them (they
    /// carry no token).
    #[tracing::instrument(level = "debug", skip_all, fields(organization = tracing::field::Empty))]
    pub async fn list_credentials(
        &self,
        caller: &Caller,
        id: Uuid,
    ) -> Result<Vec<IssuedCredential>, DomainError> {
        let cluster = self.live_cluster(id).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        self.ports
            .credentials
            .issued_credentials(cluster.id)
            .await
            .map_err(store_error)
    }

    /// Revokes one credential: its holder may (any member), anyone else must be super_admin. A revoked credential stays revoked; revoking it again changes nothing.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn revoke_credential(
        &self,
        caller: &Caller,
        id: Uuid,
        credential_id: Uuid,
    ) -> Result<IssuedCredential, DomainError> {
        let cluster = self.live_cluster(id).await?;
        access::authorize_object(caller, &cluster.organization_id, Access::Read)?;
        let found = self
            .ports
            .credentials
            .issued_credentials(cluster.id)
            .await
            .map_err(store_error)?
            .into_iter()
            .find(|c| c.id == credential_id)
            .ok_or(DomainError::NotFound(Resource::Credential))?;
        // Giving up one's own access is always allowed; ending someone else's is an admin's.
        let own = found.issued_to.user_id == caller.user.id;
        if !own
            && !caller
                .role_in(&cluster.organization_id)
                .is_some_and(|r| r.can_write())
        {
            return Err(DomainError::Forbidden(Forbidden::NotSuperAdmin));
        }
        self.spend_write(&cluster.organization_id)?;
        let now = self.ports.clock.now();
        if found.status(now) == CredentialStatus::Revoked {
            return Ok(found);
        }
        let audit = self.credential_event(
            caller,
            &cluster,
            found.id,
            AuditAction::Revoked,
            json!({"issued_to": found.issued_to.user_id}),
        );
        self.ports
            .credentials
            .revoke_credentials(Revocation {
                cluster_id: cluster.id,
                revoke: Revoke::One(found.id),
                at: now,
                by: caller.user.id.clone(),
                audit,
            })
            .await
            .map_err(store_error)?;
        Ok(IssuedCredential {
            revoked_at: Some(now),
            revoked_by: Some(caller.user.id.clone()),
            ..found
        })
    }

    /// Revokes every credential of the cluster and rotates its standing one (a laptop was
    /// lost): super_admin only. Returns how many credentials of their own were revoked.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn rotate_credentials(&self, caller: &Caller, id: Uuid) -> Result<u64, DomainError> {
        let cluster: Cluster = self.authorized(caller, &Target::of(id)).await?;
        let standing = self
            .ports
            .clusters
            .credentials(cluster.id)
            .await
            .map_err(store_error)?;
        if standing.is_none() {
            // Nothing was ever handed out: the control plane is not up yet.
            return Err(DomainError::PhaseNotProvisioned(cluster.phase.as_str()));
        }
        let rotated = self
            .ports
            .vault
            .seal(&self.new_token())
            .map_err(|e| DomainError::Internal(e.to_string()))?;
        let audit = self.credential_event(
            caller,
            &cluster,
            cluster.id,
            AuditAction::Rotated,
            json!({"standing": "[redacted]"}),
        );
        self.ports
            .credentials
            .revoke_credentials(Revocation {
                cluster_id: cluster.id,
                revoke: Revoke::All { rotated },
                at: self.ports.clock.now(),
                by: caller.user.id.clone(),
                audit,
            })
            .await
            .map_err(store_error)
    }

    /// What the cluster's API server asks before it accepts a bearer token from `from`: the
    /// control-plane firewall the API server enforces now lets that address in, then the
    /// standing credential as it is now, or an active credential of this cluster's own.
    #[tracing::instrument(skip_all, fields(organization = tracing::field::Empty))]
    pub async fn review_token(
        &self,
        cluster_id: Uuid,
        token: &Secret,
        from: IpAddr,
    ) -> Result<Reviewed, DomainError> {
        let cluster = self
            .ports
            .clusters
            .cluster(cluster_id, Freshness::Latest)
            .await
            .map_err(store_error)?;
        match cluster {
            Some(c) if !c.is_gone() => {
                if !c.control_plane_firewall.admits(from) {
                    return Ok(Reviewed::Blocked);
                }
            }
            _ => return Ok(Reviewed::Refused),
        }
        let digest = self.ports.vault.digest_token(token);
        let standing = self
            .ports
            .clusters
            .credentials(cluster_id)
            .await
            .map_err(store_error)?;
        if let Some(sealed) = standing {
            let current = self
                .ports
                .vault
                .open(&sealed.token)
                .map_err(|e| DomainError::Internal(e.to_string()))?;
            // Digests compared, not tokens: nothing about the token leaks through timing.
            if self.ports.vault.digest_token(&current) == digest {
                return Ok(Reviewed::Standing);
            }
        }
        let found = self
            .ports
            .credentials
            .credential_by_digest(digest)
            .await
            .map_err(store_error)?;
        Ok(match found {
            Some(c) if c.cluster_id == cluster_id && c.accepts(self.ports.clock.now()) => {
                Reviewed::Issued(c)
            }
            _ => Reviewed::Refused,
        })
    }
}

#[async_trait::async_trait]
impl crate::ports::provisioning::TokenReviewer for Services {
    async fn review(
        &self,
        cluster_id: Uuid,
        token: &Secret,
        from: IpAddr,
    ) -> Result<Reviewed, DomainError> {
        self.review_token(cluster_id, token, from).await
    }
}
