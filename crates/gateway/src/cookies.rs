//! The gateway's own cookies: sealed (ChaCha20-Poly1305 under a key derived from `SECRETS_KEY`
//! for that one purpose, bound by associated data to the cookie's name), named so they can be
//! told from an application's, and never passed to or accepted from an upstream.
//!
//! - `gateway_session_<auth server>`: a signed-in browser's identity (Path=/, `__Host-` prefix
//!   whenever the cookie is Secure, so no other host or plain-http page can plant one).
//! - `gateway_login_<hash of state>`: a sign-in in progress, kept in the browser that started
//!   it (Path=the redirect path, `__Secure-` prefix when Secure, ten minutes).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand::RngCore;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Every gateway cookie's name starts so (after a `__Host-`/`__Secure-` prefix).
pub const NAME_STEM: &str = "gateway_";
const NONCE_LEN: usize = 12;
/// Cookie values the gateway will try to open: a sealed session of four claims is well under
/// this; anything longer was not made here.
const MAX_VALUE: usize = 4096;

/// Seals and opens one kind of cookie.
pub struct Sealer {
    /// The first seals; every one opens, so cookies made before a `SECRETS_KEY` rotation stay
    /// good until their key leaves the ring.
    ciphers: Vec<ChaCha20Poly1305>,
    purpose: &'static str,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealer")
            .field("purpose", &self.purpose)
            .finish_non_exhaustive()
    }
}

impl Sealer {
    /// A sealer with `keys`, the sealing one first (an empty list seals and opens nothing).
    pub fn new(keys: Vec<[u8; 32]>, purpose: &'static str) -> Sealer {
        Sealer {
            ciphers: keys
                .iter()
                .map(|k| ChaCha20Poly1305::new(Key::from_slice(k)))
                .collect(),
            purpose,
        }
    }

    fn aad(&self, name: &str) -> Vec<u8> {
        format!("{}\0{name}", self.purpose).into_bytes()
    }

    /// The cookie value for `value`, bound to the cookie `name`.
    pub fn seal<T: Serialize>(&self, name: &str, value: &T) -> Option<String> {
        let plain = serde_json::to_vec(value).ok()?;
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let aad = self.aad(name);
        let ciphertext = self
            .ciphers
            .first()?
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: &plain,
                    aad: &aad,
                },
            )
            .ok()?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&ciphertext);
        Some(URL_SAFE_NO_PAD.encode(out))
    }

    /// What a cookie `name` holds, if this gateway sealed it under that name.
    pub fn open<T: DeserializeOwned>(&self, name: &str, value: &str) -> Option<T> {
        if value.len() > MAX_VALUE {
            return None;
        }
        let raw = URL_SAFE_NO_PAD.decode(value).ok()?;
        if raw.len() < NONCE_LEN {
            return None;
        }
        let (nonce, ciphertext) = raw.split_at(NONCE_LEN);
        let aad = self.aad(name);
        let plain = self.ciphers.iter().find_map(|cipher| {
            cipher
                .decrypt(
                    Nonce::from_slice(nonce),
                    Payload {
                        msg: ciphertext,
                        aad: &aad,
                    },
                )
                .ok()
        })?;
        serde_json::from_slice(&plain).ok()
    }
}

/// The cookies of a request, name and value, in order: every `Cookie` header, split (HTTP/2
/// clients send one header per cookie).
pub fn pairs<'h, 'a>(
    cookie_headers: &'h [&'a str],
) -> impl Iterator<Item = (&'a str, &'a str)> + use<'h, 'a> {
    cookie_headers
        .iter()
        .flat_map(|h| h.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .map(|(n, v)| (n, v.trim().trim_matches('"')))
}

/// The value of the first cookie named `name`.
pub fn find<'a>(cookie_headers: &[&'a str], name: &str) -> Option<&'a str> {
    pairs(cookie_headers)
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
}

/// Whether a cookie name is one of the gateway's, in any prefix form: `__Host-` and
/// `__Secure-` are recognised in any case, as browsers recognise them.
pub fn is_gateway_cookie(name: &str) -> bool {
    let name = name.trim();
    let strip = |prefix: &str| {
        name.get(..prefix.len())
            .filter(|head| head.eq_ignore_ascii_case(prefix))
            .map(|_| &name[prefix.len()..])
    };
    let bare = strip("__Host-")
        .or_else(|| strip("__Secure-"))
        .unwrap_or(name);
    bare.get(..NAME_STEM.len())
        .is_some_and(|stem| stem.eq_ignore_ascii_case(NAME_STEM))
}

