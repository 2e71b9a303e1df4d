//! The ports: what the domain needs from the outside world, as traits the adapters implement.
//! Each is mockable with mockall (`mocks` feature) so use cases are tested without I/O.

pub mod budget;
pub mod clock;
pub mod identity;
pub mod maintenance;
pub mod provisioning;
pub mod secrets;
pub mod storage;
