//! Elastic IPs, and what the assistant may do with them.

use super::*;

fn eip(status: ElasticIpStatus) -> ElasticIp {
    ElasticIp {
        id: uuid::Uuid::from_u128(0xe1),
        cluster_id: CLUSTER_1,
        name: None,
        exposure: Exposure::Private,
        status,
        address: std::net::Ipv4Addr::new(10, 96, 0, 1),
        failure_reason: None,
        created_at: at(0),
        updated_at: at(0),
    }
}

fn eip_ready(network_mode: NetworkMode, private: &str, public: Option<&str>) -> Mocks {
    let mut c = cluster(ORG_A, ClusterPhase::Provisioned);
    c.network_mode = network_mode;
    let mut m = Mocks::new().with_cluster(c);
    let private = AddressPool::new(Ipv4Cidr::parse(private).unwrap());
    let public = public.map(|p| AddressPool::new(Ipv4Cidr::parse(p).unwrap()));
    m.cloud.expect_address_pool().returning(move |e| {
        if e == Exposure::Private {
            Some(private)
        } else {
            public
        }
    });
    m.clusters.expect_elastic_ips().returning(|_| Ok(vec![]));
    m.clusters.expect_commit().returning(|_| Ok(6));
    m
}

fn eip_body(name: Option<&str>, exposure: Option<Exposure>) -> CreateElasticIpRequest {
    CreateElasticIpRequest {
        name: name.map(Into::into),
        exposure,
    }
}

#[test]
fn elastic_ip_intranet_allows_only_private() {
    let mut m = eip_ready(
        NetworkMode::Intranet,
        "10.96.0.0/16",
        Some("198.51.100.0/24"),
    );
    m.clusters
        .expect_addresses_in_use()
        .returning(|_| Ok(Default::default()));
    let s = m.services();
    let r = block_on(s.create_elastic_ip(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        eip_body(None, Some(Exposure::Public)),
    ));
    assert_eq!(code(r), "exposure_mismatch");
    let ok = block_on(s.create_elastic_ip(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        eip_body(Some("web"), Some(Exposure::Private)),
    ));
    let v = ok.unwrap().fresh().unwrap();
    assert_eq!(
        (v.status, v.address.clone(), v.annotation.key.as_str()),
        (ElasticIpStatus::Pending, None, "k8s.example.com/elastic-ip")
    );
}

#[test]
fn elastic_ip_internet_allows_only_public() {
    let mut m = eip_ready(
        NetworkMode::Internet,
        "10.96.0.0/16",
        Some("198.51.100.0/24"),
    );
    m.clusters
        .expect_addresses_in_use()
        .returning(|_| Ok(Default::default()));
    let s = m.services();
    let r = block_on(s.create_elastic_ip(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        eip_body(None, Some(Exposure::Private)),
    ));
    assert_eq!(code(r), "exposure_mismatch");
    let ok = block_on(s.create_elastic_ip(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        eip_body(None, None),
    ));
    assert_eq!(
        ok.unwrap().fresh().map(|v| v.exposure),
        Some(Exposure::Public),
        "omitted exposure follows the network mode"
    );
}

#[test]
fn elastic_ip_public_pool_disabled_is_503() {
    let s = eip_ready(NetworkMode::Internet, "10.96.0.0/16", None).services();
    let r = block_on(s.create_elastic_ip(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        eip_body(None, Some(Exposure::Public)),
    ));
    assert_eq!(code(r), "capacity_exhausted");
}

#[test]
fn elastic_ip_exhausted_pool_is_503() {
    let mut m = eip_ready(NetworkMode::Intranet, "192.0.2.0/30", None);
    m.clusters.expect_addresses_in_use().returning(|_| {
        Ok([
            std::net::Ipv4Addr::new(192, 0, 2, 1),
            std::net::Ipv4Addr::new(192, 0, 2, 2),
        ]
        .into_iter()
        .collect())
    });
    let r = block_on(m.services().create_elastic_ip(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        eip_body(None, None),
    ));
    assert_eq!(code(r), "capacity_exhausted");
}

#[test]
fn elastic_ip_release_only_from_ready_or_failed() {
    for (from, expected) in [
        (ElasticIpStatus::Ready, "ok"),
        (ElasticIpStatus::Failed, "ok"),
        (ElasticIpStatus::Pending, "invalid_state"),
        (ElasticIpStatus::Provisioning, "invalid_state"),
        (ElasticIpStatus::Deleting, "invalid_state"),
    ] {
        let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
        m.clusters
            .expect_elastic_ips()
            .returning(move |_| Ok(vec![eip(from)]));
        m.clusters.expect_commit().returning(|_| Ok(6));
        let r = block_on(m.services().release_elastic_ip(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            uuid::Uuid::from_u128(0xe1),
            None,
        ));
        assert_eq!(code(r.clone()), expected, "{from:?}");
        if let Ok(a) = r {
            assert_eq!(a.fresh().map(|v| v.status), Some(ElasticIpStatus::Deleting));
        }
    }
}

#[test]
fn assistant_may_list_but_not_allocate_or_release_elastic_ips() {
    let mut who = super_admin_a();
    who.client = ClientKind::Assistant;
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters
        .expect_elastic_ips()
        .returning(|_| Ok(vec![eip(ElasticIpStatus::Ready)]));
    m.clusters.expect_commit().never();
    let s = m.services();
    let id = CLUSTER_1;
    assert_eq!(
        block_on(s.list_elastic_ips(&who, id)).map(|l| l.len()),
        Ok(1)
    );
    assert_eq!(
        code(block_on(s.create_elastic_ip(
            Command::new(&who),
            id,
            eip_body(None, None)
        ))),
        "assistant_not_allowed"
    );
    assert_eq!(
        code(block_on(s.release_elastic_ip(
            Command::new(&who),
            id,
            uuid::Uuid::from_u128(0xe1),
            None
        ))),
        "assistant_not_allowed"
    );
    let rule = icmp_rule();
    assert_eq!(
        code(block_on(s.create_firewall_rule(
            Command::new(&who),
            id,
            rule
        ))),
        "assistant_not_allowed"
    );
    assert_eq!(
        code(block_on(s.delete_firewall_rule(
            Command::new(&who),
            id,
            uuid::Uuid::from_u128(1),
            None
        ))),
        "assistant_not_allowed"
    );
}
