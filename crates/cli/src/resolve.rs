//! Objects named the way people name them: a cluster by its name or id (within the
//! organization), an Elastic IP or firewall rule by its name or id (within the cluster), an
//! auth server by its name (within the organization and, when needed, the environment) or id.

use serde_json::Value;
use uuid::Uuid;
use wire::auth_server::{AuthServerList, AuthServerView};
use wire::cluster::{Cluster, ClusterList};

use crate::client::{Api, Call};
use crate::error::CliError;

/// A name the user typed, as one path segment: every byte but the unreserved ones
/// percent-encoded, so `/`, `?`, `#` or `%` cannot reach another route, and `.`/`..` refused,
/// since URL parsers resolve them (even encoded) to a parent: `node-pool delete demo ../..`
/// must not become a DELETE of something else.
pub fn segment<'a>(what: &str, typed: &'a str) -> Result<std::borrow::Cow<'a, str>, CliError> {
    if matches!(typed, "" | "." | "..") {
        return Err(CliError::usage(format!("{typed:?} is not a {what} name")));
    }
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    if typed.bytes().all(unreserved) {
        return Ok(std::borrow::Cow::Borrowed(typed));
    }
    Ok(std::borrow::Cow::Owned(
        typed
            .bytes()
            .map(|b| {
                if unreserved(b) {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect(),
    ))
}

/// The largest page the API gives.
const PAGE: u32 = 100;

/// A cluster named by the user.
#[derive(Debug, Clone)]
pub struct ClusterRef {
    pub id: Uuid,
    /// What the user typed, for messages and the commands suggested to them.
    pub label: String,
}

impl ClusterRef {
    pub fn path(&self) -> String {
        format!("/v1/public/clusters/{}", self.id)
    }
}

/// An id as given, or the cluster of that name in the organization (found page by page).
pub async fn cluster(api: &Api, name_or_id: &str) -> Result<ClusterRef, CliError> {
    if let Ok(id) = Uuid::parse_str(name_or_id) {
        return Ok(ClusterRef {
            id,
            label: name_or_id.to_owned(),
        });
    }
    find_cluster(api, name_or_id).await.map(|c| ClusterRef {
        id: c.id,
        label: name_or_id.to_owned(),
    })
}

async fn find_cluster(api: &Api, name: &str) -> Result<Cluster, CliError> {
    let mut page: u32 = 1;
    loop {
        let list: ClusterList = api
            .json(
                &Call::get("/v1/public/clusters")
                    .query("page", page)
                    .query("size", PAGE),
            )
            .await?;
        let seen = u64::from(page.saturating_sub(1)) * u64::from(PAGE) + list.items.len() as u64;
        if let Some(c) = list.items.into_iter().find(|c| c.name == name) {
            return Ok(c);
        }
        if seen >= list.total || page >= 10_000 {
            return Err(CliError::NotFound(format!(
                "no cluster named {name:?}{}",
                in_org(api)
            )));
        }
        page += 1;
    }
}

fn in_org(api: &Api) -> String {
    api.organization()
        .map(|o| format!(" in organization {o}"))
        .unwrap_or_default()
}

/// The id of an item of a cluster's list (`elastic-ips`, `firewall-rules`) by id or `name`.
pub async fn item_id(
    api: &Api,
    cluster: &ClusterRef,
    collection: &str,
    what: &str,
    name_or_id: &str,
) -> Result<String, CliError> {
    if Uuid::parse_str(name_or_id).is_ok() {
        return Ok(name_or_id.to_owned());
    }
    let list: Value = api
        .send(&Call::get(format!("{}/{collection}", cluster.path())))
        .await?
        .json()?;
    list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|item| item["name"] == name_or_id)
        .and_then(|item| item["id"].as_str().map(str::to_owned))
        .ok_or_else(|| {
            CliError::NotFound(format!(
                "no {what} named {name_or_id:?} in cluster {}",
                cluster.label
            ))
        })
}

/// An auth server by id, or by name within the organization (and `environment` when given).
pub async fn auth_server(
    api: &Api,
    name_or_id: &str,
    environment: Option<&str>,
) -> Result<AuthServerView, CliError> {
    if Uuid::parse_str(name_or_id).is_ok() {
        return api
            .json(&Call::get(format!(
                "/v1/public/gateway/auth-servers/{name_or_id}"
            )))
            .await;
    }
    let mut call = Call::get("/v1/public/gateway/auth-servers");
    if let Some(env) = environment {
        call = call.query("environment", env);
    }
    let list: AuthServerList = api.json(&call).await?;
    let mut found: Vec<AuthServerView> = list
        .items
        .into_iter()
        .filter(|s| s.name == name_or_id)
        .collect();
    match found.len() {
        0 => Err(CliError::NotFound(format!(
            "no auth server named {name_or_id:?}{}{}",
            environment
                .map(|e| format!(" in environment {e}"))
                .unwrap_or_default(),
            in_org(api)
        ))),
        1 => Ok(found.remove(0)),
        _ => {
            let envs: Vec<String> = found.iter().map(|s| s.environment.clone()).collect();
            Err(CliError::usage(format!(
                "{name_or_id:?} names an auth server in several environments ({}): add --environment",
                envs.join(", ")
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a person types as a pool, node or credential never reaches another route.
    #[test]
    fn a_typed_name_is_one_path_segment() {
        let table = [
            ("default", Some("default")),
            ("a.b", Some("a.b")),
            ("../other", Some("..%2Fother")),
            ("x/../../y", Some("x%2F..%2F..%2Fy")),
            ("%2e%2e", Some("%252e%252e")),
            ("a?b#c", Some("a%3Fb%23c")),
            ("..", None),
            (".", None),
            ("", None),
        ];
        for (typed, sent) in table {
            assert_eq!(
                segment("node pool", typed).ok().as_deref(),
                sent,
                "{typed:?}"
            );
        }
    }
}
