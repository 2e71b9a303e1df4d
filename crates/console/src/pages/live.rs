//! A cluster's page follows what is in progress without a reload: the phase badge, a sentence
//! of progress ("creating the control plane", "2 of 3 nodes ready") and the tab's read-only
//! parts are redrawn when the cluster changes, through the same state long-poll the API offers.
//!
//! The page carries a poller (`#progress`) while something moves. htmx asks
//! `/clusters/{id}/live/{tab}?since=REVISION`; the server holds the request until the cluster
//! changed (or the wait ran out) and answers a new poller plus the parts that changed, each
//! swapped by its id (`hx-swap-oob`). Forms are never part of the answer, so what a person is
//! typing stays. Once nothing moves, the poller says so and stops asking.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::web::{Path, Query};
use api::extract::Id;
use domain::DomainError;
use domain::error::Resource;
use domain::model::cluster::{Cluster, ClusterPhase};
use domain::model::elastic_ip::{ElasticIpStatus, ElasticIpView};
use domain::model::node::{Node, NodeStatus};
use domain::model::node_pool::PoolStatus;
use domain::ports::storage::Freshness;
use maud::{Markup, html};
use serde::Deserialize;

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::pages::cluster::Tab;
use crate::pages::html_page;
use crate::session::Signed;

/// How long one live request waits for a change before it answers anyway.
const LIVE_WAIT_SECONDS: u32 = 25;

/// What a cluster is doing, in a sentence, and whether it may still change by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub words: String,
    pub moving: bool,
}

/// What the cluster's page shows about it beyond the cluster itself.
pub struct Around {
    pub nodes: Vec<Node>,
    pub eips: Vec<ElasticIpView>,
}

