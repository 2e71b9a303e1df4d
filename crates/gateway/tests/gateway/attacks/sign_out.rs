//! Signing a user out against their will (logout CSRF: another site's page posting the form, a
//! link or an image that GETs it), sending them elsewhere with `rd`, and reaching an upstream
//! through the gateway's own `/.gateway/` pages.

use crate::harness::*;
use crate::oidc::{browser, setup, signed_in, with_session};

const JSON: &str = "application/json";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_is_a_post_from_a_page_of_this_origin() {
    let Some((h, provider, _, _)) = setup().await else {
        return;
    };
    let alice = browser();
    let session = signed_in(&h, &alice, "alice").await;
    let own = format!("http://{}", h.gateway);
    let other_scheme = format!("https://{}", h.gateway);
    // What a browser sends along with another site's form (or a sibling host's, which is the
    // same site but not the same origin).
    let refused: [(&str, &[(&str, &str)]); 6] = [
        ("cross-site", &[("sec-fetch-site", "cross-site")]),
        (
            "cross-site, any case",
            &[("sec-fetch-site", " Cross-Site ")],
        ),
        ("another origin", &[("origin", "http://evil.example")]),
        ("an opaque origin", &[("origin", "null")]),
        ("another scheme", &[("origin", other_scheme.as_str())]),
        (
            "another origin of the same site",
            &[
                ("origin", "http://evil.127.0.0.1.nip.io"),
                ("sec-fetch-site", "same-site"),
            ],
        ),
    ];
    for (what, headers) in refused {
        for page in ["sign-out", "sign-out-everywhere"] {
            let r = post_gateway_page(&h, &alice, page, headers).await;
            let (status, content_type, body) = problem_code(r).await;
            assert_eq!(status, 403, "{what} {page}: {body}");
            assert_eq!(
                content_type.as_deref(),
                Some("application/problem+json"),
                "{what}"
            );
            assert_eq!(body["code"], "forbidden", "{what}");
        }
    }
    for method in [
        reqwest::Method::GET,
        reqwest::Method::HEAD,
        reqwest::Method::PUT,
        reqwest::Method::OPTIONS,
    ] {
        for page in ["sign-out", "sign-out-everywhere"] {
            let r = alice
                .request(method.clone(), h.url(&format!("/.gateway/{page}?rd=/")))
                .header("origin", &own)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 405, "{method} {page}");
            assert_eq!(header(&r, "allow").as_deref(), Some("POST"), "{method}");
        }
    }
    assert_eq!(
        with_session(h.gateway, &session, JSON).await.status(),
        200,
        "none of these signed alice out"
    );
    // Control: the same browser, from its own origin, signs out.
    let r = post_gateway_page(&h, &alice, "sign-out", &[]).await;
    assert_eq!(r.status(), 200);
    assert_eq!(with_session(h.gateway, &session, JSON).await.status(), 401);
    provider.stop().await;
}

/// `rd` is followed only to a page of this origin; anything else gets the signed-out page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sign_out_goes_nowhere_but_this_origin() {
    let Some((h, provider, _, _)) = setup().await else {
        return;
    };
    let client = http();
    let cases = [
        ("/oidc/page?x=1", Some("/oidc/page?x=1")),
        ("/", Some("/")),
        ("//evil.example", None),
        ("//evil.example/oidc", None),
        ("/\\evil.example", None),
        ("/\t/evil.example", None),
        ("https://evil.example/", None),
        ("http:evil.example", None),
        ("javascript:alert(1)", None),
        ("", None),
    ];
    for (rd, followed) in cases {
        let encoded: String = url::form_urlencoded::byte_serialize(rd.as_bytes()).collect();
        let by_query = post_gateway_page(&h, &client, &format!("sign-out?rd={encoded}"), &[]).await;
        let by_form = client
            .post(h.url("/.gateway/sign-out"))
            .header("origin", format!("http://{}", h.gateway))
            .form(&[("rd", rd)])
            .send()
            .await
            .unwrap();
        for (how, r) in [("query", by_query), ("form", by_form)] {
            match followed {
                Some(location) => {
                    assert_eq!(r.status(), 303, "{rd:?} by {how}");
                    assert_eq!(header(&r, "location").as_deref(), Some(location));
                }
                None => {
                    assert_eq!(r.status(), 200, "{rd:?} by {how}");
                    assert_eq!(header(&r, "location"), None, "{rd:?} by {how}");
                    assert_eq!(
                        header(&r, "content-type").as_deref(),
                        Some("text/html; charset=utf-8")
                    );
                    let page = r.text().await.unwrap();
                    assert!(!page.contains("evil"), "{rd:?} by {how}: {page}");
                }
            }
        }
    }
    provider.stop().await;
}

/// The gateway's own prefix is never routed: not by a route of `/`, not spelt another way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_under_the_gateways_own_prefix_reaches_an_upstream() {
    let token = "static-token-0123456789abcdef";
    let h = harness(&[("/", "machines")]).await;
    let machines = h.token_server(ORG_SLUG, "machines", token);
    h.insert_all(&[&machines], "/").await;
    let before = h.upstream_hits();
    for (method, path, status) in [
        ("GET", "/.gateway/sign-out", 405),
        ("POST", "/.gateway/sign-in", 404),
        ("GET", "/.gateway", 404),
        ("GET", "/.gateway/", 404),
        ("GET", "/.gateway/anything/else", 404),
        ("GET", "/%2Egateway/sign-out", 405),
        ("GET", "/app/../.gateway/x", 404),
        ("POST", "/.gateway/sign-out/", 404),
    ] {
        let r = raw(
            h.gateway,
            &raw_request(
                method,
                h.gateway,
                path,
                &[
                    &format!("Authorization: Bearer {token}"),
                    "Content-Length: 0",
                ],
            ),
        )
        .await;
        assert_eq!(r.status, status, "{method} {path}: {}", r.body);
        assert!(!r.answered_by_upstream(), "{method} {path}");
    }
    assert_eq!(h.upstream_hits(), before);
    // Control: the route itself is served.
    let r = http()
        .get(h.url("/.gatewayx"))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(h.upstream_hits(), before + 1);
}
