//! The API gateway: a reverse proxy that puts each configured host and path prefix behind an
//! auth server (OIDC, Basic or Token) read from PostgreSQL and kept fresh in memory.
//!
//! One request, in order: framing checks ([`request`]), the path's canonical form ([`path`]),
//! the client as the gateway saw it ([`forwarding`]), the route ([`routes`]), a sign-in callback
//! if the route's server answers one there, the failed-attempt limit ([`ratelimit`]), the auth
//! check ([`basic`], [`token`], [`oidc`]), and forwarding exactly the path that was checked
//! ([`proxy`]). The gateway's own pages (`/.gateway/`: [`signout`]) are answered before any
//! route is looked at. `docs/gateway.md` states what this guarantees.

mod basic;
mod body;
mod cookies;
mod current;
pub mod forwarding;
mod head_timer;
mod metrics;
mod oidc;
pub mod outbound;
mod outcome;
pub mod path;
mod problem;
mod proxy;
mod ratelimit;
mod registry;
mod request;
mod revocations;
pub mod routes;
mod routes_file;
mod serve;
pub mod settings;
mod signout;
mod tls;
mod token;
mod trace;
mod upstream;
mod wire;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use domain::model::auth_server::{AuthServer, AuthServerConfig};
use http::header::{self, HeaderValue};
use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use store_postgres::{AuthServerChanges, PgStore};
use tracing::Instrument;

pub use routes::{Route, Routes};
pub use serve::Handle;
pub use settings::{Settings, SettingsError};
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use wire::differential;

use crate::basic::BasicVerifier;
use crate::body::{Body, Response};
use crate::current::Current;
use crate::forwarding::{Claimed, TrustedProxies};
use crate::metrics::Metrics;
use crate::oidc::{Oidc, OidcSettings};
use crate::outbound::{NetworkPolicy, Outbound};
use crate::outcome::{Attempts, Facts, Outcome};
use crate::path::CanonicalPath;
use crate::problem::{problem, with_header};
use crate::ratelimit::{Limiter, Scope};
use crate::registry::{Registry, Snapshot};
use crate::revocations::Revocations;
use crate::routes_file::RoutesFile;
use crate::serve::{Peer, Sockets, TlsSocket, Workers};
use crate::upstream::Upstreams;

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error(transparent)]
    Routes(#[from] routes::RoutesError),
    #[error("the database: {0}")]
    Database(String),
    #[error("cannot listen on {addr}: {reason}")]
    Bind { addr: String, reason: String },
    #[error("TLS: {0}")]
    Tls(String),
}

pub(crate) struct State {
    routes: Current<Routes>,
    upstreams: Upstreams,
    registry: Registry,
    vault: secrets::Vault,
    basic: BasicVerifier,
    oidc: Oidc,
    limiter: Limiter,
    trusted: TrustedProxies,
    metrics: Arc<Metrics>,
    /// Where sign-outs are recorded.
    store: PgStore,
}

/// A started gateway: its addresses, and the handle that stops it.
pub struct Running {
    pub addr: SocketAddr,
    /// The TLS listener's address, when one was set.
    pub tls_addr: Option<SocketAddr>,
    /// Where `/metrics` is served, when an admin address was set.
    pub admin_addr: Option<SocketAddr>,
    pub handle: Handle,
    workers: Workers,
    admin: Option<tokio::task::JoinHandle<()>>,
    reloader: tokio::task::JoinHandle<()>,
    routes_watch: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Serves until stopped: by `handle.stop`, SIGTERM or SIGINT. A stop finishes the requests
    /// in flight first.
    pub async fn wait(mut self) -> std::io::Result<()> {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            () = self.workers.wait() => {}
            _ = terminate.recv() => self.stopping(),
            _ = tokio::signal::ctrl_c() => self.stopping(),
        }
        self.workers.wait().await;
        if let Some(admin) = &self.admin {
            admin.abort();
        }
        self.reloader.abort();
        self.routes_watch.abort();
        Ok(())
    }

    fn stopping(&self) {
        tracing::info!("stopping: no new connections; finishing the requests in flight");
        self.handle.stop();
    }

    /// Serves in the background (tests), until the runtime this is called on ends.
    pub fn spawn(mut self) -> SocketAddr {
        let addr = self.addr;
        tokio::spawn(async move { self.workers.wait().await });
        addr
    }
}

