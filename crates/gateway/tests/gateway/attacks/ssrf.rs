//! The gateway's own requests (discovery, keys, the token endpoint, which receives the client
//! secret) go only where the operator allows: never to link-local (cloud metadata) addresses,
//! to private ones only when allowed, over https except to loopback, to no other origin than
//! the issuer's, and never by following a redirect.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use domain::model::auth_server::{AuthServer, AuthServerConfig, ClaimNames, OidcConfig};
use domain::model::secret::Secret;
use domain::ports::secrets::SecretVault;
use serde_json::json;

use crate::harness::*;

/// A server that answers anything and counts what reached it: where a request must not go.
async fn bait() -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = web::Data::from(hits.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = HttpServer::new(move || {
        App::new()
            .app_data(counted.clone())
            .default_service(web::to(|hits: web::Data<AtomicUsize>| async move {
                hits.fetch_add(1, Ordering::SeqCst);
                HttpResponse::Ok().json(json!({"keys": []}))
            }))
    })
    .workers(1)
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    (addr, hits)
}

/// A provider at `http://<addr>/t/<case>` whose discovery document is right (`good`) or wrong
/// in one way, pointing at `bait` where it is wrong.
async fn provider(bait: SocketAddr) -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let state = web::Data::new((addr, bait, hits.clone()));
    let server = HttpServer::new(move || {
        App::new().app_data(state.clone()).default_service(web::to(
            |req: HttpRequest, state: web::Data<(SocketAddr, SocketAddr, Arc<AtomicUsize>)>| async move {
                let (own, bait, hits) = state.get_ref();
                hits.fetch_add(1, Ordering::SeqCst);
                let case = req.path().split('/').nth(2).unwrap_or("").to_owned();
                let origin = format!("http://{own}");
                let issuer = format!("{origin}/t/{case}");
                let elsewhere = format!("http://{bait}");
                let document = |issuer: &str, endpoints: &str| {
                    HttpResponse::Ok().json(json!({
                        "issuer": issuer,
                        "authorization_endpoint": format!("{origin}/auth"),
                        "token_endpoint": format!("{endpoints}/token"),
                        "jwks_uri": format!("{endpoints}/jwks"),
                        "response_types_supported": ["code"],
                        "subject_types_supported": ["public"],
                        "id_token_signing_alg_values_supported": ["RS256"],
                    }))
                };
                match case.as_str() {
                    "good" => document(&issuer, &origin),
                    "other-issuer" => document(&format!("{elsewhere}/t/good"), &origin),
                    "off-origin" => document(&issuer, &elsewhere),
                    "redirected" => HttpResponse::Found()
                        .insert_header(("location", format!("{elsewhere}/t/good/.well-known/openid-configuration")))
                        .finish(),
                    _ => HttpResponse::NotFound().finish(),
                }
            },
        ))
    })
    .workers(1)
    .listen(listener)
    .unwrap()
    .run();
    tokio::spawn(server);
    (addr, hits)
}

fn oidc(h: &Harness, name: &str, issuer_url: String) -> AuthServer {
    h.server(
        name,
        AuthServerConfig::Oidc(OidcConfig {
            issuer_url,
            redirect_path: format!("/{name}/callback"),
            client_id: "svc".into(),
            client_secret: h.vault().seal(&Secret::new("svc-secret")).expect("seal"),
            authorized_domain: h.gateway.to_string(),
            claims: ClaimNames::default(),
        }),
    )
}

/// A browser opening `/<name>/page`: the answer's status, and where it was sent.
async fn open(h: &Harness, name: &str) -> (u16, Option<String>) {
    let r = http()
        .get(h.url(&format!("/{name}/page")))
        .header("accept", "text/html")
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), header(&r, "location"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_addresses_and_endpoints_are_checked_before_any_request() {
    let (bait, bait_hits) = bait().await;
    let (fake, _) = provider(bait).await;
    let cases: &[(&str, String, u16)] = &[
        // Control: the same fake provider, right in every way, is used.
        ("good", format!("http://{fake}/t/good"), 302),
        ("metadata", "http://169.254.169.254/latest".into(), 502),
        ("private", "http://10.255.255.1:9".into(), 502),
        ("plaintext", "http://provider.example".into(), 502),
        ("otherissuer", format!("http://{fake}/t/other-issuer"), 502),
        ("offorigin", format!("http://{fake}/t/off-origin"), 502),
        ("redirected", format!("http://{fake}/t/redirected"), 502),
    ];
    let routes: Vec<RouteSpec> = cases
        .iter()
        .map(|(name, _, _)| route(&format!("/{name}"), name))
        .collect();
    let h = harness_with(&routes, &[]).await;
    let servers: Vec<AuthServer> = cases
        .iter()
        .map(|(name, issuer, _)| oidc(&h, name, issuer.clone()))
        .collect();
    h.insert_all(&servers.iter().collect::<Vec<_>>(), "/redirected")
        .await;
    for (name, _, status) in cases {
        let (answer, location) = open(&h, name).await;
        assert_eq!(answer, *status, "{name}: sent to {location:?}");
    }
    assert_eq!(
        bait_hits.load(Ordering::SeqCst),
        0,
        "a request went where it must not"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_provider_is_refused_where_only_public_networks_are_allowed() {
    let (bait, _) = bait().await;
    let (fake, fake_hits) = provider(bait).await;
    let h = harness_with(
        &[route("/good", "good")],
        &[("GATEWAY_ALLOWED_ISSUER_NETWORKS", "public")],
    )
    .await;
    let server = oidc(&h, "good", format!("http://{fake}/t/good"));
    h.insert_all(&[&server], "/good").await;
    let (status, _) = open(&h, "good").await;
    assert_eq!(status, 502);
    assert_eq!(
        fake_hits.load(Ordering::SeqCst),
        0,
        "the gateway connected to a refused address"
    );
}

/// A provider on the gateway's own host is allowed by default only to a gateway nobody off
/// that host can reach (every listener on loopback: development, a single-host install). One
/// listening on any other address refuses it unless `GATEWAY_ALLOWED_ISSUER_NETWORKS` says
/// otherwise: a tenant's issuer URL cannot make it fetch from 127.0.0.1 (its admin listener, a
/// sidecar).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_provider_is_allowed_by_default_only_to_a_gateway_on_loopback() {
    let (bait, _) = bait().await;
    let (fake, fake_hits) = provider(bait).await;
    for (bind, networks, status) in [
        ("127.0.0.1:0", None, 302),
        ("0.0.0.0:0", None, 502),
        ("0.0.0.0:0", Some("public,loopback"), 302),
        ("127.0.0.1:0", Some("public"), 502),
    ] {
        let mut settings = vec![("GATEWAY_BIND_ADDR", bind)];
        settings.extend(networks.map(|n| ("GATEWAY_ALLOWED_ISSUER_NETWORKS", n)));
        let h = harness_with(&[route("/good", "good")], &settings).await;
        let server = oidc(&h, "good", format!("http://{fake}/t/good"));
        h.insert_all(&[&server], "/good").await;
        let before = fake_hits.load(Ordering::SeqCst);
        let (answer, _) = open(&h, "good").await;
        assert_eq!(answer, status, "{bind} {networks:?}");
        let fetched = fake_hits.load(Ordering::SeqCst) > before;
        assert_eq!(fetched, status == 302, "{bind} {networks:?}");
    }
}
