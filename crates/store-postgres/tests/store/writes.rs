//! Writes and reads of clusters and everything under them.

use super::*;
use domain::model::kubeconfig::SealedCredentials;
use domain::model::node::{Node, NodeStatus};
use domain::model::secret::SealedSecret;
use domain::names::NodeName;
use domain::ports::storage::{PageRequest, ZoneCapacity};

fn node(name: &str, pool: &str) -> Node {
    Node {
        name: NodeName::parse(name).unwrap(),
        pool: label(pool),
        status: NodeStatus::Provisioning,
        version: "v1.32.4".into(),
        created_at: now(),
        labels: [("team".to_owned(), "a".to_owned())].into(),
        taints: vec![domain::model::node_pool::Taint {
            key: "example.com/dedicated".into(),
            value: String::new(),
            effect: domain::model::node_pool::TaintEffect::NoExecute,
        }],
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

/// A zone's demand, summed over its usage rows, is what its live pools ask for: after creates
/// running at once in two zones, removals, and the counting migration undone and redone
/// (which rebuilds the rows from the pools).
#[tokio::test]
async fn zone_demand_is_the_sum_of_the_zones_pools_after_concurrent_writes() {
    use diesel_migrations::MigrationHarness;

    let db = TestDatabase::create();
    let store = store(&db);
    let org = Uuid::new_v4();
    let clusters: Vec<Cluster> = (0..40)
        .map(|i| {
            let mut c = cluster(org, &format!("c{i}"));
            c.zone = if i % 3 == 0 { "zone-2" } else { "zone-1" }.into();
            c.node_pools[0].count = 1 + i % 5;
            c
        })
        .collect();
    let inserts = clusters.iter().map(|c| insert(&store, c));
    for result in futures::future::join_all(inserts).await {
        assert_eq!(result, Ok(1));
    }
    for c in clusters.iter().step_by(7) {
        store
            .commit(write(c.id, Some(1), vec![Change::RemoveCluster]))
            .await
            .unwrap();
    }
    let expected = |zone: &str| -> u64 {
        clusters
            .iter()
            .enumerate()
            .filter(|(i, c)| c.zone == zone && i % 7 != 0)
            .map(|(_, c)| u64::from(c.node_pools[0].count))
            .sum()
    };
    for zone in ["zone-1", "zone-2"] {
        assert_eq!(
            store.zone_node_demand(zone.into()).await.unwrap(),
            expected(zone),
            "{zone}"
        );
    }

    let mut conn = raw(&db);
    // Back to before the migration that spread the counts (and any after it), then forward.
    loop {
        let reverted = conn
            .revert_last_migration(store_postgres::MIGRATIONS)
            .unwrap();
        if reverted.to_string() == "20261125000001" {
            break;
        }
    }
    conn.run_pending_migrations(store_postgres::MIGRATIONS)
        .unwrap();
    for zone in ["zone-1", "zone-2", "zone-3"] {
        assert_eq!(
            store.zone_node_demand(zone.into()).await.unwrap(),
            expected(zone),
            "{zone} after the migration ran again"
        );
    }
}

/// A write that adds nodes carries its zone's limit and is refused whole when the zone's other
/// clusters leave no room: a create (one call of `kubesvc_create_cluster`) and a pool added to
/// a cluster (the transaction of every other write) alike. Up to the limit exactly is allowed.
#[tokio::test]
async fn a_write_past_its_zones_capacity_writes_nothing() {
    let db = TestDatabase::create();
    let store = store(&db);
    let org = Uuid::new_v4();
    let limit = |adds: u64| ZoneCapacity {
        zone: "zone-1".into(),
        adds,
        capacity: 5,
    };
    let create = |name: &str, count: u32| {
        let mut c = cluster(org, name);
        c.node_pools[0].count = count;
        let mut w = write(c.id, None, vec![Change::InsertCluster(c.clone())]);
        w.reconcile = true;
        w.zone_capacity = Some(limit(u64::from(count)));
        let lease = Uuid::new_v4();
        let key = format!("key-of-{name}");
        w.idempotency = Some(completion(org, &key, lease, b"{}"));
        (c, w, claim_record(org, &key, lease, now()))
    };
    let (first, w, claim) = create("first", 3);
    store.claim(claim).await.unwrap();
    assert_eq!(store.commit(w).await, Ok(1));

    let (refused, w, claim) = create("refused", 3);
    store.claim(claim).await.unwrap();
    assert_eq!(store.commit(w).await, Err(StoreError::CapacityExhausted));
    assert_eq!(store.cluster(refused.id, Freshness::Latest).await, Ok(None));
    let mut conn = raw(&db);
    let of_refused = |table: &str| format!("{table} WHERE cluster_id = '{}'", refused.id);
    for table in ["node_pools", "operations", "cluster_change_log"] {
        assert_eq!(count(&mut conn, &of_refused(table)), 0, "{table}");
    }
    assert_eq!(
        count(
            &mut conn,
            "idempotency_keys WHERE key = 'key-of-refused' AND state = 'in_progress'"
        ),
        1,
        "the key keeps waiting for the request's answer"
    );

    let mut grown = first.clone();
    grown.node_pools.push(pool("more", now()));
    let mut w = write(
        first.id,
        Some(1),
        vec![Change::InsertPool(grown.node_pools[1].clone())],
    );
    w.zone_capacity = Some(limit(3));
    assert_eq!(store.commit(w).await, Err(StoreError::CapacityExhausted));
    assert_eq!(
        store.revision(first.id).await.unwrap().map(|r| r.0),
        Some(1)
    );

    let (exact, w, claim) = create("exact", 2);
    store.claim(claim).await.unwrap();
    assert_eq!(
        store.commit(w).await,
        Ok(1),
        "3 + 2 nodes fill the zone exactly"
    );
    assert_eq!(store.zone_node_demand("zone-1".into()).await, Ok(5));
    assert!(
        store
            .cluster(exact.id, Freshness::Latest)
            .await
            .unwrap()
            .is_some()
    );
}

/// The automatic upgrades' candidates are the clusters whose maintenance window is open now and
/// had no automatic upgrade in it yet: closed windows never fill the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_upgrade_candidates_are_the_clusters_whose_window_is_open() {
    use diesel::connection::SimpleConnection;
    use domain::model::maintenance_window::open_windows;
    let db = TestDatabase::create();
    let store = store(&db);
    let mut conn = raw(&db);
    let org = Uuid::new_v4();
    // A Tuesday, 02:30 UTC.
    let now = DateTime::parse_from_rfc3339("2026-12-01T02:30:00Z")
        .unwrap()
        .with_timezone(&Utc);
    // (name, day, start, last automatic upgrade, a candidate?)
    let cases = [
        ("any-0100", "any", "01:00", None, true),
        ("tuesday-0000", "tuesday", "00:00", None, true),
        ("monday-2300", "monday", "23:00", None, true),
        ("wednesday-0100", "wednesday", "01:00", None, false),
        ("any-0300", "any", "03:00", None, false),
        (
            "any-0100-done",
            "any",
            "01:00",
            Some("2026-12-01T01:00:00Z"),
            false,
        ),
        (
            "any-0100-last-week",
            "any",
            "01:00",
            Some("2026-11-24T01:00:00Z"),
            true,
        ),
    ];
    let mut wanted = Vec::new();
    for (name, day, start, last, candidate) in cases {
        let c = cluster(org, name);
        insert(&store, &c).await.unwrap();
        let last = last.map_or("NULL".to_owned(), |t| format!("'{t}'"));
        conn.batch_execute(&format!(
            "UPDATE clusters SET phase = 'Provisioned', auto_upgrade = true, \
                 maintenance_day = '{day}', maintenance_start_time = '{start}', \
                 last_auto_upgrade_window = {last} WHERE id = '{}'",
            c.id
        ))
        .unwrap();
        if candidate {
            wanted.push(c.id);
        }
    }
    let mut found = store
        .auto_upgrade_candidates(&open_windows(now), 100)
        .await
        .unwrap();
    found.sort();
    wanted.sort();
    assert_eq!(found, wanted);
    assert!(
        store
            .auto_upgrade_candidates(&[], 100)
            .await
            .unwrap()
            .is_empty()
    );
}
