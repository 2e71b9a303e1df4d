//! The domain of the managed-Kubernetes cluster service and the gateway's auth servers: every
//! rule of the product, the state machines, the access policy, the ports the adapters implement and
//! the use cases that tie them together. Pure: no database, HTTP, runtime or other I/O here.

pub mod access;
pub mod error;
pub mod input;
pub mod maintenance;
pub mod model;
pub mod names;
pub mod ports;
pub mod reconcile;
pub mod rules;
pub mod service;
pub mod validation;

#[cfg(any(test, feature = "mocks"))]
pub mod testing;

pub use error::DomainError;
