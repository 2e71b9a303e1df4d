//! Adapters of the identity port: the account platform over HTTP with its caches
//! and metrics, and the in-process development platform with its demo directory.

pub mod config;
pub mod dev;
pub mod http;
pub mod metrics;

pub use config::PlatformConfig;
pub use dev::{DemoToken, DevAccountPlatform, Directory, DirectoryUser, demo_tokens};
pub use http::{BuildError, HttpAccountPlatform};
pub use metrics::{PlatformMetrics, PlatformMetricsSnapshot};
