//! How requests are refused, across every route: the error table, hostile input, the
//! limits of query parameters and keys, and what schema fuzzing found.

mod bad_input;
mod conditional;
mod errors;
mod examples;
mod limits;
mod rate_limits;
mod regressions;
