//! Black-box tests of the whole service over HTTP: real PostgreSQL, the stub account
//! platform over real HTTP, the full server. One binary, modules by subject.
#![allow(clippy::unwrap_used)]

mod auth;
mod auth_servers;
mod bad_input;
mod behaviours;
mod errors;
mod idempotency;
mod limits;
mod pagination;
mod regressions;
mod roles;
