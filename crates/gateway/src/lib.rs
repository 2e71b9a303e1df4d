//! The API gateway: a reverse proxy that puts each configured host and path prefix behind an
//! auth server (OIDC, Basic or Token) read from PostgreSQL and kept fresh in memory.
//!
//! One request, in order: framing checks ([`request`]), the path's canonical form ([`path`]),
//! the client as the gateway saw it ([`forwarding`]), the route ([`routes`]), a sign-in callback
//! if the route's server answers one there, the failed-attempt limit ([`ratelimit`]), the auth
//! check ([`basic`], [`token`], [`oidc`]), and forwarding exactly the path that was checked
//! ([`proxy`]). `docs/gateway.md` states what this guarantees.

mod basic;
mod cookies;
mod current;
pub mod forwarding;
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
pub mod routes;
mod routes_file;
pub mod settings;
mod tls;
mod token;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::Arc;

use actix_web::dev::ServerHandle;
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use domain::model::auth_server::{AuthServer, AuthServerConfig};
use store_postgres::{AuthServerChanges, PgStore};
use tracing::Instrument;

pub use routes::{Route, Routes};
pub use settings::{Settings, SettingsError};

use crate::basic::BasicVerifier;
use crate::current::Current;
use crate::forwarding::{Claimed, TrustedProxies};
use crate::metrics::Metrics;
use crate::oidc::{Oidc, OidcSettings};
use crate::outbound::Outbound;
use crate::outcome::{Attempts, Facts, Outcome};
use crate::path::CanonicalPath;
use crate::problem::{problem, with_header};
use crate::ratelimit::{Limiter, Scope};
use crate::registry::{Registry, Snapshot};
use crate::routes_file::RoutesFile;

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

struct State {
    routes: Current<Routes>,
    registry: Registry,
    vault: secrets::Vault,
    basic: BasicVerifier,
    oidc: Oidc,
    limiter: Limiter,
    trusted: TrustedProxies,
    metrics: Arc<Metrics>,
}

/// A started gateway: its addresses, and the handle that stops it.
pub struct Running {
    pub addr: SocketAddr,
    /// The TLS listener's address, when one was set.
    pub tls_addr: Option<SocketAddr>,
    /// Where `/metrics` is served, when an admin address was set.
    pub admin_addr: Option<SocketAddr>,
    pub handle: ServerHandle,
    server: Option<actix_web::dev::Server>,
    admin: Option<actix_web::dev::Server>,
    reloader: tokio::task::JoinHandle<()>,
    routes_watch: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Serves until the server stops (a signal, or `handle.stop`).
    pub async fn wait(mut self) -> std::io::Result<()> {
        let admin = self.admin.take().map(|a| {
            let handle = a.handle();
            (tokio::spawn(a), handle)
        });
        let result = match self.server.take() {
            Some(server) => server.await,
            None => Ok(()),
        };
        if let Some((task, handle)) = admin {
            handle.stop(true).await;
            let _ = task.await;
        }
        self.reloader.abort();
        self.routes_watch.abort();
        result
    }

    /// Serves in the background (tests).
    pub fn spawn(mut self) -> SocketAddr {
        if let Some(server) = self.server.take() {
            tokio::spawn(server);
        }
        if let Some(admin) = self.admin.take() {
            tokio::spawn(admin);
        }
        self.addr
    }
}

fn bind(addr: &str) -> Result<(TcpListener, SocketAddr), StartError> {
    let bind_error = |e: std::io::Error| StartError::Bind {
        addr: addr.to_owned(),
        reason: e.to_string(),
    };
    let listener = TcpListener::bind(addr).map_err(bind_error)?;
    let local = listener.local_addr().map_err(bind_error)?;
    Ok((listener, local))
}

/// The TLS listener when `addr` is set: bound, with the rustls configuration that picks each
/// handshake's certificate from `certificates`.
fn tls_listener(
    addr: Option<&str>,
    certificates: &Current<tls::Certificates>,
) -> Result<Option<(TcpListener, SocketAddr, rustls::ServerConfig)>, StartError> {
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
    let (listener, bound) = bind(addr)?;
    Ok(Some((listener, bound, config)))
}

