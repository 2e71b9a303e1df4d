//! Elastic IPs: their status machine (release only from Ready or Failed) and the address pools
//! they are drawn from.

use std::collections::HashSet;
use std::net::Ipv4Addr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::model::cluster::Exposure;
use crate::model::firewall::Ipv4Cidr;
use crate::names::DnsLabel;

/// Pending, Provisioning, Ready, Failed, Deleting, Deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ElasticIpStatus {
    Pending,
    Provisioning,
    Ready,
    Failed,
    Deleting,
    Deleted,
}

impl ElasticIpStatus {
    /// Every value, in declaration order.
    pub const ALL: [ElasticIpStatus; 6] = [
        ElasticIpStatus::Pending,
        ElasticIpStatus::Provisioning,
        ElasticIpStatus::Ready,
        ElasticIpStatus::Failed,
        ElasticIpStatus::Deleting,
        ElasticIpStatus::Deleted,
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElasticIpEvent {
    StartProvisioning,
    Attached,
    Fail,
    Release,
    Released,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("an Elastic IP in status {from:?} cannot take {event:?}")]
pub struct ElasticIpTransitionError {
    pub from: ElasticIpStatus,
    pub event: ElasticIpEvent,
}

impl ElasticIpStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ElasticIpStatus::Pending => "Pending",
            ElasticIpStatus::Provisioning => "Provisioning",
            ElasticIpStatus::Ready => "Ready",
            ElasticIpStatus::Failed => "Failed",
            ElasticIpStatus::Deleting => "Deleting",
            ElasticIpStatus::Deleted => "Deleted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "Pending" => ElasticIpStatus::Pending,
            "Provisioning" => ElasticIpStatus::Provisioning,
            "Ready" => ElasticIpStatus::Ready,
            "Failed" => ElasticIpStatus::Failed,
            "Deleting" => ElasticIpStatus::Deleting,
            "Deleted" => ElasticIpStatus::Deleted,
            _ => return None,
        })
    }

    /// Release only from `Ready` or `Failed`.
    pub fn apply(self, event: ElasticIpEvent) -> Result<ElasticIpStatus, ElasticIpTransitionError> {
        use ElasticIpEvent::*;
        use ElasticIpStatus::*;
        match (self, event) {
            (Pending, StartProvisioning) => Ok(Provisioning),
            (Provisioning, Attached) => Ok(Ready),
            (Pending | Provisioning, Fail) => Ok(Failed),
            (Ready | Failed, Release) => Ok(Deleting),
            (Deleting, Released) => Ok(Deleted),
            (from, event) => Err(ElasticIpTransitionError { from, event }),
        }
    }

    /// Alive Elastic IPs hold their name and their address.
    pub fn is_alive(self) -> bool {
        self != ElasticIpStatus::Deleted
    }
}

/// The Service annotation that binds a workload to an Elastic IP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    pub key: String,
    pub value: String,
}

/// An Elastic IP as stored. Its address is reserved when it is allocated, so an exhausted pool
/// fails at once (`DomainError::CapacityExhausted`), but shown only once `Ready`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElasticIp {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub name: Option<DnsLabel>,
    pub exposure: Exposure,
    pub status: ElasticIpStatus,
    pub address: Ipv4Addr,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// An Elastic IP as answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElasticIpView {
    pub id: Uuid,
    pub cluster_id: Uuid,
    pub name: Option<String>,
    pub exposure: Exposure,
    pub status: ElasticIpStatus,
    /// Null until `Ready`.
    pub address: Option<String>,
    pub annotation: Annotation,
    pub failure_reason: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The annotation key workloads use: `{annotation_domain}/elastic-ip`.
pub fn annotation_key(annotation_domain: &str) -> String {
    format!("{annotation_domain}/elastic-ip")
}

impl ElasticIp {
    pub fn view(&self, annotation_domain: &str) -> ElasticIpView {
        ElasticIpView {
            id: self.id,
            cluster_id: self.cluster_id,
            name: self.name.as_ref().map(|n| n.as_str().to_owned()),
            exposure: self.exposure,
            status: self.status,
            address: (self.status == ElasticIpStatus::Ready).then(|| self.address.to_string()),
            annotation: Annotation {
                key: annotation_key(annotation_domain),
                value: self.id.to_string(),
            },
            failure_reason: self.failure_reason.clone(),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }
}

/// A range of addresses Elastic IPs are drawn from. Never the network or the broadcast
/// address (a /30 gives two).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressPool {
    cidr: Ipv4Cidr,
}

