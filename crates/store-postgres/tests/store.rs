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
    IdempotencyCompletion, IdempotencyRecord, IdempotencyScope, IdempotencyState,
    RequestFingerprint, StoredResponse,
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
        tags: BTreeMap::new(),
        root_volume_size_gib: 80,
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
        created_at: at,
        updated_at: at,
        revision: 1,
        deleted_at: None,
    }
}

fn write(cluster_id: Uuid, expected: Option<i64>, changes: Vec<Change>) -> ClusterWrite {
    ClusterWrite {
        cluster_id,
        expected_revision: expected,
        changes,
        reconcile: false,
        idempotency: None,
        cause: None,
        at: now(),
    }
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
        fingerprint: RequestFingerprint::new(
            "POST",
            "/v1/public/clusters",
            Some(&serde_json::json!({"name": "x"})),
        ),
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
        response: StoredResponse {
            status: 201,
            headers: vec![("Location".into(), "/v1/public/clusters/x".into())],
            body: body.to_vec(),
        },
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

mod constraints {
    use super::*;
    use domain::ports::storage::UniqueRule;

    #[tokio::test]
    async fn cluster_names_are_unique_among_live_clusters_of_an_organization() {
        let db = TestDatabase::create();
        let store = store(&db);
        let org = Uuid::new_v4();
        let first = cluster(org, "prod-1");
        assert_eq!(insert(&store, &first).await, Ok(1));
        assert_eq!(
            insert(&store, &cluster(org, "prod-1")).await,
            Err(StoreError::Duplicate(UniqueRule::ClusterName))
        );
        // Another organization may use the name.
        assert_eq!(
            insert(&store, &cluster(Uuid::new_v4(), "prod-1")).await,
            Ok(1)
        );
        // Once the first is removed, its name is free again.
        store
            .commit(write(first.id, Some(1), vec![Change::RemoveCluster]))
            .await
            .unwrap();
        assert_eq!(insert(&store, &cluster(org, "prod-1")).await, Ok(1));
    }

    #[tokio::test]
    async fn pool_names_are_unique_per_cluster() {
        let db = TestDatabase::create();
        let store = store(&db);
        let c = cluster(Uuid::new_v4(), "c1");
        insert(&store, &c).await.unwrap();
        let dup = write(
            c.id,
            Some(1),
            vec![Change::InsertPool(pool("default", now()))],
        );
        assert_eq!(
            store.commit(dup).await,
            Err(StoreError::Duplicate(UniqueRule::PoolName))
        );
        let other = write(
            c.id,
            Some(1),
            vec![Change::InsertPool(pool("second", now()))],
        );
        assert_eq!(store.commit(other).await, Ok(2));
    }

    #[tokio::test]
    async fn elastic_ip_names_and_addresses_are_unique_while_alive() {
        let db = TestDatabase::create();
        let store = store(&db);
        let (a, b) = (cluster(Uuid::new_v4(), "a"), cluster(Uuid::new_v4(), "b"));
        insert(&store, &a).await.unwrap();
        insert(&store, &b).await.unwrap();
        let web = elastic_ip(a.id, Some("web"), [10, 96, 0, 1]);
        store
            .commit(write(
                a.id,
                Some(1),
                vec![Change::InsertElasticIp(web.clone())],
            ))
            .await
            .unwrap();
        let same_name = elastic_ip(a.id, Some("web"), [10, 96, 0, 2]);
        assert_eq!(
            store
                .commit(write(
                    a.id,
                    Some(2),
                    vec![Change::InsertElasticIp(same_name.clone())]
                ))
                .await,
            Err(StoreError::Duplicate(UniqueRule::ElasticIpName))
        );
        // Unnamed ones never collide by name; the same address does, across clusters.
        let unnamed = [
            elastic_ip(a.id, None, [10, 96, 0, 3]),
            elastic_ip(a.id, None, [10, 96, 0, 4]),
        ];
        let changes = unnamed
            .iter()
            .cloned()
            .map(Change::InsertElasticIp)
            .collect();
        assert_eq!(store.commit(write(a.id, Some(2), changes)).await, Ok(3));
        let same_address = elastic_ip(b.id, None, [10, 96, 0, 1]);
        assert_eq!(
            store
                .commit(write(
                    b.id,
                    Some(1),
                    vec![Change::InsertElasticIp(same_address.clone())]
                ))
                .await,
            Err(StoreError::Duplicate(UniqueRule::ElasticIpAddress))
        );
        // A public address may equal a private one: the pools are separate.
        let public = ElasticIp {
            exposure: Exposure::Public,
            ..same_address.clone()
        };
        assert_eq!(
            store
                .commit(write(b.id, Some(1), vec![Change::InsertElasticIp(public)]))
                .await,
            Ok(2)
        );
        // A Deleted Elastic IP frees both its name and its address.
        let deleted = ElasticIp {
            status: ElasticIpStatus::Deleted,
            ..web
        };
        store
            .commit(write(a.id, Some(3), vec![Change::UpdateElasticIp(deleted)]))
            .await
            .unwrap();
        assert_eq!(
            store
                .commit(write(
                    a.id,
                    Some(4),
                    vec![Change::InsertElasticIp(same_name)]
                ))
                .await,
            Ok(5)
        );
        let in_use = store.addresses_in_use(Exposure::Private).await.unwrap();
        let expected: std::collections::HashSet<_> =
            [[10, 96, 0, 2], [10, 96, 0, 3], [10, 96, 0, 4]]
                .into_iter()
                .map(Ipv4Addr::from)
                .collect();
        assert_eq!(in_use, expected);
    }

    #[tokio::test]
    async fn firewall_rule_names_are_unique_per_cluster() {
        let db = TestDatabase::create();
        let store = store(&db);
        let c = cluster(Uuid::new_v4(), "c1");
        insert(&store, &c).await.unwrap();
        let https = firewall_rule(c.id, Some("https"));
        store
            .commit(write(
                c.id,
                Some(1),
                vec![Change::InsertFirewallRule(https)],
            ))
            .await
            .unwrap();
        assert_eq!(
            store
                .commit(write(
                    c.id,
                    Some(2),
                    vec![Change::InsertFirewallRule(firewall_rule(
                        c.id,
                        Some("https")
                    ))]
                ))
                .await,
            Err(StoreError::Duplicate(UniqueRule::FirewallRuleName))
        );
        let unnamed = vec![
            Change::InsertFirewallRule(firewall_rule(c.id, None)),
            Change::InsertFirewallRule(firewall_rule(c.id, None)),
        ];
        assert_eq!(store.commit(write(c.id, Some(2), unnamed)).await, Ok(3));
        assert_eq!(store.firewall_rules(c.id).await.unwrap().len(), 3);
    }

    /// Bad text in an enum column or a value out of range never gets in, whoever writes it.
    #[tokio::test]
    async fn check_constraints_refuse_what_the_domain_refuses() {
        let db = TestDatabase::create();
        let store = store(&db);
        let c = cluster(Uuid::new_v4(), "c1");
        insert(&store, &c).await.unwrap();
        let mut conn = raw(&db);
        let id = c.id;
        let refused = [
            format!("UPDATE clusters SET phase = 'Running' WHERE id = '{id}'"),
            format!("UPDATE clusters SET exposure = 'PUBLIC' WHERE id = '{id}'"),
            format!("UPDATE clusters SET network_mode = 'lan' WHERE id = '{id}'"),
            format!("UPDATE clusters SET hub_registration_status = 'done' WHERE id = '{id}'"),
            format!("UPDATE clusters SET hub_registration_reason = 'because' WHERE id = '{id}'"),
            format!("UPDATE clusters SET exposure_change_to = 'both' WHERE id = '{id}'"),
            format!("UPDATE clusters SET revision = 0 WHERE id = '{id}'"),
            format!("UPDATE clusters SET name = 'Not_A_Label' WHERE id = '{id}'"),
            format!("UPDATE clusters SET tags = ARRAY['ok', 'NOT OK'] WHERE id = '{id}'"),
            format!("UPDATE node_pools SET status = 'Gone' WHERE cluster_id = '{id}'"),
            format!("UPDATE node_pools SET count = 201 WHERE cluster_id = '{id}'"),
            format!("UPDATE node_pools SET count = -1 WHERE cluster_id = '{id}'"),
            format!("UPDATE node_pools SET min_nodes = -1 WHERE cluster_id = '{id}'"),
            format!("UPDATE node_pools SET max_nodes = 0 WHERE cluster_id = '{id}'"),
            format!("UPDATE node_pools SET max_nodes = 201 WHERE cluster_id = '{id}'"),
            format!("UPDATE node_pools SET min_nodes = 6 WHERE cluster_id = '{id}'"),
            format!("UPDATE node_pools SET labels = '[]' WHERE cluster_id = '{id}'"),
            format!(
                "INSERT INTO firewall_rules (id, cluster_id, direction, protocol, source_cidrs, port_from, port_to, status, created_at, updated_at) \
                 VALUES (gen_random_uuid(), '{id}', 'egress', 'tcp', ARRAY['10.0.0.0/8'], 1, 2, 'Pending', now(), now())"
            ),
            format!(
                "INSERT INTO firewall_rules (id, cluster_id, direction, protocol, source_cidrs, port_from, port_to, status, created_at, updated_at) \
                 VALUES (gen_random_uuid(), '{id}', 'ingress', 'tcp', ARRAY['10.0.0.0/8'], 0, 2, 'Pending', now(), now())"
            ),
            format!(
                "INSERT INTO firewall_rules (id, cluster_id, direction, protocol, source_cidrs, port_from, port_to, status, created_at, updated_at) \
                 VALUES (gen_random_uuid(), '{id}', 'ingress', 'tcp', ARRAY['10.0.0.0/8'], 443, 65536, 'Pending', now(), now())"
            ),
            format!(
                "INSERT INTO firewall_rules (id, cluster_id, direction, protocol, source_cidrs, port_from, port_to, status, created_at, updated_at) \
                 VALUES (gen_random_uuid(), '{id}', 'ingress', 'icmp', ARRAY['10.0.0.0/8'], 1, 2, 'Pending', now(), now())"
            ),
            format!(
                "INSERT INTO elastic_ips (id, cluster_id, exposure, status, address, created_at, updated_at) \
                 VALUES (gen_random_uuid(), '{id}', 'private', 'Lost', '10.0.0.1', now(), now())"
            ),
            format!(
                "INSERT INTO elastic_ips (id, cluster_id, exposure, status, address, created_at, updated_at) \
                 VALUES (gen_random_uuid(), '{id}', 'private', 'Ready', '10.0.0.256', now(), now())"
            ),
            format!(
                "INSERT INTO operations (cluster_id, id, state, generation, run_after, created_at, updated_at) \
                 VALUES ('{id}', gen_random_uuid(), 'queued', 1, now(), now(), now())"
            ),
            "INSERT INTO idempotency_keys (organization_id, key, method, path, body_sha256, state, lease_id, lease_expires_at, created_at) \
             VALUES (gen_random_uuid(), 'key-00001', 'POST', '/x', repeat('a', 64), 'started', gen_random_uuid(), now(), now())"
                .to_owned(),
            "INSERT INTO auth_servers (id, organization_id, organization_slug, name, environment, type, created_at, updated_at) \
             VALUES (gen_random_uuid(), gen_random_uuid(), 'acme', 'sso', 'prod', 'saml', now(), now())"
                .to_owned(),
        ];
        for sql in refused {
            let result = diesel::sql_query(&sql).execute(&mut conn);
            assert!(result.is_err(), "the database accepted: {sql}");
        }
        // Nothing of it got in: the cluster reads back as written.
        let back = store
            .cluster(c.id, Freshness::Latest)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(back, Cluster { revision: 1, ..c });
    }

    #[tokio::test]
    async fn auth_server_names_are_unique_per_organization_and_environment() {
        use domain::model::auth_server::{
            AuthServer, AuthServerConfig, BasicConfig, BasicCredential,
        };
        use domain::model::secret::PasswordHash;
        use domain::ports::storage::{
            AuditEvent, AuthServerChange, AuthServerRepository, AuthServerWrite,
        };

        let db = TestDatabase::create();
        let store = store(&db);
        let org = Uuid::new_v4();
        let server = |name: &str, env: &str, users: &[&str]| AuthServer {
            id: Uuid::new_v4(),
            organization_id: org,
            organization_slug: "acme".into(),
            name: label(name),
            environment: label(env),
            config: AuthServerConfig::Basic(BasicConfig {
                realm: None,
                credentials: users
                    .iter()
                    .map(|u| BasicCredential {
                        id: Uuid::new_v4(),
                        username: (*u).into(),
                        password_hash: PasswordHash("$argon2id$x".into()),
                    })
                    .collect(),
            }),
            created_at: now(),
            updated_at: now(),
        };
        let audit = |id| AuditEvent {
            id: Uuid::new_v4(),
            organization_id: org,
            auth_server_id: id,
            actor: "alice".into(),
            action: "created".into(),
            details: serde_json::json!({}),
            at: now(),
        };
        let put = |s: AuthServer| AuthServerWrite {
            audit: audit(s.id),
            change: AuthServerChange::Insert(s),
            idempotency: None,
        };
        let first = server("sso", "production", &["alice", "bob"]);
        store.write_auth_server(put(first.clone())).await.unwrap();
        assert_eq!(
            store
                .write_auth_server(put(server("sso", "production", &["x"])))
                .await,
            Err(StoreError::Duplicate(UniqueRule::AuthServerName))
        );
        store
            .write_auth_server(put(server("sso", "staging", &["x"])))
            .await
            .unwrap();
        assert_eq!(
            store
                .write_auth_server(put(server("other", "staging", &["x", "x"])))
                .await,
            Err(StoreError::Duplicate(UniqueRule::CredentialName))
        );
        assert_eq!(
            store.auth_server(first.id).await.unwrap(),
            Some(first.clone())
        );
        assert_eq!(
            store
                .list_auth_servers(org, Some("production".into()))
                .await
                .unwrap(),
            vec![first.clone()]
        );

        // An update replaces the credentials (one kept, one removed, one added) when the
        // server is unchanged since read; a stale one is refused.
        let mut next = first.clone();
        next.updated_at = now() + chrono::Duration::seconds(1);
        if let AuthServerConfig::Basic(b) = &mut next.config {
            b.credentials.remove(1);
            b.credentials.push(BasicCredential {
                id: Uuid::new_v4(),
                username: "bob".into(),
                password_hash: PasswordHash("$argon2id$y".into()),
            });
        }
        let update = |server: AuthServer, expected| AuthServerWrite {
            audit: audit(server.id),
            change: AuthServerChange::Update {
                server,
                expected_updated_at: expected,
            },
            idempotency: None,
        };
        store
            .write_auth_server(update(next.clone(), first.updated_at))
            .await
            .unwrap();
        assert_eq!(
            store.auth_server(first.id).await.unwrap(),
            Some(next.clone())
        );
        assert_eq!(
            store
                .write_auth_server(update(first.clone(), first.updated_at))
                .await,
            Err(StoreError::RevisionMismatch)
        );
        let delete = AuthServerWrite {
            audit: audit(first.id),
            change: AuthServerChange::Delete(first.id),
            idempotency: None,
        };
        store.write_auth_server(delete).await.unwrap();
        assert_eq!(store.auth_server(first.id).await.unwrap(), None);
        let mut conn = raw(&db);
        assert_eq!(
            count(
                &mut conn,
                &format!(
                    "auth_server_credentials WHERE auth_server_id = '{}'",
                    first.id
                )
            ),
            0
        );
        assert_eq!(
            count(
                &mut conn,
                &format!("audit_events WHERE auth_server_id = '{}'", first.id)
            ),
            3
        );
    }
}

mod writes {
    use super::*;
    use domain::model::kubeconfig::SealedCredentials;
    use domain::model::node::{Node, NodeStatus};
    use domain::model::secret::SealedSecret;
    use domain::names::NodeName;
    use domain::ports::storage::PageRequest;

    fn node(name: &str, pool: &str) -> Node {
        Node {
            name: NodeName::parse(name).unwrap(),
            pool: label(pool),
            status: NodeStatus::Provisioning,
            created_at: now(),
        }
    }

    #[tokio::test]
    async fn a_cluster_reads_back_as_written_with_everything_under_it() {
        let db = TestDatabase::create();
        let store = store(&db);
        let mut c = cluster(Uuid::new_v4(), "full");
        c.node_pools
            .push(pool("extra", c.created_at + chrono::Duration::seconds(1)));
        assert_eq!(insert(&store, &c).await, Ok(1));
        assert_eq!(
            store.cluster(c.id, Freshness::Latest).await.unwrap(),
            Some(c.clone())
        );
        assert_eq!(
            store.revision(c.id).await.unwrap(),
            Some((1, ClusterPhase::Pending))
        );

        let mut next = c.clone();
        next.phase = ClusterPhase::Provisioning;
        next.tags = vec![label("x"), label("y")];
        next.exposure_change = Some(domain::model::cluster::ExposureChange {
            to: Exposure::Public,
            status: domain::model::cluster::ExposureChangeStatus::InProgress,
        });
        next.node_pools[1].count = 7;
        let creds = SealedCredentials {
            ca_certificate_pem: "PEM".into(),
            token: SealedSecret("sealed".into()),
        };
        let changes = vec![
            Change::UpdateCluster(next.clone()),
            Change::UpdatePool(next.node_pools[1].clone()),
            Change::InsertNode(node("default-b", "default")),
            Change::InsertNode(node("default-a", "default")),
            Change::InsertNode(node("extra-a", "extra")),
            Change::SetCredentials(creds.clone()),
        ];
        assert_eq!(store.commit(write(c.id, Some(1), changes)).await, Ok(2));
        assert_eq!(
            store.cluster(c.id, Freshness::Latest).await.unwrap(),
            Some(Cluster {
                revision: 2,
                ..next.clone()
            })
        );
        let names = |nodes: Vec<Node>| {
            nodes
                .into_iter()
                .map(|n| n.name.as_str().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(store.nodes(c.id, None).await.unwrap()),
            ["default-a", "default-b", "extra-a"]
        );
        assert_eq!(
            names(store.nodes(c.id, Some("default".into())).await.unwrap()),
            ["default-a", "default-b"]
        );
        assert_eq!(store.credentials(c.id).await.unwrap(), Some(creds));
        // 3 (default) + 7 (extra)
        assert_eq!(store.zone_node_demand("zone-1".into()).await.unwrap(), 10);

        // Deleting a pool takes its nodes; a Deleting pool no longer counts toward demand.
        let deleting = NodePool {
            status: PoolStatus::Deleting,
            ..next.node_pools[1].clone()
        };
        store
            .commit(write(c.id, Some(2), vec![Change::UpdatePool(deleting)]))
            .await
            .unwrap();
        assert_eq!(store.zone_node_demand("zone-1".into()).await.unwrap(), 3);
        store
            .commit(write(
                c.id,
                Some(3),
                vec![Change::DeletePool(label("extra"))],
            ))
            .await
            .unwrap();
        assert_eq!(
            names(store.nodes(c.id, None).await.unwrap()),
            ["default-a", "default-b"]
        );
        store
            .commit(write(
                c.id,
                Some(4),
                vec![Change::DeleteNode(NodeName::parse("default-a").unwrap())],
            ))
            .await
            .unwrap();
        assert_eq!(names(store.nodes(c.id, None).await.unwrap()), ["default-b"]);
    }

    #[tokio::test]
    async fn a_stale_revision_is_refused_and_writes_nothing() {
        let db = TestDatabase::create();
        let store = store(&db);
        let c = cluster(Uuid::new_v4(), "c1");
        insert(&store, &c).await.unwrap();
        let mut renamed = c.clone();
        renamed.description = Some("first".into());
        store
            .commit(write(c.id, Some(1), vec![Change::UpdateCluster(renamed)]))
            .await
            .unwrap();
        let mut stale = c.clone();
        stale.description = Some("stale".into());
        let mut w = write(
            c.id,
            Some(1),
            vec![
                Change::UpdateCluster(stale),
                Change::InsertPool(pool("late", now())),
                Change::InsertElasticIp(elastic_ip(c.id, None, [10, 0, 0, 9])),
            ],
        );
        w.reconcile = true;
        assert_eq!(store.commit(w).await, Err(StoreError::RevisionMismatch));
        let back = store
            .cluster(c.id, Freshness::Latest)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                back.revision,
                back.description.as_deref(),
                back.node_pools.len()
            ),
            (2, Some("first"), 1)
        );
        assert!(store.elastic_ips(c.id).await.unwrap().is_empty());
        assert_eq!(count(&mut raw(&db), "operations"), 0);
    }

    /// 20 writers each add a tag, re-reading and retrying on a revision mismatch: none is lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_updates_with_retry_lose_nothing() {
        let db = TestDatabase::create();
        let store = store(&db);
        let c = Cluster {
            tags: vec![],
            ..cluster(Uuid::new_v4(), "busy")
        };
        insert(&store, &c).await.unwrap();
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut retries = 0;
                    loop {
                        let mut current = store
                            .cluster(c.id, Freshness::Latest)
                            .await
                            .unwrap()
                            .unwrap();
                        current.tags.push(label(&format!("tag-{i}")));
                        match store
                            .commit(write(
                                c.id,
                                Some(current.revision),
                                vec![Change::UpdateCluster(current)],
                            ))
                            .await
                        {
                            Ok(_) => return retries,
                            Err(StoreError::RevisionMismatch) => retries += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        let back = store
            .cluster(c.id, Freshness::Latest)
            .await
            .unwrap()
            .unwrap();
        let mut tags: Vec<_> = back.tags.iter().map(|t| t.as_str().to_owned()).collect();
        tags.sort();
        let mut expected: Vec<_> = (0..20).map(|i| format!("tag-{i}")).collect();
        expected.sort();
        assert_eq!(tags, expected);
        assert_eq!(back.revision, 21);
    }

    #[tokio::test]
    async fn removing_a_cluster_leaves_a_tombstone_and_nothing_under_it() {
        let db = TestDatabase::create();
        let store = store(&db);
        let c = cluster(Uuid::new_v4(), "doomed");
        insert(&store, &c).await.unwrap();
        let creds = SealedCredentials {
            ca_certificate_pem: "PEM".into(),
            token: SealedSecret("sealed".into()),
        };
        let mut w = write(
            c.id,
            Some(1),
            vec![
                Change::InsertNode(node("default-a", "default")),
                Change::InsertElasticIp(elastic_ip(c.id, Some("web"), [10, 96, 0, 1])),
                Change::InsertFirewallRule(firewall_rule(c.id, Some("https"))),
                Change::SetCredentials(creds),
            ],
        );
        w.reconcile = true;
        store.commit(w).await.unwrap();
        assert_eq!(
            store
                .commit(write(c.id, Some(2), vec![Change::RemoveCluster]))
                .await,
            Ok(3)
        );
        let gone = store
            .cluster(c.id, Freshness::Latest)
            .await
            .unwrap()
            .unwrap();
        assert!(gone.is_gone());
        assert!(gone.node_pools.is_empty());
        assert_eq!(store.revision(c.id).await.unwrap(), None);
        assert!(
            store
                .addresses_in_use(Exposure::Private)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(store.credentials(c.id).await.unwrap(), None);
        let mut conn = raw(&db);
        for table in [
            "node_pools",
            "nodes",
            "elastic_ips",
            "firewall_rules",
            "cluster_credentials",
            "operations",
        ] {
            assert_eq!(
                count(&mut conn, table),
                0,
                "{table} kept rows of a removed cluster"
            );
        }
        assert_eq!(store.zone_node_demand("zone-1".into()).await.unwrap(), 0);
        let page = store
            .list_clusters(
                c.organization_id,
                None,
                PageRequest { page: 1, size: 10 },
                Freshness::Latest,
            )
            .await
            .unwrap();
        assert_eq!(page.total, 0);
    }

    #[tokio::test]
    async fn list_clusters_pages_in_creation_order_with_the_total() {
        let db = TestDatabase::create();
        let store = store(&db);
        let org = Uuid::new_v4();
        let base = now();
        let mut made = Vec::new();
        for i in 0..7 {
            let mut c = cluster(org, &format!("c{i}"));
            // Two clusters share a created_at: the id decides between them.
            c.created_at = base + chrono::Duration::seconds(i64::from(i / 2) * 10);
            if i == 3 {
                c.zone = "zone-2".into();
            }
            c.node_pools
                .push(pool("second", base + chrono::Duration::hours(1)));
            insert(&store, &c).await.unwrap();
            made.push(c);
        }
        insert(&store, &cluster(Uuid::new_v4(), "other-org"))
            .await
            .unwrap();
        made.sort_by_key(|c| (c.created_at, c.id));
        let ids = |cs: &[Cluster]| cs.iter().map(|c| c.id).collect::<Vec<_>>();

        let p1 = store
            .list_clusters(
                org,
                None,
                PageRequest { page: 1, size: 3 },
                Freshness::Latest,
            )
            .await
            .unwrap();
        let p3 = store
            .list_clusters(
                org,
                None,
                PageRequest { page: 3, size: 3 },
                Freshness::Latest,
            )
            .await
            .unwrap();
        let past = store
            .list_clusters(
                org,
                None,
                PageRequest { page: 4, size: 3 },
                Freshness::Latest,
            )
            .await
            .unwrap();
        assert_eq!((p1.total, p3.total, past.total), (7, 7, 7));
        assert_eq!(ids(&p1.items), ids(&made[0..3]));
        assert_eq!(ids(&p3.items), ids(&made[6..7]));
        assert!(past.items.is_empty());
        // Pools come with each cluster, in their own order.
        assert_eq!(
            p1.items[0],
            Cluster {
                revision: 1,
                ..made[0].clone()
            }
        );
        assert!(
            p1.items
                .iter()
                .all(|c| c.node_pools.len() == 2 && c.node_pools[0].name.as_str() == "default")
        );

        let zoned = store
            .list_clusters(
                org,
                Some("zone-2".into()),
                PageRequest { page: 1, size: 10 },
                Freshness::Latest,
            )
            .await
            .unwrap();
        assert_eq!(
            (zoned.total, zoned.items.len(), zoned.items[0].name.as_str()),
            (1, 1, "c3")
        );
        let none = store
            .list_clusters(
                Uuid::new_v4(),
                None,
                PageRequest { page: 1, size: 10 },
                Freshness::Latest,
            )
            .await
            .unwrap();
        assert_eq!((none.total, none.items.len()), (0, 0));
    }

    /// The connection of a commit is killed while its transaction waits on a lock, after it
    /// inserted the cluster: nothing of it stays, the caller gets `Unavailable`, and the store
    /// goes on with a new connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_connection_killed_mid_transaction_leaves_no_partial_rows() {
        let db = TestDatabase::create();
        let store = store(&db);
        let org = Uuid::new_v4();
        let lease = Uuid::new_v4();
        let key = "kill-key-1";
        let claimed = store
            .claim(claim_record(
                org,
                key,
                lease,
                now() + chrono::Duration::seconds(60),
            ))
            .await
            .unwrap();
        assert_eq!(claimed, ClaimOutcome::Claimed);

        // Another session holds the key's row, so the commit stops at its last step.
        let mut blocker = raw(&db);
        diesel::sql_query("BEGIN").execute(&mut blocker).unwrap();
        diesel::sql_query("SELECT 1 FROM idempotency_keys FOR UPDATE")
            .execute(&mut blocker)
            .unwrap();

        let c = cluster(org, "half");
        let mut w = write(c.id, None, vec![Change::InsertCluster(c.clone())]);
        w.idempotency = Some(completion(org, key, lease, b"{}"));
        w.reconcile = true;
        let pending = tokio::spawn({
            let store = store.clone();
            async move { store.commit(w).await }
        });

        let mut killer = raw(&db);
        #[derive(diesel::QueryableByName)]
        struct Killed {
            #[diesel(sql_type = diesel::sql_types::Bool)]
            killed: bool,
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let killed: Vec<Killed> = diesel::sql_query(
                "SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity \
                 WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
            )
            .load(&mut killer)
            .unwrap();
            if killed.iter().any(|k| k.killed) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the commit never reached its lock wait"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let result = pending.await.unwrap();
        assert!(
            matches!(result, Err(StoreError::Unavailable(_))),
            "{result:?}"
        );
        diesel::sql_query("ROLLBACK").execute(&mut blocker).unwrap();

        assert_eq!(store.cluster(c.id, Freshness::Latest).await.unwrap(), None);
        let mut conn = raw(&db);
        for table in ["clusters", "node_pools", "operations"] {
            assert_eq!(
                count(&mut conn, table),
                0,
                "{table} kept a row of the killed transaction"
            );
        }
        assert_eq!(
            count(&mut conn, "idempotency_keys WHERE state = 'in_progress'"),
            1
        );
    }

    /// Every connection of the pool is killed (as by a database restart): the next calls work.
    #[tokio::test]
    async fn the_store_recovers_when_its_connections_are_killed() {
        let db = TestDatabase::create();
        let store = store(&db);
        let c = cluster(Uuid::new_v4(), "c1");
        insert(&store, &c).await.unwrap();
        store.ping().await.unwrap();
        let mut killer = raw(&db);
        diesel::sql_query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
        )
        .execute(&mut killer)
        .unwrap();
        assert!(
            store
                .cluster(c.id, Freshness::Latest)
                .await
                .unwrap()
                .is_some()
        );
        store.ping().await.unwrap();
        assert!(store.pool_state().0 >= 1);
    }

    #[tokio::test]
    async fn an_unreachable_database_is_unavailable_not_internal() {
        let db = TestDatabase::create();
        let store = PgStore::connect(&db.url, 2, Duration::from_secs(2)).unwrap();
        drop(db); // DROP DATABASE … WITH (FORCE): every connection of the pool dies.
        match store.cluster(Uuid::new_v4(), Freshness::Latest).await {
            Err(StoreError::Unavailable(_)) => {}
            other => panic!("expected Unavailable, got {other:?}"),
        }
    }
}

mod idempotency {
    use super::*;

    /// 50 requests with one key at once: exactly one holds it, none waits for it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn fifty_concurrent_claims_of_one_key_make_one_claim() {
        let db = TestDatabase::create();
        let store = store(&db);
        let org = Uuid::new_v4();
        let expires = now() + chrono::Duration::seconds(60);
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .claim(claim_record(org, "same-key-1", Uuid::new_v4(), expires))
                        .await
                })
            })
            .collect();
        let mut claimed = 0;
        for t in tasks {
            match t.await.unwrap().unwrap() {
                ClaimOutcome::Claimed => claimed += 1,
                ClaimOutcome::Existing(r) => {
                    assert!(matches!(r.state, IdempotencyState::InProgress { .. }))
                }
            }
        }
        assert_eq!(claimed, 1);
    }

    /// 50 create requests with one key: claim, and the one that holds it commits the cluster
    /// with its answer. One cluster exists; every other request sees the key.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn fifty_concurrent_creates_with_one_key_make_one_cluster() {
        let db = TestDatabase::create();
        let store = store(&db);
        let org = Uuid::new_v4();
        let tasks: Vec<_> = (0..50)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    let lease = Uuid::new_v4();
                    let expires = now() + chrono::Duration::seconds(60);
                    match store
                        .claim(claim_record(org, "create-key-1", lease, expires))
                        .await
                        .unwrap()
                    {
                        ClaimOutcome::Claimed => {
                            // Each request would make its own cluster (own id, own name).
                            let c = cluster(org, &format!("made-{i}"));
                            let mut w = write(c.id, None, vec![Change::InsertCluster(c)]);
                            w.idempotency =
                                Some(completion(org, "create-key-1", lease, b"{\"made\":true}"));
                            w.reconcile = true;
                            store.commit(w).await.unwrap();
                            true
                        }
                        ClaimOutcome::Existing(_) => false,
                    }
                })
            })
            .collect();
        let mut made = 0;
        for t in tasks {
            made += usize::from(t.await.unwrap());
        }
        assert_eq!(made, 1);
        let mut conn = raw(&db);
        assert_eq!(count(&mut conn, "clusters"), 1);
        assert_eq!(count(&mut conn, "operations WHERE state = 'pending'"), 1);
        // A replay reads the stored answer byte for byte.
        let again = store
            .claim(claim_record(org, "create-key-1", Uuid::new_v4(), now()))
            .await
            .unwrap();
        let ClaimOutcome::Existing(record) = again else {
            panic!("the key must exist")
        };
        let IdempotencyState::Completed { response } = record.state else {
            panic!("the key must be completed")
        };
        assert_eq!(
            response,
            completion(org, "create-key-1", Uuid::nil(), b"{\"made\":true}").response
        );
    }

    #[tokio::test]
    async fn leases_are_compared_and_set() {
        let db = TestDatabase::create();
        let store = store(&db);
        let org = Uuid::new_v4();
        let (first, second) = (Uuid::new_v4(), Uuid::new_v4());
        let past = now() - chrono::Duration::seconds(1);
        store
            .claim(claim_record(org, "lease-key-1", first, past))
            .await
            .unwrap();
        let later = now() + chrono::Duration::seconds(60);
        // Only the holder of the stale lease can be replaced, and only once.
        assert!(
            store
                .take_over(scope(org, "lease-key-1"), first, second, later)
                .await
                .unwrap()
        );
        assert!(
            !store
                .take_over(scope(org, "lease-key-1"), first, Uuid::new_v4(), later)
                .await
                .unwrap()
        );

        // The first request woke up late: its commit is refused and writes nothing.
        let c = cluster(org, "late");
        let mut w = write(c.id, None, vec![Change::InsertCluster(c.clone())]);
        w.idempotency = Some(completion(org, "lease-key-1", first, b"late"));
        assert_eq!(store.commit(w).await, Err(StoreError::LeaseLost));
        assert_eq!(store.cluster(c.id, Freshness::Latest).await.unwrap(), None);

        // A refusal is stored by `complete`; a second complete changes nothing.
        let mut refusal = completion(org, "lease-key-1", second, b"{\"status\":409}");
        refusal.response.status = 409;
        store.complete(refusal.clone()).await.unwrap();
        store
            .complete(completion(org, "lease-key-1", second, b"other"))
            .await
            .unwrap();
        let ClaimOutcome::Existing(record) = store
            .claim(claim_record(org, "lease-key-1", Uuid::new_v4(), later))
            .await
            .unwrap()
        else {
            panic!("the key must exist")
        };
        assert_eq!(
            record.state,
            IdempotencyState::Completed {
                response: refusal.response
            }
        );

        // A released key can be claimed anew; a release with another lease does nothing.
        store
            .claim(claim_record(org, "release-key", first, later))
            .await
            .unwrap();
        store
            .release(scope(org, "release-key"), second)
            .await
            .unwrap();
        assert!(matches!(
            store
                .claim(claim_record(org, "release-key", second, later))
                .await
                .unwrap(),
            ClaimOutcome::Existing(_)
        ));
        store
            .release(scope(org, "release-key"), first)
            .await
            .unwrap();
        assert_eq!(
            store
                .claim(claim_record(org, "release-key", second, later))
                .await
                .unwrap(),
            ClaimOutcome::Claimed
        );

        // The same key in another organization is another key.
        assert_eq!(
            store
                .claim(claim_record(Uuid::new_v4(), "release-key", second, later))
                .await
                .unwrap(),
            ClaimOutcome::Claimed
        );
        assert_eq!(
            store
                .purge_created_before(now() + chrono::Duration::seconds(1))
                .await
                .unwrap(),
            3
        );
        assert_eq!(store.purge_created_before(now()).await.unwrap(), 0);
    }
}

