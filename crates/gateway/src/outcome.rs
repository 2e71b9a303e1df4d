//! What an auth check decides about one request.

use actix_web::HttpResponse;

/// Who the request was authenticated as: the `X-Auth-*` headers to send upstream.
#[derive(Debug, Default)]
pub struct Identity {
    pub headers: Vec<(&'static str, String)>,
    /// OIDC bearer tokens go on to the upstream; Basic and Token credentials do not.
    pub forward_authorization: bool,
}

pub enum Outcome {
    Allow(Identity),
    /// Refused with this answer; `failed` when wrong credentials were sent (rate limited).
    Deny {
        response: HttpResponse,
        failed: bool,
    },
}
