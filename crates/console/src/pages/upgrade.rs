//! The Overview's day-two cards: the Kubernetes upgrade (the versions on offer, the surge
//! setting, each pool's progress while it runs) and the maintenance policy (the window and
//! automatic patch upgrades). Both post to the same use cases as the API.

use actix_web::web::{Form, Path};
use actix_web::{HttpRequest, HttpResponse};
use api::extract::Id;
use domain::input::cluster::ClusterPatch;
use domain::input::upgrade::{MaintenanceWindowRequest, UpgradeRequest};
use domain::model::cluster::Cluster;
use domain::model::maintenance_window::{MaintenanceDay, format_start_time};
use domain::model::node_pool::PoolStatus;
use domain::service::{Command, UpgradeOptions};
use maud::{Markup, html};
use serde::Deserialize;

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::pages::check_form;
use crate::session::Signed;

/// Where an upgrade stands, for the facts: `None` when none is in flight.
pub fn upgrade_progress(c: &Cluster) -> Option<String> {
    let up = c.upgrade.as_ref()?;
    if c.version != up.to {
        return Some(format!("to {}: upgrading the control plane", up.to));
    }
    let pools: Vec<String> = c
        .live_pools()
        .map(|p| {
            let state = match (p.status, p.version == up.to) {
                (PoolStatus::Upgrading, _) => "replacing nodes",
                (_, true) => "done",
                (_, false) => "waiting",
            };
            format!("{} {state}", p.name.as_str())
        })
        .collect();
    Some(format!("to {}: node pools {}", up.to, pools.join(", ")))
}

/// The upgrade card: the form when versions are on offer and nothing is in flight.
pub fn upgrade_card(c: &Cluster, options: &UpgradeOptions, csrf: &str) -> Markup {
    html! {
        section.card aria-labelledby="upgrade-title" {
            h3 #upgrade-title { "Kubernetes upgrade" }
            @if let Some(progress) = upgrade_progress(c) {
                p #upgrade-progress { "Upgrading " (progress) ". Each node is replaced by a new one of the new version, which is ready before the old one is removed." }
            } @else if options.available.is_empty() {
                p { "The cluster runs " strong { (c.version) } ", the newest version it can move to." }
            } @else {
                form method="post" action={ (PREFIX) "/clusters/" (c.id) "/upgrade" } {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="upgrade-version" { "Upgrade from " (c.version) " to" }
                    select #upgrade-version name="version" required {
                        @for v in &options.available {
                            option value=(v.id) {
                                (v.id) " (" (v.channel)
                                @if let Some(eos) = v.end_of_support { ", supported until " (eos) }
                                ")"
                            }
                        }
                    }
                    label for="upgrade-surge" { "Extra nodes per pool while replacing (surge)" }
                    input #upgrade-surge type="number" name="max_surge" min="1" max="10" placeholder="each pool's own (1 unless set)" aria-describedby="upgrade-surge-hint";
                    small.hint #upgrade-surge-hint { "More extra nodes finish sooner; none of the old ones is removed before its replacement is ready." }
                    p { button type="submit" { "Upgrade" } }
                }
            }
        }
    }
}

/// The maintenance card: the window, automatic patch upgrades, and when the next window opens.
pub fn maintenance_card(c: &Cluster, options: &UpgradeOptions, csrf: &str) -> Markup {
    let w = c.maintenance_window;
    html! {
        section.card aria-labelledby="maintenance-title" {
            h3 #maintenance-title { "Maintenance window" }
            p.hint {
                "Four hours from the start time (UTC). With automatic upgrades on, the newest patch of "
                (c.version) "'s minor version is applied inside it, at most once a window. Next window: "
                (options.next_window_start.format("%A %Y-%m-%d %H:%M UTC").to_string()) "."
            }
            form method="post" action={ (PREFIX) "/clusters/" (c.id) "/maintenance" } {
                input type="hidden" name="csrf" value=(csrf);
                label for="maintenance-day" { "Day" }
                select #maintenance-day name="day" {
                    @for d in MaintenanceDay::ALL {
                        option value=(d.as_str()) selected[*d == w.day] { (d.as_str()) }
                    }
                }
                label for="maintenance-start" { "Start (UTC)" }
                input #maintenance-start type="time" name="start_time" value=(format_start_time(w.start_time)) required;
                label.inline {
                    input type="checkbox" name="auto_upgrade" value="on" checked[c.auto_upgrade];
                    " Apply patch upgrades automatically"
                }
                p { button type="submit" { "Save maintenance window" } }
            }
        }
    }
}

#[derive(Deserialize)]
pub struct UpgradeForm {
    csrf: String,
    version: String,
    #[serde(default)]
    max_surge: String,
}

/// Starts an upgrade.
pub async fn upgrade(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    form: Form<UpgradeForm>,
) -> Result<HttpResponse, ConsoleError> {
    check_form(&req, &signed.session, &form.csrf)?;
    let max_surge = match form.max_surge.trim() {
        "" => None,
        n => Some(
            n.parse::<i64>()
                .map_err(|_| ConsoleError::BadForm("the surge must be a whole number".into()))?,
        ),
    };
    let body = UpgradeRequest {
        version: Some(form.version.clone()),
        max_surge,
        max_unavailable: None,
    };
    let outcome = signed
        .services
        .upgrade_cluster(Command::new(&signed.caller), id.0, body, None)
        .await;
    super::cluster::refused_or_back(&signed, id.0, outcome.map(|_| ())).await
}

#[derive(Deserialize)]
pub struct MaintenanceForm {
    csrf: String,
    day: String,
    start_time: String,
    /// A checkbox: present when ticked.
    #[serde(default)]
    auto_upgrade: Option<String>,
}

/// Saves the window and the automatic upgrades.
pub async fn maintenance(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    form: Form<MaintenanceForm>,
) -> Result<HttpResponse, ConsoleError> {
    check_form(&req, &signed.session, &form.csrf)?;
    // A browser's time input may send seconds (`03:00:00`); the window starts on a minute.
    let start: String = form.start_time.trim().chars().take(5).collect();
    let patch = ClusterPatch {
        maintenance_window: Some(Some(MaintenanceWindowRequest {
            day: Some(form.day.clone()),
            start_time: Some(start),
        })),
        auto_upgrade: Some(Some(form.auto_upgrade.is_some())),
        ..ClusterPatch::default()
    };
    let outcome = signed
        .services
        .patch_cluster(Command::new(&signed.caller), id.0, patch, None)
        .await;
    super::cluster::refused_or_back(&signed, id.0, outcome.map(|_| ())).await
}
