//! `cluster upgrades`, `cluster upgrade` and `cluster maintenance set`.

use reqwest::Method;
use wire::cluster::{Cluster, ClusterUpgrades};
use wire::request::cluster::ClusterPatch;
use wire::request::upgrade::{MaintenanceWindowRequest, UpgradeRequest};

use super::clusters::{follow, show_cluster, to_json};
use super::{key, parse};
use crate::args::{ClusterCommand, MaintenanceCommand};
use crate::client::Call;
use crate::error::CliError;
use crate::output::{Table, View};
use crate::resolve;
use crate::session::Session;
use crate::wait::Progress;

pub async fn run(s: &Session, command: ClusterCommand) -> Result<(), CliError> {
    match command {
        ClusterCommand::Upgrades { cluster } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let answer = s
                .api
                .send(&Call::get(format!("{}/upgrades", cluster.path())))
                .await?;
            let raw = answer.json()?;
            let u: ClusterUpgrades = parse(raw.clone())?;
            if !s.out.is_data() {
                eprintln!("{}", standing(&cluster.label, &u));
            }
            let mut table = Table::new(&["VERSION", "CHANNEL", "END OF SUPPORT"]);
            for v in &u.available_versions {
                table.row(vec![
                    v.id.clone(),
                    v.channel.clone(),
                    v.end_of_support
                        .map(|d| d.to_string())
                        .unwrap_or_else(|| "-".into()),
                ]);
            }
            s.out.show(&View {
                names: u.available_versions.iter().map(|v| v.id.clone()).collect(),
                raw,
                table,
            })
        }
        ClusterCommand::Upgrade {
            cluster,
            version,
            max_surge,
            max_unavailable,
            wait,
            key: k,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let body = UpgradeRequest {
                version: Some(version.clone()),
                max_surge: max_surge.map(i64::from),
                max_unavailable: max_unavailable.map(i64::from),
            };
            let call = Call::new(Method::POST, format!("{}/upgrade", cluster.path()))
                .body(to_json(&body)?)
                .key(Some(&key(&k)));
            let started: Cluster = s.api.json(&call).await?;
            if !s.out.is_data() {
                eprintln!(
                    "Cluster {} is upgrading from {} to {version}",
                    cluster.label, started.version
                );
            }
            if wait.wait {
                let what = format!("upgrade of cluster {} to {version}", cluster.label);
                follow(
                    s,
                    &cluster,
                    &wait,
                    what,
                    format!("kubesvc cluster get {}", cluster.label),
                )
                .until(|| async {
                    let c: Cluster = s.api.json(&Call::get(cluster.path())).await?;
                    Ok(progress(&c, &version))
                })
                .await?;
            }
            show_cluster(s, &cluster).await
        }
        ClusterCommand::Maintenance(MaintenanceCommand::Set {
            cluster,
            day,
            start,
            auto_upgrade,
        }) => {
            let auto_upgrade = match auto_upgrade.as_deref() {
                None => None,
                Some("on") => Some(Some(true)),
                Some("off") => Some(Some(false)),
                Some(other) => {
                    return Err(CliError::usage(format!(
                        "--auto-upgrade must be on or off, not {other:?}"
                    )));
                }
            };
            if day.is_none() && start.is_none() && auto_upgrade.is_none() {
                return Err(CliError::usage(
                    "nothing to change: give --day, --start or --auto-upgrade",
                ));
            }
            let window =
                (day.is_some() || start.is_some()).then_some(Some(MaintenanceWindowRequest {
                    day,
                    start_time: start,
                }));
            let patch = ClusterPatch {
                maintenance_window: window,
                auto_upgrade,
                ..ClusterPatch::default()
            };
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let call = Call::new(Method::PATCH, cluster.path()).body(to_json(&patch)?);
            s.api.send(&call).await?;
            show_cluster(s, &cluster).await
        }
        other => Err(CliError::Local(format!(
            "not an upgrade command: {other:?}"
        ))),
    }
}

