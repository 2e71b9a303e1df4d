//! A signed-in browser's session: the identity headers it was given, sealed in a cookie bound
//! to one auth server and to the version of that server's identity-relevant configuration.
//!
//! The version is a digest of what decides who a session stands for: the server's id, issuer,
//! client id, the claims mapped to headers, and the (sealed) client secret. Changing any of
//! them through the API, or deleting the server, ends every session of it at the next request;
//! setting a new client secret is how an operator ends one server's sessions on purpose.
//! `GATEWAY_SESSION_EPOCH` ends every session of every server (it is part of the cookie key).
//!
//! A session also carries what a sign-out needs to end it on the server: its id, when it was
//! issued, and whose it is ([`Issued`]). Sessions sealed before sign-out existed carry none of
//! it: they are accepted until they expire (no record can name them), and a sign-out only
//! clears them from the browser that presents them.

use chrono::{DateTime, Utc};
use domain::model::auth_server::{AuthServer, OidcConfig};
use domain::model::session::{SessionStanding, SessionSubject};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// What a session cookie holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    pub server: Uuid,
    pub version: String,
    /// Unix seconds.
    pub expires: u64,
    /// The `X-Auth-*` headers, as derived at sign-in.
    pub headers: Vec<(String, String)>,
    /// Absent in sessions sealed before sign-out existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued: Option<Issued>,
}

/// Who a session stands for and when it began, so a sign-out can end it, or every session of
/// its person, on every gateway sharing the database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Issued {
    /// Random, one per sign-in.
    pub id: Uuid,
    /// Unix milliseconds: a sign-in right after a "sign out everywhere" must not be taken for
    /// one made in the same second before it.
    pub at_ms: i64,
    /// [`SessionSubject::gateway`] of the issuer and the ID token's `sub`, as stored.
    pub subject: String,
}

impl Session {
    /// What the session says of itself to a sign-out record, when it can say anything.
    pub fn standing(&self) -> Option<SessionStanding> {
        let issued = self.issued.as_ref()?;
        Some(SessionStanding {
            id: Some(issued.id),
            subject: SessionSubject::from_stored(issued.subject.clone()),
            issued_at: DateTime::<Utc>::from_timestamp_millis(issued.at_ms)?,
            expires_at: DateTime::<Utc>::from_timestamp(
                i64::try_from(self.expires).unwrap_or(i64::MAX),
                0,
            )?,
        })
    }
}

/// The session cookie of `server`.
pub fn cookie_name(server: Uuid, secure: bool) -> String {
    // `__Host-`: Secure, Path=/, no Domain, so neither another host nor a plain-http page can
    // set it. On loopback http (development) the plain name is all a browser accepts.
    let prefix = if secure { "__Host-" } else { "" };
    format!("{prefix}gateway_session_{}", server.simple())
}

/// Whether `name` is a session cookie's name as [`cookie_name`] makes it; whether it is the
/// Secure one.
pub fn is_cookie_name(name: &str) -> Option<bool> {
    let (bare, secure) = match name.strip_prefix("__Host-") {
        Some(bare) => (bare, true),
        None => (name, false),
    };
    let id = bare.strip_prefix("gateway_session_")?;
    let server = Uuid::try_parse(id).ok()?;
    (cookie_name(server, secure) == name).then_some(secure)
}