impl AddressPool {
    pub fn new(cidr: Ipv4Cidr) -> Self {
        Self { cidr }
    }

    pub fn cidr(&self) -> Ipv4Cidr {
        self.cidr
    }

    /// How many addresses the pool can hand out.
    pub fn capacity(&self) -> u64 {
        let size = 1u64 << (32 - u32::from(self.cidr.prefix()));
        size.saturating_sub(2)
    }

    pub fn contains(&self, address: Ipv4Addr) -> bool {
        let (first, last) = self.host_range();
        let a = u32::from(address);
        first <= a && a <= last && first <= last
    }

    fn host_range(&self) -> (u32, u32) {
        let network = u32::from(self.cidr.network());
        let size = 1u64 << (32 - u32::from(self.cidr.prefix()));
        let broadcast = (u64::from(network) + size - 1) as u32;
        (network.saturating_add(1), broadcast.saturating_sub(1))
    }

    /// The lowest address not in `used`, so released addresses are handed out again.
    pub fn first_free(&self, used: &HashSet<Ipv4Addr>) -> Option<Ipv4Addr> {
        if self.capacity() == 0 {
            return None;
        }
        let (first, last) = self.host_range();
        (first..=last)
            .map(Ipv4Addr::from)
            .find(|a| !used.contains(a))
    }
}

#[cfg(test)]
mod tests {
    use super::ElasticIpEvent::*;
    use super::ElasticIpStatus::*;
    use super::*;

    fn pool(s: &str) -> AddressPool {
        AddressPool::new(Ipv4Cidr::parse(s).unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn elastic_ip_release_only_from_ready_or_failed() {
        assert_eq!(Ready.apply(Release), Ok(Deleting));
        assert_eq!(Failed.apply(Release), Ok(Deleting));
        for s in [Pending, Provisioning, Deleting, Deleted] {
            assert!(s.apply(Release).is_err(), "{s:?} must not be released");
        }
    }

    #[test]
    fn elastic_ip_lifecycle_pending_provisioning_ready_deleting_deleted() {
        let s = Pending
            .apply(StartProvisioning)
            .and_then(|s| s.apply(Attached));
        assert_eq!(s, Ok(Ready));
        assert_eq!(Deleting.apply(Released), Ok(Deleted));
        assert_eq!(Pending.apply(Fail), Ok(Failed));
        assert_eq!(Provisioning.apply(Fail), Ok(Failed));
        assert!(Ready.apply(Fail).is_err());
        assert!(!Deleted.is_alive());
        assert!(Deleting.is_alive());
    }

    #[test]
    fn address_pool_slash_30_gives_exactly_two_addresses() {
        let p = pool("192.0.2.0/30");
        assert_eq!(p.capacity(), 2);
        let mut used = HashSet::new();
        let a = p.first_free(&used);
        assert_eq!(a, Some(Ipv4Addr::new(192, 0, 2, 1)));
        used.insert(Ipv4Addr::new(192, 0, 2, 1));
        assert_eq!(p.first_free(&used), Some(Ipv4Addr::new(192, 0, 2, 2)));
        used.insert(Ipv4Addr::new(192, 0, 2, 2));
        assert_eq!(p.first_free(&used), None);
    }

    #[test]
    fn address_pool_never_hands_out_network_or_broadcast() {
        let p = pool("10.96.0.0/16");
        assert_eq!(p.capacity(), 65534);
        assert!(!p.contains(Ipv4Addr::new(10, 96, 0, 0)));
        assert!(!p.contains(Ipv4Addr::new(10, 96, 255, 255)));
        assert!(p.contains(Ipv4Addr::new(10, 96, 255, 254)));
        assert_eq!(pool("10.0.0.0/31").capacity(), 0);
        assert_eq!(pool("10.0.0.7/32").first_free(&HashSet::new()), None);
    }

    #[test]
    fn address_pool_reuses_a_released_address() {
        let p = pool("192.0.2.0/29");
        let used: HashSet<_> = [1, 3]
            .iter()
            .map(|&h| Ipv4Addr::new(192, 0, 2, h))
            .collect();
        assert_eq!(p.first_free(&used), Some(Ipv4Addr::new(192, 0, 2, 2)));
    }
}
