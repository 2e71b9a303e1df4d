//! The simulated cloud: the embedded default [`CloudProvider`](domain::ports::provisioning::CloudProvider).
//!
//! It carries out the reconciler's steps like a small cloud would (a delay per step, a CA and a
//! token per control plane, endpoints that follow the exposure, hub registration outcomes) and
//! can be told to fail steps, permanently or at a rate, through documented settings (see
//! [`config`]). It keeps an in-memory record of what exists for observability and tests only:
//! several server processes may share one database, each with its own simulated cloud, so no
//! answer depends on that record.

mod api_server;
mod cloud;
pub mod config;
mod credentials;

pub use api_server::{ApiAnswer, SimulatedApiServer};
pub use cloud::{Inventory, SimCluster, SimulatedCloud, endpoint_for};
pub use config::{FaultConfig, SettingError, SimConfig};

#[cfg(test)]
pub(crate) mod test_steps {
    use std::net::Ipv4Addr;

    use chrono::Utc;
    use domain::model::cluster::Exposure;
    use domain::model::firewall::{
        Direction, FirewallRule, FirewallRuleStatus, Ipv4Cidr, PortRange, Protocol,
    };
    use domain::ports::provisioning::Step;
    use uuid::Uuid;

    pub fn rule(cluster_id: Uuid) -> FirewallRule {
        FirewallRule {
            id: Uuid::new_v4(),
            cluster_id,
            name: None,
            description: None,
            direction: Direction::Ingress,
            protocol: Protocol::Tcp,
            source_cidrs: vec![Ipv4Cidr::parse("203.0.113.0/24").unwrap_or_else(|e| panic!("{e}"))],
            port_range: Some(PortRange { from: 443, to: 443 }),
            status: FirewallRuleStatus::Pending,
            failure_reason: None,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    /// One step of every kind, for `cluster_id`.
    pub fn one_of_each(cluster_id: Uuid) -> Vec<Step> {
        let eip = Uuid::new_v4();
        let address = Ipv4Addr::new(10, 96, 0, 1);
        vec![
            Step::CreateControlPlane {
                cluster_id,
                cluster_name: "prod-1".into(),
                zone: "zone-1".into(),
                version: "v1.32.4".into(),
                exposure: Exposure::Public,
                control_plane_firewall: Default::default(),
            },
            Step::RegisterHub { cluster_id },
            Step::InstallDefaultEnvironment { cluster_id },
            Step::CreateNode {
                cluster_id,
                pool: "default".into(),
                node: "default-abc12".into(),
                size: "kube.c5.xlarge".into(),
                version: "v1.32.4".into(),
                labels: Default::default(),
                taints: Vec::new(),
            },
            Step::ConfigureNode {
                cluster_id,
                node: "default-abc12".into(),
                labels: [("role".to_owned(), "web".to_owned())].into(),
                taints: Vec::new(),
            },
            Step::DeleteNode {
                cluster_id,
                node: "default-abc12".into(),
            },
            Step::AttachAddress {
                cluster_id,
                elastic_ip_id: eip,
                address,
                exposure: Exposure::Private,
            },
            Step::DetachAddress {
                cluster_id,
                elastic_ip_id: eip,
                address,
            },
            Step::ApplyFirewallRule {
                rule: rule(cluster_id),
            },
            Step::RemoveFirewallRule {
                cluster_id,
                rule_id: Uuid::new_v4(),
            },
            Step::SetExposure {
                cluster_id,
                cluster_name: "prod-1".into(),
                to: Exposure::Private,
            },
            Step::SetControlPlaneFirewall {
                cluster_id,
                firewall: Default::default(),
            },
            Step::DestroyCluster { cluster_id },
        ]
    }
}
