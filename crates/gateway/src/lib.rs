//! The API gateway (CONTRACT §9): a reverse proxy that puts each configured path prefix behind
//! an auth server (OIDC, Basic or Token) read from PostgreSQL and kept fresh in memory.

mod basic;
mod oidc;
mod outcome;
mod problem;
mod proxy;
mod ratelimit;
mod registry;
pub mod routes;
pub mod settings;
mod token;

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::Arc;

use actix_web::dev::ServerHandle;
use actix_web::http::StatusCode;
use actix_web::http::header::{self, RETRY_AFTER};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use domain::model::auth_server::{AuthServer, AuthServerConfig};
use store_postgres::PgStore;

pub use routes::{Route, Routes};
pub use settings::{Settings, SettingsError};

use crate::basic::BasicVerifier;
use crate::oidc::Oidc;
use crate::outcome::Outcome;
use crate::problem::{problem, with_header};
use crate::ratelimit::FailureLimiter;
use crate::registry::Registry;

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
}

struct State {
    routes: Routes,
    registry: Registry,
    basic: BasicVerifier,
    oidc: Oidc,
    limiter: FailureLimiter,
    upstream: reqwest::Client,
}

/// A started gateway: its address, and the handle that stops it.
pub struct Running {
    pub addr: SocketAddr,
    pub handle: ServerHandle,
    server: Option<actix_web::dev::Server>,
    reloader: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Serves until the server stops (a signal, or `handle.stop`).
    pub async fn wait(mut self) -> std::io::Result<()> {
        let result = match self.server.take() {
            Some(server) => server.await,
            None => Ok(()),
        };
        self.reloader.abort();
        result
    }

    /// Serves in the background (tests).
    pub fn spawn(mut self) -> SocketAddr {
        if let Some(server) = self.server.take() {
            tokio::spawn(server);
        }
        self.addr
    }
}

/// Loads the routes and the auth servers, binds, and returns the server ready to run.
pub async fn start(settings: Settings) -> Result<Running, StartError> {
    let routes = Routes::load(&settings.routes_file)?;
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
    let registry = Registry::default();
    registry
        .reload(&store)
        .await
        .map_err(|e| StartError::Database(e.to_string()))?;
    let reloader = tokio::spawn(registry.clone().keep_fresh(store, settings.reload_interval));
    let upstream = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(std::time::Duration::from_secs(10))
        .no_proxy()
        .build()
        .map_err(|e| StartError::Database(format!("HTTP client: {e}")))?;
    let state = web::Data::new(State {
        routes,
        registry,
        basic: BasicVerifier::default(),
        oidc: Oidc::new(&settings.secrets_key, vault, settings.jwks_min_refresh),
        limiter: FailureLimiter::default(),
        upstream,
    });
    let listener = TcpListener::bind(&settings.bind_addr).map_err(|e| StartError::Bind {
        addr: settings.bind_addr.clone(),
        reason: e.to_string(),
    })?;
    let addr = listener.local_addr().map_err(|e| StartError::Bind {
        addr: settings.bind_addr.clone(),
        reason: e.to_string(),
    })?;
    let server = HttpServer::new(move || {
        App::new()
            .app_data(state.clone())
            .route("/healthz", web::get().to(healthz))
            .default_service(web::to(handle))
    })
    .workers(2)
    // A proxied answer is written in pieces (head, then the streamed body): with Nagle's
    // algorithm on, the client's delayed ACK holds the last piece back about 40 ms.
    .on_connect(|conn, _| {
        if let Some(tcp) = conn.downcast_ref::<actix_web::rt::net::TcpStream>() {
            let _ = tcp.set_nodelay(true);
        }
    })
    .listen(listener)
    .map_err(|e| StartError::Bind {
        addr: addr.to_string(),
        reason: e.to_string(),
    })?
    .run();
    Ok(Running {
        addr,
        handle: server.handle(),
        server: Some(server),
        reloader,
    })
}

async fn healthz() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("application/json")
        .body(r#"{"status":"ok"}"#)
}

/// The OIDC servers of the routes whose `redirect_path` is `path`.
fn callback_servers(state: &State, path: &str) -> Vec<Arc<AuthServer>> {
    let snapshot = state.registry.get();
    let mut servers: Vec<Arc<AuthServer>> = Vec::new();
    for route in state.routes.iter() {
        if let Some(server) = snapshot.for_route(route) {
            let answers_here = registry::oidc(&server).is_some_and(|c| c.redirect_path == path);
            if answers_here && !servers.iter().any(|s| s.id == server.id) {
                servers.push(server);
            }
        }
    }
    servers
}

async fn handle(req: HttpRequest, payload: web::Payload, state: web::Data<State>) -> HttpResponse {
    let path = req.path().to_owned();
    let callback = callback_servers(&state, &path);
    if !callback.is_empty() {
        return state.oidc.callback(&req, &callback).await;
    }
    let Some(route) = state.routes.find(&path) else {
        return problem(
            StatusCode::NOT_FOUND,
            "not_found",
            "no route matches this path",
        );
    };
    let client: IpAddr = req
        .peer_addr()
        .map(|a| a.ip())
        .unwrap_or(IpAddr::from([0, 0, 0, 0]));
    if let Some(retry) = state.limiter.blocked(client, route.index) {
        return with_header(
            problem(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                "too many failed attempts; try again later",
            ),
            RETRY_AFTER,
            &retry.to_string(),
        );
    }
    let Some(server) = state.registry.get().for_route(route) else {
        // Fail closed: a route whose auth server is gone lets nobody through.
        return with_header(
            problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "service_unavailable",
                "the auth server of this route does not exist",
            ),
            RETRY_AFTER,
            "5",
        );
    };
    let authorization = req.headers().get(header::AUTHORIZATION);
    let outcome = match &server.config {
        AuthServerConfig::Basic(basic) => state.basic.check(&server, basic, authorization).await,
        AuthServerConfig::Token(tokens) => token::check(tokens, authorization),
        AuthServerConfig::Oidc(config) => state.oidc.check(&server, config, &req).await,
    };
    match outcome {
        Outcome::Allow(identity) => {
            proxy::forward(&state.upstream, &req, payload, route, identity).await
        }
        Outcome::Deny { response, failed } => {
            if failed {
                state.limiter.record_failure(client, route.index);
            }
            response
        }
    }
}
