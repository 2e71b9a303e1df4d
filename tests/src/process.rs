//! The real `server` binary as a child process, for the tests that kill, restart or read the
//! logs of a process: where it is, a free port for it, a scratch directory, and the process
//! itself with its output captured in a file.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `KUBESVC_SERVER_BIN`, else `server` beside the test binary's `deps` directory (what
/// `cargo build -p server` makes in the same target directory).
pub fn server_bin() -> PathBuf {
    if let Ok(p) = std::env::var("KUBESVC_SERVER_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("server"))
        .unwrap_or_default()
}

/// A port nothing listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// A scratch directory, removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(what: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("kubesvc-test-{what}-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `server` binary on `127.0.0.1:<port>` with exactly these settings (plus `PATH`,
/// `BIND_ADDR`, `RUST_LOG=info` and the rate limits off unless given), stdout and stderr
/// appended to `log`. Killed on drop.
pub struct ServerProcess {
    child: Child,
    pub base: String,
    log: PathBuf,
}

impl ServerProcess {
    pub fn start(settings: &[(&str, String)], port: u16, log: PathBuf) -> ServerProcess {
        let bin = server_bin();
        assert!(
            bin.exists(),
            "build the server first (cargo build -p server): {}",
            bin.display()
        );
        let open = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .unwrap_or_else(|e| panic!("{}: {e}", log.display()))
        };
        let mut cmd = Command::new(bin);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("BIND_ADDR", format!("127.0.0.1:{port}"))
            .env("RUST_LOG", "info")
            // As in-process test servers: no fair-use limits unless a test sets them.
            .env("RATE_LIMIT_PER_TOKEN", "0")
            .env("RATE_LIMIT_WRITES_PER_TOKEN", "0")
            .env("RATE_LIMIT_WRITES_PER_ORGANIZATION", "0")
            .env("RATE_LIMIT_UNAUTHENTICATED_PER_ADDRESS", "0")
            .stdin(Stdio::null())
            .stdout(Stdio::from(open()))
            .stderr(Stdio::from(open()));
        for (k, v) in settings {
            cmd.env(k, v);
        }
        ServerProcess {
            child: cmd.spawn().unwrap_or_else(|e| panic!("server: {e}")),
            base: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    /// Until `/healthz` answers 200 (panics after a minute).
    pub async fn wait_healthy(&self, client: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = client
                .get(format!("{}/healthz", self.base))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0);
            if status == 200 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the server never came up:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL: no shutdown at all, as a crash.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and the graceful shutdown (SIGKILL after 20 s), so its log lines are captured.
    pub fn terminate(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill9();
    }

    /// Sends SIGTERM and returns at once (the process drains meanwhile).
    pub fn signal_term(&self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
    }

    /// Until the process exits (panics after `limit`); its exit status.
    pub async fn exited(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit:\n{}",
                self.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn log_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned()
    }

    /// The last 30 lines, for failure messages.
    pub fn log_tail(&self) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
