//! The API server of a simulated cluster, as far as who may call it goes: it accepts a bearer
//! token only when the control plane's review says so, so a revoked or expired kubeconfig
//! credential is refused from the moment it is revoked or expires, and a rotated standing
//! credential stops working at once.

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

    /// `GET /version` on the cluster's API server with this `Authorization` header.
    pub async fn version(&self, cluster_id: Uuid, authorization: Option<&str>) -> ApiAnswer {
        let token = authorization
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty());
        let accepted = match token {
            None => false,
            Some(t) => matches!(
                self.reviewer.review(cluster_id, &Secret::new(t)).await,
                Ok(Reviewed::Standing | Reviewed::Issued(_))
            ),
        };
        if accepted {
            ApiAnswer {
                status: 200,
                body: r#"{"major":"1","minor":"32","gitVersion":"v1.32.4"}"#.into(),
            }
        } else {
            ApiAnswer {
                status: 401,
                body: r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#.into(),
            }
        }
    }
}
