//! The OpenAPI schemas of the domain's enumerations.
//!
//! The values themselves (and their JSON spellings, through serde) belong to the domain; these
//! types only describe them to the document, listing every value from the domain's `ALL`, so a
//! value added there is documented without an edit here.

use std::borrow::Cow;

use utoipa::openapi::{ObjectBuilder, RefOr, Schema, Type};

/// The JSON spelling of each value, as serde writes it.
fn spellings<T: serde::Serialize>(all: &[T]) -> Vec<String> {
    all.iter()
        .filter_map(|v| match serde_json::to_value(v) {
            Ok(serde_json::Value::String(s)) => Some(s),
            _ => None,
        })
        .collect()
}

fn string_enum<T: serde::Serialize>(all: &[T], description: &str) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .enum_values(Some(spellings(all)))
        .into()
}

macro_rules! string_enums {
    ($($(#[doc = $doc:literal])+ $name:ident = $domain:ty;)+) => {$(
        $(#[doc = $doc])+
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> RefOr<Schema> {
                let doc: &[&str] = &[$($doc),+];
                let text = doc.iter().map(|l| l.trim()).collect::<Vec<_>>().join("\n");
                string_enum(&<$domain>::ALL, &text)
            }
        }

        impl utoipa::ToSchema for $name {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed(stringify!($name))
            }
        }
    )+};
}

string_enums! {
    /// Where the cluster's API endpoint is reachable from.
    Exposure = domain::model::cluster::Exposure;
    /// Which networks the workloads reach; decides which Elastic IPs a cluster may have: an
    /// intranet cluster gets private addresses only. Immutable after create.
    NetworkMode = domain::model::cluster::NetworkMode;
    /// Cluster phases: `Pending → Provisioning → ControlPlaneReady → Provisioned`;
    /// `Provisioning | ControlPlaneReady → Failed`; any phase `→ Deleting → (gone)`.
    ClusterPhase = domain::model::cluster::ClusterPhase;
    /// Status of the hub registration and of the default environment.
    SubStatus = domain::model::cluster::SubStatus;
    /// The only reason texts a registration may carry (docs/api.md lists them).
    RegistrationReason = domain::model::cluster::RegistrationReason;
    /// State of an exposure change. Only one is ever in flight: a second is 409.
    ExposureChangeStatus = domain::model::cluster::ExposureChangeStatus;
    /// `Provisioning`, `Ready`, `Scaling`, `Upgrading` (nodes being replaced by nodes of a
    /// new Kubernetes version), `Deleting`.
    /// What a taint does to pods that do not tolerate it: `NoSchedule` (not scheduled on the
    /// node), `PreferNoSchedule` (avoided when possible), `NoExecute` (also evicted).
    TaintEffect = domain::model::node_pool::TaintEffect;
    /// `Provisioning`, `Ready`, `Scaling`, `Deleting`.
    PoolStatus = domain::model::node_pool::PoolStatus;
    /// `Provisioning`, `Ready`, `Deleting`.
    NodeStatus = domain::model::node::NodeStatus;
    /// Pending, Provisioning, Ready, Failed, Deleting, Deleted.
    ElasticIpStatus = domain::model::elastic_ip::ElasticIpStatus;
    /// `Pending`, `Active`, `Deleting`, `Failed`.
    FirewallRuleStatus = domain::model::firewall::FirewallRuleStatus;
    /// `tcp`, `udp` or `icmp` (no ports).
    Protocol = domain::model::firewall::Protocol;
    /// `ingress`: traffic into the cluster.
    Direction = domain::model::firewall::Direction;
    /// `oidc`, `basic` or `token`.
    AuthServerType = domain::model::auth_server::AuthServerType;
    /// The kind of object an audit event is about.
    AuditResource = domain::model::audit::AuditResource;
    /// The face of the service a change came through.
    AuditVia = domain::model::audit::Channel;
    /// `applied`: the change is done. `accepted`: the change is recorded and provisioning
    /// carries it out (the cluster's state and operations show how it goes).
    AuditOutcome = domain::model::audit::Outcome;
    /// What an operation carries out.
    OperationKind = domain::model::operation::OperationKind;
    /// `running` until provisioning settles it; then `succeeded`, `failed` (see `last_error`)
    /// or `cancelled` (the cluster was deleted first).
    OperationStatus = domain::model::operation::OperationStatus;
    /// `active` until it expires or is revoked.
    CredentialStatus = domain::model::kubeconfig::CredentialStatus;
    /// The kind of client the actor's token belongs to, as the account platform says.
    ClientKind = domain::model::identity::ClientKind;
    /// The day a maintenance window opens on (UTC); `any`: every day.
    MaintenanceDay = domain::model::maintenance_window::MaintenanceDay;
}

#[cfg(test)]
mod tests {
    use utoipa::PartialSchema;

    use super::*;

    fn values(schema: RefOr<Schema>) -> Vec<serde_json::Value> {
        let json = serde_json::to_value(schema).unwrap_or_default();
        json["enum"].as_array().cloned().unwrap_or_default()
    }

    #[test]
    fn each_schema_lists_every_domain_value_as_serde_spells_it() {
        assert_eq!(
            values(ClusterPhase::schema()),
            [
                "Pending",
                "Provisioning",
                "ControlPlaneReady",
                "Provisioned",
                "Failed",
                "Deleting"
            ]
        );
        assert_eq!(values(Exposure::schema()), ["public", "private"]);
        assert_eq!(values(ExposureChangeStatus::schema()), ["in_progress"]);
        assert_eq!(values(RegistrationReason::schema()).len(), 5);
    }

    #[test]
    fn every_listed_value_reads_back_as_the_domain_value() {
        use domain::model::firewall::Protocol as P;
        for v in values(Protocol::schema()) {
            assert!(serde_json::from_value::<P>(v.clone()).is_ok(), "{v}");
        }
    }
}
