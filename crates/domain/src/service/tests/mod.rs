//! Use-case rules against mocked ports, one test per rule, named after it, one file per
//! resource or concern; the helpers they share are here.
#![allow(clippy::unwrap_used)]

use crate::access::OrgSelector;
use futures::executor::block_on;
use mockall::predicate::eq;
use serde_json::json;

use crate::error::{Conflict, DomainError};
use crate::input::cluster::{ClusterPatch, CreateClusterRequest, ExposurePatch};
use crate::input::elastic_ip::CreateElasticIpRequest;
use crate::input::firewall::CreateFirewallRuleRequest;
use crate::input::node_pool::{NodePoolPatch, NodePoolRequest};
use crate::model::cluster::{
    ClusterPhase, Exposure, ExposureChange, ExposureChangeStatus, NetworkMode,
};
use crate::model::elastic_ip::{AddressPool, ElasticIp, ElasticIpStatus};
use crate::model::firewall::Ipv4Cidr;
use crate::model::idempotency::{
    Fingerprint, IdempotencyRecord, IdempotencyScope, IdempotencyState, Replay,
};
use crate::model::identity::{ClientKind, Plan, Role};
use crate::model::kubeconfig::SealedCredentials;
use crate::model::node_pool::PoolStatus;
use crate::model::secret::{SealedSecret, Secret};
use crate::names::IdempotencyKey;
use crate::ports::identity::IdentityError;
use crate::ports::storage::{
    Change, ClaimOutcome, ClusterWrite, Freshness, Page, PageRequest, StoreError, ZoneCapacity,
};
use crate::service::{Answer, Command, Keyed, KubeconfigAnswer, Scheduled};
use crate::testing::*;

mod approvals;
mod audit;
mod auth_servers;
mod authentication;
mod by_id_routes;
mod collection_reads;
mod create;
mod elastic_ips;
mod exposure;
mod firewall_rules;
mod idempotency;
mod kubeconfig;
mod node_pools;
mod operations;
mod patch;
mod sessions;
mod state_long_poll;
mod write_budget;

const FIRST_PAGE: PageRequest = PageRequest { page: 1, size: 20 };

/// The organization a collection read names: the query parameter first, then the header, as
/// the API orders them.
fn sel(query: Option<&str>, header: Option<&str>) -> OrgSelector {
    OrgSelector::first_named([query, header])
}

/// The answer of a change made without a key (always fresh), or the refusal.
fn fresh<T: std::fmt::Debug>(
    a: Result<Answer<Scheduled<T>>, DomainError>,
) -> Result<T, DomainError> {
    a.map(|a| match a {
        Answer::Fresh(s) => s.value,
        Answer::Replayed(r) => panic!("a replay without a key: {r:?}"),
    })
}

/// Mocks whose commits all succeed (revision 6) and are kept, to look at afterwards.
fn recording(m: &mut Mocks) -> std::sync::Arc<std::sync::Mutex<Vec<ClusterWrite>>> {
    let writes = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = writes.clone();
    m.clusters.expect_commit().returning(move |w| {
        kept.lock().unwrap().push(w);
        Ok(6)
    });
    writes
}

fn code<T: std::fmt::Debug>(r: Result<T, DomainError>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

/// `prod-1` in `acme`, one pool of three `kube.c5.large`; change a field with
/// `CreateClusterRequest { zone: …, ..cluster_body() }`.
fn cluster_body() -> CreateClusterRequest {
    CreateClusterRequest {
        organization: Some("acme".into()),
        name: Some("prod-1".into()),
        node_pools: Some(vec![pool_body(None, "kube.c5.large", 3)]),
        ..Default::default()
    }
}

/// A pool of `count` nodes of `size`, named `name` (`default` when `None`).
fn pool_body(name: Option<&str>, size: &str, count: i64) -> NodePoolRequest {
    NodePoolRequest {
        name: name.map(Into::into),
        size: Some(size.into()),
        count: Some(count),
        ..Default::default()
    }
}

/// An icmp rule from 10.0.0.0/8.
fn icmp_rule() -> CreateFirewallRuleRequest {
    CreateFirewallRuleRequest {
        protocol: Some("icmp".into()),
        source_cidrs: Some(vec!["10.0.0.0/8".into()]),
        ..Default::default()
    }
}

/// A PATCH of the description only.
fn description_patch(text: &str) -> ClusterPatch {
    ClusterPatch {
        description: Some(Some(text.into())),
        tags: None,
        control_plane_firewall: None,
        ..ClusterPatch::default()
    }
}

fn cluster_in(organization: &str) -> CreateClusterRequest {
    CreateClusterRequest {
        organization: Some(organization.into()),
        ..cluster_body()
    }
}

fn super_admin_a() -> crate::model::identity::Caller {
    caller(&[(ORG_A, Role::SuperAdmin)])
}

/// Mocks where acme (postpaid) exists, the zone has room and commits succeed.
fn create_ready() -> Mocks {
    let mut m = Mocks::new().with_organizations(vec![
        organization(ORG_A, Plan::Postpaid, 0),
        organization(ORG_B, Plan::Prepaid, 0),
    ]);
    m.cloud.expect_zone_capacity().returning(|_| 10_000);
    m.clusters.expect_commit().returning(|_| Ok(1));
    m
}