impl Around {
    pub async fn of(signed: &Signed, c: &Cluster) -> Result<Around, ConsoleError> {
        let services = &signed.services;
        Ok(Around {
            nodes: services.list_nodes(&signed.caller, c.id, None).await?,
            eips: services.list_elastic_ips(&signed.caller, c.id).await?,
        })
    }
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// The sentence for a cluster and what is under it: the first thing still in progress, or
/// that all is settled.
pub fn progress(c: &Cluster, around: &Around) -> Progress {
    let ready = |pool: Option<&str>| {
        around
            .nodes
            .iter()
            .filter(|n| pool.is_none_or(|p| n.pool.as_str() == p))
            .filter(|n| n.status == NodeStatus::Ready)
            .count()
    };
    let moving = |words: String| Progress {
        words,
        moving: true,
    };
    let wanted: u32 = c.node_pools.iter().map(|p| p.count).sum();
    match c.phase {
        ClusterPhase::Pending => {
            return moving("Queued: provisioning starts in a moment.".into());
        }
        ClusterPhase::Provisioning => {
            return moving("Creating the control plane…".into());
        }
        ClusterPhase::ControlPlaneReady => {
            return moving(format!(
                "Control plane up; starting the nodes: {} of {wanted} ready.",
                ready(None)
            ));
        }
        ClusterPhase::Deleting => {
            return moving("Deleting the cluster and everything in it…".into());
        }
        ClusterPhase::Failed => {
            return Progress {
                words: format!(
                    "Failed: {}",
                    c.failure_reason.as_deref().unwrap_or("no reason was given")
                ),
                moving: false,
            };
        }
        ClusterPhase::Provisioned => {}
    }
    if let Some(change) = &c.exposure_change {
        return moving(format!("Changing the exposure to {}…", change.to.as_str()));
    }
    if let Some(p) = c.node_pools.iter().find(|p| p.status != PoolStatus::Ready) {
        let name = p.name.as_str();
        return moving(match p.status {
            PoolStatus::Deleting => format!("Deleting node pool {name}…"),
            _ => format!(
                "Node pool {name}: {} of {} ready.",
                ready(Some(name)),
                plural(p.count as usize, "node")
            ),
        });
    }
    if let Some(n) = around.nodes.iter().find(|n| n.status != NodeStatus::Ready) {
        return moving(match n.status {
            NodeStatus::Deleting => format!("Replacing node {}…", n.name.as_str()),
            _ => format!("Starting node {}…", n.name.as_str()),
        });
    }
    if let Some(e) = around.eips.iter().find(|e| {
        matches!(
            e.status,
            ElasticIpStatus::Pending | ElasticIpStatus::Provisioning | ElasticIpStatus::Deleting
        )
    }) {
        let name = e.name.as_deref().unwrap_or("without a name");
        return moving(match e.status {
            ElasticIpStatus::Deleting => format!("Releasing Elastic IP {name}…"),
            _ => format!("Allocating Elastic IP {name}…"),
        });
    }
    Progress {
        words: format!(
            "Provisioned: {} ready. Download the kubeconfig to use it.",
            plural(ready(None), "node")
        ),
        moving: false,
    }
}

/// The poller: the sentence, announced politely to screen readers, and while something moves
/// the request that redraws the page when it changed. `followed`: drawn by a live answer, so a
/// settled state is said as news.
pub fn poller(c: &Cluster, tab: Tab, p: &Progress, followed: bool, shown: &str) -> Markup {
    let next = p.moving.then(|| {
        format!(
            "{PREFIX}/clusters/{}/live/{}?since={}&shown={}",
            c.id,
            tab.slug(),
            c.revision,
            super::urlencode(shown)
        )
    });
    let tone = if p.moving {
        "busy"
    } else if c.phase == ClusterPhase::Failed {
        "bad"
    } else {
        "ok"
    };
    html! {
        p #progress class={ "progress " (tone) } role="status" aria-live="polite"
            hx-get=[next.as_deref()] hx-trigger=[next.as_ref().map(|_| "load")]
            hx-swap=[next.as_ref().map(|_| "outerHTML")] {
            @if followed && !p.moving { strong { "Done. " } }
            (p.words)
        }
    }
}

#[derive(Deserialize)]
pub struct LiveQuery {
    since: Option<i64>,
    /// The node pools the page shows, comma-separated: a page whose set of pools changed is
    /// reloaded whole rather than patched.
    shown: Option<String>,
}

/// The live answer for one tab (see the module's comment).
pub async fn follow(
    signed: Signed,
    path: Path<(Id, String)>,
    query: Query<LiveQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let (id, tab) = path.into_inner();
    let tab = Tab::from_slug(&tab).ok_or(DomainError::NotFound(Resource::Cluster))?;
    let services = &signed.services;
    let waited = services
        .cluster_state(
            &signed.caller,
            id.0,
            query.since.unwrap_or(0),
            LIVE_WAIT_SECONDS,
        )
        .await;
    let found = match waited {
        Ok(_) => {
            services
                .get_cluster(&signed.caller, id.0, Freshness::Recent)
                .await
        }
        Err(e) => Err(e),
    };
    let c = match found {
        Ok(c) => c,
        Err(DomainError::NotFound(Resource::Cluster)) => {
            return Ok(html_page(StatusCode::OK, gone()));
        }
        Err(e) => return Err(e.into()),
    };
    let pools = shown_pools(&c);
    if query.shown.as_deref().is_some_and(|s| s != pools) {
        // Pools came or went: the page's forms no longer match it.
        return Ok(HttpResponse::Ok()
            .insert_header(("HX-Refresh", "true"))
            .finish());
    }
    let around = Around::of(&signed, &c).await?;
    let p = progress(&c, &around);
    let parts = tab.live_parts(&signed, &c, &around).await?;
    Ok(html_page(
        StatusCode::OK,
        html! {
            (poller(&c, tab, &p, true, &pools))
            span #cluster-phase hx-swap-oob="true" { (super::clusters::phase_badge(c.phase)) }
            (parts)
        },
    ))
}

/// The pool names a page shows, as the poller carries them.
pub fn shown_pools(c: &Cluster) -> String {
    c.node_pools
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

fn gone() -> Markup {
    html! {
        p #progress class="progress muted" role="status" aria-live="polite" {
            strong { "Deleted. " } "The cluster is gone. "
            a href={ (PREFIX) "/clusters" } { "Back to the clusters" }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use domain::model::cluster::{Exposure, ExposureChange, ExposureChangeStatus};
    use domain::names::{DnsLabel, NodeName};
    use domain::testing::{ORG_A, cluster, pool};

    fn with_pools(phase: ClusterPhase, pools: &[(&str, u32, PoolStatus)]) -> Cluster {
        let mut c = cluster(ORG_A, phase);
        c.node_pools = pools
            .iter()
            .map(|(name, count, status)| {
                let mut p = pool(name, *count);
                p.status = *status;
                p
            })
            .collect();
        c
    }

    fn nodes(pool: &str, ready: usize, starting: usize) -> Vec<Node> {
        let node = |i: usize, status| Node {
            name: NodeName::parse(&format!("{pool}-n{i}")).unwrap_or_else(|e| panic!("{e}")),
            pool: DnsLabel::parse(pool).unwrap_or_else(|e| panic!("{e}")),
            status,
            version: "v1.32.4".into(),
            created_at: chrono::Utc::now(),
            labels: Default::default(),
            taints: Vec::new(),
        };
        (0..ready)
            .map(|i| node(i, NodeStatus::Ready))
            .chain((ready..ready + starting).map(|i| node(i, NodeStatus::Provisioning)))
            .collect()
    }

    fn around(nodes: Vec<Node>) -> Around {
        Around {
            nodes,
            eips: Vec::new(),
        }
    }

    /// What a person reads at each step of a cluster's life, and whether the page keeps
    /// following.
    #[test]
    fn each_step_is_said_in_words() {
        use ClusterPhase as C;
        use PoolStatus as P;
        let table = [
            (
                with_pools(C::Pending, &[("web", 3, P::Provisioning)]),
                vec![],
                "Queued",
                true,
            ),
            (
                with_pools(C::Provisioning, &[("web", 3, P::Provisioning)]),
                vec![],
                "Creating the control plane",
                true,
            ),
            (
                with_pools(C::ControlPlaneReady, &[("web", 3, P::Provisioning)]),
                nodes("web", 2, 1),
                "2 of 3 ready",
                true,
            ),
            (
                with_pools(
                    C::Provisioned,
                    &[("web", 3, P::Ready), ("gpu", 2, P::Scaling)],
                ),
                nodes("gpu", 1, 1),
                "Node pool gpu: 1 of 2 nodes ready",
                true,
            ),
            (
                with_pools(
                    C::Provisioned,
                    &[("web", 1, P::Ready), ("old", 1, P::Deleting)],
                ),
                vec![],
                "Deleting node pool old",
                true,
            ),
            (
                with_pools(C::Provisioned, &[("web", 2, P::Ready)]),
                nodes("web", 1, 1),
                "Starting node web-n1",
                true,
            ),
            (
                with_pools(C::Provisioned, &[("web", 2, P::Ready)]),
                nodes("web", 2, 0),
                "Provisioned: 2 nodes ready",
                false,
            ),
            (
                with_pools(C::Deleting, &[("web", 2, P::Deleting)]),
                vec![],
                "Deleting the cluster",
                true,
            ),
        ];
        for (c, nodes, words, moving) in table {
            let p = progress(&c, &around(nodes));
            assert!(p.words.contains(words), "{words}: {p:?}");
            assert_eq!(p.moving, moving, "{words}");
        }
        let mut changing = with_pools(C::Provisioned, &[("web", 1, P::Ready)]);
        changing.exposure_change = Some(ExposureChange {
            to: Exposure::Public,
            status: ExposureChangeStatus::InProgress,
        });
        let p = progress(&changing, &around(nodes("web", 1, 0)));
        assert!(p.moving && p.words.contains("exposure to public"), "{p:?}");
    }
}