/// Loads the routes and the auth servers, binds, and returns the server ready to run.
pub async fn start(settings: Settings) -> Result<Running, StartError> {
    let (in_force, routes_file) =
        RoutesFile::load(settings.routes_file.clone(), settings.routes_check)?;
    let routes = in_force.routes.clone();
    let tls = tls_listener(settings.tls_bind_addr.as_deref(), &in_force.certificates)?;
    let vault = secrets::Vault::from_base64_key(&settings.secrets_key).map_err(|e| {
        SettingsError::Invalid {
            name: "SECRETS_KEY",
            reason: e.to_string(),
        }
    })?;
    let url = settings.database_url.clone();
    let store = tokio::task::spawn_blocking(move || {
        PgStore::connect(&url, 2, std::time::Duration::from_secs(5))
    })
    .await
    .map_err(|e| StartError::Database(e.to_string()))?
    .map_err(|e| StartError::Database(e.to_string()))?;
    let metrics = Arc::new(Metrics::default());
    let registry = Registry::default();
    let count = registry
        .reload(&store)
        .await
        .map_err(|e| StartError::Database(e.to_string()))?;
    metrics.auth_servers(count);
    warn_about_callbacks(&routes.get(), &registry.get());
    let routes_watch = tokio::spawn(routes_file.watch(registry.clone(), metrics.clone()));
    let reloader = tokio::spawn(registry.clone().keep_fresh(
        store,
        AuthServerChanges::start(&settings.database_url),
        settings.reload_interval,
        metrics.clone(),
    ));
    let oidc = Oidc::new(
        vault.clone(),
        Outbound::new(settings.issuer_networks),
        &OidcSettings {
            min_refresh: settings.jwks_min_refresh,
            session_ttl: settings.session_ttl,
            session_epoch: settings.session_epoch.clone(),
            endpoint_hosts: settings.oidc_endpoint_hosts.clone(),
        },
    );
    let state = web::Data::new(State {
        routes,
        registry,
        vault,
        basic: BasicVerifier::default(),
        oidc,
        limiter: Limiter::default(),
        trusted: settings.trusted_proxies.clone(),
        metrics: metrics.clone(),
    });
    let (listener, addr) = bind(&settings.bind_addr)?;
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .route("/healthz", web::get().to(healthz))
            .default_service(web::to(handle))
    })
    .workers(settings.workers)
    // A proxied answer is written in pieces (head, then the streamed body): with Nagle's
    // algorithm on, the client's delayed ACK holds the last piece back about 40 ms. The TLS
    // listener's connections are the same sockets under rustls.
    .on_connect(|conn, _| {
        use actix_web::rt::net::TcpStream;
        let tcp = conn.downcast_ref::<TcpStream>().or_else(|| {
            conn.downcast_ref::<actix_tls::accept::rustls_0_23::TlsStream<TcpStream>>()
                .map(|tls| tls.get_ref().0)
        });
        if let Some(tcp) = tcp {
            let _ = tcp.set_nodelay(true);
        }
    })
    .listen(listener)
    .map_err(|e| StartError::Bind {
        addr: addr.to_string(),
        reason: e.to_string(),
    })?;
    let tls_addr = tls.as_ref().map(|(_, addr, _)| *addr);
    let server =
        match tls {
            None => server,
            Some((listener, tls_addr, config)) => server
                .listen_rustls_0_23(listener, config)
                .map_err(|e| StartError::Bind {
                    addr: tls_addr.to_string(),
                    reason: e.to_string(),
                })?,
        }
        .run();
    let (admin, admin_addr) = match &settings.admin_bind_addr {
        None => (None, None),
        Some(admin_bind) => {
            let (listener, admin_addr) = bind(admin_bind)?;
            let metrics = web::Data::from(metrics);
            let admin = HttpServer::new(move || {
                App::new()
                    .app_data(metrics.clone())
                    .route("/healthz", web::get().to(healthz))
                    .route("/metrics", web::get().to(render_metrics))
            })
            .workers(1)
            .listen(listener)
            .map_err(|e| StartError::Bind {
                addr: admin_addr.to_string(),
                reason: e.to_string(),
            })?
            .run();
            (Some(admin), Some(admin_addr))
        }
    };
    Ok(Running {
        addr,
        tls_addr,
        admin_addr,
        handle: server.handle(),
        server: Some(server),
        admin,
        reloader,
        routes_watch,
    })
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(r#"{"status":"ok"}"#)
}

