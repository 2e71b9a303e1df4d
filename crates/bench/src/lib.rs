//! `make bench`: the orchestrator `kubesvc-bench` ([`run`]), its settings, the typed results,
//! the report and its chart, and the pieces the separate load clients share.

/// A progress line on stderr, in the `==> ` style of scripts/*.sh.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("==> {}", format_args!($($arg)*))
    };
}

pub mod args;
pub mod chart;
pub mod parse;
pub mod report;
pub mod results;
pub mod run;
pub mod scale;
pub mod settings;
pub mod stats;
