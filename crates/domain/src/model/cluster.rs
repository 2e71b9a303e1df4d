//! Clusters: their settings, their phase machine, the exposure change that may be
//! in flight, and the hub registration / default environment sub-statuses.

use std::net::IpAddr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::firewall::IpCidr;
use crate::model::maintenance_window::MaintenanceWindow;
use crate::model::node_pool::{NodePool, PoolStatus};
use crate::model::upgrade::UpgradeInFlight;
use crate::names::DnsLabel;

/// Where the cluster's API endpoint is reachable from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exposure {
    Public,
    Private,
}

impl Exposure {
    /// Every value, in declaration order.
    pub const ALL: [Exposure; 2] = [Exposure::Public, Exposure::Private];
}

impl Exposure {
    pub fn as_str(self) -> &'static str {
        match self {
            Exposure::Public => "public",
            Exposure::Private => "private",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "public" => Some(Exposure::Public),
            "private" => Some(Exposure::Private),
            _ => None,
        }
    }
}

/// Which networks the workloads reach; decides which Elastic IPs a cluster may have: an
/// intranet cluster gets private addresses only. Immutable after create.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    Intranet,
    Internet,
}

impl NetworkMode {
    /// Every value, in declaration order.
    pub const ALL: [NetworkMode; 2] = [NetworkMode::Intranet, NetworkMode::Internet];
}

impl NetworkMode {
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::Intranet => "intranet",
            NetworkMode::Internet => "internet",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "intranet" => Some(NetworkMode::Intranet),
            "internet" => Some(NetworkMode::Internet),
            _ => None,
        }
    }

    /// The one Elastic IP exposure this network mode allows.
    pub fn elastic_ip_exposure(self) -> Exposure {
        match self {
            NetworkMode::Intranet => Exposure::Private,
            NetworkMode::Internet => Exposure::Public,
        }
    }
}

/// Cluster phases: `Pending → Provisioning → ControlPlaneReady → Provisioned`;
/// `Provisioning | ControlPlaneReady → Failed`; any phase `→ Deleting → (gone)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClusterPhase {
    Pending,
    Provisioning,
    ControlPlaneReady,
    Provisioned,
    Failed,
    Deleting,
}

impl ClusterPhase {
    /// Every value, in declaration order.
    pub const ALL: [ClusterPhase; 6] = [
        ClusterPhase::Pending,
        ClusterPhase::Provisioning,
        ClusterPhase::ControlPlaneReady,
        ClusterPhase::Provisioned,
        ClusterPhase::Failed,
        ClusterPhase::Deleting,
    ];
}

/// What happens to a cluster's phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseEvent {
    /// A worker picked up the new cluster.
    StartProvisioning,
    /// The control plane answers: kubeconfigs can be handed out.
    ControlPlaneUp,
    /// Every initial node is up.
    NodesReady,
    /// The provider gave up.
    Fail,
    /// The owner asked for deletion.
    Delete,
}

/// A phase change the machine does not allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a cluster in phase {from:?} cannot take {event:?}")]
pub struct PhaseTransitionError {
    pub from: ClusterPhase,
    pub event: PhaseEvent,
}

impl ClusterPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterPhase::Pending => "Pending",
            ClusterPhase::Provisioning => "Provisioning",
            ClusterPhase::ControlPlaneReady => "ControlPlaneReady",
            ClusterPhase::Provisioned => "Provisioned",
            ClusterPhase::Failed => "Failed",
            ClusterPhase::Deleting => "Deleting",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Pending" => ClusterPhase::Pending,
            "Provisioning" => ClusterPhase::Provisioning,
            "ControlPlaneReady" => ClusterPhase::ControlPlaneReady,
            "Provisioned" => ClusterPhase::Provisioned,
            "Failed" => ClusterPhase::Failed,
            "Deleting" => ClusterPhase::Deleting,
            _ => return None,
        })
    }

    /// The phase machine. Deleting is idempotent (a second deletion is accepted as it is).
    pub fn apply(self, event: PhaseEvent) -> Result<ClusterPhase, PhaseTransitionError> {
        use ClusterPhase::*;
        use PhaseEvent::*;
        match (self, event) {
            (Pending, StartProvisioning) => Ok(Provisioning),
            (Provisioning, ControlPlaneUp) => Ok(ControlPlaneReady),
            (ControlPlaneReady, NodesReady) => Ok(Provisioned),
            (Provisioning | ControlPlaneReady, Fail) => Ok(Failed),
            (_, Delete) => Ok(Deleting),
            (from, event) => Err(PhaseTransitionError { from, event }),
        }
    }

    /// Whether a kubeconfig can be handed out.
    pub fn serves_kubeconfig(self) -> bool {
        matches!(
            self,
            ClusterPhase::ControlPlaneReady | ClusterPhase::Provisioned
        )
    }
}

