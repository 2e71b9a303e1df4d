//! Black-box tests of the whole service over HTTP: real PostgreSQL, the stub account
//! platform over real HTTP, the full server. One binary; a module per resource, and
//! `requests` for what applies to every route. Helpers live in the blackbox crate (tests/src).
#![allow(clippy::unwrap_used)]

mod access;
mod admin;
mod audit;
mod auth_servers;
mod cli;
mod clusters;
mod console;
mod console_approvals;
mod console_auth_servers;
mod console_cluster_pages;
mod idempotency;
mod mcp;
mod monitoring;
mod networking;
mod node_pools;
mod operations;
mod requests;
