//! The service as a library: settings → wired ports → a running HTTP server. `main.rs` is a
//! thin shell around [`start`], and black-box tests start the same thing in-process.

pub mod config;
mod metrics;
mod system;

#[cfg(test)]
mod architecture;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use actix_web::dev::Service;
use actix_web::middleware::from_fn;
use actix_web::{App, HttpServer};
use anyhow::Context;
use async_trait::async_trait;
use domain::model::catalog::Catalog;
use domain::model::secret::Secret;
use domain::ports::identity::IdentityProvider;
use domain::service::{Ports, Services, Settings};
use store_postgres::{CachedStore, PgChangeFeed, PgStore};

use crate::config::{Config, Identity, SecretsKey};
pub use crate::system::{RandomIds, SystemClock};

/// A started server.
pub struct Running {
    pub addr: SocketAddr,
    pub server: actix_web::dev::Server,
    pub services: Services,
    /// Demo tokens to print (development mode with the embedded platform only).
    pub demo_tokens: Vec<(String, String)>,
    pub generated_secrets_key: bool,
    /// The provisioning workers; stop them with [`reconciler::ReconcilerHandle::shutdown`].
    pub reconciler: reconciler::ReconcilerHandle,
    /// Set when the process starts to stop: `/readyz` fails from then on.
    pub draining: Arc<AtomicBool>,
    /// The change feed, closed when the process stops so waiting long-polls answer.
    pub feed: PgChangeFeed,
    /// The store, whose notifier thread is ended last (`PgStore::close_notifier`).
    pub store: PgStore,
}

/// Ready while the database answers and the process is not stopping.
struct StoreReadiness {
    store: PgStore,
    draining: Arc<AtomicBool>,
}

#[async_trait]
impl api::Readiness for StoreReadiness {
    async fn ready(&self) -> Result<(), String> {
        if self.draining.load(Ordering::SeqCst) {
            return Err("the process is stopping".into());
        }
        self.store.ping().await.map_err(|e| e.to_string())
    }
}

