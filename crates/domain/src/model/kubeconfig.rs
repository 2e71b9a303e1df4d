//! The kubeconfig a cluster hands out: one cluster, one user with a bearer
//! token, one context, `current-context` set. The one answer that carries a credential.

use base64::Engine;

use crate::model::secret::{SealedSecret, Secret};

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

/// Renders the YAML. `server` is the API server's URL (`https://<host>:6443`).
pub fn render(cluster_name: &str, server: &str, credentials: &ClusterCredentials) -> String {
    let ca =
        base64::engine::general_purpose::STANDARD.encode(credentials.ca_certificate_pem.as_bytes());
    let user = format!("{cluster_name}-admin");
    // Names are DNS labels and hosts are host names, both YAML-safe as plain scalars; the
    // token is quoted since a token may begin with a character YAML reads specially.
    format!(
        "apiVersion: v1\n\
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
        let y = render("prod-1", "https://prod-1.k8s.example.com:6443", &creds);
        assert!(y.starts_with("apiVersion: v1\nkind: Config\n"));
        assert!(y.contains("    server: https://prod-1.k8s.example.com:6443\n"));
        assert!(y.contains("    token: \"tok-123\"\n"));
        assert!(y.contains("current-context: prod-1\n"));
        assert!(y.contains("    certificate-authority-data: LS0tLS1CRUdJTi"));
    }
}
