//! The processes a run starts. Each is the leader of a process group of its own, so that
//! stopping it stops what it started too (nginx's workers), and it is killed when its handle is
//! dropped: a failed item, an error or Ctrl-C never leaves one behind.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use rustix::process::{Pid, Signal, kill_process_group};
use tokio::process::{Child, Command};

/// A loopback port nothing listens on right now.
pub fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// Sends `signal` to the process group `pid` leads. Never to a pid that could name the caller's
/// own group or every process (`0`, `1`, `-1` mean those to kill(2)).
fn signal_group(pid: u32, signal: Signal) {
    let Some(pid) = i32::try_from(pid).ok().filter(|p| *p > 1) else {
        return;
    };
    if let Some(pid) = Pid::from_raw(pid) {
        let _ = kill_process_group(pid, signal);
    }
}

/// The last `lines` lines of a log file, for an error message.
pub fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A long-running child: a server, a proxy, the OIDC issuer.
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Child,
    pid: u32,
    log: PathBuf,
    stopped: bool,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr in `logs/NAME.log`.
    pub fn spawn(name: &str, mut cmd: Command, logs: &Path) -> anyhow::Result<Proc> {
        let log = logs.join(format!("{name}.log"));
        let file =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        cmd.stdin(Stdio::null())
            .stdout(file.try_clone()?)
            .stderr(file)
            .process_group(0)
            .kill_on_drop(true);
        let child = cmd.spawn().with_context(|| format!("starting {name}"))?;
        let pid = child
            .id()
            .with_context(|| format!("{name} exited at once"))?;
        Ok(Proc {
            name: name.to_owned(),
            child,
            pid,
            log,
            stopped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// An error naming the log when the process has exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{} exited ({status}); the end of {}:\n{}",
                self.name,
                self.log.display(),
                tail(&self.log, 20)
            );
        }
        Ok(())
    }

    /// Until 127.0.0.1:`port` accepts connections.
    pub async fn wait_port(&mut self, port: u16, within: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(());
            }
            self.check_running()?;
            if start.elapsed() > within {
                bail!(
                    "{} did not listen on :{port} within {within:?} (log: {})",
                    self.name,
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Until `url` answers 2xx.
    pub async fn wait_ok(
        &mut self,
        http: &reqwest::Client,
        url: &str,
        within: Duration,
    ) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            let answered = http.get(url).send().await;
            if answered.is_ok_and(|r| r.status().is_success()) {
                return Ok(());
            }
            self.check_running()?;
            if start.elapsed() > within {
                bail!(
                    "{} did not answer 200 at {url} within {within:?} (log: {})",
                    self.name,
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGTERM to its group and a wait for the leader; SIGKILL after 15 s. Then SIGKILL to the
    /// group in case a member outlived its leader.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.stopped = true;
        signal_group(self.pid, Signal::TERM);
        let waited = tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await;
        if waited.is_err() {
            crate::say!(
                "{} did not stop within 15 s of SIGTERM: killing it",
                self.name
            );
        }
        signal_group(self.pid, Signal::KILL);
        if waited.is_err() {
            self.child.wait().await?;
        }
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.stopped {
            signal_group(self.pid, Signal::KILL);
        }
    }
}

/// Runs a command to its end, output captured (killed if the run is dropped).
pub async fn output(program: impl AsRef<Path>, args: &[&str]) -> anyhow::Result<Output> {
    let program = program.as_ref();
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("running {}", program.display()))
}

/// The first line a tool prints about itself (stdout, else stderr), or why there is none.
pub async fn version(program: impl AsRef<Path>, args: &[&str]) -> String {
    match output(program, args).await {
        Ok(o) => {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_owned()
        }
        Err(e) => format!("unknown ({e:#})"),
    }
}

/// `name` on the PATH, else in `/usr/sbin` (nginx is there, off most users' PATH).
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn tails_a_log() {
        let dir = std::env::temp_dir().join(format!("bench-tail-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("x.log");
        std::fs::write(&f, "a\nb\nc\n").unwrap();
        assert_eq!(tail(&f, 2), "b\nc");
        assert_eq!(tail(&f, 9), "a\nb\nc");
        assert_eq!(tail(&dir.join("missing"), 2), "");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_dropped_process_is_killed_with_its_group() {
        let dir = std::env::temp_dir().join(format!("bench-proc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut cmd = Command::new("sh");
        // A child of the child: it must die with the group.
        cmd.args(["-c", "sleep 30 & echo $! ; wait"]);
        let mut p = Proc::spawn("sleeper", cmd, &dir).unwrap();
        p.check_running().unwrap();
        let pid = p.pid();
        let log = dir.join("sleeper.log");
        let mut grandchild = String::new();
        for _ in 0..50 {
            grandchild = std::fs::read_to_string(&log).unwrap_or_default();
            if !grandchild.trim().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let grandchild: u32 = grandchild.trim().parse().unwrap();
        drop(p);
        tokio::time::sleep(Duration::from_millis(200)).await;
        let alive = |pid: u32| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| !s.contains(") Z "))
                .unwrap_or(false)
        };
        assert!(!alive(grandchild), "the grandchild outlived its group");
        assert!(!alive(pid), "the child outlived its handle");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
