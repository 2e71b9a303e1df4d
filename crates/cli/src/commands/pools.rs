//! `node-pool add|list|scale|update|delete` and `node list|delete`.

use domain::model::node_pool::PoolStatus;
use reqwest::Method;
use serde_json::{Value, json};
use wire::cluster::{NodeList, NodePool, NodePoolList};
use wire::request::node_pool::{NodePoolPatch, NodePoolRequest, TaintRequest};

use super::clusters::{follow, to_json};
use super::{key, pairs};
use crate::args::{NodeCommand, NodePoolCommand, ScaleFlags, WaitFlags};
use crate::client::Call;
use crate::confirm::{Answer, Question};
use crate::error::CliError;
use crate::output::{Table, View, age, cell};
use crate::resolve::{self, ClusterRef};
use crate::session::Session;
use crate::wait::Progress;

/// `--taint` values as the API takes them, split as `kubectl taint` writes them.
fn taint_list(texts: &[String]) -> Vec<TaintRequest> {
    texts
        .iter()
        .map(|t| domain::input::node_pool::TaintRequest::from_text(t).into())
        .collect()
}

/// What someone who tries to change a pool's machine size is told.
const REPLACE_POOL: &str = "a node pool's machine size cannot change. Replace the pool instead: \
add a pool of the new size (kubesvc node-pool add CLUSTER NEW-POOL --size SIZE --count N --wait), \
move the workloads to it, then delete the old pool (kubesvc node-pool delete CLUSTER OLD-POOL)";

pub async fn pools(s: &Session, command: NodePoolCommand) -> Result<(), CliError> {
    match command {
        NodePoolCommand::Add {
            cluster,
            pool,
            size,
            scale,
            labels,
            taints,
            tags,
            wait,
            key: k,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let body = NodePoolRequest {
                name: Some(pool.clone()),
                size: Some(size),
                count: scale.count.map(i64::from),
                auto_scale: auto_scale(&scale),
                min_nodes: scale.min_nodes.map(i64::from),
                max_nodes: scale.max_nodes.map(i64::from),
                labels: (!labels.is_empty())
                    .then(|| pairs("--label", &labels))
                    .transpose()?,
                taints: (!taints.is_empty()).then(|| taint_list(&taints)),
                tags: (!tags.is_empty())
                    .then(|| pairs("--tag", &tags))
                    .transpose()?,
                ..NodePoolRequest::default()
            };
            let call = Call::new(Method::POST, format!("{}/node-pools", cluster.path()))
                .body(to_json(&body)?)
                .key(Some(&key(&k)));
            let answer = s.api.send(&call).await?;
            finish(s, &cluster, &pool, answer.json()?, &wait).await
        }
        NodePoolCommand::List { cluster } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let answer = s
                .api
                .send(&Call::get(format!("{}/node-pools", cluster.path())))
                .await?;
            let list: NodePoolList = answer.parse()?;
            s.out.show(&pool_view(&list.items, answer.json()?))
        }
        NodePoolCommand::Scale {
            cluster,
            pool,
            scale,
            size,
            wait,
            key: k,
        } => {
            if size.is_some() {
                return Err(CliError::usage(REPLACE_POOL));
            }
            let patch = NodePoolPatch {
                count: scale.count.map(|c| Some(i64::from(c))),
                auto_scale: auto_scale(&scale).map(Some),
                min_nodes: scale.min_nodes.map(|n| Some(i64::from(n))),
                max_nodes: scale.max_nodes.map(|n| Some(i64::from(n))),
                ..NodePoolPatch::default()
            };
            if patch == NodePoolPatch::default() {
                return Err(CliError::usage(
                    "nothing to change: give --count, --auto-scale/--no-auto-scale, --min-nodes or --max-nodes",
                ));
            }
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let call = Call::new(
                Method::PATCH,
                format!(
                    "{}/node-pools/{}",
                    cluster.path(),
                    resolve::segment("node pool", &pool)?
                ),
            )
            .body(to_json(&patch)?)
            .key(Some(&key(&k)));
            let answer = s
                .api
                .send(&call)
                .await
                .map_err(advise)
                .map_err(|e| no_such(e, "node pool", &pool, &cluster))?;
            finish(s, &cluster, &pool, answer.json()?, &wait).await
        }
        NodePoolCommand::Update {
            cluster,
            pool,
            labels,
            clear_labels,
            taints,
            clear_taints,
            wait,
            key: k,
        } => {
            let patch = NodePoolPatch {
                labels: match (labels.is_empty(), clear_labels) {
                    (false, _) => Some(Some(pairs("--label", &labels)?)),
                    (true, true) => Some(Some(Default::default())),
                    (true, false) => None,
                },
                taints: match (taints.is_empty(), clear_taints) {
                    (false, _) => Some(Some(taint_list(&taints))),
                    (true, true) => Some(Some(Vec::new())),
                    (true, false) => None,
                },
                ..NodePoolPatch::default()
            };
            if patch == NodePoolPatch::default() {
                return Err(CliError::usage(
                    "nothing to change: give --label, --clear-labels, --taint or --clear-taints",
                ));
            }
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let path = format!(
                "{}/node-pools/{}",
                cluster.path(),
                resolve::segment("node pool", &pool)?
            );
            let call = Call::new(Method::PATCH, path.clone())
                .body(to_json(&patch)?)
                .key(Some(&key(&k)));
            let answer = s
                .api
                .send(&call)
                .await
                .map_err(|e| no_such(e, "node pool", &pool, &cluster))?;
            let raw = answer.json()?;
            if wait.wait {
                let changed: NodePool = serde_json::from_value(raw.clone()).map_err(|e| {
                    CliError::Network(format!(
                        "the API's node pool does not have the expected shape: {e}"
                    ))
                })?;
                let what = format!("labels and taints of node pool {pool}");
                let resume = format!("kubesvc node list {} --pool {pool}", cluster.label);
                follow(s, &cluster, &wait, what, resume)
                    .until(|| async {
                        let nodes: NodeList =
                            s.api.json(&Call::get(format!("{path}/nodes"))).await?;
                        let behind = nodes
                            .items
                            .iter()
                            .filter(|n| n.labels != changed.labels || n.taints != changed.taints)
                            .count();
                        Ok(if behind == 0 {
                            Progress::Done("on every node".into())
                        } else {
                            Progress::Pending(format!(
                                "{behind} node{} to go",
                                if behind == 1 { "" } else { "s" }
                            ))
                        })
                    })
                    .await?;
            }
            finish(
                s,
                &cluster,
                &pool,
                raw,
                &WaitFlags {
                    wait: false,
                    ..wait
                },
            )
            .await
        }
        NodePoolCommand::Delete {
            cluster,
            pool,
            wait,
            yes,
            key: k,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            Question {
                action: format!("delete node pool {pool} of cluster {}", cluster.label),
                consequence: "Its nodes are drained and deleted with it; workloads scheduled \
                              only there have nowhere to run.",
                answer: Answer::Yes,
            }
            .ask(yes)?;
            let call = Call::new(
                Method::DELETE,
                format!(
                    "{}/node-pools/{}",
                    cluster.path(),
                    resolve::segment("node pool", &pool)?
                ),
            )
            .key(Some(&key(&k)));
            let answer = s
                .api
                .send(&call)
                .await
                .map_err(|e| no_such(e, "node pool", &pool, &cluster))?;
            finish(s, &cluster, &pool, answer.json()?, &wait).await
        }
    }
}

