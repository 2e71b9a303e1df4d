//! List envelopes for the answers not yet in the `wire` crate.

use domain::model::auth_server::AuthServerView;
use domain::model::elastic_ip::ElasticIpView;
use domain::model::firewall::FirewallRule;
use serde::Serialize;

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ElasticIpList {
    pub items: Vec<ElasticIpView>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct FirewallRuleList {
    pub items: Vec<FirewallRule>,
}

#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct AuthServerList {
    pub items: Vec<AuthServerView>,
}
