//! The service's processes: one `platform-stub` (the account platform) for the whole run, and
//! `server` processes on the run's database, each on a free port with the bench's settings.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use base64::Engine;
use rand::RngCore;
use tokio::process::Command;

use super::process::{Proc, free_port};

/// `bytes` random bytes as hex: names and secrets no other run shares.
pub fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The platform stub the servers ask about tokens and organizations.
#[derive(Debug)]
pub struct Stub {
    proc: Proc,
    pub url: String,
    pub service_token: String,
}

impl Stub {
    pub async fn start(bin: &Path, logs: &Path, http: &reqwest::Client) -> anyhow::Result<Stub> {
        Self::start_with_directory(bin, logs, http, None).await
    }

    /// [`Stub::start`] answering from the directory file `directory` (the demo one if `None`).
    pub async fn start_with_directory(
        bin: &Path,
        logs: &Path,
        http: &reqwest::Client,
        directory: Option<&Path>,
    ) -> anyhow::Result<Stub> {
        let port = free_port()?;
        let url = format!("http://127.0.0.1:{port}");
        let service_token = format!("bench-service-token-{}", random_hex(12));
        crate::say!("starting platform-stub on {url}");
        let mut cmd = Command::new(bin.join("platform-stub"));
        cmd.args(["--bind", &format!("127.0.0.1:{port}")])
            .env("PLATFORM_STUB_SERVICE_TOKEN", &service_token);
        if let Some(directory) = directory {
            cmd.arg("--directory").arg(directory);
        }
        let mut proc = Proc::spawn("platform-stub", cmd, logs)?;
        proc.wait_port(port, Duration::from_secs(10)).await?;
        // Any answer means it serves; /v1/me without a token is a 401.
        let _ = http.get(format!("{url}/v1/me")).send().await;
        Ok(Stub {
            proc,
            url,
            service_token,
        })
    }

    pub async fn stop(self) -> anyhow::Result<()> {
        self.proc.stop().await
    }
}

/// What every server process of the run shares.
#[derive(Debug, Clone)]
pub struct ServerEnv {
    pub bin: PathBuf,
    pub logs: PathBuf,
    pub database_url: String,
    pub stub_url: String,
    pub stub_token: String,
    /// One key for the run: the gateway unseals what server G sealed.
    pub secrets_key: String,
    pub pool_size: u32,
    pub http: reqwest::Client,
}

impl ServerEnv {
    pub fn new(
        bin: &Path,
        logs: &Path,
        database_url: &str,
        stub: &Stub,
        pool_size: u32,
        http: &reqwest::Client,
    ) -> ServerEnv {
        let mut key = [0u8; 32];
        rand::thread_rng().fill_bytes(&mut key);
        ServerEnv {
            bin: bin.to_owned(),
            logs: logs.to_owned(),
            database_url: database_url.to_owned(),
            stub_url: stub.url.clone(),
            stub_token: stub.service_token.clone(),
            secrets_key: base64::engine::general_purpose::STANDARD.encode(key),
            pool_size,
            http: http.clone(),
        }
    }

    /// `server` on a free port, `RECONCILER_WORKERS=0` (no provisioning competes with the
    /// measure) and a zone too large to refuse a create; ready once `/readyz` answers 200.
    pub async fn start(&self, name: &str, token_cache_ttl_s: u32) -> anyhow::Result<Server> {
        self.start_logging(name, token_cache_ttl_s, "warn").await
    }

    /// [`Env::start`] with `RUST_LOG=rust_log` (the bench's servers log at `warn` otherwise).
    pub async fn start_logging(
        &self,
        name: &str,
        token_cache_ttl_s: u32,
        rust_log: &str,
    ) -> anyhow::Result<Server> {
        self.start_with(name, token_cache_ttl_s, rust_log, &[])
            .await
    }

    /// [`Env::start_logging`] with `extra` settings over the bench's own (provisioning workers
    /// on, say).
    pub async fn start_with(
        &self,
        name: &str,
        token_cache_ttl_s: u32,
        rust_log: &str,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<Server> {
        let port = free_port()?;
        let url = format!("http://127.0.0.1:{port}");
        crate::say!("starting server {name} on {url} (TOKEN_CACHE_TTL_S={token_cache_ttl_s})");
        let mut cmd = Command::new(self.bin.join("server"));
        cmd.envs([
            ("DATABASE_URL", self.database_url.as_str()),
            ("BIND_ADDR", &format!("127.0.0.1:{port}")),
            ("ACCOUNT_PLATFORM_URL", &self.stub_url),
            ("ACCOUNT_PLATFORM_SERVICE_TOKEN", &self.stub_token),
            ("SECRETS_KEY", &self.secrets_key),
            ("RECONCILER_WORKERS", "0"),
            ("ZONE_MAX_NODES", "1000000000"),
            ("DATABASE_POOL_SIZE", &self.pool_size.to_string()),
            ("TOKEN_CACHE_TTL_S", &token_cache_ttl_s.to_string()),
            // The load comes from one token by design: measured without fair-use limits, but
            // for the per-address one, which only requests without a valid token meet (item 5
            // measures it at its default).
            ("RATE_LIMIT_PER_TOKEN", "0"),
            ("RATE_LIMIT_WRITES_PER_TOKEN", "0"),
            ("RATE_LIMIT_WRITES_PER_ORGANIZATION", "0"),
            ("RUST_LOG", rust_log),
        ]);
        cmd.envs(extra.iter().copied());
        let mut proc = Proc::spawn(&format!("server-{name}"), cmd, &self.logs)?;
        proc.wait_ok(
            &self.http,
            &format!("{url}/readyz"),
            Duration::from_secs(30),
        )
        .await?;
        Ok(Server { proc, url })
    }
}

/// A running server process.
#[derive(Debug)]
pub struct Server {
    proc: Proc,
    pub url: String,
}

impl Server {
    pub fn pid(&self) -> u32 {
        self.proc.pid()
    }

    /// Its `/metrics` text.
    pub async fn metrics(&self, http: &reqwest::Client) -> anyhow::Result<String> {
        http.get(format!("{}/metrics", self.url))
            .send()
            .await?
            .error_for_status()?
            .text()
            .await
            .with_context(|| format!("/metrics of {}", self.proc.name()))
    }

    /// Its resident memory (VmRSS), in kB.
    pub fn rss_kb(&self) -> anyhow::Result<u64> {
        crate::parse::proc_kb(self.pid(), "VmRSS")
            .with_context(|| format!("no VmRSS for {}", self.proc.name()))
    }

    pub async fn stop(self) -> anyhow::Result<()> {
        self.proc.stop().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_hex_has_two_digits_a_byte() {
        let h = random_hex(6);
        assert_eq!(h.len(), 12);
        assert!(h.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
