//! The console session: the account platform's access token, sealed in a cookie under the
//! service's secrets key, with the CSRF token of the session's forms. Every request opens it
//! and asks the identity port who the token belongs to (the same port, and cache, a Bearer
//! token goes through), so a token the platform revoked ends the session at once.

use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;

use actix_web::cookie::{Cookie, SameSite, time};
use actix_web::dev::Payload;
use actix_web::web::Data;
use actix_web::{FromRequest, HttpRequest};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use domain::model::identity::Caller;
use domain::model::secret::{SealedSecret, Secret};
use domain::model::session::{SessionStanding, SessionSubject};
use domain::service::Services;
use rand::RngCore;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::ConsoleError;
use crate::{ConsoleState, PREFIX};

/// How long a session lasts from sign-in.
pub const LIFETIME_HOURS: i64 = 8;
/// How long the sign-in form's nonce is good for.
const SIGN_IN_MINUTES: i64 = 30;
/// Sealed with every session, and checked on opening: a value sealed for another purpose under
/// the same key (an OIDC client secret, a cluster credential) never opens as a session.
const PURPOSE: &str = "kubesvc console session v1";

/// A demo user the development sign-in page offers (the token stays on the server).
#[derive(Clone)]
pub struct DemoUser {
    pub label: String,
    pub token: Secret,
}

/// What the session cookie holds, sealed.
#[derive(Serialize, Deserialize)]
struct Sealed {
    purpose: String,
    token: String,
    csrf: String,
    issued_at: i64,
    /// The session's id, by which a sign-out ends it everywhere it is presented (absent in
    /// sessions sealed by earlier releases).
    #[serde(default)]
    id: Option<Uuid>,
    /// `issued_at` in milliseconds, so a sign-in right after a "sign out everywhere" is not
    /// taken for one before it.
    #[serde(default)]
    issued_ms: Option<i64>,
}

/// An open session.
pub struct Session {
    pub token: Secret,
    /// The token every form of this session carries.
    pub csrf: String,
    id: Option<Uuid>,
    issued_at: DateTime<Utc>,
}

impl Session {
    /// What the session says of itself, once its caller is known.
    pub fn standing(&self, caller: &Caller) -> SessionStanding {
        SessionStanding {
            id: self.id,
            subject: SessionSubject::console(&caller.user.id),
            issued_at: self.issued_at,
            expires_at: self.issued_at + chrono::Duration::hours(LIFETIME_HOURS),
        }
    }
}

/// A random token for forms and nonces: 32 bytes, URL-safe.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// The cookie names: `__Host-` (Secure, this host only, path `/`) unless the console is
/// reached over plain http on this machine, where a browser would not keep a Secure cookie.
pub struct CookieNames {
    pub session: &'static str,
    pub sign_in: &'static str,
    pub flash: &'static str,
    pub secure: bool,
}

pub fn cookie_names(req: &HttpRequest) -> CookieNames {
    if is_loopback_http(req) {
        CookieNames {
            session: "kubesvc-session",
            sign_in: "kubesvc-sign-in",
            flash: "kubesvc-flash",
            secure: false,
        }
    } else {
        CookieNames {
            session: "__Host-kubesvc-session",
            sign_in: "__Host-kubesvc-sign-in",
            flash: "__Host-kubesvc-flash",
            secure: true,
        }
    }
}

/// Plain http from this machine: the connection is not TLS, its peer is a loopback address
/// and the browser asked for a loopback host. Forwarding headers are not read: they are the
/// client's to forge.
fn is_loopback_http(req: &HttpRequest) -> bool {
    let peer_is_loopback = req.peer_addr().is_some_and(|a| a.ip().is_loopback());
    let host = req
        .headers()
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    let host_is_loopback =
        name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    !req.app_config().secure() && peer_is_loopback && host_is_loopback
}

fn cookie<'a>(name: &'a str, value: String, secure: bool, max_age: time::Duration) -> Cookie<'a> {
    Cookie::build(name, value)
        // `__Host-` cookies must have path `/`; the loopback ones keep to the console.
        .path(if secure { "/" } else { PREFIX })
        .http_only(true)
        .secure(secure)
        .same_site(SameSite::Strict)
        .max_age(max_age)
        .finish()
}

/// The session cookie for a token the identity port accepted.
pub fn session_cookie(
    state: &ConsoleState,
    req: &HttpRequest,
    token: &Secret,
    now: DateTime<Utc>,
) -> Result<Cookie<'static>, ConsoleError> {
    let sealed = Sealed {
        purpose: PURPOSE.to_owned(),
        token: token.expose().to_owned(),
        csrf: random_token(),
        issued_at: now.timestamp(),
        id: Some(Uuid::new_v4()),
        issued_ms: Some(now.timestamp_millis()),
    };
    let plain = serde_json::to_string(&sealed)
        .map_err(|e| ConsoleError::Internal(format!("session: {e}")))?;
    let value = state
        .services()
        .ports()
        .vault
        .seal(&Secret::new(plain))
        .map_err(|e| ConsoleError::Internal(format!("session: {e}")))?;
    let names = cookie_names(req);
    Ok(cookie(
        names.session,
        value.0,
        names.secure,
        time::Duration::hours(LIFETIME_HOURS),
    )
    .into_owned())
}

/// A cookie that removes the session.
pub fn ended_session(req: &HttpRequest) -> Cookie<'static> {
    let names = cookie_names(req);
    cookie(
        names.session,
        String::new(),
        names.secure,
        time::Duration::ZERO,
    )
    .into_owned()
}

