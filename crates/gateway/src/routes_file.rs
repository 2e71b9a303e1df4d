//! The routes file kept in force while the gateway runs: read again on `SIGHUP`, and whenever
//! its content changes (looked at every `GATEWAY_ROUTES_CHECK_S`, so an editor's save, an
//! atomic rename and a Kubernetes ConfigMap's symlink swap are all seen). A file that does not
//! read as routes is refused whole, with its error in the log, and the routes in force stay:
//! nothing is half-applied, and requests under way finish on the routes they started with.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::current::Current;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::routes::{Routes, RoutesError};

/// What keeps the routes current; [`RoutesFile::watch`] runs it.
pub struct RoutesFile {
    path: PathBuf,
    routes: Current<Routes>,
    /// The bytes last read, parsed or refused: the same bytes are not parsed (or refused, or
    /// logged) again unless a `SIGHUP` asks.
    last: Vec<u8>,
    /// Why the file could not be read last time, so a lasting failure is said once.
    unreadable: Option<String>,
    hangups: Option<Signal>,
    /// `None`: only on `SIGHUP`.
    every: Option<Duration>,
}

impl RoutesFile {
    /// Reads the file for the start: its routes, and the watcher to run. The `SIGHUP` handler
    /// is in place when this returns (a signal sent after the start reloads, never kills).
    pub fn load(
        path: PathBuf,
        every: Option<Duration>,
    ) -> Result<(Current<Routes>, RoutesFile), RoutesError> {
        let bytes = std::fs::read(&path).map_err(|e| RoutesError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let routes = Current::new(parse(&bytes)?);
        let hangups = match signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(error) => {
                tracing::warn!(%error, "cannot handle SIGHUP; the routes file is read again only when it changes");
                None
            }
        };
        let file = RoutesFile {
            path,
            routes: routes.clone(),
            last: bytes,
            unreadable: None,
            hangups,
            every,
        };
        Ok((routes, file))
    }

    /// Runs forever.
    pub async fn watch(mut self, registry: Registry, metrics: Arc<Metrics>) {
        loop {
            let asked = self.next().await;
            let bytes = match tokio::fs::read(&self.path).await {
                Ok(bytes) => {
                    self.unreadable = None;
                    bytes
                }
                Err(error) => {
                    let error = error.to_string();
                    if asked || self.unreadable.as_ref() != Some(&error) {
                        tracing::warn!(path = %self.path.display(), %error, "cannot read the routes file; the routes in force stay");
                        metrics.routes_reload_failed();
                    }
                    self.unreadable = Some(error);
                    continue;
                }
            };
            if bytes == self.last && !asked {
                continue;
            }
            match parse(&bytes) {
                Ok(routes) => {
                    crate::warn_about_callbacks(&routes, &registry.get());
                    tracing::info!(routes = routes.iter().count(), "routes file read again");
                    metrics.routes_reloaded();
                    self.routes.set(routes);
                }
                Err(error) => {
                    tracing::warn!(%error, "routes file refused; the routes in force stay");
                    metrics.routes_reload_failed();
                }
            }
            self.last = bytes;
        }
    }

    /// Waits for the next look at the file: `true` when a `SIGHUP` asked for it.
    async fn next(&mut self) -> bool {
        let (hangups, every) = (&mut self.hangups, self.every);
        let hangup = async {
            match hangups.as_mut() {
                Some(s) => s.recv().await,
                None => std::future::pending().await,
            }
        };
        let tick = async {
            match every {
                Some(every) => tokio::time::sleep(every).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = hangup => true,
            () = tick => false,
        }
    }
}

fn parse(bytes: &[u8]) -> Result<Routes, RoutesError> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| RoutesError::Parse("the file is not UTF-8".into()))?;
    Routes::parse(text)
}