/// Wires every port from the settings and starts serving.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    let catalog = match &config.catalog_file {
        None => Catalog::builtin(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("CATALOG_FILE: cannot read {path}"))?;
            Catalog::from_json(&text).with_context(|| format!("CATALOG_FILE: {path}"))?
        }
    };
    let (vault, generated_secrets_key) = match &config.secrets_key {
        SecretsKey::Given { current, previous } => {
            (secrets::Vault::from_keys(current, previous)?, false)
        }
        SecretsKey::Generated => (
            secrets::Vault::from_base64_key(&secrets::Vault::generate_key())
                .context("SECRETS_KEY")?,
            true,
        ),
    };
    let sim = config.sim.clone();
    // The address first: a second server on a taken address stops here, before any worker or
    // background task has started (or logged that it did).
    let listener = std::net::TcpListener::bind(&config.bind_addr).map_err(|e| {
        anyhow::anyhow!(
            "BIND_ADDR: cannot listen on {}: {e}{}",
            config.bind_addr,
            if e.kind() == std::io::ErrorKind::AddrInUse {
                " (another process listens there, perhaps another `make run`: stop it, or set \
                 BIND_ADDR to another address, e.g. BIND_ADDR=127.0.0.1:8090)"
            } else {
                ""
            }
        )
    })?;

    let database = store_postgres::Database {
        url: config.database_url.clone(),
        direct_url: config.listen_database_url.clone(),
        statement_cache: config.database_statement_cache,
    };
    if database.url != database.direct_url {
        // Never the URLs themselves: they may hold a password.
        tracing::info!(
            statement_cache = database.statement_cache,
            "LISTEN_DATABASE_URL is set: the change feed and the migrations connect there, every query to DATABASE_URL"
        );
    }
    let pool_size = config.database_pool_size;
    let store = tokio::task::spawn_blocking(move || {
        PgStore::connect_to(&database, pool_size, std::time::Duration::from_secs(5))
    })
    .await
    .context("database set-up")?
    .context("DATABASE_URL or LISTEN_DATABASE_URL: cannot connect or migrate")?;
    // A key generated for this run could not open a digest key stored by an earlier run, and
    // nothing sealed by that run opens either: such a run keeps the key it derives.
    let vault = if generated_secrets_key {
        vault
    } else {
        store.open_vault(vault).await?
    };
    let feed = PgChangeFeed::start(&config.listen_database_url, config.cluster_cache_size);
    let clusters = Arc::new(CachedStore::new(store.clone(), &feed));
    if config.cluster_cache_prefill && config.cluster_cache_size > 0 {
        // In the background: `/readyz` and the first requests do not wait for it, and a miss
        // meanwhile reads the database as it would without it.
        tokio::spawn(
            clusters
                .as_ref()
                .clone()
                .keep_filled(store_postgres::PREFILL_BATCH),
        );
    }

    let mut registry = api::metrics::Metrics::default();
    registry.register(Box::new(metrics::PoolMetrics(store.clone())));
    registry.register(Box::new(metrics::CacheMetrics(clusters.as_ref().clone())));
    let mut demo_tokens = Vec::new();
    let identity: Arc<dyn IdentityProvider> = match &config.identity {
        Identity::Platform { url, service_token } => {
            let platform = account_platform::HttpAccountPlatform::new(
                account_platform::PlatformConfig::new(
                    url.clone(),
                    Secret::new(service_token.clone()),
                )
                .with_timeout(config.platform_timeout)
                .with_token_cache_ttl(config.token_cache_ttl)
                .with_refusal_cache_ttl(config.refusal_cache_ttl)
                .with_org_cache_ttl(config.org_cache_ttl),
            )
            .context("ACCOUNT_PLATFORM_URL")?;
            registry.register(Box::new(metrics::PlatformMetrics(platform.metrics())));
            Arc::new(platform)
        }
        Identity::Development => {
            demo_tokens = account_platform::dev::demo_tokens()
                .into_iter()
                .map(|t| (t.description, t.token))
                .collect();
            Arc::new(account_platform::dev::DevAccountPlatform::demo())
        }
    };

    let store_arc = Arc::new(store.clone());
    let ports = Ports {
        clusters,
        idempotency: store_arc.clone(),
        auth_servers: store_arc.clone(),
        audit: store_arc.clone(),
        operations: store_arc.clone(),
        credentials: store_arc.clone(),
        sessions: store_arc.clone(),
        approvals: store_arc.clone(),
        changes: Arc::new(feed.clone()),
        identity,
        cloud: Arc::new(provisioner_sim::SimulatedCloud::new(sim)),
        vault: Arc::new(vault),
        clock: Arc::new(SystemClock),
        ids: Arc::new(RandomIds),
    };
    let settings = Settings {
        public_hostname_suffix: config.public_hostname_suffix.clone(),
        annotation_domain: config.annotation_domain.clone(),
        kubeconfig_requires_super_admin: config.kubeconfig_requires_super_admin,
        kubeconfig_expiry_default_seconds: config.kubeconfig_expiry_default_seconds,
        kubeconfig_expiry_max_seconds: config.kubeconfig_expiry_max_seconds,
    };
    let services = Services::new(ports.clone(), catalog, settings)
        .with_write_budget(Arc::new(api::ratelimit::OrganizationWrites::new(
            config.writes_per_organization,
            config.rate_limits.replicas,
        )))
        .with_approval_ttl(chrono::Duration::minutes(i64::from(
            config.approval_ttl_minutes,
        )));
    let reconciler = reconciler::Reconciler::start(
        ports,
        store_arc.clone(),
        reconciler::ReconcilerConfig {
            workers: config.reconciler_workers,
            poll_interval: config.reconciler_poll,
            name: format!("{}-{}", hostname(), std::process::id()),
            ..Default::default()
        },
        reconciler::CancellationToken::new(),
    );
    let queue = metrics::QueueMetrics::new(reconciler.metrics_reader());
    registry.register(Box::new(queue.clone()));
    let draining = Arc::new(AtomicBool::new(false));
    let state = api::AppState {
        services: services.clone(),
        readiness: Arc::new(StoreReadiness {
            store: store.clone(),
            draining: draining.clone(),
        }),
        metrics: Arc::new(registry),
        refresh: vec![queue],
        limiter: Arc::new(api::ratelimit::RateLimiter::new(
            config.rate_limits,
            config.trusted_proxies.clone(),
        )),
    };
    system::spawn_idempotency_purge(store.clone());
    system::spawn_session_purge(store.clone());
    system::spawn_approval_expiry(services.clone());
    system::spawn_automatic_upgrades(services.clone());
    system::spawn_housekeeping(
        store.clone(),
        config.audit_retention_days,
        config.credential_grace_days,
    );
    let console_state = console::ConsoleState::new(
        services.clone().via(domain::model::audit::Channel::Console),
        demo_tokens
            .iter()
            .map(|(label, token)| console::DemoUser {
                label: label.clone(),
                token: Secret::new(token.clone()),
            })
            .collect(),
    );

    let assistant = mcp::Settings {
        public_url: config.public_url.clone(),
        authorization_servers: config.authorization_server_url.iter().cloned().collect(),
    };

    let closing = draining.clone();
    let server = HttpServer::new(move || {
        let closing = closing.clone();
        App::new()
            // Once stopping, every answer closes its connection: a client's next request opens
            // a new one, which the load balancer sends to another replica, rather than keeping
            // this one busy on a kept-alive connection until the drain time cuts it.
            .wrap_fn(move |req, srv| {
                let answer = srv.call(req);
                let closing = closing.clone();
                async move {
                    let mut res = answer.await?;
                    if closing.load(Ordering::SeqCst) {
                        res.response_mut()
                            .head_mut()
                            .set_connection_type(actix_web::http::ConnectionType::Close);
                    }
                    Ok(res)
                }
            })
            .wrap(from_fn(api::middleware::observe))
            .configure(console::configure(console_state.clone()))
            // The assistant's MCP endpoint, before the API's routes and their fallback.
            .configure(mcp::configure(assistant.clone()))
            .configure(api::configure(state.clone()))
    })
    // The process's own stop sequence (main.rs) decides when to stop accepting.
    .disable_signals()
    .shutdown_timeout(config.drain_timeout.as_secs())
    .listen(listener)
    .with_context(|| format!("BIND_ADDR: cannot listen on {}", config.bind_addr))?;
    let addr = server
        .addrs()
        .first()
        .copied()
        .context("BIND_ADDR: no address bound")?;
    let server = server.run();
    Ok(Running {
        addr,
        server,
        services,
        demo_tokens,
        generated_secrets_key,
        reconciler,
        draining,
        feed,
        store: store.clone(),
    })
}

/// This machine's name, for naming workers (who holds a lease is visible in the queue).
fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "server".into())
}
