//! The model: the service's objects and their state machines.

pub mod audit;
pub mod auth_server;
pub mod catalog;
pub mod cluster;
pub mod elastic_ip;
pub mod firewall;
pub mod idempotency;
pub mod identity;
pub mod kubeconfig;
pub mod node;
pub mod node_pool;
pub mod secret;
