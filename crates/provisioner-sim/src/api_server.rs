//! The API server of a simulated cluster, as far as who may call it goes: it accepts a bearer
//! token only when the control plane's review says so, so a revoked or expired kubeconfig
//! credential is refused from the moment it is revoked or expires, a rotated standing
//! credential stops working at once, and a caller from outside the cluster's enabled
//! control-plane firewall is refused whatever token it holds.

use std::net::IpAddr;
use std::sync::Arc;

use domain::model::secret::Secret;
use domain::ports::provisioning::TokenReviewer;
use domain::service::Reviewed;
use uuid::Uuid;

/// What the simulated API server answered: a status and a JSON body, as Kubernetes does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiAnswer {
    pub status: u16,
    pub body: String,
}

/// The simulated clusters' API servers, each authenticating through `reviewer`.
#[derive(Clone)]
pub struct SimulatedApiServer {
    reviewer: Arc<dyn TokenReviewer>,
}

impl SimulatedApiServer {
    pub fn new(reviewer: Arc<dyn TokenReviewer>) -> Self {
        SimulatedApiServer { reviewer }
    }

    /// `GET /version` on the cluster's API server from the caller at `from`, with this
    /// `Authorization` header: 401 without a good token, 403 from an address the cluster's
    /// control-plane firewall does not let in (checked first, so an outsider learns nothing
    /// of the token).
    pub async fn version(
        &self,
        cluster_id: Uuid,
        from: IpAddr,
        authorization: Option<&str>,
    ) -> ApiAnswer {
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            // Without a token the firewall still answers first: an empty one is reviewed.
            .unwrap_or_default();
        match self.reviewer.review(cluster_id, &Secret::new(token), from).await {
            Ok(Reviewed::Standing | Reviewed::Issued(_)) if !token.is_empty() => ApiAnswer {
                status: 200,
                body: r#"{"major":"1","minor":"32","gitVersion":"v1.32.4"}"#.into(),
            },
            Ok(Reviewed::Blocked) => ApiAnswer {
                status: 403,
                body: r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"forbidden: the address is not allowed by the cluster's control-plane firewall","reason":"Forbidden","code":403}"#.into(),
            },
            _ => ApiAnswer {
                status: 401,
                body: r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#.into(),
            },
        }
    }
}
