//! Browser sign-ins: no anonymous request holds memory others depend on (a sign-in in progress
//! lives in the browser that began it), a callback counts only in that browser (login CSRF),
//! and one tenant's callback path never takes a path from another tenant's route.

use domain::model::auth_server::{AuthServerConfig, ClaimNames, OidcConfig};
use domain::model::secret::Secret;
use domain::ports::secrets::SecretVault;

use crate::harness::*;
use crate::oidc::{
    browser, ensure_installed, oidc_server, provider_with, query, sign_in, sign_in_from,
    start_provider,
};

fn set_cookie(r: &reqwest::Response) -> Option<String> {
    header(r, "set-cookie")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_abandoned_sign_ins_do_not_stop_the_next_one() {
    let Some((h, provider)) = provider_with(&[route("/oidc", "sso")], &[]).await else {
        return;
    };
    let sso = oidc_server(&h, "sso", &provider);
    h.insert_all(&[&sso], "/oidc").await;

    // The confirmed attack: 10,050 sign-ins begun and never finished, from one client.
    let c = http();
    let begin = || {
        c.get(h.url("/oidc/page"))
            .header("accept", "text/html")
            .send()
    };
    let mut begun = 0;
    for _ in 0..(10_050 / 50) {
        let batch = futures::future::join_all((0..50).map(|_| begin())).await;
        for r in batch {
            let r = r.unwrap();
            assert_eq!(r.status(), 302);
            assert!(set_cookie(&r).is_some_and(|c| c.starts_with("gateway_login_")));
            begun += 1;
        }
    }
    assert_eq!(begun, 10_050);

    // Another browser signs in as usual.
    let b = browser();
    let callback = sign_in(&h, &b, "/oidc/mine").await;
    let r = b.get(callback).send().await.unwrap();
    assert_eq!(r.status(), 302);
    assert_eq!(header(&r, "location").as_deref(), Some("/oidc/mine"));
    assert!(set_cookie(&r).is_some_and(|c| c.starts_with("gateway_session_")));
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callback_only_signs_in_the_browser_that_began_it() {
    let Some((h, provider)) = provider_with(&[route("/oidc", "sso")], &[]).await else {
        return;
    };
    let sso = oidc_server(&h, "sso", &provider);
    h.insert_all(&[&sso], "/oidc").await;

    // The attacker signs in as themself and stops at the callback: a valid code and state.
    let attacker = browser();
    let callback = sign_in(&h, &attacker, "/oidc/page").await;
    assert!(query(&callback, "code").is_some());

    // The victim opens it: without the sign-in's cookie, no session.
    let r = http().get(callback.clone()).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(set_cookie(&r), None);
    // A victim in the middle of their own sign-in holds a cookie for their state, not this one.
    let victim = browser();
    let begun = victim
        .get(h.url("/oidc/page"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(begun.status(), 302);
    let r = victim.get(callback.clone()).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(set_cookie(&r), None);

    // The attacker's own browser still completes it: the refusals above were for the cookie.
    let r = attacker.get(callback).send().await.unwrap();
    assert_eq!(r.status(), 302);
    assert!(set_cookie(&r).is_some_and(|c| c.starts_with("gateway_session_")));
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_in_begun_at_one_gateway_completes_at_another() {
    let Some((h, provider)) = provider_with(&[route("/oidc", "sso")], &[]).await else {
        return;
    };
    let sso = oidc_server(&h, "sso", &provider);
    h.insert_all(&[&sso], "/oidc").await;
    let (second, _) = h.start_gateway(&[]).await;
    let loaded = eventually(std::time::Duration::from_secs(10), || async {
        http()
            .get(format!("http://{second}/oidc"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 401)
    })
    .await;
    assert!(loaded);

    // Begun at the second gateway; the provider sends the browser back to the first (the
    // server's authorized domain), which never saw the sign-in begin.
    let b = browser();
    let callback = sign_in_from(&b, &format!("http://{second}/oidc/x"), h.gateway.port()).await;
    let r = b.get(callback).send().await.unwrap();
    assert_eq!(r.status(), 302);
    assert_eq!(header(&r, "location").as_deref(), Some("/oidc/x"));
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_callback_path_never_takes_another_tenants_route() {
    // globex sets its callback to a path on acme's route.
    let h = harness_with(
        &[
            route("/acme-app", "staff"),
            route("/globex-app", "sso").of(OTHER_ORG_SLUG),
        ],
        &[],
    )
    .await;
    let staff = h.basic_server(ORG_SLUG, "staff", &[("alice", "alice-password")]);
    let theirs = h.server_of(
        OTHER_ORG_SLUG,
        "sso",
        AuthServerConfig::Oidc(OidcConfig {
            issuer_url: "http://127.0.0.1:9".into(),
            redirect_path: "/acme-app/callback".into(),
            client_id: "globex".into(),
            client_secret: h.vault().seal(&Secret::new("globex-secret")).expect("seal"),
            authorized_domain: h.gateway.to_string(),
            claims: ClaimNames::default(),
        }),
    );
    h.insert_all(&[&staff, &theirs], "/globex-app").await;

    // acme's route answers at that path as it always did: its Basic challenge, and its user.
    let r = http()
        .get(h.url("/acme-app/callback?code=x&state=y"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        header(&r, "www-authenticate").as_deref(),
        Some("Basic realm=\"staff\"")
    );
    let r = http()
        .get(h.url("/acme-app/callback?code=x&state=y"))
        .header("authorization", basic("alice:alice-password"))
        .send()
        .await
        .unwrap();
    let e = echo_of(r).await;
    assert_eq!(e.status, 200);
    assert_eq!(e.body["path"], "/acme-app/callback");
}

/// The attributes a `Set-Cookie` value sets, by name, with their values.
fn attributes(set_cookie: &str) -> Vec<(String, String)> {
    set_cookie
        .split(';')
        .skip(1)
        .map(|a| {
            let (name, value) = a.split_once('=').unwrap_or((a, ""));
            (name.trim().to_owned(), value.trim().to_owned())
        })
        .collect()
}

/// A redirect path may hold `;` and `=` (the API takes them: they are path characters). The
/// sign-in cookie is scoped to the redirect path: written into `Path=` as it is, such a path
/// would add attributes of its author's choosing (a `Domain` that sends the cookie to sibling
/// hosts, `SameSite=None`, a year of `Max-Age`). The gateway's cookies carry the attributes it
/// sets and no other, with a path that still covers the callback, so the sign-in completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_path_never_adds_attributes_to_a_cookie() {
    if let Err(reason) = ensure_installed() {
        eprintln!("SKIPPED: the OIDC tests need oidc-provider from npm: {reason}");
        return;
    }
    let redirect_path = "/oauth/cb;Domain=example.com;SameSite=None;Max-Age=31536000";
    let h = harness_with(&[route("/oidc", "sso")], &[]).await;
    let provider = start_provider(
        None,
        "key-one",
        &format!("http://{}{redirect_path}", h.gateway),
    )
    .await;
    let mut sso = oidc_server(&h, "sso", &provider);
    if let AuthServerConfig::Oidc(config) = &mut sso.config {
        config.redirect_path = redirect_path.into();
    }
    h.insert_all(&[&sso], "/oidc").await;
    let only_the_gateways = |cookie: &str| {
        let names: Vec<String> = attributes(cookie).into_iter().map(|(n, _)| n).collect();
        assert_eq!(
            names,
            ["Path", "Max-Age", "HttpOnly", "SameSite"],
            "{cookie}"
        );
        assert!(
            attributes(cookie).contains(&("Path".into(), "/oauth/".into())),
            "{cookie}"
        );
    };

    let begun = http()
        .get(h.url("/oidc/page"))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(begun.status(), 302);
    only_the_gateways(&set_cookie(&begun).expect("the sign-in cookie"));

    // The whole sign-in, through the redirect path: the cookie reaches it, and the one that
    // clears it is scoped the same way.
    let b = browser();
    let callback = sign_in(&h, &b, "/oidc/x").await;
    assert_eq!(
        callback.path(),
        "/oauth/cb;Domain=example.com;SameSite=None;Max-Age=31536000"
    );
    let r = b.get(callback).send().await.unwrap();
    assert_eq!(r.status(), 302);
    assert_eq!(header(&r, "location").as_deref(), Some("/oidc/x"));
    let cleared: Vec<String> = r
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .filter(|c| c.starts_with("gateway_login_"))
        .collect();
    assert_eq!(cleared.len(), 1, "{cleared:?}");
    only_the_gateways(&cleared[0]);
    provider.stop().await;
}
