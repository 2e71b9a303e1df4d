//! `--wait`: following a change until it settles, by the cluster's state long-poll (one
//! request held until something under the cluster changes), not by polling every second.
//!
//! On a terminal the progress is one line redrawn in place (indicatif); elsewhere each new
//! state is a line on stderr. Ctrl-C stops the waiting only: the change goes on, and the
//! message says how to follow it again.

use std::future::Future;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use wire::cluster::ClusterState;

use crate::client::{Api, Call};
use crate::error::CliError;
use crate::output::printable;
use crate::resolve::ClusterRef;

/// The longest a single long-poll is held.
const HOLD_SECONDS: u64 = 25;

/// Where a change stands, as a check reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Still going; the label says where (a phase, a status).
    Pending(String),
    /// Settled as asked.
    Done(String),
    /// Settled badly; the reason in words.
    Failed(String),
}

/// What is followed and how to pick it up again.
pub struct Follow<'a> {
    pub api: &'a Api,
    pub cluster: &'a ClusterRef,
    /// `cluster prod-1`, `node pool web`…
    pub what: String,
    /// The command that follows it again, said after Ctrl-C or a timeout.
    pub resume: String,
    pub timeout: Duration,
    pub interactive: bool,
}

impl Follow<'_> {
    /// Runs `check` at the start and after each change under the cluster, until it says
    /// `Done` (Ok) or `Failed` (CliError::Failed), the time is up, or Ctrl-C.
    pub async fn until<F, Fut>(&self, check: F) -> Result<String, CliError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Progress, CliError>>,
    {
        let bar = self.bar();
        let outcome = tokio::select! {
            outcome = self.follow(check, &bar) => outcome,
            _ = tokio::signal::ctrl_c() => Err(CliError::Interrupted(format!(
                "stopped waiting; {} goes on as it is. Follow it again with: {}",
                self.what, self.resume
            ))),
        };
        bar.finish_and_clear();
        // The line drawn in place is gone: where it settled stays, as a line of its own.
        if let Ok(label) = &outcome
            && !bar.is_hidden()
        {
            eprintln!("{}: {}", self.what, printable(label));
        }
        outcome
    }

    fn bar(&self) -> ProgressBar {
        if !self.interactive {
            return ProgressBar::hidden();
        }
        let bar = ProgressBar::new_spinner();
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        bar
    }

    async fn follow<F, Fut>(&self, mut check: F, bar: &ProgressBar) -> Result<String, CliError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<Progress, CliError>>,
    {
        let started = Instant::now();
        let deadline = started + self.timeout;
        let mut since = 0;
        let mut last = String::new();
        loop {
            let label = match check().await? {
                Progress::Done(label) => {
                    self.say(bar, &label, &mut last);
                    return Ok(label);
                }
                Progress::Failed(reason) => {
                    return Err(CliError::Failed(format!("{} failed: {reason}", self.what)));
                }
                Progress::Pending(label) => label,
            };
            self.say(bar, &label, &mut last);
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(CliError::Failed(format!(
                    "{} is still {label} after {}s; it goes on. Follow it again with: {}",
                    self.what,
                    self.timeout.as_secs(),
                    self.resume
                )));
            }
            let hold = left.as_secs().clamp(1, HOLD_SECONDS);
            let call = Call::get(format!("{}/state", self.cluster.path()))
                .query("since", since)
                .query("timeout_seconds", hold);
            match self
                .api
                .send_within(&call, Duration::from_secs(hold + 30))
                .await
            {
                Ok(answer) => since = answer.parse::<ClusterState>()?.version,
                // The cluster is gone: the check says what that means for what is followed.
                Err(e) if e.is_status(404) => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Shows a new state: on the progress line, or as a line of its own.
    fn say(&self, bar: &ProgressBar, label: &str, last: &mut String) {
        if label == last {
            return;
        }
        *last = label.to_owned();
        // indicatif draws nothing where it sees no capable terminal (TERM unset or dumb):
        // plain lines there.
        if !bar.is_hidden() {
            bar.set_message(format!("{}: {}", self.what, printable(label)));
        } else {
            eprintln!("{}: {}", self.what, printable(label));
        }
    }
}
