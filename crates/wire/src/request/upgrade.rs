//! Upgrade bodies: `POST …/upgrade` and the maintenance window of a create or PATCH.

use domain::input::upgrade as draft;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::enums;
use crate::request::opt_integer;

/// `POST /v1/public/clusters/{id}/upgrade`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpgradeRequest {
    /// A version id `GET …/upgrades` lists: newer than the cluster's, at most one minor
    /// version ahead.
    #[schema(required = true, nullable = false, example = "v1.32.6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// 1-10: how many nodes above its count each pool may go while its nodes are replaced.
    /// When given, every pool keeps it for later upgrades too; each pool's own otherwise.
    #[schema(minimum = 1, maximum = 10)]
    #[serde(default, deserialize_with = "opt_integer")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<i64>,
    /// 0-10: how many nodes below its count each pool may go while its nodes are replaced.
    #[schema(minimum = 0, maximum = 10)]
    #[serde(default, deserialize_with = "opt_integer")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<i64>,
}

impl From<UpgradeRequest> for draft::UpgradeRequest {
    fn from(b: UpgradeRequest) -> Self {
        draft::UpgradeRequest {
            version: b.version,
            max_surge: b.max_surge,
            max_unavailable: b.max_unavailable,
        }
    }
}

/// A maintenance window as sent: four hours from `start_time` (UTC) on `day`. In a PATCH a
/// part left out stays as it is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MaintenanceWindowRequest {
    #[schema(value_type = Option<enums::MaintenanceDay>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub day: Option<String>,
    /// `HH:MM`, 24-hour, UTC.
    #[schema(pattern = "^([01][0-9]|2[0-3]):[0-5][0-9]$", example = "03:00")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
}

impl From<MaintenanceWindowRequest> for draft::MaintenanceWindowRequest {
    fn from(b: MaintenanceWindowRequest) -> Self {
        draft::MaintenanceWindowRequest {
            day: b.day,
            start_time: b.start_time,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upgrade_body_takes_the_version_and_integral_surge_only() {
        let b: UpgradeRequest =
            serde_json::from_str(r#"{"version":"v1.32.6","max_surge":2.0}"#).unwrap_or_default();
        assert_eq!(b.max_surge, Some(2));
        assert!(
            serde_json::from_str::<UpgradeRequest>(r#"{"version":"v1.32.6","force":true}"#)
                .is_err()
        );
        assert!(serde_json::from_str::<UpgradeRequest>(r#"{"max_surge":1.5}"#).is_err());
    }
}