/// The sign-in form's nonce cookie (the form carries the same value: a page of another site
/// can post the form but cannot read or set the cookie, so it cannot sign a victim in).
pub fn sign_in_cookie(req: &HttpRequest, nonce: &str) -> Cookie<'static> {
    let names = cookie_names(req);
    cookie(
        names.sign_in,
        nonce.to_owned(),
        names.secure,
        time::Duration::minutes(SIGN_IN_MINUTES),
    )
    .into_owned()
}

pub fn ended_sign_in(req: &HttpRequest) -> Cookie<'static> {
    let names = cookie_names(req);
    cookie(
        names.sign_in,
        String::new(),
        names.secure,
        time::Duration::ZERO,
    )
    .into_owned()
}

pub fn sign_in_nonce(req: &HttpRequest) -> Option<String> {
    req.cookie(cookie_names(req).sign_in)
        .map(|c| c.value().to_owned())
        .filter(|v| !v.is_empty())
}

/// Opens the request's session cookie: `None` when there is none, it does not open under this
/// key, it was sealed for something else, or it is older than [`LIFETIME_HOURS`].
fn open(state: &ConsoleState, req: &HttpRequest, now: DateTime<Utc>) -> Option<Session> {
    let value = req.cookie(cookie_names(req).session)?;
    let plain = state
        .services()
        .ports()
        .vault
        .open(&SealedSecret(value.value().to_owned()))
        .ok()?;
    let sealed: Sealed = serde_json::from_str(plain.expose()).ok()?;
    let age = now.timestamp() - sealed.issued_at;
    let issued_ms = sealed
        .issued_ms
        .unwrap_or(sealed.issued_at.saturating_mul(1000));
    let issued_at = DateTime::<Utc>::from_timestamp_millis(issued_ms)?;
    (sealed.purpose == PURPOSE && (0..LIFETIME_HOURS * 3600).contains(&age)).then(|| Session {
        token: Secret::new(sealed.token),
        csrf: sealed.csrf,
        id: sealed.id,
        issued_at,
    })
}

/// A request with a live session: the caller the identity port says its token belongs to.
/// Without one the console answers with the sign-in page (a redirect).
pub struct Signed {
    pub caller: Caller,
    pub session: Session,
    /// The use cases serving this request: the changes it makes name it (its id) in the
    /// audit trail and on the operations they start, as the API's do.
    pub services: Services,
    /// How many of the person's approvals wait for their decision, for the header's link
    /// (counted for whole pages only: a live fragment has no header).
    pub pending_approvals: usize,
}

impl FromRequest for Signed {
    type Error = ConsoleError;
    type Future = Pin<Box<dyn Future<Output = Result<Signed, ConsoleError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = req
                .app_data::<Data<ConsoleState>>()
                .cloned()
                .ok_or_else(|| ConsoleError::Internal("console state missing".into()))?;
            let now = state.services().ports().clock.now();
            let needed = || ConsoleError::SignInNeeded(crate::pages::sign_in::back_from(&req));
            let session = open(&state, &req, now).ok_or_else(needed)?;
            let caller = match state.services().authenticate(&session.token).await {
                Ok(caller) => caller,
                Err(domain::DomainError::Unauthorized(_)) => return Err(needed()),
                Err(e) => return Err(ConsoleError::Domain(e)),
            };
            // A session signed out (here, in another tab, or everywhere) is over, though its
            // cookie may still open.
            if state
                .services()
                .session_ended(&session.standing(&caller))
                .await?
            {
                return Err(needed());
            }
            let services = api::extract::serving_services(state.services(), &req);
            let pending_approvals = if req.headers().contains_key("hx-request") {
                0
            } else {
                crate::pages::approvals::pending_count(&services, &caller).await
            };
            Ok(Signed {
                caller,
                session,
                services,
                pending_approvals,
            })
        })
    }
}

/// News for the next page (the id of what a create just made), for a minute at most: the page
/// it names says what happened once, then clears it. It holds an id, never words, so nothing
/// another request puts there is ever shown as it is.
pub fn flash_cookie(req: &HttpRequest, id: Uuid) -> Cookie<'static> {
    let names = cookie_names(req);
    cookie(
        names.flash,
        id.to_string(),
        names.secure,
        time::Duration::minutes(1),
    )
    .into_owned()
}

pub fn ended_flash(req: &HttpRequest) -> Cookie<'static> {
    let names = cookie_names(req);
    cookie(
        names.flash,
        String::new(),
        names.secure,
        time::Duration::ZERO,
    )
    .into_owned()
}

/// Whether the news waiting for this request is about `id`.
pub fn flash_for(req: &HttpRequest, id: Uuid) -> bool {
    req.cookie(cookie_names(req).flash)
        .is_some_and(|c| c.value() == id.to_string())
}

#[cfg(test)]
mod tests {
    use actix_web::test::TestRequest;

    use super::*;

    #[test]
    fn secure_host_cookies_unless_plain_http_on_this_machine() {
        let local = "127.0.0.1:50000".parse().ok();
        let remote = "203.0.113.9:50000".parse().ok();
        let cases = [
            ("127.0.0.1:8080", local, false),
            ("localhost:8080", local, false),
            ("[::1]:8080", "[::1]:50000".parse().ok(), false),
            ("console.example.com", local, true),
            ("127.0.0.1:8080", remote, true),
            ("localhost.evil.example", local, true),
        ];
        for (host, peer, secure) in cases {
            let mut req = TestRequest::get().insert_header(("host", host));
            if let Some(peer) = peer {
                req = req.peer_addr(peer);
            }
            let names = cookie_names(&req.to_http_request());
            assert_eq!(names.secure, secure, "{host} from {peer:?}");
            assert_eq!(names.session.starts_with("__Host-"), secure, "{host}");
        }
    }

    #[test]
    fn random_tokens_are_long_and_differ() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 43);
        assert_ne!(a, b);
    }
}
