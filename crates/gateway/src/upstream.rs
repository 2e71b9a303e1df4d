//! The upstream connections, kept per worker thread: a worker's requests reuse the keep-alive
//! connections its own runtime drives, with no lock and no cross-thread wake-up between them.
//!
//! A request without a body and without an upgrade, to a plain `http://` upstream, goes through
//! the worker's own HTTP/1.1 client (`wire.rs`): most traffic, at the least cost. The others to
//! HTTP/1.1 upstreams go through the worker's own pool of hyper connections: a request takes
//! an idle connection of its upstream (scheme and authority) that is ready for another
//! request, or opens one (the route's connect timeout; TLS with the webpki roots for
//! `https://`), and gives it back when its answer's head is in, unless that answer has no body
//! by its framing (to HEAD, a 204, a 304): hyper reads the next answer from wherever this one
//! ended, so a body the upstream sends anyway, late, would answer the next request. A
//! connection that closes leaves the pool; one that closed while idle, before the request went
//! out, makes the request go on another. HTTP/2 upstreams go through hyper-util's client, one
//! per worker and kind of route: one multiplexed connection serves them all (its frames name
//! the stream each belongs to, so nothing late is read as another's answer).

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};

use crate::body::{Body, PeerBody};
use crate::wire;

/// What sets one kind of upstream connection apart from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientKind {
    pub connect: Duration,
    /// HTTP/2 by prior knowledge (`http://`) or ALPN (`https://`); else HTTP/1.1.
    pub http2: bool,
}

pub type UpstreamError = Box<dyn std::error::Error + Send + Sync>;

type Http2Client = Client<HttpsConnector<HttpConnector>, Body>;

/// How many idle connections a worker keeps to one upstream; more are closed.
pub const MAX_IDLE_PER_UPSTREAM: usize = 256;
/// How long an HTTP/2 upstream connection is kept idle.
const HTTP2_POOL_IDLE: Duration = Duration::from_secs(90);

/// A worker's connections to one HTTP/1.1 upstream.
struct Idle {
    https: bool,
    authority: Authority,
    senders: Vec<SendRequest<Body>>,
}

thread_local! {
    static IDLE: RefCell<Vec<Idle>> = const { RefCell::new(Vec::new()) };
    static HTTP2: RefCell<Vec<(ClientKind, Http2Client)>> = const { RefCell::new(Vec::new()) };
}

/// The TLS settings of `https://` upstreams: the webpki roots (as reqwest's), ring; the
/// HTTP/1.1 pool's with its ALPN, made once rather than per connection.
#[derive(Clone)]
pub struct Upstreams {
    tls: Arc<rustls::ClientConfig>,
    tls_http1: tokio_rustls::TlsConnector,
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
        let mut http1 = tls.clone();
        http1.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Upstreams {
            tls: Arc::new(tls),
            tls_http1: tokio_rustls::TlsConnector::from(Arc::new(http1)),
        })
    }

    /// Sends `request` (absolute URI) to its upstream through this worker's connections.
    pub async fn send(
        &self,
        kind: ClientKind,
        request: Request<Body>,
    ) -> Result<Response<PeerBody>, UpstreamError> {
        let plain = request.uri().scheme() == Some(&Scheme::HTTP);
        let simple = !kind.http2
            && plain
            && http_body::Body::is_end_stream(request.body())
            && !request.headers().contains_key(http::header::UPGRADE);
        if simple {
            let authority = request
                .uri()
                .authority()
                .ok_or("the upstream URL has no authority")?;
            let host = host_header(authority, false)?;
            let outgoing = wire::Outgoing {
                method: request.method(),
                target: request.uri().path_and_query().map_or("/", |p| p.as_str()),
                host: &host,
                headers: request.headers(),
            };
            let response = wire::send(authority, kind.connect, outgoing).await?;
            return Ok(response.map(PeerBody::Wire));
        }
        // Boxed: the rarer path's future would otherwise make every request's larger.
        Ok(Box::pin(self.send_hyper(kind, request))
            .await?
            .map(PeerBody::Hyper))
    }

    async fn send_hyper(
        &self,
        kind: ClientKind,
        request: Request<Body>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        if kind.http2 {
            let future = HTTP2.with(|clients| {
                let mut clients = clients.borrow_mut();
                if let Some((_, client)) = clients.iter().find(|(k, _)| *k == kind) {
                    return client.request(request);
                }
                let client = self.http2_client(kind);
                let future = client.request(request);
                clients.push((kind, client));
                future
            });
            return Ok(future.await?);
        }
        self.send_http1(kind.connect, request).await
    }

    async fn send_http1(
        &self,
        connect: Duration,
        mut request: Request<Body>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let uri = std::mem::take(request.uri_mut());
        let https = match uri.scheme() {
            Some(s) if *s == Scheme::HTTPS => true,
            Some(s) if *s == Scheme::HTTP => false,
            _ => return Err("the upstream URL has no http(s) scheme".into()),
        };
        let authority = uri
            .authority()
            .cloned()
            .ok_or("the upstream URL has no authority")?;
        let target = uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        *request.uri_mut() = Uri::from(target);
        request
            .headers_mut()
            .insert(http::header::HOST, host_header(&authority, https)?);
        let head = request.method() == http::Method::HEAD;
        // Dropped instead of given back, the connection closes once its answer is through.
        let give_back = |sender: SendRequest<Body>, response: &Response<Incoming>| {
            if !bodiless(head, response.status()) {
                checkin(https, &authority, sender);
            }
        };
        loop {
            let Some(mut sender) = checkout(https, &authority) else {
                let mut sender = self.open(https, &authority, connect).await?;
                let response = sender.send_request(request).await?;
                give_back(sender, &response);
                return Ok(response);
            };
            match sender.try_send_request(request).await {
                Ok(response) => {
                    give_back(sender, &response);
                    return Ok(response);
                }
                Err(mut error) => match error.take_message() {
                    // Not sent: the connection closed while idle. Another one takes it.
                    Some(unsent) => request = unsent,
                    None => return Err(error.into_error().into()),
                },
            }
        }
    }

    /// A new connection to `authority`, ready for its first request.
    async fn open(
        &self,
        https: bool,
        authority: &Authority,
        connect: Duration,
    ) -> Result<SendRequest<Body>, UpstreamError> {
        let bare = bare_host(authority);
        let tcp = connect_tcp(authority, https, connect).await?;
        let builder = hyper::client::conn::http1::Builder::new();
        let mut sender = if https {
            let name = rustls::pki_types::ServerName::try_from(bare.to_owned())?;
            let stream = self.tls_http1.connect(name, tcp).await?;
            let (sender, connection) = builder.handshake(TokioIo::new(stream)).await?;
            tokio::spawn(connection.with_upgrades());
            sender
        } else {
            let (sender, connection) = builder.handshake(TokioIo::new(tcp)).await?;
            tokio::spawn(connection.with_upgrades());
            sender
        };
        sender.ready().await?;
        Ok(sender)
    }

    fn http2_client(&self, kind: ClientKind) -> Http2Client {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(kind.connect));
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config((*self.tls).clone())
            .https_or_http()
            .enable_http2()
            .wrap_connector(http);
        Client::builder(TokioExecutor::new())
            .timer(TokioTimer::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(HTTP2_POOL_IDLE)
            .http2_only(true)
            .build(connector)
    }
}

