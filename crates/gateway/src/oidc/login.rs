//! A sign-in in progress, kept in the browser that started it rather than in the gateway.
//!
//! Keeping it in the gateway meant every anonymous page view held server memory for ten
//! minutes, in one table all tenants shared (ten thousand requests filled it and broke every
//! organization's sign-in), and that the OAuth `state` was bound to nothing: a victim who opened
//! an attacker's callback URL was signed in as the attacker (login CSRF). Now the state, nonce,
//! PKCE verifier and the page to return to travel sealed in a short-lived cookie named after the
//! state, scoped to the redirect path; a callback is accepted only with the cookie of its state,
//! which only the browser that began the sign-in has.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// How long a sign-in may take.
pub const LOGIN_TTL_S: u64 = 600;
/// The most of a return path kept (a cookie is at most 4 kB); longer ones return to the path
/// without its query, or to `/`.
const MAX_RETURN_TO: usize = 2048;

/// What the callback needs to finish the sign-in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingLogin {
    /// The auth server and the version of its configuration the sign-in began under.
    pub server: Uuid,
    pub version: String,
    pub state: String,
    pub nonce: String,
    pub verifier: String,
    /// A path on this gateway (canonical, with its query).
    pub return_to: String,
    /// Unix seconds.
    pub expires: u64,
}

/// The cookie of the sign-in with this `state`.
pub fn cookie_name(state: &str, secure: bool) -> String {
    let digest = Sha256::digest(state.as_bytes());
    let short: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let prefix = if secure { "__Secure-" } else { "" };
    format!("{prefix}gateway_login_{short}")
}

/// Where to go after signing in: the page first asked for, if it fits in the cookie.
pub fn return_to(path: &str, query: &str) -> String {
    let full = if query.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{query}")
    };
    // The path is canonical, so it starts with one `/` and never `//`: never another origin.
    if full.len() <= MAX_RETURN_TO {
        full
    } else if path.len() <= MAX_RETURN_TO {
        path.to_owned()
    } else {
        "/".to_owned()
    }
}

/// `rd`, a page to go to that a request named, in the form a return path has, when it is a
/// page of this origin: a path starting with one `/` (`//host` and `/\host` are other hosts to
/// a browser), with a canonical form (no backslash, no control character, not above `/`), a
/// query of visible characters only, and no longer than a return path may be. Anything else
/// (an absolute URL above all) is `None`: never followed.
pub fn local_path(rd: &str) -> Option<String> {
    let (path, query) = rd.split_once('?').unwrap_or((rd, ""));
    let mut after_slash = path.strip_prefix('/')?.bytes();
    if matches!(after_slash.next(), Some(b'/' | b'\\')) {
        return None;
    }
    if !query.bytes().all(|b| b.is_ascii_graphic() && b != b'#') {
        return None;
    }
    let path = crate::path::normalize(path).ok()?;
    let full = if query.is_empty() {
        path.as_str().to_owned()
    } else {
        format!("{}?{query}", path.as_str())
    };
    (full.len() <= MAX_RETURN_TO).then_some(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_names_follow_the_state_and_the_secure_flag() {
        let a = cookie_name("state-a", false);
        assert!(a.starts_with("gateway_login_") && a.len() == "gateway_login_".len() + 16);
        assert_ne!(a, cookie_name("state-b", false));
        assert!(cookie_name("state-a", true).starts_with("__Secure-gateway_login_"));
    }

    #[test]
    fn the_return_path_fits_in_a_cookie() {
        assert_eq!(return_to("/app/x", "a=1"), "/app/x?a=1");
        assert_eq!(return_to("/app/x", ""), "/app/x");
        assert_eq!(return_to("/app/x", &"q".repeat(5000)), "/app/x");
        assert_eq!(return_to(&format!("/{}", "p".repeat(5000)), ""), "/");
    }

    #[test]
    fn only_pages_of_this_origin_are_gone_to() {
        for (rd, gone_to) in [
            ("/", Some("/")),
            ("/app/x?a=1&b=%2F", Some("/app/x?a=1&b=%2F")),
            ("/app/./y/../x", Some("/app/x")),
            ("/app//x", Some("/app/x")),
            ("/caf\u{e9}", Some("/caf%C3%A9")),
            ("//evil.example", None),
            ("//evil.example/x", None),
            ("/\\evil.example", None),
            ("/\tevil", None),
            ("/x\n/y", None),
            ("https://evil.example/", None),
            ("javascript:alert(1)", None),
            ("evil.example", None),
            ("", None),
            ("/..", None),
            ("/%2F%2Fevil.example", None),
            ("/x?a=b c", None),
            ("/x?a=\r\nSet-Cookie:x", None),
            ("/x?a#b", None),
        ] {
            assert_eq!(local_path(rd).as_deref(), gone_to, "{rd:?}");
        }
        let long = format!("/{}", "p".repeat(MAX_RETURN_TO));
        assert_eq!(local_path(&long), None);
    }
}
