//! Sessions end when what they were granted under changes: the auth server's identity
//! configuration, the server itself, or the operator's epoch. And claims cannot smuggle a
//! second value into the headers an upstream trusts.

use std::time::Duration;

use chrono::Utc;
use domain::model::auth_server::AuthServerConfig;
use domain::ports::storage::AuthServerChange;
use serde_json::json;

use crate::harness::*;
use crate::oidc::{browser, call, now, setup, sign_in};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_ends_with_its_configuration_its_server_or_the_epoch() {
    let Some((h, provider, mut sso, _)) = setup().await else {
        return;
    };
    let b = browser();
    let callback = sign_in(&h, &b, "/oidc/page").await;
    assert_eq!(b.get(callback).send().await.unwrap().status(), 302);
    let api = |gateway: std::net::SocketAddr| {
        b.get(format!("http://{gateway}/oidc/api"))
            .header("accept", "application/json")
            .send()
    };
    assert_eq!(api(h.gateway).await.unwrap().status(), 200);

    // A gateway started with a new epoch honours no session made before it.
    let (rotated, _) = h
        .start_gateway(&[("GATEWAY_SESSION_EPOCH", "after-the-incident")])
        .await;
    let ended = eventually(Duration::from_secs(10), || async {
        api(rotated).await.is_ok_and(|r| r.status() == 401)
    })
    .await;
    assert!(ended, "a session outlived the epoch");
    assert_eq!(api(h.gateway).await.unwrap().status(), 200);

    // A change to the claims the session's headers come from ends it.
    let before = sso.updated_at;
    let AuthServerConfig::Oidc(config) = &mut sso.config else {
        unreachable!()
    };
    config.claims.role_claim = Some("roles".into());
    sso.updated_at = Utc::now();
    h.write(
        AuthServerChange::Update {
            server: sso.clone(),
            expected_updated_at: before,
        },
        &sso,
    )
    .await;
    let ended = eventually(Duration::from_secs(10), || async {
        api(h.gateway).await.is_ok_and(|r| r.status() == 401)
    })
    .await;
    assert!(
        ended,
        "a session outlived the configuration it was made under"
    );

    // Deleting the server closes its routes to everyone.
    h.write(AuthServerChange::Delete(sso.id), &sso).await;
    let closed = eventually(Duration::from_secs(10), || async {
        api(h.gateway).await.is_ok_and(|r| r.status() == 503)
    })
    .await;
    assert!(closed);
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_cannot_pose_as_verified_or_as_more_than_one_value() {
    let Some((h, provider, _, _)) = setup().await else {
        return;
    };
    let token = provider.forge(&json!({
        "iss": provider.issuer(),
        "aud": "svc",
        "exp": now() + 600,
        "sub": "mallory",
        "email": "ceo@example.com",
        "email_verified": false,
        "role": "user\r\nX-Auth-Role: admin",
        "groups": ["devs", "devs,admins"],
    }));
    let e = echo_of(call(&h, &token).await).await;
    assert_eq!(e.status, 200, "{:?}", e.body);
    assert_eq!(e.header("x-auth-user").as_deref(), Some("mallory"));
    assert_eq!(
        e.header("x-auth-email"),
        None,
        "an unverified email was vouched for"
    );
    assert_eq!(
        e.header("x-auth-role"),
        None,
        "a role with a line break was sent"
    );
    assert_eq!(e.header("x-auth-groups").as_deref(), Some("devs"));
    provider.stop().await;
}

/// A header's values are read as a comma-separated list: one claim value holding a comma would
/// read upstream as two (a role `viewer,admin`, a group `devs,admins`), and blanks around a
/// value make another name (`" alice"`). Each value is trimmed; one that could read as several,
/// or as none, is not sent (a list keeps its other entries).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_value_never_reads_as_several_or_with_blanks() {
    let Some((h, provider, _, _)) = setup().await else {
        return;
    };
    // The claims each token carries besides the required ones, and the headers the upstream
    // must see for them (`None`: not sent).
    type Expected = [(&'static str, Option<&'static str>); 3];
    let cases: [(serde_json::Value, Expected); 4] = [
        (
            json!({"sub": "  mallory\t", "role": "viewer,admin", "groups": ["devs"]}),
            [
                ("x-auth-user", Some("mallory")),
                ("x-auth-role", None),
                ("x-auth-groups", Some("devs")),
            ],
        ),
        (
            json!({"sub": "mallory", "role": " admin ", "groups": [" devs ", "devs,admins", "ops "]}),
            [
                ("x-auth-user", Some("mallory")),
                ("x-auth-role", Some("admin")),
                ("x-auth-groups", Some("devs,ops")),
            ],
        ),
        (
            json!({"sub": "mallory,admin", "role": "   ", "groups": ["   ", "a,b"]}),
            [
                ("x-auth-user", None),
                ("x-auth-role", None),
                ("x-auth-groups", Some("")),
            ],
        ),
        (
            json!({"sub": "mallory", "role": ["viewer", "editor"], "groups": []}),
            [
                ("x-auth-user", Some("mallory")),
                ("x-auth-role", Some("viewer,editor")),
                ("x-auth-groups", Some("")),
            ],
        ),
    ];
    for (extra, expected) in cases {
        let mut claims = json!({"iss": provider.issuer(), "aud": "svc", "exp": now() + 600});
        for (name, value) in extra.as_object().unwrap() {
            claims[name] = value.clone();
        }
        let e = echo_of(call(&h, &provider.forge(&claims)).await).await;
        assert_eq!(e.status, 200, "{extra}: {:?}", e.body);
        for (header, value) in expected {
            assert_eq!(e.header(header).as_deref(), value, "{extra}: {header}");
        }
    }
    provider.stop().await;
}