mod operations {
    use super::*;
    use domain::ports::storage::OperationQueue;

    async fn scheduled(store: &PgStore, n: usize) -> Vec<Uuid> {
        let mut ids = Vec::new();
        for i in 0..n {
            let c = cluster(Uuid::new_v4(), &format!("op-{i}"));
            let mut w = write(c.id, None, vec![Change::InsertCluster(c.clone())]);
            w.reconcile = true;
            store.commit(w).await.unwrap();
            ids.push(c.id);
        }
        ids
    }

    /// Workers claiming at once never share an operation, and all of them get claimed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn two_workers_never_claim_one_operation() {
        let db = TestDatabase::create();
        let store = store(&db);
        let ids = scheduled(&store, 10).await;
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    OperationQueue::claim(&store, format!("worker-{i}"), Duration::from_secs(60))
                        .await
                        .unwrap()
                })
            })
            .collect();
        let mut claimed = Vec::new();
        for t in tasks {
            if let Some(lease) = t.await.unwrap() {
                claimed.push(lease.operation.cluster_id);
            }
        }
        claimed.sort();
        let mut expected = ids;
        expected.sort();
        assert_eq!(claimed, expected, "each operation exactly once");
        assert_eq!(store.depth().await.unwrap(), 10);
        assert!(
            OperationQueue::claim(&store, "late".into(), Duration::from_secs(60))
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn an_expired_lease_is_claimed_again_and_the_old_holder_cannot_finish() {
        let db = TestDatabase::create();
        let store = store(&db);
        scheduled(&store, 1).await;
        let dead = OperationQueue::claim(&store, "dead-worker".into(), Duration::from_millis(1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(dead.operation.attempts, 1);
        tokio::time::sleep(Duration::from_millis(20)).await;
        let next = OperationQueue::claim(&store, "live-worker".into(), Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(next.operation.cluster_id, dead.operation.cluster_id);
        assert_eq!(next.operation.attempts, 2);
        assert!(
            OperationQueue::claim(&store, "third".into(), Duration::from_secs(60))
                .await
                .unwrap()
                .is_none()
        );
        // The first worker's late finish changes nothing; the holder's does.
        store.finish(dead).await.unwrap();
        assert_eq!(store.depth().await.unwrap(), 1);
        store.finish(next).await.unwrap();
        assert_eq!(store.depth().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn work_asked_while_running_leaves_the_operation_pending() {
        let db = TestDatabase::create();
        let store = store(&db);
        let id = scheduled(&store, 1).await[0];
        let lease = OperationQueue::claim(&store, "w".into(), Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        // More work is asked while the worker runs.
        let mut w = write(id, Some(1), vec![]);
        w.reconcile = true;
        store.commit(w).await.unwrap();
        assert!(
            OperationQueue::claim(&store, "other".into(), Duration::from_secs(60))
                .await
                .unwrap()
                .is_none(),
            "still leased"
        );
        store.finish(lease).await.unwrap();
        let again = OperationQueue::claim(&store, "w".into(), Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (again.operation.cluster_id, again.operation.generation),
            (id, 2)
        );
        store.finish(again).await.unwrap();
        assert_eq!(store.depth().await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_retry_waits_until_its_time_and_records_the_error() {
        let db = TestDatabase::create();
        let store = store(&db);
        scheduled(&store, 1).await;
        let lease = OperationQueue::claim(&store, "w".into(), Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        store
            .retry(
                lease,
                "provider timed out".into(),
                now() + chrono::Duration::hours(1),
            )
            .await
            .unwrap();
        assert!(
            OperationQueue::claim(&store, "w".into(), Duration::from_secs(60))
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(store.depth().await.unwrap(), 1);
        let mut conn = raw(&db);
        diesel::sql_query("UPDATE operations SET run_after = now() - interval '1 second'")
            .execute(&mut conn)
            .unwrap();
        let again = OperationQueue::claim(&store, "w".into(), Duration::from_secs(60))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (
                again.operation.attempts,
                again.operation.last_error.as_deref()
            ),
            (2, Some("provider timed out"))
        );
    }
}

mod lifecycle {
    use super::*;
    use diesel_migrations::MigrationHarness;
    use domain::ports::storage::ChangeFeed;
    use store_postgres::{MIGRATIONS, PgChangeFeed};

    #[test]
    fn migrations_run_up_down_and_up_again() {
        let db = TestDatabase::create_empty();
        store_postgres::run_migrations(&db.url).unwrap();
        let mut conn = raw(&db);
        let tables = |conn: &mut PgConnection| count(conn, "pg_tables WHERE schemaname = 'public'");
        let with_all = tables(&mut conn);
        assert!(with_all >= 11, "{with_all} tables");
        conn.revert_all_migrations(MIGRATIONS).unwrap();
        // Only diesel's own bookkeeping table is left.
        assert_eq!(tables(&mut conn), 1);
        assert_eq!(
            count(&mut conn, "pg_proc WHERE proname LIKE 'kubesvc_%'"),
            0
        );
        store_postgres::run_migrations(&db.url).unwrap();
        assert_eq!(tables(&mut conn), with_all);
        assert!(!conn.has_pending_migration(MIGRATIONS).unwrap());
    }

    /// A commit's NOTIFY wakes a long-poll waiting on that cluster (through the one LISTEN
    /// connection), well before the wait's own timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_wakes_a_waiter_of_the_change_feed() {
        let db = TestDatabase::create();
        let store = store(&db);
        let feed = PgChangeFeed::start(&db.url, 1000);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !feed.is_listening() {
            assert!(
                std::time::Instant::now() < deadline,
                "the feed never listened"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let c = cluster(Uuid::new_v4(), "watched");
        insert(&store, &c).await.unwrap();
        let waiter = tokio::spawn({
            let feed = feed.clone();
            let store = store.clone();
            async move {
                // The long-poll loop of the domain: wait, re-read, until the revision moved.
                let deadline = std::time::Instant::now() + Duration::from_secs(120);
                loop {
                    let (revision, _) = store.revision(c.id).await.unwrap().unwrap();
                    if revision > 1 || std::time::Instant::now() > deadline {
                        return revision;
                    }
                    feed.wait(c.id, 1, Duration::from_secs(60)).await;
                }
            }
        });
        let mut next = c.clone();
        next.phase = ClusterPhase::Provisioning;
        store
            .commit(write(c.id, Some(1), vec![Change::UpdateCluster(next)]))
            .await
            .unwrap();
        assert_eq!(waiter.await.unwrap(), 2);
        // A wait for a revision the feed already saw returns at once.
        tokio::time::timeout(
            Duration::from_secs(60),
            feed.wait(c.id, 1, Duration::from_secs(3600)),
        )
        .await
        .expect("the feed remembers revision 2");
    }

    /// The LISTEN connection is killed: the feed reconnects by itself and wakes its waiters.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_change_feed_reconnects_and_wakes_every_waiter() {
        let db = TestDatabase::create();
        let feed = PgChangeFeed::start(&db.url, 1000);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !feed.is_listening() {
            assert!(
                std::time::Instant::now() < deadline,
                "the feed never listened"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let waiter = tokio::spawn({
            let feed = feed.clone();
            async move {
                feed.wait(Uuid::new_v4(), 0, Duration::from_secs(3600))
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let mut killer = raw(&db);
        diesel::sql_query(format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = '{}'",
            store_postgres::CHANGE_FEED_APPLICATION_NAME
        ))
        .execute(&mut killer)
        .unwrap();
        tokio::time::timeout(Duration::from_secs(120), waiter)
            .await
            .expect("woken after the reconnect")
            .unwrap();
        assert!(
            feed.is_listening(),
            "woken by the reconnect, so listening again"
        );
    }
}

/// The watch cache through two "processes" (each its own pool, change feed and cache) on one
/// database: the consistency model of `Freshness::Recent`, end to end.
mod watch_cache {
    use super::*;
    use domain::ports::storage::{Page, PageRequest};
    use store_postgres::{CHANGE_FEED_APPLICATION_NAME, CachedStore, PgChangeFeed};

    struct Process {
        cache: CachedStore,
        feed: PgChangeFeed,
    }

    async fn process(db: &TestDatabase) -> Process {
        let feed = PgChangeFeed::start(&db.url, 1000);
        let cache = CachedStore::new(store(db), &feed);
        eventually("the feed listens", || async { feed.is_listening() }).await;
        Process { cache, feed }
    }

    /// Waits for `ready`, failing after a minute (never a timing assertion: only a hang guard).
    async fn eventually<F, Fut>(what: &str, ready: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !ready().await {
            assert!(std::time::Instant::now() < deadline, "never: {what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn recent(p: &Process, id: Uuid) -> Cluster {
        p.cache
            .cluster(id, Freshness::Recent)
            .await
            .unwrap()
            .unwrap()
    }

    async fn describe(p: &Process, c: &Cluster, text: &str) -> i64 {
        let changed = Cluster {
            description: Some(text.into()),
            ..c.clone()
        };
        p.cache
            .commit(write(
                c.id,
                Some(c.revision),
                vec![Change::UpdateCluster(changed)],
            ))
            .await
            .unwrap()
    }

    fn in_zone(org: Uuid, name: &str, zone: &str) -> Cluster {
        Cluster {
            zone: zone.into(),
            ..cluster(org, name)
        }
    }

    async fn list(
        p: &Process,
        org: Uuid,
        zone: Option<&str>,
        page: u32,
        f: Freshness,
    ) -> Page<Cluster> {
        let page = PageRequest { page, size: 3 };
        p.cache
            .list_clusters(org, zone.map(str::to_owned), page, f)
            .await
            .unwrap()
    }

    /// Every page, in every zone and each zone, answered from memory as the database answers it.
    async fn lists_match_the_database(p: &Process, org: Uuid) {
        for zone in [None, Some("zone-1"), Some("zone-2"), Some("zone-9")] {
            for page in 1..=4 {
                let from_memory = list(p, org, zone, page, Freshness::Recent).await;
                let from_db = list(p, org, zone, page, Freshness::Latest).await;
                assert_eq!(from_memory, from_db, "zone {zone:?}, page {page}");
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn own_writes_show_at_once_and_reads_are_then_served_from_memory() {
        let db = TestDatabase::create();
        let p = process(&db).await;
        let c = cluster(Uuid::new_v4(), "mine");
        p.cache
            .commit(write(c.id, None, vec![Change::InsertCluster(c.clone())]))
            .await
            .unwrap();
        let mut current = recent(&p, c.id).await;
        let hits = p.cache.stats().hits;
        assert_eq!(recent(&p, c.id).await, current);
        assert_eq!(p.cache.stats().hits, hits + 1, "the second read is a hit");
        for n in 0..20 {
            let text = format!("change {n}");
            let revision = describe(&p, &current, &text).await;
            current = recent(&p, c.id).await;
            assert_eq!(
                (current.revision, current.description.as_deref()),
                (revision, Some(text.as_str()))
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn another_process_write_shows_once_notified_and_at_once_without_the_cache() {
        let db = TestDatabase::create();
        let (p, q) = (process(&db).await, process(&db).await);
        let c = cluster(Uuid::new_v4(), "shared");
        insert(&store(&db), &c).await.unwrap();
        let cached = recent(&p, c.id).await;
        let revision = describe(&q, &cached, "changed by q").await;
        let latest = p
            .cache
            .cluster(c.id, Freshness::Latest)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(latest.revision, revision);
        eventually("p's cache shows q's write", || async {
            recent(&p, c.id).await.revision == revision
        })
        .await;
        assert_eq!(recent(&p, c.id).await, latest);
    }

    /// The feed's connection is killed, and a write lands that no notification announces: when
    /// the feed is back, the cache must have forgotten what it held, or it would hide the
    /// write for ever.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_write_the_feed_missed_while_its_connection_was_down_is_never_hidden() {
        let db = TestDatabase::create();
        let p = process(&db).await;
        let c = cluster(Uuid::new_v4(), "behind");
        insert(&store(&db), &c).await.unwrap();
        assert_eq!(recent(&p, c.id).await.revision, 1);
        let listener_pid = |conn: &mut PgConnection| -> Vec<i32> {
            #[derive(diesel::QueryableByName)]
            struct Pid {
                #[diesel(sql_type = diesel::sql_types::Integer)]
                pid: i32,
            }
            diesel::sql_query(format!(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() \
                 AND application_name = '{CHANGE_FEED_APPLICATION_NAME}'"
            ))
            .load::<Pid>(conn)
            .unwrap()
            .into_iter()
            .map(|p| p.pid)
            .collect()
        };
        let mut conn = raw(&db);
        let before = listener_pid(&mut conn);
        assert_eq!(before.len(), 1);
        // One round trip, so the write lands while the feed is still away (it waits at least
        // 100 ms before connecting again).
        diesel::connection::SimpleConnection::batch_execute(
            &mut conn,
            &format!(
                "SELECT pg_terminate_backend({}); \
                 UPDATE clusters SET description = 'behind the feed', revision = revision + 1 \
                 WHERE id = '{}'",
                before[0], c.id
            ),
        )
        .unwrap();
        eventually("the feed has a new connection", || {
            let now = listener_pid(&mut raw(&db));
            let fresh = now.len() == 1 && now != before;
            async move { fresh }
        })
        .await;
        eventually("the feed listens again", || async { p.feed.is_listening() }).await;
        let read = recent(&p, c.id).await;
        assert_eq!(
            (read.revision, read.description.as_deref()),
            (2, Some("behind the feed"))
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lists_from_memory_are_the_database_pages_and_follow_both_processes() {
        let db = TestDatabase::create();
        let (p, q) = (process(&db).await, process(&db).await);
        let (org, other_org) = (Uuid::new_v4(), Uuid::new_v4());
        let mut mine = Vec::new();
        for n in 0..7 {
            let zone = if n % 3 == 0 { "zone-2" } else { "zone-1" };
            let c = in_zone(org, &format!("c{n}"), zone);
            p.cache
                .commit(write(c.id, None, vec![Change::InsertCluster(c.clone())]))
                .await
                .unwrap();
            mine.push(c);
        }
        insert(&store(&db), &cluster(other_org, "c0"))
            .await
            .unwrap();
        lists_match_the_database(&p, org).await;

        // This process's own creation and removal show at once.
        let created = in_zone(org, "made-by-p", "zone-2");
        p.cache
            .commit(write(
                created.id,
                None,
                vec![Change::InsertCluster(created.clone())],
            ))
            .await
            .unwrap();
        let removed = &mine[1];
        p.cache
            .commit(write(removed.id, Some(1), vec![Change::RemoveCluster]))
            .await
            .unwrap();
        let first = list(&p, org, None, 1, Freshness::Recent).await;
        assert_eq!(first.total, 7);
        assert!(first.items.iter().all(|c| c.id != removed.id));
        lists_match_the_database(&p, org).await;

        // Another process's creation shows once notified.
        let by_q = in_zone(org, "made-by-q", "zone-1");
        q.cache
            .commit(write(
                by_q.id,
                None,
                vec![Change::InsertCluster(by_q.clone())],
            ))
            .await
            .unwrap();
        eventually("p's list shows q's creation", || async {
            list(&p, org, None, 3, Freshness::Recent).await.total == 8
        })
        .await;
        lists_match_the_database(&p, org).await;

        // The other organization's cluster never shows in this list, nor this one's in its.
        let theirs = list(&p, other_org, None, 1, Freshness::Recent).await;
        assert_eq!(theirs.total, 1);
        assert!(theirs.items.iter().all(|c| c.organization_id == other_org));
    }
}
