//! `cluster show`.

use domain::maintenance::ClusterReport;
use domain::ports::maintenance::QueueEntry;

use crate::args::ClusterCommand;
use crate::output::{printable, time};
use crate::{AdminError, Outcome, context};

pub async fn run(command: ClusterCommand) -> Result<Outcome, AdminError> {
    let ClusterCommand::Show { id } = command;
    let store = context::store().await?;
    let report = context::maintenance(&store, None)?
        .cluster_report(id)
        .await?;
    print!("{}", render(&report));
    Ok(Outcome::Done)
}

fn render(r: &ClusterReport) -> String {
    let c = &r.cluster;
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&printable(&s));
        out.push('\n');
    };
    line(format!("cluster {} ({})", c.id, c.name.as_str()));
    line(format!(
        "  organization {} ({})",
        c.organization_id, c.organization_slug
    ));
    line(format!(
        "  phase {}{}",
        c.phase.as_str(),
        c.failure_reason
            .as_deref()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default()
    ));
    if let Some(at) = c.deleted_at {
        line(format!("  deleted at {}", time(at)));
    }
    line(format!(
        "  zone {}, version {}, exposure {}{}",
        c.zone,
        c.version,
        c.exposure.as_str(),
        c.exposure_change
            .as_ref()
            .map(|x| format!(" (changing to {})", x.to.as_str()))
            .unwrap_or_default()
    ));
    line(format!(
        "  hub registration {:?}, default environment {:?}",
        c.hub_registration.status, c.default_environment.status
    ));
    line(format!(
        "  api endpoint {}",
        c.api_endpoint.as_deref().unwrap_or("-")
    ));
    line(format!(
        "  credentials {}",
        if r.has_credentials {
            "stored"
        } else {
            "missing"
        }
    ));
    line(format!(
        "  revision {}, created {}",
        c.revision,
        time(c.created_at)
    ));
    line(format!("node pools ({})", c.node_pools.len()));
    for p in &c.node_pools {
        line(format!(
            "  {} {:?}: {} x {}",
            p.name.as_str(),
            p.status,
            p.count,
            p.size
        ));
    }
    line(format!("nodes ({})", r.nodes.len()));
    for n in &r.nodes {
        line(format!(
            "  {} in {} {:?}",
            n.name,
            n.pool.as_str(),
            n.status
        ));
    }
    line(format!("elastic IPs ({})", r.elastic_ips.len()));
    for e in &r.elastic_ips {
        line(format!(
            "  {} {} {} {:?}{}",
            e.id,
            e.address,
            e.exposure.as_str(),
            e.status,
            e.failure_reason
                .as_deref()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default()
        ));
    }
    line(format!("firewall rules ({})", r.firewall_rules.len()));
    for f in &r.firewall_rules {
        line(format!(
            "  {} {:?} {} {:?}",
            f.id,
            f.direction,
            f.protocol.as_str(),
            f.status
        ));
    }
    line(format!("provisioning queue: {}", queue(r.queue.as_ref())));
    line(format!(
        "operations (latest {} of {})",
        r.operations.len(),
        r.operations_total
    ));
    for o in &r.operations {
        line(format!("  {}", crate::operations::summary(o)));
    }
    out
}

pub fn queue(q: Option<&QueueEntry>) -> String {
    let Some(q) = q else {
        return "none".into();
    };
    let mut s = format!(
        "{:?}, generation {}, {} failed attempts, due {}",
        q.state,
        q.generation,
        q.attempts,
        time(q.run_after)
    );
    if let (Some(by), Some(until)) = (&q.leased_by, q.lease_expires_at) {
        s.push_str(&format!(", leased by {by} until {}", time(until)));
    }
    if let Some(e) = &q.last_error {
        s.push_str(&format!(", last error: {e}"));
    }
    s
}