/// The version of `server`'s identity-relevant configuration.
pub fn version(server: &AuthServer, config: &OidcConfig) -> String {
    let mut h = Sha256::new();
    let claims = &config.claims;
    for part in [
        server.id.to_string().as_str(),
        config.issuer_url.as_str(),
        config.client_id.as_str(),
        claims.username_claim.as_deref().unwrap_or("\u{0}"),
        claims.email_claim.as_deref().unwrap_or("\u{0}"),
        claims.role_claim.as_deref().unwrap_or("\u{0}"),
        claims.group_claim.as_deref().unwrap_or("\u{0}"),
        config.client_secret.0.as_str(),
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The headers of `session` if it is a live session of `server` at `version`.
pub fn accept(
    session: Session,
    server: Uuid,
    version: &str,
    now: u64,
) -> Option<Vec<(String, String)>> {
    (session.server == server && session.version == version && session.expires > now)
        .then_some(session.headers)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use domain::model::auth_server::{AuthServerConfig, ClaimNames};
    use domain::model::secret::SealedSecret;
    use domain::names::DnsLabel;

    fn server(issuer: &str, client_id: &str, secret: &str) -> (AuthServer, OidcConfig) {
        let config = OidcConfig {
            issuer_url: issuer.into(),
            redirect_path: "/cb".into(),
            client_id: client_id.into(),
            client_secret: SealedSecret(secret.into()),
            authorized_domain: "app.example.com".into(),
            claims: ClaimNames::default(),
        };
        let name = DnsLabel::parse("sso").unwrap_or_else(|_| panic!());
        (
            AuthServer {
                id: Uuid::from_u128(7),
                organization_id: Uuid::from_u128(1),
                organization_slug: "acme".into(),
                name: name.clone(),
                environment: name,
                config: AuthServerConfig::Oidc(config.clone()),
                created_at: Utc::now(),
                updated_at: Utc::now(),
            },
            config,
        )
    }

    #[test]
    fn the_version_changes_with_what_decides_identity_only() {
        let (s, c) = server("https://id.example.com", "app", "v1:aaa");
        let v = version(&s, &c);
        assert_eq!(v.len(), 32);
        for (issuer, client, secret) in [
            ("https://other.example.com", "app", "v1:aaa"),
            ("https://id.example.com", "app2", "v1:aaa"),
            ("https://id.example.com", "app", "v1:bbb"),
        ] {
            let (s2, c2) = server(issuer, client, secret);
            assert_ne!(version(&s2, &c2), v, "{issuer} {client} {secret}");
        }
        let mut c3 = c.clone();
        c3.claims.group_claim = Some("groups".into());
        assert_ne!(version(&s, &c3), v);
        let mut c4 = c.clone();
        c4.redirect_path = "/elsewhere".into();
        assert_eq!(version(&s, &c4), v);
    }

    #[test]
    fn a_session_is_accepted_for_its_server_version_and_lifetime_only() {
        let id = Uuid::from_u128(7);
        let s = Session {
            server: id,
            version: "v".into(),
            expires: 100,
            headers: vec![("x-auth-user".into(), "alice".into())],
            issued: None,
        };
        assert!(accept(s.clone(), id, "v", 99).is_some());
        assert!(accept(s.clone(), id, "v", 100).is_none());
        assert!(accept(s.clone(), id, "w", 99).is_none());
        assert!(accept(s, Uuid::from_u128(8), "v", 99).is_none());
        assert_eq!(
            cookie_name(id, true),
            format!("__Host-gateway_session_{}", id.simple())
        );
    }

    #[test]
    fn session_cookies_are_told_by_their_exact_name() {
        let id = Uuid::from_u128(7);
        for (name, secure) in [
            (cookie_name(id, true), Some(true)),
            (cookie_name(id, false), Some(false)),
            (format!("gateway_session_{id}"), None),
            (format!("__HOST-gateway_session_{}", id.simple()), None),
            (format!("__Secure-gateway_session_{}", id.simple()), None),
            (format!("gateway_session_{}x", id.simple()), None),
            ("gateway_login_0123".to_owned(), None),
            ("gateway_session_".to_owned(), None),
        ] {
            assert_eq!(is_cookie_name(&name), secure, "{name}");
        }
    }

    /// A session sealed before sign-out existed opens (its `issued` is absent) and has no
    /// standing; one sealed now carries its own.
    #[test]
    fn only_sessions_with_an_id_have_a_standing() {
        let old = r#"{"server":"00000000-0000-0000-0000-000000000007","version":"v","expires":100,"headers":[]}"#;
        let old: Session = serde_json::from_str(old).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(old.issued, None);
        assert_eq!(old.standing(), None);
        let subject = SessionSubject::gateway("https://id.example", "alice");
        let new = Session {
            issued: Some(Issued {
                id: Uuid::from_u128(9),
                at_ms: 40_500,
                subject: subject.as_str().to_owned(),
            }),
            ..old
        };
        let standing = new.standing().unwrap_or_else(|| panic!("no standing"));
        assert_eq!(standing.id, Some(Uuid::from_u128(9)));
        assert_eq!(standing.subject, subject);
        assert_eq!(standing.issued_at.timestamp_millis(), 40_500);
        assert_eq!(standing.expires_at.timestamp(), 100);
    }
}
