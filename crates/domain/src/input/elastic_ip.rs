//! Allocating an Elastic IP.

use crate::model::cluster::Exposure;
use crate::names::DnsLabel;
use crate::validation::Violations;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CreateElasticIpRequest {
    /// Optional DNS label, unique among the cluster's alive Elastic IPs.
    pub name: Option<String>,
    /// `private` or `public`; bound by the cluster's network mode. Omitted: the one the
    /// network mode allows.
    pub exposure: Option<Exposure>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElasticIpSpec {
    pub name: Option<DnsLabel>,
    pub exposure: Option<Exposure>,
}

impl CreateElasticIpRequest {
    pub fn validate(&self) -> Result<ElasticIpSpec, Violations> {
        let mut v = Violations::new();
        let name = self
            .name
            .as_deref()
            .and_then(|n| v.check("name", DnsLabel::parse(n)));
        v.into_result(ElasticIpSpec {
            name,
            exposure: self.exposure,
        })
    }
}
