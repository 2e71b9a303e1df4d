//! The upstream connections. Each worker thread keeps its own pooled hyper client per kind of
//! route (connect timeout, HTTP/1.1 or HTTP/2): a worker's requests reuse the keep-alive
//! connections its own runtime drives, with no lock or cross-thread wake-up between them. A
//! client pools by upstream origin, so routes of one kind share it.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::{Client, ResponseFuture};
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::body::Body;

/// What sets one upstream client apart from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientKind {
    pub connect: Duration,
    /// HTTP/2 by prior knowledge (`http://`) or ALPN (`https://`); else HTTP/1.1.
    pub http2: bool,
}

type Pooled = Client<HttpsConnector<HttpConnector>, Body>;

/// How long an idle upstream connection is kept for the next request.
const POOL_IDLE: Duration = Duration::from_secs(90);

thread_local! {
    static CLIENTS: RefCell<Vec<(ClientKind, Pooled)>> = const { RefCell::new(Vec::new()) };
}

/// The TLS settings of `https://` upstreams: the webpki roots (as reqwest's), ring.
#[derive(Clone)]
pub struct Upstreams {
    tls: Arc<rustls::ClientConfig>,
}

impl Upstreams {
    pub fn new() -> Result<Upstreams, String> {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        };
        let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
        Ok(Upstreams { tls: Arc::new(tls) })
    }

    /// Sends `request` (absolute URI) through this worker's client of `kind`.
    pub fn send(&self, kind: ClientKind, request: http::Request<Body>) -> ResponseFuture {
        CLIENTS.with(|clients| {
            let mut clients = clients.borrow_mut();
            if let Some((_, client)) = clients.iter().find(|(k, _)| *k == kind) {
                return client.request(request);
            }
            let client = self.build(kind);
            let future = client.request(request);
            clients.push((kind, client));
            future
        })
    }

    fn build(&self, kind: ClientKind) -> Pooled {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(kind.connect));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*self.tls).clone())
            .https_or_http();
        let connector = if kind.http2 {
            https.enable_http2().wrap_connector(http)
        } else {
            https.enable_http1().wrap_connector(http)
        };
        Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE)
            .http2_only(kind.http2)
            .build(connector)
    }
}
