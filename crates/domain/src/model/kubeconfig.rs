//! The kubeconfig a cluster hands out: one cluster, one user with a bearer
//! token, one context, `current-context` set. The one answer that carries a credential.
//!
//! Two kinds of credential: the cluster's standing one (issued with the control plane, the
//! same on every download until rotated) and a download's own, asked for with a lifetime,
//! recorded (who, when, until when; never the token, only its digest) and revocable.

use base64::Engine;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::model::audit::Actor;
use crate::model::secret::{SealedSecret, Secret};

/// The shortest lifetime a download may ask for, in seconds: a credential that expires
/// before `kubectl` is run helps no one.
pub const MIN_EXPIRY_SECONDS: u32 = 60;

words! {
    /// Where a download's own credential stands.
    CredentialStatus {
        Active => "active",
        Expired => "expired",
        Revoked => "revoked",
    }
}

/// A download's own credential, as recorded: never its token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCredential {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub organization_id: Uuid,
    /// Who downloaded it: only they, or a super_admin, may revoke it.
    pub issued_to: Actor,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// The user id of who revoked it.
    pub revoked_by: Option<String>,
}

impl IssuedCredential {
    pub fn status(&self, now: DateTime<Utc>) -> CredentialStatus {
        if self.revoked_at.is_some() {
            CredentialStatus::Revoked
        } else if now >= self.expires_at {
            CredentialStatus::Expired
        } else {
            CredentialStatus::Active
        }
    }

    /// Whether the cluster's API server accepts it at `now`.
    pub fn accepts(&self, now: DateTime<Utc>) -> bool {
        self.status(now) == CredentialStatus::Active
    }
}

/// A download's credential as the kubeconfig names it: the user entry is its own, so several
/// downloads merge into one kubeconfig side by side, and the expiry shows in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetime {
    pub credential_id: Uuid,
    pub expires_at: DateTime<Utc>,
}

/// What the provider issued for a cluster: its CA and the bearer token of its admin user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterCredentials {
    /// PEM of the cluster's own X.509 CA certificate.
    pub ca_certificate_pem: String,
    pub token: Secret,
}

/// The credentials as stored: the token sealed under `SECRETS_KEY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedCredentials {
    pub ca_certificate_pem: String,
    pub token: SealedSecret,
}

/// Renders the YAML. `server` is the API server's URL (`https://<host>:6443`). With a
/// `lifetime`, the user entry is named after the credential and says when it expires, in a
/// comment and in the user's `extensions` (which `kubectl config view` shows).
pub fn render(
    cluster_name: &str,
    server: &str,
    credentials: &ClusterCredentials,
    lifetime: Option<&Lifetime>,
    annotation_domain: &str,
) -> String {
    let ca =
        base64::engine::general_purpose::STANDARD.encode(credentials.ca_certificate_pem.as_bytes());
    let (user, header, extensions) = match lifetime {
        None => (
            format!("{cluster_name}-admin"),
            String::new(),
            String::new(),
        ),
        Some(l) => {
            let expires = l
                .expires_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let short = &l.credential_id.simple().to_string()[..8];
            (
                format!("{cluster_name}-{short}"),
                format!(
                    "# The user credential {} expires at {expires}.\n",
                    l.credential_id
                ),
                format!(
                    "    extensions:\n    \
                     - name: {annotation_domain}/credential\n      \
                       extension:\n        \
                         id: \"{}\"\n        \
                         expires-at: \"{expires}\"\n",
                    l.credential_id
                ),
            )
        }
    };
    // Names are DNS labels and hosts are host names, both YAML-safe as plain scalars; the
    // token is quoted since a token may begin with a character YAML reads specially.
    format!(
        "{header}apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: {cluster_name}\n  \
           cluster:\n    \
             server: {server}\n    \
             certificate-authority-data: {ca}\n\
         users:\n\
         - name: {user}\n  \
           user:\n    \
             token: \"{token}\"\n\
         {extensions}\
         contexts:\n\
         - name: {cluster_name}\n  \
           context:\n    \
             cluster: {cluster_name}\n    \
             user: {user}\n\
         current-context: {cluster_name}\n\
         preferences: {{}}\n",
        token = credentials
            .token
            .expose()
            .replace('\\', "\\\\")
            .replace('"', "\\\""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubeconfig_names_server_ca_token_and_current_context() {
        let creds = ClusterCredentials {
            ca_certificate_pem: "-----BEGIN CERTIFICATE-----\nx\n".into(),
            token: Secret::new("tok-123"),
        };
        let y = render(
            "prod-1",
            "https://prod-1.k8s.example.com:6443",
            &creds,
            None,
            "k8s.example.com",
        );
        assert!(y.starts_with("apiVersion: v1\nkind: Config\n"));
        assert!(y.contains("    server: https://prod-1.k8s.example.com:6443\n"));
        assert!(y.contains("    token: \"tok-123\"\n"));
        assert!(y.contains("current-context: prod-1\n"));
        assert!(y.contains("    certificate-authority-data: LS0tLS1CRUdJTi"));
    }
}