/// Status of the hub registration and of the default environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SubStatus {
    Pending,
    Ready,
    Failed,
}

impl SubStatus {
    /// Every value, in declaration order.
    pub const ALL: [SubStatus; 3] = [SubStatus::Pending, SubStatus::Ready, SubStatus::Failed];
}

impl SubStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SubStatus::Pending => "pending",
            SubStatus::Ready => "ready",
            SubStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "pending" => Some(SubStatus::Pending),
            "ready" => Some(SubStatus::Ready),
            "failed" => Some(SubStatus::Failed),
            _ => None,
        }
    }
}

/// The only reason texts a registration may carry (docs/api.md lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RegistrationReason {
    #[serde(rename = "organization quota exceeded")]
    QuotaExceeded,
    #[serde(rename = "name or address conflict in the service hub")]
    HubConflict,
    #[serde(rename = "registration rejected by the service hub")]
    HubRejected,
    #[serde(rename = "waiting for the service platform installation")]
    WaitingForPlatform,
    #[serde(rename = "Door platform installation failed")]
    PlatformInstallFailed,
}

impl RegistrationReason {
    pub const ALL: [RegistrationReason; 5] = [
        RegistrationReason::QuotaExceeded,
        RegistrationReason::HubConflict,
        RegistrationReason::HubRejected,
        RegistrationReason::WaitingForPlatform,
        RegistrationReason::PlatformInstallFailed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RegistrationReason::QuotaExceeded => "organization quota exceeded",
            RegistrationReason::HubConflict => "name or address conflict in the service hub",
            RegistrationReason::HubRejected => "registration rejected by the service hub",
            RegistrationReason::WaitingForPlatform => {
                "waiting for the service platform installation"
            }
            RegistrationReason::PlatformInstallFailed => "Door platform installation failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// `hub_registration` and `default_environment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    pub status: SubStatus,
    pub reason: Option<RegistrationReason>,
}

impl Registration {
    pub const PENDING: Registration = Registration {
        status: SubStatus::Pending,
        reason: None,
    };
}

/// State of an exposure change. Only one is ever in flight: a second is
/// `Conflict::ChangeInFlight`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExposureChangeStatus {
    InProgress,
}

impl ExposureChangeStatus {
    /// Every value, in declaration order.
    pub const ALL: [ExposureChangeStatus; 1] = [ExposureChangeStatus::InProgress];
}

/// An exposure change in flight: `exposure` still shows the current value, `to` the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExposureChange {
    pub to: Exposure,
    pub status: ExposureChangeStatus,
}

/// What an exposure request asks of a cluster, decided by [`Cluster::request_exposure`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExposureDecision {
    /// Already at that exposure and nothing in flight: nothing started.
    Unchanged,
    /// A change starts.
    Start(ExposureChange),
}

/// Why an exposure request (or a change of the control-plane firewall) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExposureRefusal {
    /// Exposure changes need `Provisioned` (`DomainError::PhaseNotProvisioned`).
    NotProvisioned(ClusterPhase),
    /// Another exposure change is in flight (`Conflict::ChangeInFlight`).
    ChangeInFlight,
    Deleting,
    Failed,
}

/// Why an upgrade request is refused, before the version itself is looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpgradeBlocker {
    /// Upgrades need `Provisioned`.
    NotProvisioned(ClusterPhase),
    /// An upgrade, an exposure change or a pool's change is still being carried out.
    ChangeInFlight,
}