/// The authority's host as the resolver and TLS take it: an IPv6 literal comes bracketed in a
/// URL, bare to them.
fn bare_host(authority: &Authority) -> &str {
    authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
}

/// A TCP connection to `authority` within `timeout` (a `TimedOut` error after it: the proxy
/// answers 504 for that), without Nagle's delay: heads and bodies are written in pieces.
pub async fn connect_tcp(
    authority: &Authority,
    https: bool,
    timeout: Duration,
) -> std::io::Result<tokio::net::TcpStream> {
    let port = authority.port_u16().unwrap_or(if https { 443 } else { 80 });
    let connecting = tokio::net::TcpStream::connect((bare_host(authority), port));
    let tcp = tokio::time::timeout(timeout, connecting)
        .await
        .map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connecting to the upstream timed out",
            )
        })??;
    tcp.set_nodelay(true)?;
    Ok(tcp)
}

/// `Host` for the upstream: its authority, without the scheme's default port.
fn host_header(authority: &Authority, https: bool) -> Result<HeaderValue, UpstreamError> {
    let default = if https { 443 } else { 80 };
    let value = match authority.port_u16() {
        Some(port) if port == default => HeaderValue::from_str(authority.host())?,
        _ => HeaderValue::from_str(authority.as_str())?,
    };
    Ok(value)
}

/// Whether an answer has no body by its framing (RFC 9112 §6.3): one to HEAD, a 204, a 304.
fn bodiless(head_request: bool, status: http::StatusCode) -> bool {
    head_request
        || status == http::StatusCode::NO_CONTENT
        || status == http::StatusCode::NOT_MODIFIED
}

/// An idle connection to the upstream that can take a request now, if the worker has one.
fn checkout(https: bool, authority: &Authority) -> Option<SendRequest<Body>> {
    IDLE.with(|idle| {
        let mut idle = idle.borrow_mut();
        let pool = idle
            .iter_mut()
            .find(|p| p.https == https && p.authority == *authority)?;
        pool.senders.retain(|s| !s.is_closed());
        let ready = pool.senders.iter().rposition(SendRequest::is_ready)?;
        Some(pool.senders.swap_remove(ready))
    })
}

/// Gives a connection back once its answer's head is in: it takes the next request when its
/// answer's body is through.
fn checkin(https: bool, authority: &Authority, sender: SendRequest<Body>) {
    IDLE.with(|idle| {
        let mut idle = idle.borrow_mut();
        let pool = match idle
            .iter_mut()
            .position(|p| p.https == https && p.authority == *authority)
        {
            Some(i) => &mut idle[i],
            None => {
                idle.push(Idle {
                    https,
                    authority: authority.clone(),
                    senders: Vec::new(),
                });
                let last = idle.len() - 1;
                &mut idle[last]
            }
        };
        if pool.senders.len() < MAX_IDLE_PER_UPSTREAM {
            pool.senders.push(sender);
        }
    })
}
