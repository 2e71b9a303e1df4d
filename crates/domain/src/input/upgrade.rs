//! Upgrade and maintenance-policy inputs.

use crate::model::maintenance_window::{MaintenanceDay, MaintenanceWindow, parse_start_time};
use crate::model::upgrade::SurgeSettings;
use crate::rules::{MAX_SURGE, MAX_UNAVAILABLE};
use crate::validation::Violations;

/// `POST …/upgrade`: the version to move to and, optionally, how every pool replaces its nodes
/// for this and later upgrades (each pool keeps its own setting otherwise).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpgradeRequest {
    pub version: Option<String>,
    pub max_surge: Option<i64>,
    pub max_unavailable: Option<i64>,
}

/// A checked upgrade request; the version is checked against the catalog by the use case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradeSpec {
    pub version: String,
    pub max_surge: Option<u32>,
    pub max_unavailable: Option<u32>,
}

/// Checks `max_surge` (1–10) and `max_unavailable` (0–10) where given, under `prefix`;
/// the values that hold.
pub fn check_surge(
    v: &mut Violations,
    prefix: &str,
    max_surge: Option<i64>,
    max_unavailable: Option<i64>,
) -> (Option<u32>, Option<u32>) {
    let field = |name: &str| {
        if prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{prefix}.{name}")
        }
    };
    let mut bounded = |name: &str, value: Option<i64>, min: u32, max: u32| {
        let value = value?;
        match u32::try_from(value) {
            Ok(n) if (min..=max).contains(&n) => Some(n),
            _ => {
                v.push(field(name), format!("must be {min}-{max} (got {value})"));
                None
            }
        }
    };
    (
        bounded("max_surge", max_surge, 1, MAX_SURGE),
        bounded("max_unavailable", max_unavailable, 0, MAX_UNAVAILABLE),
    )
}

/// The surge settings a pool gets from optional values, `current` filling the gaps.
pub fn surge_or(
    current: SurgeSettings,
    max_surge: Option<u32>,
    max_unavailable: Option<u32>,
) -> SurgeSettings {
    SurgeSettings {
        max_surge: max_surge.unwrap_or(current.max_surge),
        max_unavailable: max_unavailable.unwrap_or(current.max_unavailable),
    }
}

impl UpgradeRequest {
    pub fn validate(&self) -> Result<UpgradeSpec, Violations> {
        let mut v = Violations::new();
        let version = match self.version.as_deref() {
            None | Some("") => {
                v.push(
                    "version",
                    "is required: one of the versions …/upgrades lists",
                );
                String::new()
            }
            Some(s) => s.to_owned(),
        };
        let (max_surge, max_unavailable) =
            check_surge(&mut v, "", self.max_surge, self.max_unavailable);
        v.into_result(UpgradeSpec {
            version,
            max_surge,
            max_unavailable,
        })
    }
}

/// A maintenance window as sent: `day` and `start_time` (`HH:MM`, UTC).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MaintenanceWindowRequest {
    pub day: Option<String>,
    pub start_time: Option<String>,
}

impl MaintenanceWindowRequest {
    /// The window, each problem under `field`; a missing part keeps `current`'s.
    pub fn check(
        &self,
        v: &mut Violations,
        field: &str,
        current: MaintenanceWindow,
    ) -> MaintenanceWindow {
        let mut window = current;
        if let Some(day) = &self.day {
            match MaintenanceDay::parse(day) {
                Some(d) => window.day = d,
                None => v.push(
                    format!("{field}.day"),
                    "must be any, monday, tuesday, wednesday, thursday, friday, saturday or sunday",
                ),
            }
        }
        if let Some(t) = &self.start_time {
            match parse_start_time(t) {
                Some(t) => window.start_time = t,
                None => v.push(
                    format!("{field}.start_time"),
                    "must be HH:MM in UTC, 00:00-23:59",
                ),
            }
        }
        window
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surge_bounds_name_the_field() {
        let table = [
            (Some(0), None, vec!["max_surge"]),
            (Some(11), Some(11), vec!["max_surge", "max_unavailable"]),
            (Some(-1), Some(-1), vec!["max_surge", "max_unavailable"]),
            (Some(10), Some(10), vec![]),
            (Some(1), Some(0), vec![]),
        ];
        for (surge, unavailable, fields) in table {
            let r = UpgradeRequest {
                version: Some("v1.32.6".into()),
                max_surge: surge,
                max_unavailable: unavailable,
            }
            .validate();
            let got: Vec<String> = match r {
                Ok(_) => vec![],
                Err(v) => v.errors().iter().map(|e| e.field.clone()).collect(),
            };
            assert_eq!(got, fields, "{surge:?} {unavailable:?}");
        }
    }

    #[test]
    fn a_version_is_required() {
        let r = UpgradeRequest::default().validate();
        assert!(matches!(r, Err(v) if v.has("version")));
    }

    #[test]
    fn a_window_keeps_what_is_not_sent_and_names_what_is_wrong() {
        let mut v = Violations::new();
        let w = MaintenanceWindowRequest {
            day: Some("friday".into()),
            start_time: None,
        }
        .check(&mut v, "maintenance_window", MaintenanceWindow::default());
        assert!(v.is_empty());
        assert_eq!(w.day, MaintenanceDay::Friday);
        assert_eq!(w.start_time, MaintenanceWindow::default().start_time);
        MaintenanceWindowRequest {
            day: Some("Friday".into()),
            start_time: Some("25:00".into()),
        }
        .check(&mut v, "maintenance_window", w);
        let fields: Vec<_> = v.errors().iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["maintenance_window.day", "maintenance_window.start_time"]
        );
    }
}