/// Who may call the control plane's API server. Disabled (the default), anyone who holds a
/// credential; enabled, only callers from one of `allowed_addresses`, which is then never
/// empty (an empty list would refuse every client: the rule refuses it instead).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControlPlaneFirewall {
    pub enabled: bool,
    /// IPv4 and IPv6 networks, at most `rules::MAX_CONTROL_PLANE_ALLOWED`, no duplicates.
    /// Kept while disabled, so it can be enabled again as it was.
    pub allowed_addresses: Vec<IpCidr>,
}

impl ControlPlaneFirewall {
    /// Whether a call from `address` reaches the API server.
    pub fn admits(&self, address: IpAddr) -> bool {
        !self.enabled || self.allowed_addresses.iter().any(|c| c.contains(address))
    }
}

/// What a request to change the control-plane firewall asks of a cluster, decided by
/// [`Cluster::request_control_plane_firewall`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FirewallDecision {
    /// Already so and nothing in flight: nothing started.
    Unchanged,
    /// A change to this starts.
    Start(ControlPlaneFirewall),
}

/// A cluster and its node pools.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub id: Uuid,
    pub organization_id: Uuid,
    pub organization_slug: String,
    pub name: DnsLabel,
    pub description: Option<String>,
    pub tags: Vec<DnsLabel>,
    pub zone: String,
    /// The Kubernetes version id, e.g. `v1.32.4`.
    pub version: String,
    /// The control-plane option assigned to the organization in this zone.
    pub control_plane_option_id: String,
    pub exposure: Exposure,
    pub network_mode: NetworkMode,
    pub phase: ClusterPhase,
    /// Why the cluster is `Failed`; null otherwise.
    pub failure_reason: Option<String>,
    /// The public API hostname (ends in the configured public suffix); null unless public.
    pub public_hostname: Option<String>,
    /// The API server URL the kubeconfig points at; null until the control plane is up.
    pub api_endpoint: Option<String>,
    pub node_pools: Vec<NodePool>,
    pub hub_registration: Registration,
    pub default_environment: Registration,
    pub exposure_change: Option<ExposureChange>,
    /// The Kubernetes upgrade in flight; `version` shows the control plane's meanwhile.
    pub upgrade: Option<UpgradeInFlight>,
    pub maintenance_window: MaintenanceWindow,
    /// Whether the newest patch of the cluster's minor version is applied by itself, inside
    /// the maintenance window.
    pub auto_upgrade: bool,
    /// The start of the last window in which an automatic upgrade began: one a window, even
    /// when it failed.
    pub last_auto_upgrade_window: Option<DateTime<Utc>>,
    /// The control-plane firewall the API server enforces now.
    pub control_plane_firewall: ControlPlaneFirewall,
    /// The control-plane firewall being applied; `control_plane_firewall` is enforced until
    /// it is. Only one change is ever in flight: a second is
    /// `Conflict::FirewallChangeInFlight`.
    pub control_plane_firewall_change: Option<ControlPlaneFirewall>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// The change counter of the state long-poll: raised by every change of the
    /// cluster or anything under it. Also the optimistic-concurrency token of writes.
    pub revision: i64,
    /// Set once deletion completed; such a cluster is gone for every read.
    pub deleted_at: Option<DateTime<Utc>>,
}

/// The public API hostname a cluster gets: `<name>-<first 8 hex digits of its id><suffix>`,
/// the name cut to 54 characters so the first label stays within DNS's 63. Providers use the
/// same scheme, so the hostname is known from the create on.
pub fn public_hostname(name: &str, id: Uuid, suffix: &str) -> String {
    let name: String = name.chars().take(54).collect();
    let name = name.trim_end_matches('-');
    let id: String = id.simple().to_string().chars().take(8).collect();
    format!("{name}-{id}{suffix}")
}

impl Cluster {
    pub fn is_gone(&self) -> bool {
        self.deleted_at.is_some()
    }

    /// Pools that still count: a pool in `Deleting` does not.
    pub fn live_pools(&self) -> impl Iterator<Item = &NodePool> {
        self.node_pools.iter().filter(|p| !p.status.is_deleting())
    }

    pub fn pool(&self, name: &str) -> Option<&NodePool> {
        self.node_pools.iter().find(|p| p.name.as_str() == name)
    }

