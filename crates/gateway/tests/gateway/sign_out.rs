//! Signing out of a browser session (`POST /.gateway/sign-out`) and out of every session of a
//! person (`POST /.gateway/sign-out-everywhere`): the session ends on the server, so a copy of
//! its cookie is no session any more, on this gateway and on every other one sharing the
//! database, for as long as the session would have lasted.

use std::time::Duration;

use chrono::Utc;
use domain::ports::storage::SessionStore;

use crate::harness::*;
use crate::oidc::{browser, setup, signed_in, with_session};

const JSON: &str = "application/json";
const HTML: &str = "text/html,application/xhtml+xml";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_a_signed_out_session_is_no_session() {
    let Some((h, provider, _, _)) = setup().await else {
        return;
    };
    let alice = browser();
    let copy = signed_in(&h, &alice, "alice").await;
    assert_eq!(with_session(h.gateway, &copy, JSON).await.status(), 200);

    let r = post_gateway_page(&h, &alice, "sign-out?rd=/oidc/page", &[]).await;
    assert_eq!(r.status(), 303);
    assert_eq!(header(&r, "location").as_deref(), Some("/oidc/page"));
    assert_eq!(header(&r, "cache-control").as_deref(), Some("no-store"));
    let name = copy.split('=').next().unwrap();
    let cleared = header(&r, "set-cookie").unwrap_or_default();
    assert!(
        cleared.starts_with(&format!("{name}=;")) && cleared.contains("Max-Age=0"),
        "{cleared}"
    );

    // The browser's own cookie is gone; the copy kept before is no session either.
    let r = alice
        .get(h.url("/oidc/api"))
        .header("accept", JSON)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = with_session(h.gateway, &copy, JSON).await;
    assert_eq!(r.status(), 401, "an API call on the copy");
    assert_eq!(header(&r, "www-authenticate").as_deref(), Some("Bearer"));
    let r = with_session(h.gateway, &copy, HTML).await;
    assert_eq!(r.status(), 302, "a browser on the copy signs in again");
    let location = header(&r, "location").unwrap_or_default();
    assert!(location.starts_with(&provider.issuer()), "{location}");
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_gateway_on_the_database_refuses_the_copy_too() {
    let Some((h, provider, _, _)) = setup().await else {
        return;
    };
    let (second, _) = h.start_gateway(&[]).await;
    let alice = browser();
    let copy = signed_in(&h, &alice, "alice").await;
    assert_eq!(with_session(second, &copy, JSON).await.status(), 200);

    let r = post_gateway_page(&h, &alice, "sign-out", &[]).await;
    assert_eq!(r.status(), 200);
    // The other gateway reads its periodic reload hourly in these tests: only the database's
    // notification can bring it the sign-out in time.
    let refused = eventually(Duration::from_secs(10), || async {
        with_session(second, &copy, JSON).await.status() == 401
    })
    .await;
    assert!(
        refused,
        "the other gateway still honours the signed-out session"
    );
    provider.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signing_out_everywhere_ends_every_session_of_that_person_only() {
    let Some((h, provider, _, _)) = setup().await else {
        return;
    };
    let (laptop, phone, bobs) = (browser(), browser(), browser());
    signed_in(&h, &laptop, "alice").await;
    let on_phone = signed_in(&h, &phone, "alice").await;
    let bob = signed_in(&h, &bobs, "bob").await;
    assert_eq!(with_session(h.gateway, &on_phone, JSON).await.status(), 200);

    let r = post_gateway_page(&h, &laptop, "sign-out-everywhere", &[]).await;
    assert_eq!(r.status(), 200);
    let page = r.text().await.unwrap();
    assert!(page.contains("signed out"), "{page}");

    assert_eq!(
        with_session(h.gateway, &on_phone, JSON).await.status(),
        401,
        "alice's other browser"
    );
    let r = bobs
        .get(h.url("/oidc/api"))
        .header("accept", JSON)
        .send()
        .await
        .unwrap();
    let e = echo_of(r).await;
    assert_eq!(e.status, 200, "bob is still signed in");
    assert_eq!(e.header("x-auth-user").as_deref(), Some("bob"));
    assert_eq!(with_session(h.gateway, &bob, JSON).await.status(), 200);

    // Signing in again afterwards makes a session that counts.
    let again = signed_in(&h, &laptop, "alice").await;
    let r = laptop
        .get(h.url("/oidc/api"))
        .header("accept", JSON)
        .send()
        .await
        .unwrap();
    let e = echo_of(r).await;
    assert_eq!(e.status, 200, "a new sign-in after signing out everywhere");
    assert_eq!(e.header("x-auth-user").as_deref(), Some("alice"));
    assert_eq!(with_session(h.gateway, &again, JSON).await.status(), 200);
    provider.stop().await;
}

/// A sign-out is kept as long as the session it ends would have lasted, and a "sign out
/// everywhere" as long as the last session it ends could have: then it is purged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_is_kept_as_long_as_its_sessions_and_no_longer() {
    let Some((h, provider, _, _)) = setup().await else {
        return;
    };
    let (laptop, phone) = (browser(), browser());
    let before = Utc::now();
    signed_in(&h, &laptop, "alice").await;
    signed_in(&h, &phone, "alice").await;
    assert_eq!(
        post_gateway_page(&h, &laptop, "sign-out", &[])
            .await
            .status(),
        200
    );
    assert_eq!(
        post_gateway_page(&h, &phone, "sign-out-everywhere", &[])
            .await
            .status(),
        200
    );
    let after = Utc::now();
    let ttl = chrono::Duration::hours(8);
    let minute = chrono::Duration::minutes(1);
    let in_force = |at| {
        let store = &h.store;
        async move {
            let r = store.session_revocations(at).await.unwrap();
            (r.ended.len(), r.not_before.len())
        }
    };
    // The laptop's session and the phone's, by id; every session of alice's, by her.
    assert_eq!(in_force(after).await, (2, 1));
    assert_eq!(in_force(before + ttl - minute).await, (2, 1));
    assert_eq!(in_force(after + ttl + minute).await, (0, 0));
    assert_eq!(
        h.store
            .purge_session_revocations(after + ttl + minute)
            .await
            .unwrap(),
        3
    );
    assert_eq!(in_force(after).await, (0, 0));
    provider.stop().await;
}