/// Where a cluster stands, in one line: its version, its upgrade in flight, its policy.
fn standing(label: &str, u: &ClusterUpgrades) -> String {
    let policy = if u.auto_upgrade {
        format!(
            "patches applied automatically on {} from {} UTC (next window {})",
            u.maintenance_window.day,
            u.maintenance_window.start_time,
            u.next_maintenance_window_start.format("%Y-%m-%d %H:%M UTC")
        )
    } else {
        "automatic upgrades off".into()
    };
    match &u.upgrade {
        Some(up) => format!(
            "Cluster {label} is upgrading from {} to {}; {policy}",
            up.from, up.to
        ),
        None if u.available_versions.is_empty() => format!(
            "Cluster {label} runs {}, the newest it can move to; {policy}",
            u.current_version
        ),
        None => format!("Cluster {label} runs {}; {policy}", u.current_version),
    }
}

/// How an upgrade to `to` goes, as the cluster shows it.
fn progress(c: &Cluster, to: &str) -> Progress {
    match &c.upgrade {
        None if c.version == to => Progress::Done(format!("running {to}")),
        None => Progress::Failed(format!("the cluster runs {}", c.version)),
        Some(_) if c.version != to => Progress::Pending("upgrading the control plane".into()),
        Some(_) => {
            let pools: Vec<String> = c
                .node_pools
                .iter()
                .map(|p| {
                    let state = match (p.version == to, p.status.as_str()) {
                        (_, "Upgrading") => "replacing nodes",
                        (true, _) => "done",
                        (false, _) => "waiting",
                    };
                    format!("{} {state}", p.name)
                })
                .collect();
            Progress::Pending(format!("node pools: {}", pools.join(", ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn cluster(version: &str, upgrade: Option<&str>, pools: &[(&str, &str, &str)]) -> Cluster {
        let mut raw: Value = serde_json::json!({
            "id": "00000000-0000-4000-8000-000000000001",
            "organization_id": "00000000-0000-4000-8000-000000000002",
            "organization_slug": "acme", "name": "prod-1", "description": null, "tags": [],
            "zone": "zone-1", "version": version, "control_plane_option_id": "cp-standard",
            "exposure": "private", "network_mode": "intranet", "phase": "Provisioned",
            "failure_reason": null, "public_hostname": null, "api_endpoint": null,
            "node_pools": [],
            "hub_registration": {"status": "ready", "reason": null},
            "default_environment": {"status": "ready", "reason": null},
            "exposure_change": null, "upgrade": null,
            "maintenance_window": {"day": "any", "start_time": "00:00"}, "auto_upgrade": false,
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"
        });
        if let Some(to) = upgrade {
            raw["upgrade"] = serde_json::json!({"from": "v1.32.4", "to": to, "automatic": false});
        }
        raw["node_pools"] = pools
            .iter()
            .map(|(name, v, status)| {
                serde_json::json!({
                "name": name, "size": "kube.c5.large", "count": 1, "auto_scale": false,
                "min_nodes": 1, "max_nodes": null, "labels": {}, "tags": {},
                "root_volume_size_gib": 50, "version": v, "max_surge": 1, "max_unavailable": 0,
                "status": status, "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-01T00:00:00Z"})
            })
            .collect();
        serde_json::from_value(raw).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn progress_names_the_stage_and_each_pool() {
        let table = [
            (
                cluster("v1.32.4", Some("v1.32.6"), &[]),
                Progress::Pending("upgrading the control plane".into()),
            ),
            (
                cluster(
                    "v1.32.6",
                    Some("v1.32.6"),
                    &[
                        ("a", "v1.32.6", "Ready"),
                        ("b", "v1.32.6", "Upgrading"),
                        ("c", "v1.32.4", "Ready"),
                    ],
                ),
                Progress::Pending("node pools: a done, b replacing nodes, c waiting".into()),
            ),
            (
                cluster("v1.32.6", None, &[]),
                Progress::Done("running v1.32.6".into()),
            ),
            (
                cluster("v1.32.4", None, &[]),
                Progress::Failed("the cluster runs v1.32.4".into()),
            ),
        ];
        for (c, expected) in table {
            assert_eq!(progress(&c, "v1.32.6"), expected);
        }
    }
}