    pub fn pool_mut(&mut self, name: &str) -> Option<&mut NodePool> {
        self.node_pools.iter_mut().find(|p| p.name.as_str() == name)
    }

    /// Nodes the cluster asks of its zone: the target counts of its live pools.
    pub fn node_demand(&self) -> u64 {
        self.live_pools().map(|p| u64::from(p.count)).sum()
    }

    /// Decides a request to change the exposure.
    pub fn request_exposure(&self, to: Exposure) -> Result<ExposureDecision, ExposureRefusal> {
        match self.phase {
            ClusterPhase::Deleting => return Err(ExposureRefusal::Deleting),
            ClusterPhase::Failed => return Err(ExposureRefusal::Failed),
            ClusterPhase::Provisioned => {}
            other => return Err(ExposureRefusal::NotProvisioned(other)),
        }
        if self.exposure_change.is_some() {
            return Err(ExposureRefusal::ChangeInFlight);
        }
        if self.exposure == to {
            return Ok(ExposureDecision::Unchanged);
        }
        Ok(ExposureDecision::Start(ExposureChange {
            to,
            status: ExposureChangeStatus::InProgress,
        }))
    }

    /// Whether an upgrade may start now: `Provisioned`, and nothing else in flight (an
    /// upgrade replaces every node, so it waits for other node work to finish).
    pub fn upgrade_blocker(&self) -> Option<UpgradeBlocker> {
        if self.phase != ClusterPhase::Provisioned {
            return Some(UpgradeBlocker::NotProvisioned(self.phase));
        }
        let busy_pool = self
            .node_pools
            .iter()
            .any(|p| p.status != PoolStatus::Ready);
        let busy = self.upgrade.is_some()
            || self.exposure_change.is_some()
            || self.control_plane_firewall_change.is_some();
        (busy || busy_pool).then_some(UpgradeBlocker::ChangeInFlight)
    }

    /// Decides a request to change the control-plane firewall to `to`, refused as an exposure
    /// change is: the API server must be up and settled (`Provisioned`), with no change of
    /// the firewall in flight.
    pub fn request_control_plane_firewall(
        &self,
        to: ControlPlaneFirewall,
    ) -> Result<FirewallDecision, ExposureRefusal> {
        match self.phase {
            ClusterPhase::Deleting => return Err(ExposureRefusal::Deleting),
            ClusterPhase::Failed => return Err(ExposureRefusal::Failed),
            ClusterPhase::Provisioned => {}
            other => return Err(ExposureRefusal::NotProvisioned(other)),
        }
        if self.control_plane_firewall_change.is_some() {
            return Err(ExposureRefusal::ChangeInFlight);
        }
        if self.control_plane_firewall == to {
            return Ok(FirewallDecision::Unchanged);
        }
        Ok(FirewallDecision::Start(to))
    }

    /// Completes the control-plane firewall change in flight: the API server enforces it from
    /// now on. Returns false when there was none.
    pub fn complete_control_plane_firewall_change(&mut self) -> bool {
        match self.control_plane_firewall_change.take() {
            Some(to) => {
                self.control_plane_firewall = to;
                true
            }
            None => false,
        }
    }