/// A 404 on a pool or node of a cluster found by name says which, as a missing cluster does.
fn no_such(e: CliError, what: &str, name: &str, cluster: &ClusterRef) -> CliError {
    if e.is_status(404) {
        CliError::NotFound(format!(
            "no {what} named {name:?} in cluster {} (kubesvc {} list {} shows them)",
            cluster.label,
            if what == "node" { "node" } else { "node-pool" },
            cluster.label
        ))
    } else {
        e
    }
}

/// A 422 about `size` is the server saying what [`REPLACE_POOL`] says.
fn advise(e: CliError) -> CliError {
    match &e {
        CliError::Api {
            problem: Some(p), ..
        } if p.errors.iter().flatten().any(|f| f.field == "size") => CliError::usage(REPLACE_POOL),
        _ => e,
    }
}

fn auto_scale(scale: &ScaleFlags) -> Option<bool> {
    match (scale.auto_scale, scale.no_auto_scale) {
        (true, _) => Some(true),
        (false, true) => Some(false),
        (false, false) => None,
    }
}

/// After a pool write: follow it with --wait (Ready, or gone after a delete), then show it.
async fn finish(
    s: &Session,
    cluster: &ClusterRef,
    pool: &str,
    raw: Value,
    wait: &WaitFlags,
) -> Result<(), CliError> {
    let mut raw = raw;
    if wait.wait {
        let path = format!("{}/node-pools", cluster.path());
        let what = format!("node pool {pool}");
        let resume = format!("kubesvc node-pool list {}", cluster.label);
        let last = follow(s, cluster, wait, what, resume)
            .until(|| async {
                let list: NodePoolList = s.api.json(&Call::get(path.clone())).await?;
                Ok(match list.items.iter().find(|p| p.name == pool) {
                    None => Progress::Done("deleted".into()),
                    Some(p) if p.status == PoolStatus::Ready => Progress::Done("Ready".into()),
                    Some(p) => Progress::Pending(format!(
                        "{} ({} node{})",
                        cell(&json!(p.status)),
                        p.count,
                        if p.count == 1 { "" } else { "s" }
                    )),
                })
            })
            .await;
        match last {
            Ok(label) if label == "deleted" => return Ok(()),
            Ok(_) => {
                let list: Value = s
                    .api
                    .send(&Call::get(format!("{}/node-pools", cluster.path())))
                    .await?
                    .json()?;
                if let Some(p) = list["items"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["name"] == pool)
                {
                    raw = p.clone();
                }
            }
            Err(e) => return Err(e),
        }
    }
    let p: NodePool = serde_json::from_value(raw.clone()).map_err(|e| {
        CliError::Network(format!(
            "the API's node pool does not have the expected shape: {e}"
        ))
    })?;
    s.out.show(&pool_view(&[p], raw))
}

