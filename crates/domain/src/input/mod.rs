//! Request bodies and query parameters as clients send them, and the rules that turn them
//! into validated values. Serde decides the shape (unknown fields and wrong types are 422 at
//! the edge); these rules decide the content, collecting every problem with its field path.

pub mod auth_server;
pub mod cluster;
pub mod elastic_ip;
pub mod firewall;
pub mod node_pool;
pub mod query;

use serde::{Deserialize, Deserializer};

/// For PATCH fields where `null` differs from absent: absent is `None`, `null` is
/// `Some(None)`, a value is `Some(Some(v))`. Use with `#[serde(default)]`.
pub fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

pub(crate) fn check_len(v: &mut crate::validation::Violations, field: &str, value: &str, max: usize) {
    let n = value.chars().count();
    if n > max {
        v.push(field, format!("must be at most {max} characters (got {n})"));
    }
}
