//! [`SimulatedCloud`]: executes steps after the configured delay, injects the configured
//! faults, and records what exists.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Mutex, MutexGuard};

use async_trait::async_trait;
use domain::model::cluster::{
    ControlPlaneFirewall, Exposure, Registration, RegistrationReason, SubStatus,
};
use domain::model::elastic_ip::AddressPool;
use domain::model::node_pool::Taint;
use domain::ports::provisioning::{CloudProvider, Endpoint, ProviderError, Step, StepOutcome};
use rand::Rng;
use uuid::Uuid;

use crate::config::SimConfig;
use crate::credentials;

/// What the simulation believes exists for one cluster. For observability and tests only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimCluster {
    /// Unknown when this process first heard of the cluster from a later step (another process
    /// created it).
    pub name: Option<String>,
    pub endpoint: Option<Endpoint>,
    /// The control plane's Kubernetes version, once created or upgraded by this process.
    pub version: Option<String>,
    /// Node name → pool name.
    pub nodes: BTreeMap<String, String>,
    /// Node name → the Kubernetes labels and taints set on it.
    pub node_config: BTreeMap<String, (BTreeMap<String, String>, Vec<Taint>)>,
    /// What the API server admits; `None` until this process heard of the control plane.
    pub control_plane_firewall: Option<ControlPlaneFirewall>,
    /// Elastic IP id → attached address.
    pub addresses: BTreeMap<Uuid, Ipv4Addr>,
    pub firewall_rules: BTreeSet<Uuid>,
    pub hub_registration: Option<Registration>,
    pub default_environment: Option<Registration>,
}

/// Every cluster the simulation has seen and not destroyed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    pub clusters: BTreeMap<Uuid, SimCluster>,
}

/// The simulated cloud provider.
#[derive(Debug)]
pub struct SimulatedCloud {
    config: SimConfig,
    inventory: Mutex<Inventory>,
}

/// The API endpoint of a cluster for an exposure (port 6443 is implied).
///
/// - public: `<name>-<first 8 hex digits of the id><PUBLIC_HOSTNAME_SUFFIX>`, e.g.
///   `prod-1-3f2a9c4e.k8s.example.com`, also given as `public_hostname`;
/// - private: `<name>-<first 8 hex digits of the id>.internal`, e.g. `prod-1-3f2a9c4e.internal`,
///   a name only resolvable inside the cloud's network, with no `public_hostname`.
///
/// The id part keeps two clusters of one name (in two organizations) apart. The name is cut to
/// 54 characters so the first label stays within DNS's 63. The answer depends only on its
/// inputs, so repeating a step, or running it in another process, gives the same endpoint.
pub fn endpoint_for(
    config: &SimConfig,
    cluster_id: Uuid,
    cluster_name: &str,
    exposure: Exposure,
) -> Endpoint {
    let name: String = cluster_name.chars().take(54).collect();
    let name = name.trim_end_matches('-');
    let id: String = cluster_id.simple().to_string().chars().take(8).collect();
    match exposure {
        Exposure::Public => {
            let host = domain::model::cluster::public_hostname(
                cluster_name,
                cluster_id,
                &config.public_hostname_suffix,
            );
            Endpoint {
                public_hostname: Some(host.clone()),
                host,
            }
        }
        Exposure::Private => Endpoint {
            host: format!("{name}-{id}.internal"),
            public_hostname: None,
        },
    }
}

