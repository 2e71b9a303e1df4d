//! Firewall rules.

use super::*;

#[test]
fn firewall_rule_create_needs_a_provisioned_cluster() {
    for phase in [
        ClusterPhase::Pending,
        ClusterPhase::Provisioning,
        ClusterPhase::ControlPlaneReady,
    ] {
        let s = Mocks::new().with_cluster(cluster(ORG_A, phase)).services();
        let rule: CreateFirewallRuleRequest =
            serde_json::from_value(json!({"protocol": "icmp", "source_cidrs": ["10.0.0.0/8"]}))
                .unwrap();
        let r =
            block_on(s.create_firewall_rule(&super_admin_a(), &CLUSTER_1.to_string(), rule, None));
        assert_eq!(code(r), "cluster_not_provisioned", "{phase:?}");
    }
}

#[test]
fn firewall_rule_create_on_a_provisioned_cluster_is_pending() {
    let mut m = Mocks::new().with_cluster(cluster(ORG_A, ClusterPhase::Provisioned));
    m.clusters.expect_firewall_rules().returning(|_| Ok(vec![]));
    m.clusters.expect_commit().returning(|_| Ok(6));
    let rule: CreateFirewallRuleRequest = serde_json::from_value(json!({"name": "https", "protocol": "tcp", "source_cidrs": ["203.0.113.0/24"], "port_range": {"from": 443, "to": 443}})).unwrap();
    let r = block_on(m.services().create_firewall_rule(
        &super_admin_a(),
        &CLUSTER_1.to_string(),
        rule,
        None,
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
    let rule: CreateFirewallRuleRequest = serde_json::from_value(
        json!({"protocol": "udp", "source_cidrs": cidrs, "port_range": {"from": 53, "to": 53}}),
    )
    .unwrap();
    assert_eq!(
        code(block_on(s.create_firewall_rule(
            &super_admin_a(),
            &CLUSTER_1.to_string(),
            rule,
            None
        ))),
        "validation_failed"
    );
}
