//! `catalog`: what a cluster can be made of in a zone, the recommended choices marked.

use wire::catalog::CatalogView;

use crate::args::Output;
use crate::client::Call;
use crate::error::CliError;
use crate::output::{Table, print_out};
use crate::session::Session;

/// The catalog of `zone` (the default zone when None).
pub async fn fetch(
    session: &Session,
    zone: Option<&str>,
) -> Result<(CatalogView, serde_json::Value), CliError> {
    let mut call = Call::get("/v1/catalog");
    if let Some(zone) = zone {
        call = call.query("zone", zone);
    }
    let answer = session.api.send(&call).await?;
    Ok((answer.parse()?, answer.json()?))
}

pub async fn show(session: &Session, zone: Option<String>) -> Result<(), CliError> {
    let (catalog, raw) = fetch(session, zone.as_deref()).await?;
    let out = &session.out;
    match out.format {
        Output::Json | Output::Yaml => {
            return out.show(&crate::output::View {
                raw,
                table: Table::default(),
                names: Vec::new(),
            });
        }
        Output::Name => {
            return Err(CliError::usage(
                "-o name lists objects; the catalog is not one: use -o json or -o yaml",
            ));
        }
        Output::Table => {}
    }
    let mark = |recommended: bool| if recommended { "*" } else { "" }.to_owned();
    let mut text = format!(
        "Zone {} ({}): public exposure {}, public Elastic IPs {}\n\n",
        catalog.zone.id,
        catalog.zone.display_name,
        if catalog.zone.public_exposure_enabled {
            "available"
        } else {
            "unavailable"
        },
        if catalog.zone.public_elastic_ip_pool_enabled {
            "available"
        } else {
            "unavailable"
        },
    );
    let mut versions = Table::new(&["VERSION", "CHANNEL", "RECOMMENDED"]);
    for v in &catalog.kubernetes_versions {
        versions.row(vec![v.id.clone(), v.channel.clone(), mark(v.recommended)]);
    }
    text.push_str(&out.render(&versions));
    let mut tiers = Table::new(&["SIZE", "VCPU", "MEMORY", "DISK", "RECOMMENDED"]);
    for t in &catalog.machine_tiers {
        tiers.row(vec![
            t.id.clone(),
            t.vcpu.to_string(),
            format!("{} GiB", t.memory_gib),
            format!("{} GiB", t.disk_gib),
            mark(t.recommended),
        ]);
    }
    text.push('\n');
    text.push_str(&out.render(&tiers));
    let limits = &catalog.constraints.node_pools;
    text.push_str(&format!(
        "\nDefaults: exposure {}, network mode {}. Node pools: {}-{} per cluster, {}-{} nodes each.\n",
        crate::output::cell(&serde_json::to_value(catalog.defaults.exposure_mode).unwrap_or_default()),
        crate::output::cell(&serde_json::to_value(catalog.defaults.network_mode).unwrap_or_default()),
        limits.min_pools,
        limits.max_pools,
        limits.min_nodes_per_pool,
        limits.max_nodes_per_pool,
    ));
    print_out(&text)
}
