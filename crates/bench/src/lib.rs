//! The pieces of `make bench` shared by its binaries: latency summaries, parsers of the load
//! tools' output (wrk, pgbench), the report and its chart.

pub mod args;
pub mod chart;
pub mod font;
pub mod parse;
pub mod report;
pub mod stats;
