//! The public API's JSON shapes: the bodies the server reads and the answers it writes, with
//! their OpenAPI schemas.
//!
//! The domain says what a cluster, a pool or an Elastic IP is; this crate says how one is
//! written on the wire, so that the server and its clients (a CLI, a generated SDK) read one
//! definition and cannot drift. It has no HTTP framework: a client links it without actix.
//! Each answer is built from the domain value it shows (`From<&domain value>`). The request
//! bodies without secrets also serialize, for clients: an absent field is left out, and a
//! field set to `Some(None)` (PATCH's "clear it") is written as null.

pub mod approval;
pub mod audit;
pub mod auth_server;
pub mod catalog;
pub mod cluster;
pub mod credential;
pub mod enums;
pub mod networking;
pub mod operation;
pub mod problem;
pub mod request;
pub mod system;