    /// Completes the exposure change in flight: `exposure` takes the target and the change
    /// clears. Returns false when there was none.
    pub fn complete_exposure_change(
        &mut self,
        public_hostname: Option<String>,
        api_endpoint: String,
    ) -> bool {
        match self.exposure_change.take() {
            Some(change) => {
                self.exposure = change.to;
                self.public_hostname = public_hostname;
                self.api_endpoint = Some(api_endpoint);
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ClusterPhase::*;
    use PhaseEvent::*;

    #[test]
    fn phase_walks_pending_provisioning_control_plane_ready_provisioned() {
        let p = Pending
            .apply(StartProvisioning)
            .and_then(|p| p.apply(ControlPlaneUp))
            .and_then(|p| p.apply(NodesReady));
        assert_eq!(p, Ok(Provisioned));
    }

    #[test]
    fn phase_fails_only_from_provisioning_or_control_plane_ready() {
        assert_eq!(Provisioning.apply(Fail), Ok(Failed));
        assert_eq!(ControlPlaneReady.apply(Fail), Ok(Failed));
        for from in [Pending, Provisioned, Failed, Deleting] {
            assert!(from.apply(Fail).is_err(), "{from:?} must not fail");
        }
    }

    #[test]
    fn phase_any_phase_can_be_deleted() {
        for from in [
            Pending,
            Provisioning,
            ControlPlaneReady,
            Provisioned,
            Failed,
            Deleting,
        ] {
            assert_eq!(from.apply(Delete), Ok(Deleting));
        }
    }

    #[test]
    fn phase_skipping_steps_is_refused() {
        assert!(Pending.apply(ControlPlaneUp).is_err());
        assert!(Pending.apply(NodesReady).is_err());
        assert!(Provisioning.apply(NodesReady).is_err());
        assert!(Provisioned.apply(StartProvisioning).is_err());
        assert!(Deleting.apply(StartProvisioning).is_err());
        assert!(Failed.apply(ControlPlaneUp).is_err());
    }

    #[test]
    fn phase_kubeconfig_only_from_control_plane_ready_or_provisioned() {
        let serving: Vec<_> = [
            Pending,
            Provisioning,
            ControlPlaneReady,
            Provisioned,
            Failed,
            Deleting,
        ]
        .into_iter()
        .filter(|p| p.serves_kubeconfig())
        .collect();
        assert_eq!(serving, [ControlPlaneReady, Provisioned]);
    }

    fn firewall(enabled: bool, cidrs: &[&str]) -> ControlPlaneFirewall {
        ControlPlaneFirewall {
            enabled,
            allowed_addresses: cidrs
                .iter()
                .map(|c| IpCidr::parse(c).unwrap_or_else(|e| panic!("{e}")))
                .collect(),
        }
    }

    #[test]
    fn control_plane_firewall_admits_everyone_disabled_and_only_its_networks_enabled() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap_or_else(|e| panic!("{e}"));
        let list = ["203.0.113.0/24", "2001:db8::/32"];
        assert!(firewall(false, &list).admits(ip("198.51.100.1")));
        let on = firewall(true, &list);
        for inside in ["203.0.113.9", "::ffff:203.0.113.9", "2001:db8::5"] {
            assert!(on.admits(ip(inside)), "{inside}");
        }
        for outside in ["198.51.100.1", "2001:db9::5", "::1", "127.0.0.1"] {
            assert!(!on.admits(ip(outside)), "{outside}");
        }
    }

    #[test]
    fn a_firewall_change_needs_a_provisioned_cluster_and_none_in_flight() {
        let mut c = crate::testing::cluster(crate::testing::ORG_A, Provisioned);
        let to = firewall(true, &["10.0.0.0/8"]);
        assert_eq!(
            c.request_control_plane_firewall(to.clone()),
            Ok(FirewallDecision::Start(to.clone()))
        );
        assert_eq!(
            c.request_control_plane_firewall(ControlPlaneFirewall::default()),
            Ok(FirewallDecision::Unchanged)
        );
        c.control_plane_firewall_change = Some(to.clone());
        assert_eq!(
            c.request_control_plane_firewall(ControlPlaneFirewall::default()),
            Err(ExposureRefusal::ChangeInFlight)
        );
        assert!(c.complete_control_plane_firewall_change());
        assert_eq!(c.control_plane_firewall, to);
        assert!(!c.complete_control_plane_firewall_change());
        for (phase, refusal) in [
            (Pending, ExposureRefusal::NotProvisioned(Pending)),
            (Deleting, ExposureRefusal::Deleting),
            (Failed, ExposureRefusal::Failed),
        ] {
            c.phase = phase;
            assert_eq!(c.request_control_plane_firewall(to.clone()), Err(refusal));
        }
    }

    #[test]
    fn registration_reasons_are_exactly_the_documented_texts() {
        let texts: Vec<_> = RegistrationReason::ALL
            .iter()
            .map(|r| serde_json::to_value(r).unwrap_or_default())
            .collect();
        assert_eq!(
            texts,
            [
                "organization quota exceeded",
                "name or address conflict in the service hub",
                "registration rejected by the service hub",
                "waiting for the service platform installation",
                "Door platform installation failed",
            ]
        );
        for r in RegistrationReason::ALL {
            assert_eq!(RegistrationReason::parse(r.as_str()), Some(r));
        }
    }
}
