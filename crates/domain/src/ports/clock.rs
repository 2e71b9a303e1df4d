//! Time and identifiers come through ports so tests are deterministic.

use chrono::{DateTime, Utc};
use uuid::Uuid;

#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

#[cfg_attr(any(test, feature = "mocks"), mockall::automock)]
pub trait IdSource: Send + Sync {
    fn new_id(&self) -> Uuid;
}