/// The TLS listener's sockets (one per worker) when `addr` is set, with the acceptor that picks
/// each handshake's certificate from `certificates`.
fn tls_listener(
    addr: Option<&str>,
    workers: usize,
    certificates: &Current<tls::Certificates>,
) -> Result<Option<TlsSockets>, StartError> {
    let Some(addr) = addr else {
        if !certificates.get().is_empty() {
            tracing::warn!(
                "the routes file names certificates but GATEWAY_TLS_BIND_ADDR is not set: there is no TLS listener"
            );
        }
        return Ok(None);
    };
    if certificates.get().is_empty() {
        return Err(StartError::Tls(
            "GATEWAY_TLS_BIND_ADDR is set but the routes file names no [[certificate]]".into(),
        ));
    }
    let config = tls::server_config(certificates.clone()).map_err(StartError::Tls)?;
    let (sockets, bound) = serve::bind(addr, workers)?;
    Ok(Some(TlsSockets {
        sockets,
        addr: bound,
        acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        certificates: certificates.clone(),
    }))
}

/// The TLS listener: a socket per worker, its address, its handshakes and their certificates.
struct TlsSockets {
    sockets: Vec<std::net::TcpListener>,
    addr: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    certificates: Current<tls::Certificates>,
}

/// Loads the routes and the auth servers, binds, and returns the server ready to run.
pub async fn start(settings: Settings) -> Result<Running, StartError> {
    let (in_force, routes_file) =
        RoutesFile::load(settings.routes_file.clone(), settings.routes_check)?;
    let routes = in_force.routes.clone();
    let tls = tls_listener(
        settings.tls_bind_addr.as_deref(),
        settings.workers,
        &in_force.certificates,
    )?;
    // Every address is bound before anything starts in the background (the auth-server
    // listener thread above all): a gateway that cannot listen leaves nothing running.
    let (plain, addr) = serve::bind(&settings.bind_addr, settings.workers)?;
    let admin_listener = match &settings.admin_bind_addr {
        None => None,
        Some(admin_bind) => {
            let (mut sockets, admin_addr) = serve::bind(admin_bind, 1)?;
            let bind_error = |reason: String| StartError::Bind {
                addr: admin_bind.clone(),
                reason,
            };
            let socket = sockets
                .pop()
                .ok_or_else(|| bind_error("no socket".into()))?;
            let listener =
                tokio::net::TcpListener::from_std(socket).map_err(|e| bind_error(e.to_string()))?;
            Some((listener, admin_addr))
        }
    };
    let tls_addr = tls.as_ref().map(|t| t.addr);
    // Where the gateway can be reached decides whether it may fetch from its own host.
    let listeners: Vec<SocketAddr> = std::iter::once(addr).chain(tls_addr).collect();
    let issuer_networks = match settings.issuer_networks {
        Some(set) => set,
        None => {
            let chosen = NetworkPolicy::by_default_for(&listeners);
            tracing::info!(
                loopback = chosen.loopback,
                "GATEWAY_ALLOWED_ISSUER_NETWORKS not set: OpenID providers may be on public addresses{}",
                if chosen.loopback {
                    ", and on loopback ones (every listener is on a loopback address)"
                } else {
                    " only (a listener is not on a loopback address)"
                }
            );
            chosen
        }
    };
    let upstreams = Upstreams::new().map_err(StartError::Tls)?;
    let vault = secrets::Vault::from_keys(&settings.secrets_key, &settings.secrets_key_previous)
        .map_err(|e| SettingsError::Invalid {
            name: "SECRETS_KEY",
            reason: e.to_string(),
        })?;
    let database = store_postgres::Database {
        url: settings.database_url.clone(),
        direct_url: settings.listen_database_url.clone(),
        statement_cache: settings.database_statement_cache,
    };
    let store = tokio::task::spawn_blocking(move || {
        PgStore::connect_to(&database, 2, std::time::Duration::from_secs(5))
    })
    .await
    .map_err(|e| StartError::Database(e.to_string()))?
    .map_err(|e| StartError::Database(e.to_string()))?;
    // The token digest key is kept in the database, so tokens digested under an earlier
    // SECRETS_KEY still verify.
    let vault = store
        .open_vault(vault)
        .await
        .map_err(|e| StartError::Database(e.to_string()))?;
    let metrics = Arc::new(Metrics::default());
    let registry = Registry::default();
    let count = registry
        .reload(&store)
        .await
        .map_err(|e| StartError::Database(e.to_string()))?;
    metrics.auth_servers(count);
    let revocations = Revocations::default();
    revocations
        .reload(&store)
        .await
        .map_err(|e| StartError::Database(e.to_string()))?;
    warn_about_callbacks(&routes.get(), &registry.get());
    let routes_watch = tokio::spawn(routes_file.watch(registry.clone(), metrics.clone()));
    let changes = AuthServerChanges::start(&settings.listen_database_url);
    let signed_out = revocations.clone().keep_fresh(
        store.clone(),
        changes.session_revocations(),
        settings.reload_interval,
    );
    let servers = registry.clone().keep_fresh(
        store.clone(),
        changes,
        settings.reload_interval,
        metrics.clone(),
    );
    let reloader = tokio::spawn(async move {
        tokio::join!(servers, signed_out);
    });
    let oidc = Oidc::new(
        vault.clone(),
        Outbound::new(issuer_networks),
        &OidcSettings {
            min_refresh: settings.jwks_min_refresh,
            session_ttl: settings.session_ttl,
            session_epoch: settings.session_epoch.clone(),
            endpoint_hosts: settings.oidc_endpoint_hosts.clone(),
        },
        revocations,
    );
    let state = Arc::new(State {
        routes,
        upstreams,
        registry,
        vault,
        basic: BasicVerifier::default(),
        oidc,
        limiter: Limiter::default(),
        trusted: settings.trusted_proxies.clone(),
        metrics: metrics.clone(),
        store,
    });
    let mut tls = tls.map(|t| (t.sockets.into_iter(), t.acceptor, t.certificates));
    let sockets = plain
        .into_iter()
        .map(|plain| Sockets {
            plain,
            tls: tls.as_mut().and_then(|(sockets, acceptor, certificates)| {
                Some(TlsSocket {
                    socket: sockets.next()?,
                    acceptor: acceptor.clone(),
                    certificates: certificates.clone(),
                })
            }),
        })
        .collect();
    let workers = serve::start(
        sockets,
        state,
        serve::Connections::new(settings.max_connections),
    )?;
    let (admin, admin_addr) = match admin_listener {
        None => (None, None),
        Some((listener, admin_addr)) => (
            Some(tokio::spawn(serve_admin(listener, metrics))),
            Some(admin_addr),
        ),
    };
    Ok(Running {
        addr,
        tls_addr,
        admin_addr,
        handle: workers.handle(),
        workers,
        admin,
        reloader,
        routes_watch,
    })
}

