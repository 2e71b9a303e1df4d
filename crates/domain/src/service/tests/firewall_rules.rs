//! Firewall rules.

use super::*;

use crate::input::firewall::PortRangeRequest;

#[test]
fn firewall_rule_create_needs_a_provisioned_cluster() {
    for phase in [
        ClusterPhase::Pending,
        ClusterPhase::Provisioning,
        ClusterPhase::ControlPlaneReady,
    ] {
        let s = Mocks::new().with_cluster(cluster(ORG_A, phase)).services();
        let rule = icmp_rule();
        let r = block_on(s.create_firewall_rule(Command::new(&super_admin_a()), CLUSTER_1, rule));
        assert_eq!(code(r), "cluster_not_provisioned", "{phase:?}");
    }
}

#[test]
fn firewall_rule_create_on_a_provisioned_cluster_is_pending() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters.expect_firewall_rules().returning(|_| Ok(vec![]));
    m.clusters.expect_commit().returning(|_| Ok(6));
    let rule = CreateFirewallRuleRequest {
        name: Some("https".into()),
        protocol: Some("tcp".into()),
        source_cidrs: Some(vec!["203.0.113.0/24".into()]),
        port_range: Some(PortRangeRequest { from: 443, to: 443 }),
        ..Default::default()
    };
    let r = block_on(m.services().create_firewall_rule(
        Command::new(&super_admin_a()),
        CLUSTER_1,
        rule,
    ))
    .unwrap()
    .fresh()
    .unwrap();
    assert_eq!(
        r.status,
        crate::model::firewall::FirewallRuleStatus::Pending
    );
}

#[test]
fn firewall_rule_with_17_cidrs_is_422() {
    let s = Mocks::new()
        .with_cluster(cluster(ORG_A, ClusterPhase::Provisioned))
        .services();
    let cidrs: Vec<String> = (0..17).map(|i| format!("10.{i}.0.0/16")).collect();
    let rule = CreateFirewallRuleRequest {
        protocol: Some("udp".into()),
        source_cidrs: Some(cidrs),
        port_range: Some(PortRangeRequest { from: 53, to: 53 }),
        ..Default::default()
    };
    assert_eq!(
        code(block_on(s.create_firewall_rule(
            Command::new(&super_admin_a()),
            CLUSTER_1,
            rule
        ))),
        "validation_failed"
    );
}
