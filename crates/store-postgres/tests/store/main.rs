//! The PostgreSQL adapter against a real server: each test has a database of its own (from the
//! migrated template), so the tests run in parallel.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::Duration;

use chrono::{DateTime, Utc};
use diesel::pg::PgConnection;
use diesel::{Connection, RunQueryDsl};
use domain::model::cluster::{Cluster, ClusterPhase, Exposure, NetworkMode, Registration};
use domain::model::elastic_ip::{ElasticIp, ElasticIpStatus};
use domain::model::firewall::{
    Direction, FirewallRule, FirewallRuleStatus, Ipv4Cidr, PortRange, Protocol,
};
use domain::model::idempotency::{
    Fingerprint, IdempotencyCompletion, IdempotencyRecord, IdempotencyScope, IdempotencyState,
    Replay,
};
use domain::model::node_pool::{NodePool, PoolStatus};
use domain::names::{DnsLabel, IdempotencyKey};
use domain::ports::storage::{
    Change, ClaimOutcome, ClusterRepository, ClusterWrite, Freshness, IdempotencyStore, StoreError,
};
use store_postgres::{PgStore, TestDatabase};
use uuid::Uuid;

/// Now, at the database's precision, so values read back compare equal.
fn now() -> DateTime<Utc> {
    DateTime::from_timestamp_micros(Utc::now().timestamp_micros()).unwrap()
}

fn label(s: &str) -> DnsLabel {
    DnsLabel::parse(s).unwrap()
}

fn store(db: &TestDatabase) -> PgStore {
    PgStore::connect(&db.url, 8, Duration::from_secs(10)).expect("store")
}

fn raw(db: &TestDatabase) -> PgConnection {
    PgConnection::establish(&db.url).expect("raw connection")
}

fn pool(name: &str, at: DateTime<Utc>) -> NodePool {
    NodePool {
        name: label(name),
        size: "kube.c5.xlarge".into(),
        count: 3,
        auto_scale: false,
        min_nodes: 1,
        max_nodes: Some(5),
        labels: BTreeMap::from([("team".to_owned(), "a".to_owned())]),
        taints: vec![domain::model::node_pool::Taint {
            key: "nvidia.com/gpu".into(),
            value: "a100".into(),
            effect: domain::model::node_pool::TaintEffect::NoSchedule,
        }],
        tags: BTreeMap::new(),
        root_volume_size_gib: 80,
        version: "v1.32.4".into(),
        surge: domain::model::upgrade::SurgeSettings::DEFAULT,
        status: PoolStatus::Provisioning,
        created_at: at,
        updated_at: at,
    }
}

fn cluster(org: Uuid, name: &str) -> Cluster {
    let at = now();
    Cluster {
        id: Uuid::new_v4(),
        organization_id: org,
        organization_slug: "acme".into(),
        name: label(name),
        description: Some("a test cluster".into()),
        tags: vec![label("team-a")],
        zone: "zone-1".into(),
        version: "v1.32.4".into(),
        control_plane_option_id: "cp-standard".into(),
        exposure: Exposure::Private,
        network_mode: NetworkMode::Intranet,
        phase: ClusterPhase::Pending,
        failure_reason: None,
        public_hostname: None,
        api_endpoint: None,
        node_pools: vec![pool("default", at)],
        hub_registration: Registration::PENDING,
        default_environment: Registration::PENDING,
        exposure_change: None,
        upgrade: None,
        maintenance_window: Default::default(),
        auto_upgrade: false,
        last_auto_upgrade_window: None,
        control_plane_firewall: domain::model::cluster::ControlPlaneFirewall {
            enabled: true,
            allowed_addresses: ["203.0.113.0/24", "2001:db8::/32"]
                .iter()
                .map(|c| domain::model::firewall::IpCidr::parse(c).unwrap())
                .collect(),
        },
        control_plane_firewall_change: Some(Default::default()),
        created_at: at,
        updated_at: at,
        revision: 1,
        deleted_at: None,
    }
}

fn write(cluster_id: Uuid, expected: Option<i64>, changes: Vec<Change>) -> ClusterWrite {
    ClusterWrite::plain(cluster_id, expected, changes, now())
}

async fn insert(store: &PgStore, c: &Cluster) -> Result<i64, StoreError> {
    store
        .commit(write(c.id, None, vec![Change::InsertCluster(c.clone())]))
        .await
}

fn elastic_ip(cluster_id: Uuid, name: Option<&str>, address: [u8; 4]) -> ElasticIp {
    let at = now();
    ElasticIp {
        id: Uuid::new_v4(),
        cluster_id,
        name: name.map(label),
        exposure: Exposure::Private,
        status: ElasticIpStatus::Pending,
        address: Ipv4Addr::from(address),
        failure_reason: None,
        created_at: at,
        updated_at: at,
    }
}

fn firewall_rule(cluster_id: Uuid, name: Option<&str>) -> FirewallRule {
    let at = now();
    FirewallRule {
        id: Uuid::new_v4(),
        cluster_id,
        name: name.map(label),
        description: None,
        direction: Direction::Ingress,
        protocol: Protocol::Tcp,
        source_cidrs: vec![Ipv4Cidr::parse("203.0.113.0/24").unwrap()],
        port_range: Some(PortRange { from: 443, to: 443 }),
        status: FirewallRuleStatus::Pending,
        failure_reason: None,
        created_at: at,
        updated_at: at,
    }
}

fn scope(org: Uuid, key: &str) -> IdempotencyScope {
    IdempotencyScope {
        organization_id: org,
        key: IdempotencyKey::parse(key).unwrap(),
    }
}

fn claim_record(org: Uuid, key: &str, lease_id: Uuid, expires: DateTime<Utc>) -> IdempotencyRecord {
    IdempotencyRecord {
        scope: scope(org, key),
        fingerprint: Fingerprint::of(&["create", "name=x"]),
        state: IdempotencyState::InProgress {
            lease_id,
            lease_expires_at: expires,
        },
        created_at: now(),
    }
}

fn completion(org: Uuid, key: &str, lease_id: Uuid, body: &[u8]) -> IdempotencyCompletion {
    IdempotencyCompletion {
        scope: scope(org, key),
        lease_id,
        replay: Replay(body.to_vec()),
    }
}

/// `SELECT count(*) FROM <table>` on a raw connection.
fn count(conn: &mut PgConnection, table: &str) -> i64 {
    #[derive(diesel::QueryableByName)]
    struct N {
        #[diesel(sql_type = diesel::sql_types::BigInt)]
        n: i64,
    }
    let n: N = diesel::sql_query(format!("SELECT count(*) AS n FROM {table}"))
        .get_result(conn)
        .unwrap();
    n.n
}

mod connections;
mod constraints;
mod housekeeping;
mod idempotency;
mod lifecycle;
mod operations;
mod sessions;
mod watch_cache;
mod writes;