/// Pools as a table and as names; `raw` as the API sent it.
fn pool_view(pools: &[NodePool], raw: Value) -> View {
    let mut table = Table::new(&[
        "NAME",
        "SIZE",
        "COUNT",
        "AUTOSCALE",
        "STATUS",
        "LABELS",
        "TAINTS",
        "AGE",
    ]);
    for p in pools {
        table.row(row(p));
    }
    View {
        raw,
        names: pools.iter().map(|p| p.name.clone()).collect(),
        table,
    }
}

fn row(p: &NodePool) -> Vec<String> {
    vec![
        p.name.clone(),
        p.size.clone(),
        p.count.to_string(),
        autoscale(p.auto_scale, p.min_nodes, p.max_nodes),
        cell(&json!(p.status)),
        p.labels
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
        p.taints
            .iter()
            .map(|t| match t.value.as_str() {
                "" => format!("{}:{}", t.key, t.effect),
                value => format!("{}={value}:{}", t.key, t.effect),
            })
            .collect::<Vec<_>>()
            .join(","),
        age(&p.created_at),
    ]
}

/// `off`, or `min-max`.
pub fn autoscale(on: bool, min: u32, max: Option<u32>) -> String {
    match (on, max) {
        (false, _) => "off".into(),
        (true, Some(max)) => format!("{min}-{max}"),
        (true, None) => format!("{min}-"),
    }
}

pub async fn nodes(s: &Session, command: NodeCommand) -> Result<(), CliError> {
    match command {
        NodeCommand::List { cluster, pool } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let path = match &pool {
                Some(pool) => format!(
                    "{}/node-pools/{}/nodes",
                    cluster.path(),
                    resolve::segment("node pool", pool)?
                ),
                None => format!("{}/nodes", cluster.path()),
            };
            let answer = s
                .api
                .send(&Call::get(path))
                .await
                .map_err(|e| match &pool {
                    Some(pool) => no_such(e, "node pool", pool, &cluster),
                    None => e,
                })?;
            let list: NodeList = answer.parse()?;
            let mut table = Table::new(&["NAME", "POOL", "STATUS", "VERSION", "AGE"]);
            for n in &list.items {
                table.row(vec![
                    n.name.clone(),
                    n.pool.clone(),
                    cell(&json!(n.status)),
                    n.version.clone(),
                    age(&n.created_at),
                ]);
            }
            s.out.show(&View {
                raw: answer.json()?,
                names: list.items.iter().map(|n| n.name.clone()).collect(),
                table,
            })
        }
        NodeCommand::Delete {
            cluster,
            node,
            yes,
            key: k,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            Question {
                action: format!("delete node {node} of cluster {}", cluster.label),
                consequence: "The node is drained and replaced by a new one: its pool keeps \
                              its count.",
                answer: Answer::Yes,
            }
            .ask(yes)?;
            let call = Call::new(
                Method::DELETE,
                format!(
                    "{}/nodes/{}",
                    cluster.path(),
                    resolve::segment("node", &node)?
                ),
            )
            .key(Some(&key(&k)));
            let raw = s
                .api
                .send(&call)
                .await
                .map_err(|e| no_such(e, "node", &node, &cluster))?
                .json()?;
            if !s.out.is_data() {
                eprintln!("Node {node} is being replaced (its pool keeps its count)");
            }
            let mut table = Table::new(&["NAME", "POOL", "STATUS"]);
            table.row(vec![
                super::field(&raw, "name"),
                super::field(&raw, "pool"),
                super::field(&raw, "status"),
            ]);
            s.out.show(&View {
                names: vec![node],
                raw,
                table,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_body_carries_only_what_was_given() {
        let scale = ScaleFlags {
            count: Some(5),
            auto_scale: false,
            no_auto_scale: true,
            min_nodes: None,
            max_nodes: None,
        };
        let patch = NodePoolPatch {
            count: scale.count.map(|c| Some(i64::from(c))),
            auto_scale: auto_scale(&scale).map(Some),
            ..NodePoolPatch::default()
        };
        let body = to_json(&patch).unwrap_or_default();
        assert_eq!(body, json!({"count": 5, "auto_scale": false}));
        assert_eq!(
            serde_json::from_value::<NodePoolPatch>(body).ok(),
            Some(patch)
        );
    }

    #[test]
    fn autoscale_reads_as_a_range() {
        assert_eq!(autoscale(false, 1, Some(5)), "off");
        assert_eq!(autoscale(true, 1, Some(5)), "1-5");
    }
}