/// The admin listener: `/healthz` and `/metrics`, on the runtime the gateway was started on.
async fn serve_admin(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let metrics = metrics.clone();
                async move {
                    let response = match (request.method(), request.uri().path()) {
                        (&Method::GET, "/healthz") => healthz(),
                        (&Method::GET, "/metrics") => {
                            let mut response = Response::new(Body::full(metrics.render()));
                            response.headers_mut().insert(
                                header::CONTENT_TYPE,
                                HeaderValue::from_static(
                                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                                ),
                            );
                            response
                        }
                        _ => problem(StatusCode::NOT_FOUND, "not_found", "no such page"),
                    };
                    Ok::<_, Infallible>(response)
                }
            });
            let _ =
                hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                    .serve_connection(hyper_util::rt::TokioIo::new(tcp), service)
                    .await;
        });
    }
}

fn healthz() -> Response {
    let mut response = Response::new(Body::full(r#"{"status":"ok"}"#));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Says at start (and at each routes reload) when an OIDC server's redirect path lies on a route of another auth server:
/// that route keeps its path, so the server's sign-ins cannot complete there.
pub(crate) fn warn_about_callbacks(routes: &Routes, snapshot: &Snapshot) {
    for route in routes.iter() {
        let Some(server) = snapshot.for_route(route) else {
            continue;
        };
        let Some(config) = oidc::config_of(&server) else {
            continue;
        };
        let Ok(callback) = path::normalize(&config.redirect_path) else {
            continue;
        };
        if let Some(owner) = routes.find(route.host.as_deref(), &callback) {
            let owner_server = snapshot.for_route(owner).map(|s| s.id);
            if owner_server != Some(server.id) {
                tracing::warn!(
                    auth_server = %server.id,
                    redirect_path = %config.redirect_path,
                    route = %owner.label(),
                    "an OIDC redirect path lies on a route of another auth server; sign-ins through it cannot complete"
                );
            }
        }
    }
}

/// The OIDC servers that answer a sign-in callback at `path`. On a route, only the route's own
/// server does: a redirect path can never take a path away from another tenant's route. Off
/// every route, each server of a route whose redirect path this is (the sign-in's state tells
/// which).
fn callback_servers(
    snapshot: &Snapshot,
    routes: &Routes,
    matched: Option<&Route>,
    path: &CanonicalPath,
) -> Vec<Arc<AuthServer>> {
    let answers = |server: &AuthServer| {
        oidc::config_of(server)
            .is_some_and(|c| path::normalize(&c.redirect_path).is_ok_and(|p| p == *path))
    };
    match matched {
        Some(route) => snapshot
            .for_route(route)
            .filter(|s| answers(s))
            .into_iter()
            .collect(),
        None => {
            let mut servers: Vec<Arc<AuthServer>> = Vec::new();
            for server in routes.iter().filter_map(|r| snapshot.for_route(r)) {
                if answers(&server) && !servers.iter().any(|s| s.id == server.id) {
                    servers.push(server);
                }
            }
            servers
        }
    }
}

/// One request on the proxied listeners, answered.
pub(crate) async fn handle(req: Request<Incoming>, peer: Peer, state: &State) -> Response {
    if req.method() == Method::GET && req.uri().path() == "/healthz" {
        return healthz();
    }
    let request_id = problem::choose_request_id(req.headers().get("x-request-id"));
    let mut trace = trace::Trace::of(req.headers());
    let span = tracing::info_span!(
        "request",
        request_id = request_id.to_str().unwrap_or_default(),
        trace_id = tracing::field::Empty,
        method = %req.method()
    );
    trace.join(&span);
    span.record(
        "trace_id",
        tracing::field::display(trace.context.trace_id()),
    );
    // Boxed at once: the checks and the forwarding make a future of several KB, which every
    // wrapper below and hyper's dispatcher would otherwise copy whole, per request.
    let decided = Box::pin(decide(req, peer, state, &request_id, &trace));
    let (route, mut response) = problem::REQUEST_ID
        .scope(request_id.clone(), decided.instrument(span))
        .await;
    state
        .metrics
        .request(route.as_ref(), response.status().as_u16());
    response
        .headers_mut()
        .insert(header::HeaderName::from_static("x-request-id"), request_id);
    response
}

fn bad_request(detail: &str) -> Response {
    problem(StatusCode::BAD_REQUEST, "bad_request", detail)
}

/// Everything a request goes through; the route's label (for metrics) and the answer.
async fn decide(
    req: Request<Incoming>,
    peer: Peer,
    state: &State,
    request_id: &HeaderValue,
    trace: &trace::Trace,
) -> (Option<Arc<str>>, Response) {
    let (req, body) = req.into_parts();
    let host = match request::check(&req) {
        Ok(host) => host,
        Err(request::Malformed::Method) => {
            let response = problem(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "CONNECT and TRACE are not forwarded",
            );
            return (
                None,
                with_header(
                    response,
                    header::ALLOW,
                    "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
                ),
            );
        }
        Err(e) => return (None, bad_request(&e.to_string())),
    };
    let host_key = host.and_then(routes::host_key);
    if let (Some(tls), Some(host)) = (&peer.tls, host_key.as_deref())
        && !tls.covers(host)
    {
        // Negotiated for another name, and its certificate does not cover this one: a client
        // that reused it (HTTP/2 coalescing) must ask again on a connection of its own.
        return (
            None,
            problem(
                StatusCode::MISDIRECTED_REQUEST,
                "misdirected_request",
                "this connection is not for that host; open one for it",
            ),
        );
    }
    let path = match path::normalize(req.uri.path()) {
        Ok(p) => p,
        Err(e) => return (None, bad_request(&e.to_string())),
    };
    let headers = &req.headers;
    let values = |name: &str| -> Vec<&str> {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .collect()
    };
    let forwarded_for = values("x-forwarded-for");
    let client = forwarding::client_view(
        peer.addr,
        host,
        // Set by the TLS listener only; no header can claim it.
        peer.tls.is_some(),
        Claimed {
            forwarded_for: &forwarded_for,
            forwarded_proto: values("x-forwarded-proto").first().copied(),
            forwarded_host: values("x-forwarded-host").first().copied(),
        },
        &state.trusted,
    );
    if signout::is_reserved(&path) {
        let answer = signout::answer(&req, body, &path, &client, &state.oidc, &state.store);
        return (None, Box::pin(answer).await);
    }
    // This request's routes, whatever a reload puts in force meanwhile.
    let routes = state.routes.get();
    let route = routes.find(host_key.as_deref(), &path);
    let label = route.map(|r| r.label.clone());
    let snapshot = state.registry.get();
    let facts = Facts {
        // A value that is not visible ASCII is no credential: it is read as malformed.
        authorization: headers
            .get(header::AUTHORIZATION)
            .map(|v| v.to_str().unwrap_or("")),
        cookies: values("cookie"),
        accepts_html: headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("text/html")),
        navigable: matches!(req.method, Method::GET | Method::HEAD),
        path: path.as_str(),
        query: req.uri.query().unwrap_or(""),
    };

    let callback = callback_servers(&snapshot, &routes, route, &path);
    if !callback.is_empty() {
        let attempts = Attempts {
            limiter: &state.limiter,
            client: client.addr,
            scope: Scope::Callback,
        };
        if let Some(blocked) = attempts.blocked() {
            return (label, blocked);
        }
        return (
            label,
            Box::pin(state.oidc.callback(&facts, &callback, &attempts)).await,
        );
    }
    let Some(route) = route else {
        return (
            None,
            problem(
                StatusCode::NOT_FOUND,
                "not_found",
                "no route matches this path",
            ),
        );
    };
    // A host route's upstream is told the host the route was chosen by: a trusted proxy's
    // X-Forwarded-Host naming another host would have it build links to a host nobody checked.
    let mut client = client;
    if let Some(route_host) = &route.host
        && client.host.as_deref().and_then(routes::host_key).as_deref() != Some(route_host.as_str())
    {
        client.host = host.map(str::to_owned);
    }
    let header_bytes: u64 = headers
        .iter()
        .map(|(name, value)| (name.as_str().len() + value.len() + 4) as u64)
        .sum();
    if header_bytes > route.limits.max_request_headers {
        return (
            label,
            problem(
                StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
                "request_header_fields_too_large",
                &format!(
                    "the request's headers are larger than this route takes ({} bytes)",
                    route.limits.max_request_headers
                ),
            ),
        );
    }
    if !route.upgrades && proxy::asks_to_switch(&req) {
        // Refused before any check: the tunnel it asks for is what the route does not take.
        return (
            label,
            problem(
                StatusCode::FORBIDDEN,
                "forbidden",
                "this route does not take requests to switch protocols (WebSocket or any other upgrade)",
            ),
        );
    }
    let attempts = Attempts {
        limiter: &state.limiter,
        client: client.addr,
        scope: Scope::Route(route.limit_key),
    };
    if let Some(blocked) = attempts.blocked() {
        return (label, blocked);
    }
    let Some(server) = snapshot.for_route(route) else {
        // Fail closed: a route whose auth server is gone lets nobody through.
        return (
            label,
            with_header(
                problem(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "service_unavailable",
                    "the auth server of this route does not exist",
                ),
                header::RETRY_AFTER,
                "5",
            ),
        );
    };
    // The stages' spans are at `debug`: at `info` they cost one check each.
    let outcome = async {
        match &server.config {
            AuthServerConfig::Basic(basic) => {
                Box::pin(
                    state
                        .basic
                        .check(&server, basic, facts.authorization, &attempts),
                )
                .await
            }
            AuthServerConfig::Token(tokens) => {
                token::check(&state.vault, tokens, facts.authorization, &attempts)
            }
            AuthServerConfig::Oidc(config) => {
                Box::pin(state.oidc.check(&server, config, &facts, &attempts)).await
            }
        }
    }
    .instrument(tracing::debug_span!(
        "authenticate",
        kind = server.config.kind().as_str()
    ))
    .await;
    let response = match outcome {
        Outcome::Allow(identity) => {
            let checked = proxy::Checked {
                route,
                path: &path,
                identity,
                client: &client,
                request_id,
                trace,
                upstreams: &state.upstreams,
            };
            proxy::forward(req, body, checked)
                .instrument(tracing::debug_span!("upstream"))
                .await
        }
        Outcome::Deny(response) => response,
    };
    (label, response)
}
