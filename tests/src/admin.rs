//! The real `kubesvc-admin` binary, run against a test's database.

use std::path::PathBuf;
use std::process::Command;

/// `KUBESVC_ADMIN_BIN`, else `kubesvc-admin` beside the test binary's `deps` directory (what
/// `cargo build -p kubesvc-admin` makes in the same target directory).
pub fn admin_bin() -> PathBuf {
    if let Ok(p) = std::env::var("KUBESVC_ADMIN_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("kubesvc-admin"))
        .unwrap_or_default()
}

/// What one run printed and how it exited.
#[derive(Debug)]
pub struct AdminRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl AdminRun {
    /// Panics unless the run exited with `code`.
    pub fn expect(self, code: i32) -> AdminRun {
        assert_eq!(
            self.code, code,
            "kubesvc-admin exited {}: {self:#?}",
            self.code
        );
        self
    }
}

/// The operator's tool on one database with one key ring.
#[derive(Clone)]
pub struct Admin {
    pub env: Vec<(String, String)>,
}

impl Admin {
    pub fn new(database_url: &str, secrets_key: &str) -> Admin {
        Admin {
            env: vec![
                ("DATABASE_URL".into(), database_url.into()),
                ("SECRETS_KEY".into(), secrets_key.into()),
            ],
        }
    }

    /// The same tool with one more (or a replaced) setting.
    pub fn with(&self, name: &str, value: &str) -> Admin {
        let mut env: Vec<(String, String)> = self
            .env
            .iter()
            .filter(|(k, _)| k != name)
            .cloned()
            .collect();
        env.push((name.into(), value.into()));
        Admin { env }
    }

    /// Runs `kubesvc-admin args…` to the end (blocking: call it from `spawn_blocking` when a
    /// server in the same process must keep answering).
    pub fn run(&self, args: &[&str]) -> AdminRun {
        let bin = admin_bin();
        let out = Command::new(&bin)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {} (build it: cargo build -p kubesvc-admin): {e}",
                    bin.display()
                )
            });
        AdminRun {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// `run` off the async workers.
    pub async fn run_async(&self, args: &[&str]) -> AdminRun {
        let (me, args): (Admin, Vec<String>) =
            (self.clone(), args.iter().map(|a| (*a).to_owned()).collect());
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            me.run(&args)
        })
        .await
        .unwrap_or_else(|e| panic!("kubesvc-admin task: {e}"))
    }
}
