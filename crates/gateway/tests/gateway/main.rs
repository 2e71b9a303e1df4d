//! The gateway end to end: a fresh PostgreSQL database per test, an echo upstream, real HTTP
//! clients (and raw sockets where a client would tidy a request up), and a real OpenID provider
//! (`oidc-provider` from npm) for the OIDC routes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod attacks;
mod basic_and_token;
mod harness;
mod key_rotation;
mod oidc;
mod routes_reload;
mod sign_out;
mod tls;
mod upgrades;
mod upstreams;
