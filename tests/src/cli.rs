//! The `kubesvc` binary as its users run it: a child process with its own HOME, config
//! directory and KUBECONFIG, and nothing else of the test's environment.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::process::Scratch;

/// `KUBESVC_CLI_BIN`, else `kubesvc` beside the test binary's `deps` directory (what
/// `cargo build -p kubesvc` makes in the same target directory).
pub fn cli_bin() -> PathBuf {
    if let Ok(p) = std::env::var("KUBESVC_CLI_BIN") {
        return p.into();
    }
    let exe = std::env::current_exe().unwrap_or_default();
    exe.parent()
        .and_then(|d| d.parent())
        .map(|d| d.join("kubesvc"))
        .unwrap_or_default()
}

/// One user's machine: a home directory of their own.
pub struct CliUser {
    pub home: Scratch,
    /// Extra variables on every run (KUBESVC_URL, KUBESVC_TOKEN…).
    pub env: Vec<(String, String)>,
}

/// What one run gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl From<std::process::Output> for Run {
    fn from(out: std::process::Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Standard output as JSON (for `-o json` runs).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }

    /// Asserts the exit code, showing both streams when it differs.
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(
            self.code, code,
            "exit code\nstdout: {}\nstderr: {}",
            self.stdout, self.stderr
        );
        self
    }
}

impl CliUser {
    pub fn new() -> CliUser {
        let bin = cli_bin();
        assert!(
            bin.exists(),
            "build the CLI first (cargo build -p kubesvc): {}",
            bin.display()
        );
        CliUser {
            home: Scratch::new("cli-home"),
            env: Vec::new(),
        }
    }

    /// A user whose every run talks to `url` with `token` in organization `org`, through the
    /// environment (no config file).
    pub fn with_env(url: &str, token: &str, org: &str) -> CliUser {
        let mut user = CliUser::new();
        for (k, v) in [
            ("KUBESVC_URL", url),
            ("KUBESVC_TOKEN", token),
            ("KUBESVC_ORGANIZATION", org),
        ] {
            user.env.push((k.to_owned(), v.to_owned()));
        }
        user
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.home.path(".kube/config")
    }

    pub fn config_file(&self) -> PathBuf {
        self.home.path(".config/kubesvc/config.toml")
    }

    fn command(&self, program: &std::path::Path, args: &[&str], extra: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.home.0)
            .env("XDG_CONFIG_HOME", self.home.path(".config"))
            .env("KUBECONFIG", self.kubeconfig());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd
    }

    /// Runs `kubesvc ARGS` with `stdin` as its input, off the async runtime (the server under
    /// test runs on it).
    pub async fn run_with(&self, args: &[&str], stdin: &str, extra: &[(&str, &str)]) -> Run {
        let cmd = self.command(&cli_bin(), args, extra);
        Self::fed(cmd, stdin, args.join(" ")).await
    }

    /// Runs `kubesvc ARGS` on a terminal (util-linux `script` gives it a pty) where a person
    /// types `typed`; what the terminal showed (the typing echoed) is the stdout.
    pub async fn on_terminal(&self, args: &[&str], typed: &str) -> Run {
        let line = format!(
            "TERM=xterm-256color {} {}",
            cli_bin().display(),
            args.join(" ")
        );
        let cmd = self.command(
            std::path::Path::new("script"),
            &["-qec", &line, "/dev/null"],
            &[],
        );
        Self::fed(cmd, typed, line.clone()).await
    }

    async fn fed(mut cmd: Command, stdin: &str, shown: String) -> Run {
        let input = stdin.to_owned();
        tokio::task::spawn_blocking(move || {
            let mut child = cmd
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("kubesvc {shown}: {e}"));
            if let Some(mut pipe) = child.stdin.take() {
                let _ = pipe.write_all(input.as_bytes());
            }
            let out = child
                .wait_with_output()
                .unwrap_or_else(|e| panic!("kubesvc {shown}: {e}"));
            Run::from(out)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs `kubesvc ARGS`, sends it SIGINT (what Ctrl-C sends) once its stderr shows
    /// `after`, and gives what it did then.
    pub async fn interrupted(&self, args: &[&str], after: &str) -> Run {
        let mut cmd = self.command(&cli_bin(), args, &[]);
        let (shown, after) = (args.join(" "), after.to_owned());
        tokio::task::spawn_blocking(move || {
            let mut child = cmd
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("kubesvc {shown}: {e}"));
            let mut stderr =
                std::io::BufReader::new(child.stderr.take().unwrap_or_else(|| panic!("no stderr")));
            let mut seen = String::new();
            while !seen.contains(&after) {
                let mut line = String::new();
                if std::io::BufRead::read_line(&mut stderr, &mut line).unwrap_or(0) == 0 {
                    break;
                }
                seen.push_str(&line);
            }
            let _ = Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
            let out = child
                .wait_with_output()
                .unwrap_or_else(|e| panic!("kubesvc {shown}: {e}"));
            Run {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: seen + &rest,
            }
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    }

    pub async fn run(&self, args: &[&str]) -> Run {
        self.run_with(args, "", &[]).await
    }

    /// Runs another program (kubectl, script) in this user's environment.
    pub async fn other(&self, program: &str, args: &[&str]) -> Run {
        let mut cmd = self.command(std::path::Path::new(program), args, &[]);
        let shown = format!("{program} {}", args.join(" "));
        tokio::task::spawn_blocking(move || {
            let out = cmd
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("{shown}: {e}"));
            Run::from(out)
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Default for CliUser {
    fn default() -> Self {
        CliUser::new()
    }
}