async fn render_metrics(metrics: web::Data<Metrics>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/openmetrics-text; version=1.0.0; charset=utf-8")
        .body(metrics.render())
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

async fn handle(req: HttpRequest, payload: web::Payload, state: web::Data<State>) -> HttpResponse {
    let request_id = problem::choose_request_id(
        req.headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok()),
    );
    let span = tracing::info_span!("request", request_id = %request_id, method = %req.method());
    let (route, mut response) = problem::REQUEST_ID
        .scope(
            request_id.clone(),
            decide(&req, payload, &state, &request_id).instrument(span),
        )
        .await;
    state.metrics.request(route, response.status().as_u16());
    if let Ok(v) = HeaderValue::from_str(&request_id) {
        response
            .headers_mut()
            .insert(header::HeaderName::from_static("x-request-id"), v);
    }
    response
}

fn bad_request(detail: &str) -> HttpResponse {
    problem(StatusCode::BAD_REQUEST, "bad_request", detail)
}

/// Everything a request goes through; the route's label (for metrics) and the answer.
async fn decide(
    req: &HttpRequest,
    payload: web::Payload,
    state: &State,
    request_id: &str,
) -> (Option<String>, HttpResponse) {
    let host = match request::check(req) {
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
    let path = match path::normalize(req.uri().path()) {
        Ok(p) => p,
        Err(e) => return (None, bad_request(&e.to_string())),
    };
    let headers = req.headers();
    let values = |name: &str| -> Vec<&str> {
        headers
            .get_all(name)
            .filter_map(|v| v.to_str().ok())
            .collect()
    };
    let forwarded_for = values("x-forwarded-for");
    let peer = req
        .peer_addr()
        .map(|a| a.ip())
        .unwrap_or(IpAddr::from([0, 0, 0, 0]));
    let client = forwarding::client_view(
        peer,
        host.as_deref(),
        // Set by actix for the TLS listener only; no header can claim it.
        req.app_config().secure(),
        Claimed {
            forwarded_for: &forwarded_for,
            forwarded_proto: values("x-forwarded-proto").first().copied(),
            forwarded_host: values("x-forwarded-host").first().copied(),
        },
        &state.trusted,
    );
    let host_key = host.as_deref().and_then(routes::host_key);
    // This request's routes, whatever a reload puts in force meanwhile.
    let routes = state.routes.get();
    let route = routes.find(host_key.as_deref(), &path);
    let label = route.map(Route::label);
    let snapshot = state.registry.get();
    let path_text = path.to_string();
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
        navigable: matches!(req.method().as_str(), "GET" | "HEAD"),
        path: &path_text,
        query: req.query_string(),
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
            state.oidc.callback(&facts, &callback, &attempts).await,
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
    let outcome = match &server.config {
        AuthServerConfig::Basic(basic) => {
            state
                .basic
                .check(&server, basic, facts.authorization, &attempts)
                .await
        }
        AuthServerConfig::Token(tokens) => {
            token::check(&state.vault, tokens, facts.authorization, &attempts)
        }
        AuthServerConfig::Oidc(config) => {
            state.oidc.check(&server, config, &facts, &attempts).await
        }
    };
    let response = match outcome {
        Outcome::Allow(identity) => {
            let checked = proxy::Checked {
                route,
                path: &path,
                identity,
                client: &client,
                request_id,
            };
            proxy::forward(req, payload, checked).await
        }
        Outcome::Deny(response) => response,
    };
    (label, response)
}