/// The name and value of one cookie pair as a browser reads them (RFC 6265bis §5.6): without a
/// `=` the name is empty and the whole pair is the value; spaces and tabs around each go.
fn name_and_value(pair: &str) -> (&str, &str) {
    let blank = |c: char| c == ' ' || c == '\t';
    match pair.split_once('=') {
        Some((name, value)) => (name.trim_matches(blank), value.trim_matches(blank)),
        None => ("", pair.trim_matches(blank)),
    }
}

/// Whether a cookie pair is, or comes back to a server as, one of the gateway's cookies. A
/// browser sends a cookie with an empty name as its bare value, so `=gateway_session_x=v` (or
/// `gateway_session_x` alone) returns as the cookie `gateway_session_x`.
fn names_gateway_cookie(pair: &str) -> bool {
    let (name, value) = name_and_value(pair);
    if !name.is_empty() {
        return is_gateway_cookie(name);
    }
    let returned = value.trim_start_matches(['=', ' ', '\t']);
    is_gateway_cookie(returned.split('=').next().unwrap_or(returned))
}

/// Whether one `name=value` pair of a `Cookie` header is a gateway cookie.
pub fn is_gateway_cookie_pair(pair: &str) -> bool {
    names_gateway_cookie(pair)
}

/// A `Cookie` header without the gateway's own cookies, or `None` when nothing is left.
pub fn without_gateway_cookies(value: &str) -> Option<String> {
    let kept: Vec<&str> = value
        .split(';')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .filter(|c| !is_gateway_cookie_pair(c))
        .collect();
    (!kept.is_empty()).then(|| kept.join("; "))
}

/// Whether a `Set-Cookie` from an upstream would set one of the gateway's cookies, as a browser
/// would store it. An upstream shares the gateway's origin, so it could otherwise plant a
/// session of its choosing for another tenant's route (session fixation across tenants).
pub fn sets_gateway_cookie(set_cookie: &str) -> bool {
    names_gateway_cookie(set_cookie.split(';').next().unwrap_or(set_cookie))
}

/// The `Path` attribute for a cookie meant for `path`: `path` itself when every character of it
/// reads as part of the attribute's value, else the longest part of it up to a `/` before the
/// first one that may not (`/oauth/` for `/oauth/cb;Domain=evil.example`). A `;` would end the
/// attribute and begin another of the path's choosing (`Domain`, `SameSite=None`); a `,`
/// splits the header for some older parsers. A browser sends a cookie of path `/oauth/` with
/// every request below it, so the cookie still reaches `path`.
fn cookie_path(path: &str) -> &str {
    let fits = |b: u8| b.is_ascii_alphanumeric() || b"-._~!$&'()*+=:@/".contains(&b);
    let Some(bad) = path.bytes().position(|b| !fits(b)) else {
        return path;
    };
    match path[..bad].rfind('/') {
        Some(slash) => &path[..=slash],
        None => "/",
    }
}

/// A `Set-Cookie` value for a gateway cookie. `path` adds no attribute, whatever it holds.
pub fn set_cookie(name: &str, value: &str, path: &str, max_age: u64, secure: bool) -> String {
    let secure = if secure { "; Secure" } else { "" };
    let path = cookie_path(path);
    format!("{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}")
}

