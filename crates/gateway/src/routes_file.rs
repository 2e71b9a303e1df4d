//! The routes file kept in force while the gateway runs: read again on `SIGHUP`, and whenever
//! its content or the content of a certificate file it names changes (looked at every
//! `GATEWAY_ROUTES_CHECK_S`, so an editor's save, an atomic rename, a Kubernetes ConfigMap's
//! symlink swap and a renewed certificate are all seen). A file that does not read as routes,
//! or names certificates that do not load, is refused whole, with its error in the log, and
//! what is in force stays: nothing is half-applied, requests under way finish on the routes
//! they started with, and open TLS connections keep their certificate.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::current::Current;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::routes::{Routes, RoutesError};
use crate::tls::{CertificateSpec, Certificates};

/// What is in force: the routes, and the TLS listener's certificates.
#[derive(Clone)]
pub struct InForce {
    pub routes: Current<Routes>,
    pub certificates: Current<Certificates>,
}

/// What keeps them current; [`RoutesFile::watch`] runs it.
pub struct RoutesFile {
    path: PathBuf,
    in_force: InForce,
    /// The bytes last read, parsed or refused: the same bytes are not parsed (or refused, or
    /// logged) again unless a `SIGHUP` asks.
    last: Vec<u8>,
    /// The certificate and key files' bytes last read, the same way.
    last_certificates: Vec<u8>,
    /// Why a file could not be read last time, so a lasting failure is said once.
    unreadable: Option<String>,
    hangups: Option<Signal>,
    /// `None`: only on `SIGHUP`.
    every: Option<Duration>,
}

impl RoutesFile {
    /// Reads the file (and its certificates) for the start, and makes the watcher to run. The
    /// `SIGHUP` handler is in place when this returns (a signal sent after the start reloads,
    /// never kills).
    pub fn load(
        path: PathBuf,
        every: Option<Duration>,
    ) -> Result<(InForce, RoutesFile), RoutesError> {
        let bytes = std::fs::read(&path).map_err(|e| RoutesError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        let routes = parse(&bytes)?;
        let specs = resolved(&path, &routes.certificates);
        let certificates = Certificates::load(&specs)?;
        let last_certificates = certificate_bytes(&specs).unwrap_or_default();
        let hangups = match signal(SignalKind::hangup()) {
            Ok(s) => Some(s),
            Err(error) => {
                tracing::warn!(%error, "cannot handle SIGHUP; the routes file is read again only when it changes");
                None
            }
        };
        let in_force = InForce {
            routes: Current::new(routes),
            certificates: Current::new(certificates),
        };
        let file = RoutesFile {
            path,
            in_force: in_force.clone(),
            last: bytes,
            last_certificates,
            unreadable: None,
            hangups,
            every,
        };
        Ok((in_force, file))
    }

    /// Runs forever.
    pub async fn watch(mut self, registry: Registry, metrics: Arc<Metrics>) {
        loop {
            let asked = self.next().await;
            let bytes = match tokio::fs::read(&self.path).await {
                Ok(bytes) => bytes,
                Err(e) => {
                    let error = format!("{}: {e}", self.path.display());
                    self.unreadable(error, asked, &metrics);
                    continue;
                }
            };
            // Parsed only when the bytes changed (a parse builds each route's upstream
            // client): the certificates the file now names, else those of the routes in force,
            // are what a renewal is looked for in.
            let parsed = (asked || bytes != self.last).then(|| parse(&bytes));
            let specs = match &parsed {
                Some(Ok(routes)) => resolved(&self.path, &routes.certificates),
                _ => resolved(&self.path, &self.in_force.routes.get().certificates),
            };
            let certificate_files = match certificate_bytes(&specs) {
                Ok(files) => files,
                Err(error) => {
                    self.unreadable(error, asked, &metrics);
                    continue;
                }
            };
            self.unreadable = None;
            if parsed.is_none() && certificate_files == self.last_certificates {
                continue;
            }
            let read = parsed.unwrap_or_else(|| parse(&bytes)).and_then(|routes| {
                let certificates = Certificates::load(&resolved(&self.path, &routes.certificates))?;
                Ok((routes, certificates))
            });
            match read {
                Ok((routes, certificates)) => {
                    crate::warn_about_callbacks(&routes, &registry.get());
                    tracing::info!(
                        routes = routes.iter().count(),
                        certificates = routes.certificates.len(),
                        "routes file read again"
                    );
                    metrics.routes_reloaded();
                    self.in_force.certificates.set(certificates);
                    self.in_force.routes.set(routes);
                }
                Err(error) => {
                    tracing::warn!(%error, "routes file refused; what is in force stays");
                    metrics.routes_reload_failed();
                }
            }
            self.last = bytes;
            self.last_certificates = certificate_files;
        }
    }

    /// A file could not be read: said (and counted) once while it stays so, or when asked.
    fn unreadable(&mut self, error: String, asked: bool, metrics: &Metrics) {
        if asked || self.unreadable.as_ref() != Some(&error) {
            tracing::warn!(%error, "cannot read the routes file or a certificate it names; what is in force stays");
            metrics.routes_reload_failed();
        }
        self.unreadable = Some(error);
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

/// The certificates with relative paths read from the routes file's directory.
fn resolved(routes_file: &Path, specs: &[CertificateSpec]) -> Vec<CertificateSpec> {
    let dir = routes_file.parent().unwrap_or(Path::new("."));
    specs
        .iter()
        .map(|s| CertificateSpec {
            cert: dir.join(&s.cert),
            key: dir.join(&s.key),
            ..s.clone()
        })
        .collect()
}

/// Every certificate and key file's bytes, one after the other: what a change is looked for in.
fn certificate_bytes(specs: &[CertificateSpec]) -> Result<Vec<u8>, String> {
    let mut all = Vec::new();
    for path in specs.iter().flat_map(|s| [&s.cert, &s.key]) {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        all.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
        all.extend_from_slice(&bytes);
    }
    Ok(all)
}
