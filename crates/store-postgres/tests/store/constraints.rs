//! What the schema refuses: unique names, and the rules a write must keep.

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
    let expected: std::collections::HashSet<_> = [[10, 96, 0, 2], [10, 96, 0, 3], [10, 96, 0, 4]]
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
        format!("UPDATE clusters SET tags = ARRAY['ok', NULL] WHERE id = '{id}'"),
        format!("UPDATE clusters SET tags = ARRAY['ok', ''] WHERE id = '{id}'"),
        format!("UPDATE clusters SET tags = ARRAY['a,b'] WHERE id = '{id}'"),
        format!("UPDATE clusters SET tags = ARRAY[repeat('a', 64)] WHERE id = '{id}'"),
        format!("UPDATE clusters SET tags = ARRAY[['a', 'b'], ['c', 'd']] WHERE id = '{id}'"),
        format!("UPDATE clusters SET name = repeat('a', 64) WHERE id = '{id}'"),
        format!("UPDATE clusters SET name = 'trailing-' WHERE id = '{id}'"),
        format!("UPDATE node_pools SET name = 'Pool' WHERE cluster_id = '{id}'"),
        format!("UPDATE node_pools SET status = 'Gone' WHERE cluster_id = '{id}'"),
        format!("UPDATE node_pools SET count = 201 WHERE cluster_id = '{id}'"),
        format!("UPDATE node_pools SET count = -1 WHERE cluster_id = '{id}'"),
        format!("UPDATE node_pools SET min_nodes = -1 WHERE cluster_id = '{id}'"),
        format!("UPDATE node_pools SET max_nodes = 0 WHERE cluster_id = '{id}'"),
        format!("UPDATE node_pools SET max_nodes = 201 WHERE cluster_id = '{id}'"),
        format!("UPDATE node_pools SET min_nodes = 6 WHERE cluster_id = '{id}'"),
        format!("UPDATE node_pools SET labels = '[]' WHERE cluster_id = '{id}'"),
        format!("UPDATE node_pools SET taints = '{{}}' WHERE cluster_id = '{id}'"),
        format!(
            "UPDATE node_pools SET taints = (SELECT jsonb_agg(jsonb_build_object('key', 'k' || i, 'value', '', 'effect', 'NoSchedule')) FROM generate_series(1, 51) AS i) WHERE cluster_id = '{id}'"
        ),
        format!("UPDATE clusters SET control_plane_firewall_enabled = true, control_plane_firewall_allowed = '{{}}' WHERE id = '{id}'"),
        format!("UPDATE clusters SET control_plane_firewall_allowed = (SELECT array_agg('10.' || i || '.0.0/16') FROM generate_series(1, 101) AS i) WHERE id = '{id}'"),
        format!("UPDATE clusters SET control_plane_firewall_change_enabled = true WHERE id = '{id}'"),
        format!("UPDATE clusters SET control_plane_firewall_change_enabled = true, control_plane_firewall_change_allowed = '{{}}' WHERE id = '{id}'"),
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
            "INSERT INTO elastic_ips (id, cluster_id, name, exposure, status, address, created_at, updated_at) \
             VALUES (gen_random_uuid(), '{id}', 'Web', 'private', 'Ready', '10.0.0.9', now(), now())"
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
        "INSERT INTO auth_servers (id, organization_id, organization_slug, name, environment, type, created_at, updated_at) \
         VALUES (gen_random_uuid(), gen_random_uuid(), 'acme', 'sso', 'Prod', 'token', now(), now())"
            .to_owned(),
        "INSERT INTO auth_servers (id, organization_id, organization_slug, name, environment, type, created_at, updated_at) \
         VALUES (gen_random_uuid(), gen_random_uuid(), 'acme', '-sso', 'prod', 'token', now(), now())"
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
    use domain::model::audit::{Actor, AuditEvent, AuditResource, Channel, Outcome, Parent};
    use domain::model::auth_server::{AuthServer, AuthServerConfig, BasicConfig, BasicCredential};
    use domain::model::identity::ClientKind;
    use domain::model::secret::PasswordHash;
    use domain::ports::storage::{AuthServerChange, AuthServerRepository, AuthServerWrite};

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
    let audit = |id: Uuid| AuditEvent {
        id: Uuid::new_v4(),
        organization_id: org,
        at: now(),
        actor: Actor {
            user_id: "alice".into(),
            email: None,
            client: ClientKind::Api,
        },
        via: Channel::Api,
        resource: AuditResource::AuthServer,
        resource_id: id.to_string(),
        parent: Some(Parent::AuthServer(id)),
        action: "created".into(),
        changes: serde_json::json!({}),
        request_id: None,
        outcome: Outcome::Applied,
        approval: None,
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