/// A `Set-Cookie` value that removes a gateway cookie.
pub fn clear_cookie(name: &str, path: &str, secure: bool) -> String {
    set_cookie(name, "", path, 0, secure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_value_opens_only_under_its_own_name_and_purpose() {
        let a = Sealer::new(vec![[1u8; 32]], "a");
        let sealed = a.seal("c1", &vec!["x".to_owned()]).unwrap_or_default();
        assert_eq!(
            a.open::<Vec<String>>("c1", &sealed),
            Some(vec!["x".to_owned()])
        );
        assert_eq!(a.open::<Vec<String>>("c2", &sealed), None);
        assert_eq!(
            Sealer::new(vec![[1u8; 32]], "b").open::<Vec<String>>("c1", &sealed),
            None
        );
        assert_eq!(
            Sealer::new(vec![[2u8; 32]], "a").open::<Vec<String>>("c1", &sealed),
            None
        );
        let mut tampered = sealed.clone();
        tampered.replace_range(20..21, if &sealed[20..21] == "A" { "B" } else { "A" });
        assert_eq!(a.open::<Vec<String>>("c1", &tampered), None);
        assert_eq!(a.open::<Vec<String>>("c1", &"A".repeat(5000)), None);
    }

    #[test]
    fn after_a_key_rotation_old_cookies_open_until_their_key_leaves_the_ring() {
        let (old, new) = ([1u8; 32], [2u8; 32]);
        let before = Sealer::new(vec![old], "session");
        let cookie = before.seal("c1", &7u32).unwrap_or_default();
        let rotated = Sealer::new(vec![new, old], "session");
        assert_eq!(rotated.open::<u32>("c1", &cookie), Some(7));
        let fresh = rotated.seal("c1", &8u32).unwrap_or_default();
        assert_eq!(
            before.open::<u32>("c1", &fresh),
            None,
            "sealed under the new key"
        );
        let after = Sealer::new(vec![new], "session");
        assert_eq!(after.open::<u32>("c1", &fresh), Some(8));
        assert_eq!(after.open::<u32>("c1", &cookie), None);
        assert_eq!(Sealer::new(Vec::new(), "session").seal("c1", &1u32), None);
    }

    #[test]
    fn gateway_cookies_are_found_and_stripped_in_every_prefix_form() {
        let headers = [
            "a=1; gateway_session_x=abc",
            "__Host-gateway_session_y=\"q\"",
        ];
        assert_eq!(find(&headers, "gateway_session_x"), Some("abc"));
        assert_eq!(find(&headers, "__Host-gateway_session_y"), Some("q"));
        assert_eq!(find(&headers, "gateway_session_y"), None);
        assert_eq!(
            without_gateway_cookies("a=1; __Host-gateway_session_x=s; GATEWAY_login_1=2; b=2"),
            Some("a=1; b=2".into())
        );
        assert_eq!(without_gateway_cookies("__Secure-gateway_login_1=x"), None);
        assert!(sets_gateway_cookie("__Host-gateway_session_abc=x; Path=/"));
        assert!(!sets_gateway_cookie("app_session=x; Path=/"));
    }

    #[test]
    fn a_cookie_path_never_adds_an_attribute() {
        for (path, cookie_path) in [
            ("/callback", "/callback"),
            ("/oauth/cb", "/oauth/cb"),
            ("/a-b_c.d~e/!$&'()*+=:@", "/a-b_c.d~e/!$&'()*+=:@"),
            ("/oauth/cb;Domain=evil.example", "/oauth/"),
            ("/oauth/x/cb;SameSite=None;Max-Age=9", "/oauth/x/"),
            ("/cb;Path=/", "/"),
            ("/oauth/a,b", "/oauth/"),
            ("/oauth/a b", "/oauth/"),
            ("/o\"a", "/"),
        ] {
            let cookie = set_cookie("gateway_login_1", "v", path, 600, true);
            assert_eq!(
                cookie,
                format!(
                    "gateway_login_1=v; Path={cookie_path}; Max-Age=600; HttpOnly; SameSite=Lax; Secure"
                ),
                "{path}"
            );
        }
    }

    #[test]
    fn a_set_cookie_is_judged_by_the_name_a_browser_stores_it_under() {
        for (set_cookie, gateways) in [
            ("gateway_session_x=v; Path=/", true),
            ("  gateway_session_x\t=v", true),
            ("=gateway_session_x=v; Path=/", true),
            ("  =  gateway_session_x=v", true),
            ("==gateway_session_x=v", true),
            ("gateway_session_x; Path=/", true),
            ("=__Host-gateway_session_x=v", true),
            ("__HOST-gateway_session_x=v; Secure", true),
            ("__secure-GATEWAY_login_1=v", true),
            ("app=gateway_session_x; Path=/", false),
            ("=theme=dark", false),
            ("gateway=1", false),
            ("__Host-app=1", false),
            ("x=1; Path=/gateway_session_x", false),
        ] {
            assert_eq!(sets_gateway_cookie(set_cookie), gateways, "{set_cookie}");
        }
    }
}
