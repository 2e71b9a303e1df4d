//! `POST …/elastic-ips`.

use serde::Deserialize;

use crate::model::cluster::Exposure;
use crate::names::DnsLabel;
use crate::validation::Violations;

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateElasticIpRequest {
    /// Optional DNS label, unique among the cluster's alive Elastic IPs.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
    )]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elastic_ip_name_is_optional_and_a_dns_label() {
        let ok: CreateElasticIpRequest =
            serde_json::from_str(r#"{"exposure":"private"}"#).unwrap_or_default();
        assert!(ok.validate().is_ok());
        let bad = CreateElasticIpRequest {
            name: Some("Web!".into()),
            exposure: None,
        };
        assert!(bad.validate().is_err_and(|v| v.has("name")));
        let long = CreateElasticIpRequest {
            name: Some("a".repeat(64)),
            exposure: None,
        };
        assert!(long.validate().is_err());
        let max = CreateElasticIpRequest {
            name: Some("a".repeat(63)),
            exposure: None,
        };
        assert!(max.validate().is_ok());
    }

    #[test]
    fn elastic_ip_extra_fields_and_bad_exposure_are_refused() {
        assert!(
            serde_json::from_str::<CreateElasticIpRequest>(r#"{"address":"1.2.3.4"}"#).is_err()
        );
        assert!(
            serde_json::from_str::<CreateElasticIpRequest>(r#"{"exposure":"global"}"#).is_err()
        );
    }
}