impl SimulatedCloud {
    pub fn new(config: SimConfig) -> Self {
        SimulatedCloud {
            config,
            inventory: Mutex::new(Inventory::default()),
        }
    }

    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// A copy of what the simulation believes exists.
    pub fn inventory(&self) -> Inventory {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inventory> {
        // The record is only ever replaced field by field, so one left by a panicking holder is
        // still usable.
        self.inventory
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn inject_faults(&self, step: &Step) -> Result<(), ProviderError> {
        let name = step.name();
        let faults = &self.config.faults;
        if faults.fail_steps.contains(name) {
            return Err(ProviderError::Permanent(format!(
                "injected failure of step {name}"
            )));
        }
        let flaky = faults.flaky_steps.is_empty() || faults.flaky_steps.contains(name);
        if flaky && faults.flaky_rate > 0.0 && rand::thread_rng().gen_bool(faults.flaky_rate) {
            return Err(ProviderError::Transient(format!(
                "injected transient failure of step {name}"
            )));
        }
        Ok(())
    }

    fn registration(&self, step_is_hub: bool) -> Registration {
        let fails_here = self
            .config
            .faults
            .hub_outcome
            .filter(|reason| is_hub_reason(*reason) == step_is_hub);
        match fails_here {
            Some(reason) => Registration {
                status: SubStatus::Failed,
                reason: Some(reason),
            },
            None => Registration {
                status: SubStatus::Ready,
                reason: None,
            },
        }
    }

    fn apply(&self, step: Step) -> Result<StepOutcome, ProviderError> {
        let outcome = match step {
            Step::CreateControlPlane {
                cluster_id,
                cluster_name,
                exposure,
                version,
                control_plane_firewall,
                ..
            } => {
                let credentials = credentials::issue(&cluster_name).map_err(|e| {
                    ProviderError::Transient(format!("issuing the cluster CA: {e}"))
                })?;
                let endpoint = endpoint_for(&self.config, cluster_id, &cluster_name, exposure);
                let mut inv = self.lock();
                let c = inv.clusters.entry(cluster_id).or_default();
                c.name = Some(cluster_name);
                c.endpoint = Some(endpoint.clone());
                c.version = Some(version);
                c.control_plane_firewall = Some(control_plane_firewall);
                StepOutcome::ControlPlane {
                    endpoint,
                    credentials,
                }
            }
            Step::SetExposure {
                cluster_id,
                cluster_name,
                to,
            } => {
                let endpoint = endpoint_for(&self.config, cluster_id, &cluster_name, to);
                let mut inv = self.lock();
                let c = inv.clusters.entry(cluster_id).or_default();
                c.name = Some(cluster_name);
                c.endpoint = Some(endpoint.clone());
                StepOutcome::Exposure(endpoint)
            }
            Step::RegisterHub { cluster_id } => {
                let r = self.registration(true);
                self.lock()
                    .clusters
                    .entry(cluster_id)
                    .or_default()
                    .hub_registration = Some(r);
                StepOutcome::Registration(r)
            }
            Step::InstallDefaultEnvironment { cluster_id } => {
                let r = self.registration(false);
                self.lock()
                    .clusters
                    .entry(cluster_id)
                    .or_default()
                    .default_environment = Some(r);
                StepOutcome::Registration(r)
            }
            Step::CreateNode {
                cluster_id,
                pool,
                node,
                labels,
                taints,
                ..
            } => {
                let mut inv = self.lock();
                let c = inv.clusters.entry(cluster_id).or_default();
                c.nodes.insert(node.clone(), pool);
                c.node_config.insert(node, (labels, taints));
                StepOutcome::Done
            }
            Step::ConfigureNode {
                cluster_id,
                node,
                labels,
                taints,
            } => {
                // Set whole, so repeating it changes nothing more.
                self.lock()
                    .clusters
                    .entry(cluster_id)
                    .or_default()
                    .node_config
                    .insert(node, (labels, taints));
                StepOutcome::Done
            }
            Step::DeleteNode { cluster_id, node } => {
                if let Some(c) = self.lock().clusters.get_mut(&cluster_id) {
                    c.nodes.remove(&node);
                    c.node_config.remove(&node);
                }
                StepOutcome::Done
            }
            Step::SetControlPlaneFirewall {
                cluster_id,
                firewall,
            } => {
                self.lock()
                    .clusters
                    .entry(cluster_id)
                    .or_default()
                    .control_plane_firewall = Some(firewall);
                StepOutcome::Done
            }
            Step::AttachAddress {
                cluster_id,
                elastic_ip_id,
                address,
                ..
            } => {
                self.lock()
                    .clusters
                    .entry(cluster_id)
                    .or_default()
                    .addresses
                    .insert(elastic_ip_id, address);
                StepOutcome::Done
            }
            Step::DetachAddress {
                cluster_id,
                elastic_ip_id,
                ..
            } => {
                if let Some(c) = self.lock().clusters.get_mut(&cluster_id) {
                    c.addresses.remove(&elastic_ip_id);
                }
                StepOutcome::Done
            }
            Step::ApplyFirewallRule { rule } => {
                self.lock()
                    .clusters
                    .entry(rule.cluster_id)
                    .or_default()
                    .firewall_rules
                    .insert(rule.id);
                StepOutcome::Done
            }
            Step::RemoveFirewallRule {
                cluster_id,
                rule_id,
            } => {
                if let Some(c) = self.lock().clusters.get_mut(&cluster_id) {
                    c.firewall_rules.remove(&rule_id);
                }
                StepOutcome::Done
            }
            Step::UpgradeControlPlane {
                cluster_id,
                version,
            } => {
                self.lock().clusters.entry(cluster_id).or_default().version = Some(version);
                StepOutcome::Done
            }
            Step::DestroyCluster { cluster_id } => {
                self.lock().clusters.remove(&cluster_id);
                StepOutcome::Done
            }
        };
        Ok(outcome)
    }
}

/// The hub's own refusals fail the registration; the platform's fail the default environment.
fn is_hub_reason(reason: RegistrationReason) -> bool {
    match reason {
        RegistrationReason::QuotaExceeded
        | RegistrationReason::HubConflict
        | RegistrationReason::HubRejected => true,
        RegistrationReason::WaitingForPlatform | RegistrationReason::PlatformInstallFailed => false,
    }
}

#[async_trait]
impl CloudProvider for SimulatedCloud {
    /// One zone size for every zone: the catalog decides which zones exist.
    fn zone_capacity(&self, _zone: &str) -> u64 {
        self.config.zone_max_nodes
    }

    fn address_pool(&self, exposure: Exposure) -> Option<AddressPool> {
        match exposure {
            Exposure::Private => Some(AddressPool::new(self.config.private_cidr)),
            Exposure::Public => self.config.public_cidr.map(AddressPool::new),
        }
    }

    async fn execute(&self, step: Step) -> Result<StepOutcome, ProviderError> {
        if !self.config.step_delay.is_zero() {
            tokio::time::sleep(self.config.step_delay).await;
        }
        let name = step.name();
        let result = self.inject_faults(&step).and_then(|()| self.apply(step));
        match &result {
            Ok(_) => tracing::debug!(step = name, "simulated step done"),
            Err(e) => tracing::info!(step = name, error = %e, "simulated step failed"),
        }
        result
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::HashMap;
    use std::time::Duration;

    use domain::model::firewall::Ipv4Cidr;

    use super::*;
    use crate::config::{FaultConfig, STEP_NAMES};
    use crate::test_steps;

    fn cloud(faults: FaultConfig) -> SimulatedCloud {
        SimulatedCloud::new(SimConfig {
            faults,
            ..SimConfig::for_tests()
        })
    }

    fn fail(names: &[&str]) -> FaultConfig {
        FaultConfig {
            fail_steps: names.iter().map(|s| (*s).to_owned()).collect(),
            ..FaultConfig::default()
        }
    }

    fn create(id: Uuid, name: &str, exposure: Exposure) -> Step {
        Step::CreateControlPlane {
            cluster_id: id,
            cluster_name: name.into(),
            zone: "zone-1".into(),
            version: "v1.32.4".into(),
            exposure,
            control_plane_firewall: ControlPlaneFirewall::default(),
        }
    }

    #[test]
    fn capacity_and_pools_come_from_the_config() {
        let settings: HashMap<String, String> = [
            ("ZONE_MAX_NODES", "7"),
            ("ELASTIC_IP_PUBLIC_CIDR", "192.0.2.0/30"),
            ("ELASTIC_IP_PRIVATE_CIDR", "10.1.0.0/24"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let c = SimulatedCloud::new(SimConfig::from_map(&settings).unwrap());
        assert_eq!(c.zone_capacity("zone-1"), 7);
        let public = c.address_pool(Exposure::Public).unwrap();
        assert_eq!(public.capacity(), 2);
        assert_eq!(public.cidr(), Ipv4Cidr::parse("192.0.2.0/30").unwrap());
        assert_eq!(c.address_pool(Exposure::Private).unwrap().capacity(), 254);
    }

    #[test]
    fn a_disabled_public_pool_is_none() {
        let c = SimulatedCloud::new(SimConfig {
            public_cidr: None,
            ..SimConfig::for_tests()
        });
        assert_eq!(c.address_pool(Exposure::Public), None);
        assert!(c.address_pool(Exposure::Private).is_some());
    }

    #[tokio::test]
    async fn every_step_succeeds_without_faults() {
        let c = cloud(FaultConfig::default());
        for step in test_steps::one_of_each(Uuid::new_v4()) {
            let name = step.name();
            assert!(c.execute(step).await.is_ok(), "{name}");
        }
    }

    #[tokio::test]
    async fn a_step_named_in_fail_steps_fails_permanently_and_others_do_not() {
        for name in STEP_NAMES {
            let c = cloud(fail(&[name]));
            for step in test_steps::one_of_each(Uuid::new_v4()) {
                let this = step.name();
                match c.execute(step).await {
                    Err(ProviderError::Permanent(msg)) if this == name => {
                        assert!(msg.contains(name), "{msg}")
                    }
                    Ok(_) if this != name => {}
                    other => panic!("fail_steps={name}, step {this}: {other:?}"),
                }
            }
        }
    }

    #[tokio::test]
    async fn flaky_rate_one_always_fails_transiently_and_zero_never() {
        let always = cloud(FaultConfig {
            flaky_rate: 1.0,
            ..FaultConfig::default()
        });
        let never = cloud(FaultConfig {
            flaky_rate: 0.0,
            ..FaultConfig::default()
        });
        for _ in 0..20 {
            for step in test_steps::one_of_each(Uuid::new_v4()) {
                assert!(matches!(
                    always.execute(step.clone()).await,
                    Err(ProviderError::Transient(_))
                ));
                assert!(never.execute(step).await.is_ok());
            }
        }
    }

    #[tokio::test]
    async fn flaky_steps_limit_which_steps_are_flaky() {
        let c = cloud(FaultConfig {
            flaky_steps: ["create_node".to_owned()].into(),
            flaky_rate: 1.0,
            ..FaultConfig::default()
        });
        for step in test_steps::one_of_each(Uuid::new_v4()) {
            let name = step.name();
            let r = c.execute(step).await;
            assert_eq!(
                matches!(r, Err(ProviderError::Transient(_))),
                name == "create_node",
                "{name}: {r:?}"
            );
        }
    }

    #[tokio::test]
    async fn control_plane_gives_a_ca_token_and_public_endpoint_under_the_suffix() {
        let c = cloud(FaultConfig::default());
        let id = Uuid::parse_str("3f2a9c4e-0000-4000-8000-000000000000").unwrap();
        let Ok(StepOutcome::ControlPlane {
            endpoint,
            credentials,
        }) = c.execute(create(id, "prod-1", Exposure::Public)).await
        else {
            panic!("a control plane outcome");
        };
        assert_eq!(endpoint.host, "prod-1-3f2a9c4e.k8s.example.com");
        assert!(endpoint.host.ends_with(&c.config().public_hostname_suffix));
        assert_eq!(
            endpoint.public_hostname.as_deref(),
            Some(endpoint.host.as_str())
        );
        assert!(credentials.ca_certificate_pem.contains("BEGIN CERTIFICATE"));
        assert!(!credentials.token.is_empty());
        assert_eq!(c.inventory().clusters[&id].endpoint, Some(endpoint));
    }

    #[tokio::test]
    async fn a_private_control_plane_has_an_internal_host_and_no_public_hostname() {
        let c = cloud(FaultConfig::default());
        let id = Uuid::parse_str("0123abcd-0000-4000-8000-000000000000").unwrap();
        let Ok(StepOutcome::ControlPlane { endpoint, .. }) =
            c.execute(create(id, "db", Exposure::Private)).await
        else {
            panic!("a control plane outcome");
        };
        assert_eq!(
            endpoint,
            Endpoint {
                host: "db-0123abcd.internal".into(),
                public_hostname: None
            }
        );
    }

    #[tokio::test]
    async fn two_clusters_get_different_cas_and_tokens() {
        let c = cloud(FaultConfig::default());
        let mut seen = Vec::new();
        for name in ["a", "b"] {
            let Ok(StepOutcome::ControlPlane { credentials, .. }) = c
                .execute(create(Uuid::new_v4(), name, Exposure::Public))
                .await
            else {
                panic!("a control plane outcome");
            };
            seen.push(credentials);
        }
        assert_ne!(seen[0].ca_certificate_pem, seen[1].ca_certificate_pem);
        assert_ne!(seen[0].token, seen[1].token);
    }

    #[tokio::test]
    async fn set_exposure_reissues_the_endpoint_for_the_target() {
        let c = cloud(FaultConfig::default());
        let id = Uuid::new_v4();
        let to_public = Step::SetExposure {
            cluster_id: id,
            cluster_name: "web".into(),
            to: Exposure::Public,
        };
        let Ok(StepOutcome::Exposure(public)) = c.execute(to_public).await else {
            panic!("an exposure outcome")
        };
        assert!(
            public.host.starts_with("web-") && public.host.ends_with(".k8s.example.com"),
            "{}",
            public.host
        );
        assert!(public.public_hostname.is_some());
        let to_private = Step::SetExposure {
            cluster_id: id,
            cluster_name: "web".into(),
            to: Exposure::Private,
        };
        let Ok(StepOutcome::Exposure(private)) = c.execute(to_private.clone()).await else {
            panic!("an exposure outcome")
        };
        assert!(private.host.ends_with(".internal") && private.public_hostname.is_none());
        // Idempotent: the same step again gives the same endpoint.
        assert_eq!(
            c.execute(to_private).await,
            Ok(StepOutcome::Exposure(private))
        );
    }

    #[test]
    fn a_long_name_keeps_the_first_label_within_63_characters() {
        let name = format!("{}-{}", "a".repeat(53), "b".repeat(9));
        let e = endpoint_for(
            &SimConfig::for_tests(),
            Uuid::new_v4(),
            &name,
            Exposure::Public,
        );
        let label = e.host.split('.').next().unwrap();
        assert!(label.len() <= 63, "{label}");
        assert!(!label.contains("--"), "{label}");
    }

    #[tokio::test]
    async fn registrations_are_ready_by_default() {
        let c = cloud(FaultConfig::default());
        let id = Uuid::new_v4();
        let ready = Registration {
            status: SubStatus::Ready,
            reason: None,
        };
        assert_eq!(
            c.execute(Step::RegisterHub { cluster_id: id }).await,
            Ok(StepOutcome::Registration(ready))
        );
        assert_eq!(
            c.execute(Step::InstallDefaultEnvironment { cluster_id: id })
                .await,
            Ok(StepOutcome::Registration(ready))
        );
    }

    #[tokio::test]
    async fn hub_outcome_fails_the_step_its_reason_belongs_to() {
        for reason in RegistrationReason::ALL {
            let c = cloud(FaultConfig {
                hub_outcome: Some(reason),
                ..FaultConfig::default()
            });
            let id = Uuid::new_v4();
            let Ok(StepOutcome::Registration(hub)) =
                c.execute(Step::RegisterHub { cluster_id: id }).await
            else {
                panic!("a registration")
            };
            let Ok(StepOutcome::Registration(env)) = c
                .execute(Step::InstallDefaultEnvironment { cluster_id: id })
                .await
            else {
                panic!("a registration")
            };
            let failed = Registration {
                status: SubStatus::Failed,
                reason: Some(reason),
            };
            let ready = Registration {
                status: SubStatus::Ready,
                reason: None,
            };
            let (expect_hub, expect_env) = if is_hub_reason(reason) {
                (failed, ready)
            } else {
                (ready, failed)
            };
            assert_eq!((hub, env), (expect_hub, expect_env), "{}", reason.as_str());
        }
    }

    #[tokio::test]
    async fn the_inventory_follows_nodes_addresses_and_rules_and_forgets_a_destroyed_cluster() {
        let c = cloud(FaultConfig::default());
        let id = Uuid::new_v4();
        let eip = Uuid::new_v4();
        let rule = test_steps::rule(id);
        let rule_id = rule.id;
        let address = Ipv4Addr::new(10, 96, 0, 1);
        for step in [
            Step::CreateNode {
                cluster_id: id,
                pool: "p".into(),
                node: "p-1".into(),
                size: "s".into(),
                version: "v1.32.4".into(),
                labels: Default::default(),
                taints: Vec::new(),
            },
            Step::CreateNode {
                cluster_id: id,
                pool: "p".into(),
                node: "p-2".into(),
                size: "s".into(),
                version: "v1.32.4".into(),
                labels: Default::default(),
                taints: Vec::new(),
            },
            // Repeated after a crash: no harm.
            Step::CreateNode {
                cluster_id: id,
                pool: "p".into(),
                node: "p-2".into(),
                size: "s".into(),
                version: "v1.32.4".into(),
                labels: Default::default(),
                taints: Vec::new(),
            },
            Step::DeleteNode {
                cluster_id: id,
                node: "p-1".into(),
            },
            Step::AttachAddress {
                cluster_id: id,
                elastic_ip_id: eip,
                address,
                exposure: Exposure::Private,
            },
            Step::ApplyFirewallRule { rule },
        ] {
            assert_eq!(c.execute(step).await, Ok(StepOutcome::Done));
        }
        let seen = c.inventory().clusters[&id].clone();
        assert_eq!(seen.nodes.keys().collect::<Vec<_>>(), ["p-2"]);
        assert_eq!(seen.addresses.get(&eip), Some(&address));
        assert!(seen.firewall_rules.contains(&rule_id));

        for step in [
            Step::DetachAddress {
                cluster_id: id,
                elastic_ip_id: eip,
                address,
            },
            Step::DetachAddress {
                cluster_id: id,
                elastic_ip_id: eip,
                address,
            },
            Step::RemoveFirewallRule {
                cluster_id: id,
                rule_id,
            },
        ] {
            assert_eq!(c.execute(step).await, Ok(StepOutcome::Done));
        }
        let seen = c.inventory().clusters[&id].clone();
        assert!(seen.addresses.is_empty() && seen.firewall_rules.is_empty());

        assert_eq!(
            c.execute(Step::DestroyCluster { cluster_id: id }).await,
            Ok(StepOutcome::Done)
        );
        assert_eq!(
            c.execute(Step::DestroyCluster { cluster_id: id }).await,
            Ok(StepOutcome::Done)
        );
        assert!(!c.inventory().clusters.contains_key(&id));
    }

    #[tokio::test(start_paused = true)]
    async fn a_step_waits_its_delay_on_tokio_time() {
        // With tokio's clock paused the hour passes at once: this checks the step sleeps on
        // tokio's timer (not a thread sleep) and then completes.
        let c = SimulatedCloud::new(SimConfig {
            step_delay: Duration::from_secs(3600),
            ..SimConfig::for_tests()
        });
        let before = tokio::time::Instant::now();
        assert_eq!(
            c.execute(Step::DestroyCluster {
                cluster_id: Uuid::new_v4()
            })
            .await,
            Ok(StepOutcome::Done)
        );
        assert!(tokio::time::Instant::now() - before >= Duration::from_secs(3600));
    }
}
