//! The drafts of the commands clients send, and the rules that turn them into validated
//! values. A draft holds what the client said, as loosely as it may say it (every field
//! optional, text not yet parsed); `validate` collects every problem with its field path, so
//! a client learns all of them at once. Reading a draft from JSON is the API's business (the
//! `wire` crate's request shapes convert into these); an internal tool builds them directly.

pub mod audit;
pub mod auth_server;
pub mod cluster;
pub mod elastic_ip;
pub mod firewall;
pub mod node_pool;
pub mod precondition;
pub mod upgrade;

pub(crate) fn check_len(
    v: &mut crate::validation::Violations,
    field: &str,
    value: &str,
    max: usize,
) {
    let n = value.chars().count();
    if n > max {
        v.push(field, format!("must be at most {max} characters (got {n})"));
    }
}
