//! `cluster create|list|get|update|delete|wait`, `cluster kubeconfig save|show` and
//! `cluster exposure set`.

use std::time::{Duration, Instant};

use domain::model::cluster::{ClusterPhase, Exposure, NetworkMode};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use wire::cluster::{Cluster, ClusterList, KubeconfigPending};
use wire::request::cluster::{
    ClusterPatch, ControlPlaneFirewallRequest, CreateClusterRequest, ExposurePatch,
};
use wire::request::node_pool::NodePoolRequest;

use super::{field, key, spelled};
use crate::args::{
    ClusterCommand, ControlPlaneFirewallCommand, ExpiryFlag, ExposureCommand, KubeconfigCommand,
    PoolFlags, WaitFlags,
};
use crate::client::Call;
use crate::confirm::{Answer, Question};
use crate::error::CliError;
use crate::kubeconfig;
use crate::output::{Table, View, age, print_out, stamp};
use crate::resolve::{self, ClusterRef};
use crate::session::Session;
use crate::wait::{Follow, Progress};

const CLUSTERS: &str = "/v1/public/clusters";

pub async fn run(s: &Session, command: ClusterCommand) -> Result<(), CliError> {
    match command {
        ClusterCommand::Create {
            name,
            pools,
            zone,
            kubernetes_version: version,
            description,
            tags,
            exposure,
            network_mode,
            wait,
            key: k,
        } => {
            let body = CreateClusterRequest {
                organization: Some(s.api.required_organization()?.to_owned()),
                name: Some(name.clone()),
                node_pools: Some(node_pools(s, &pools, zone.as_deref()).await?),
                zone,
                version,
                description,
                tags: (!tags.is_empty()).then_some(tags),
                exposure: exposure
                    .map(|e| spelled::<Exposure>("--exposure", &e, "public or private"))
                    .transpose()?,
                network_mode: network_mode
                    .map(|m| spelled::<NetworkMode>("--network-mode", &m, "intranet or internet"))
                    .transpose()?,
                control_plane_firewall: None,
                ..CreateClusterRequest::default()
            };
            let call = Call::new(Method::POST, CLUSTERS)
                .body(to_json(&body)?)
                .key(Some(&key(&k)));
            let created: Cluster = s.api.json(&call).await?;
            let cluster = ClusterRef {
                id: created.id,
                label: name,
            };
            if !s.out.is_data() {
                eprintln!(
                    "Cluster {} created ({}), phase {}",
                    created.name,
                    created.id,
                    phase(created.phase)
                );
            }
            if wait.wait {
                settle(s, &cluster, &wait).await?;
            }
            show_cluster(s, &cluster).await
        }
        ClusterCommand::List {
            zone,
            page,
            page_size,
        } => {
            let mut call = Call::get(CLUSTERS)
                .query("page", page)
                .query("size", page_size);
            if let Some(zone) = zone {
                call = call.query("zone", zone);
            }
            let answer = s.api.send(&call).await?;
            let list: ClusterList = answer.parse()?;
            let shown =
                u64::from(page.saturating_sub(1)) * u64::from(page_size) + list.items.len() as u64;
            if shown < list.total && !s.out.is_data() {
                eprintln!(
                    "{} of {} clusters shown; the next ones: --page {}",
                    list.items.len(),
                    list.total,
                    page + 1
                );
            }
            let mut table = Table::new(&[
                "NAME", "PHASE", "VERSION", "ZONE", "EXPOSURE", "NODES", "AGE",
            ]);
            for c in &list.items {
                table.row(vec![
                    c.name.clone(),
                    phase(c.phase),
                    c.version.clone(),
                    c.zone.clone(),
                    exposure(c),
                    c.node_pools
                        .iter()
                        .map(|p| p.count)
                        .sum::<u32>()
                        .to_string(),
                    age(&c.created_at),
                ]);
            }
            s.out.show(&View {
                raw: answer.json()?,
                names: list.items.iter().map(|c| c.name.clone()).collect(),
                table,
            })
        }
        ClusterCommand::Get { cluster } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            show_cluster(s, &cluster).await
        }
        ClusterCommand::Update {
            cluster,
            description,
            clear_description,
            tags,
            clear_tags,
        } => {
            let patch = ClusterPatch {
                description: match (description, clear_description) {
                    (Some(d), _) => Some(Some(d)),
                    (None, true) => Some(None),
                    (None, false) => None,
                },
                tags: match (tags.is_empty(), clear_tags) {
                    (false, _) => Some(Some(tags)),
                    (true, true) => Some(Some(Vec::new())),
                    (true, false) => None,
                },
                control_plane_firewall: None,
                ..ClusterPatch::default()
            };
            if patch.description.is_none() && patch.tags.is_none() {
                return Err(CliError::usage(
                    "nothing to change: give --description, --clear-description, --tag or --clear-tags",
                ));
            }
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            // No Idempotency-Key on this route: a PATCH is sent once, never retried blindly.
            let call = Call::new(Method::PATCH, cluster.path()).body(to_json(&patch)?);
            let answer = s.api.send(&call).await?;
            print_cluster(s, answer.json()?)
        }
        ClusterCommand::Delete {
            cluster,
            wait,
            yes,
            key: k,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            Question {
                action: format!("delete cluster {}", cluster.label),
                consequence: "Its node pools, nodes, Elastic IPs and firewall rules are deleted \
                              with it and every kubeconfig of it stops working. This cannot be \
                              undone.",
                answer: Answer::Name(&cluster.label),
            }
            .ask(yes)?;
            let answer = s
                .api
                .send(&Call::new(Method::DELETE, cluster.path()).key(Some(&key(&k))))
                .await?;
            if !s.out.is_data() {
                eprintln!("Cluster {} is being deleted", cluster.label);
            }
            if wait.wait {
                settle(s, &cluster, &wait).await?;
                return Ok(());
            }
            print_cluster(s, answer.json()?)
        }
        ClusterCommand::Wait {
            cluster,
            wait_timeout,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let wait = WaitFlags {
                wait: true,
                wait_timeout,
            };
            let gone = settle(s, &cluster, &wait).await? == GONE;
            if gone {
                return Ok(());
            }
            show_cluster(s, &cluster).await
        }
        ClusterCommand::Kubeconfig(c) => kubeconfig_command(s, c).await,
        ClusterCommand::Operations { cluster, status } => {
            super::activity::operations(s, &cluster, status).await
        }
        ClusterCommand::Credential(c) => super::activity::credentials(s, c).await,
        ClusterCommand::Upgrades { .. }
        | ClusterCommand::Upgrade { .. }
        | ClusterCommand::Maintenance(_) => super::upgrades::run(s, command).await,
        ClusterCommand::Exposure(ExposureCommand::Set {
            cluster,
            exposure: to,
            wait,
        }) => {
            let to: Exposure = spelled("exposure", &to, "public or private")?;
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let call = Call::new(Method::PATCH, format!("{}/exposure", cluster.path()))
                .body(to_json(&ExposurePatch { exposure: to })?);
            let answer = s.api.send(&call).await?;
            if answer.status == StatusCode::OK && !s.out.is_data() {
                eprintln!(
                    "Cluster {} is already {}: nothing to change",
                    cluster.label,
                    spell(to)
                );
            }
            if wait.wait && answer.status == StatusCode::ACCEPTED {
                let what = format!("exposure of cluster {}", cluster.label);
                let follow = follow(
                    s,
                    &cluster,
                    &wait,
                    what,
                    format!("kubesvc cluster get {}", cluster.label),
                );
                follow
                    .until(|| async {
                        let c: Cluster = s.api.json(&Call::get(cluster.path())).await?;
                        Ok(match c.exposure_change {
                            None if c.exposure == to => Progress::Done(spell(to)),
                            None => Progress::Failed(format!(
                                "the exposure stayed {}",
                                spell(c.exposure)
                            )),
                            Some(_) => Progress::Pending(format!("changing to {}", spell(to))),
                        })
                    })
                    .await?;
                return show_cluster(s, &cluster).await;
            }
            print_cluster(s, answer.json()?)
        }
        ClusterCommand::ControlPlaneFirewall(ControlPlaneFirewallCommand::Set {
            cluster,
            allow,
            disable,
            wait,
            key: k,
        }) => {
            let patch = ClusterPatch {
                control_plane_firewall: Some(Some(ControlPlaneFirewallRequest {
                    enabled: Some(!disable),
                    allowed_addresses: (!allow.is_empty()).then_some(allow),
                })),
                ..ClusterPatch::default()
            };
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let call = Call::new(Method::PATCH, cluster.path())
                .body(to_json(&patch)?)
                .key(Some(&key(&k)));
            let answer = s.api.send(&call).await?;
            if answer.status == StatusCode::OK && !s.out.is_data() {
                eprintln!(
                    "Cluster {}'s control-plane firewall is already so: nothing to change",
                    cluster.label
                );
            }
            if wait.wait && answer.status == StatusCode::ACCEPTED {
                let what = format!("control-plane firewall of cluster {}", cluster.label);
                follow(
                    s,
                    &cluster,
                    &wait,
                    what,
                    format!("kubesvc cluster get {}", cluster.label),
                )
                .until(|| async {
                    let c: Cluster = s.api.json(&Call::get(cluster.path())).await?;
                    Ok(match c.control_plane_firewall_change {
                        None => Progress::Done(firewall(&c.control_plane_firewall)),
                        Some(_) => Progress::Pending("applying".into()),
                    })
                })
                .await?;
                return show_cluster(s, &cluster).await;
            }
            print_cluster(s, answer.json()?)
        }
    }
}

/// A control-plane firewall in a few words.
fn firewall(f: &wire::cluster::ControlPlaneFirewall) -> String {
    if f.enabled {
        format!("only {}", f.allowed_addresses.join(", "))
    } else {
        "open (disabled)".into()
    }
}

/// The pools of `cluster create`: the --pool list, else one pool `default` of --size (the
/// zone's recommended machine tier when not given) and --count.
async fn node_pools(
    s: &Session,
    flags: &PoolFlags,
    zone: Option<&str>,
) -> Result<Vec<NodePoolRequest>, CliError> {
    if !flags.pools.is_empty() {
        return flags.pools.iter().map(|p| parse_pool(p)).collect();
    }
    let size = match &flags.size {
        Some(size) => size.clone(),
        None => {
            let (catalog, _) = super::catalog::fetch(s, zone).await?;
            let tier = catalog
                .machine_tiers
                .iter()
                .find(|t| t.recommended)
                .or(catalog.machine_tiers.first())
                .ok_or_else(|| CliError::usage("the catalog lists no machine tier: give --size"))?;
            if !s.out.is_data() {
                eprintln!(
                    "Using the recommended machine tier {} (--size to choose)",
                    tier.id
                );
            }
            tier.id.clone()
        }
    };
    Ok(vec![NodePoolRequest {
        name: Some("default".into()),
        size: Some(size),
        count: Some(i64::from(flags.count)),
        ..NodePoolRequest::default()
    }])
}

/// `NAME:SIZE:COUNT`.
fn parse_pool(text: &str) -> Result<NodePoolRequest, CliError> {
    let bad = || {
        CliError::usage(format!(
            "--pool takes NAME:SIZE:COUNT (e.g. web:kube.c5.large:3), not {text:?}"
        ))
    };
    let mut parts = text.split(':');
    let (Some(name), Some(size), Some(count), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let count: i64 = count.parse().map_err(|_| bad())?;
    Ok(NodePoolRequest {
        name: Some(name.to_owned()),
        size: Some(size.to_owned()),
        count: Some(count),
        ..NodePoolRequest::default()
    })
}

pub fn to_json<T: serde::Serialize>(body: &T) -> Result<Value, CliError> {
    serde_json::to_value(body)
        .map_err(|e| CliError::Local(format!("cannot write the request: {e}")))
}

/// The label `settle` ends with when the cluster is gone.
const GONE: &str = "deleted";

/// Follows a cluster until it is Provisioned (Done), Failed, or gone.
async fn settle(s: &Session, cluster: &ClusterRef, wait: &WaitFlags) -> Result<String, CliError> {
    let resume = format!("kubesvc cluster wait {}", cluster.label);
    let follow = follow(
        s,
        cluster,
        wait,
        format!("cluster {}", cluster.label),
        resume,
    );
    follow
        .until(|| async {
            match s.api.json::<Cluster>(&Call::get(cluster.path())).await {
                Ok(c) => Ok(match c.phase {
                    ClusterPhase::Provisioned => Progress::Done(phase(c.phase)),
                    ClusterPhase::Failed => Progress::Failed(
                        c.failure_reason.unwrap_or_else(|| "no reason given".into()),
                    ),
                    p => Progress::Pending(phase(p)),
                }),
                Err(e) if e.is_status(404) => Ok(Progress::Done(GONE.into())),
                Err(e) => Err(e),
            }
        })
        .await
}

/// A follower of `cluster` for `what`; `resume` is the command that picks it up again.
pub fn follow<'a>(
    s: &'a Session,
    cluster: &'a ClusterRef,
    wait: &WaitFlags,
    what: String,
    resume: String,
) -> Follow<'a> {
    Follow {
        api: &s.api,
        cluster,
        what,
        resume,
        timeout: Duration::from_secs(wait.wait_timeout),
        interactive: s.interactive,
    }
}

pub(super) async fn show_cluster(s: &Session, cluster: &ClusterRef) -> Result<(), CliError> {
    let answer = s.api.send(&Call::get(cluster.path())).await?;
    print_cluster(s, answer.json()?)
}

fn print_cluster(s: &Session, raw: Value) -> Result<(), CliError> {
    let c: Cluster = serde_json::from_value(raw.clone()).map_err(|e| {
        CliError::Network(format!(
            "the API's cluster does not have the expected shape: {e}"
        ))
    })?;
    if s.out.is_data() {
        return s.out.show(&View {
            raw,
            table: Table::default(),
            names: vec![c.name],
        });
    }
    let mut pairs = vec![
        ("Name:", c.name.clone()),
        ("ID:", c.id.to_string()),
        ("Organization:", c.organization_slug.clone()),
        ("Phase:", phase(c.phase)),
        ("Version:", c.version.clone()),
        ("Zone:", c.zone.clone()),
        ("Exposure:", exposure(&c)),
        (
            "Control-plane firewall:",
            match &c.control_plane_firewall_change {
                Some(to) => format!("{} → {}", firewall(&c.control_plane_firewall), firewall(to)),
                None => firewall(&c.control_plane_firewall),
            },
        ),
        ("Network mode:", field(&raw, "network_mode")),
        ("API endpoint:", field(&raw, "api_endpoint")),
        ("Description:", field(&raw, "description")),
        ("Tags:", field(&raw, "tags")),
        ("Hub registration:", registration(&raw["hub_registration"])),
        (
            "Default environment:",
            registration(&raw["default_environment"]),
        ),
        ("Created:", stamp(&c.created_at)),
    ];
    if let Some(reason) = &c.failure_reason {
        pairs.insert(4, ("Failure:", reason.clone()));
    }
    let mut text = s.out.details(&pairs);
    let mut pools = Table::new(&["POOL", "SIZE", "COUNT", "AUTOSCALE", "STATUS"]);
    for p in &c.node_pools {
        pools.row(vec![
            p.name.clone(),
            p.size.clone(),
            p.count.to_string(),
            super::pools::autoscale(p.auto_scale, p.min_nodes, p.max_nodes),
            crate::output::cell(&json!(p.status)),
        ]);
    }
    text.push('\n');
    text.push_str(&s.out.render(&pools));
    print_out(&text)
}

fn registration(v: &Value) -> String {
    match v["reason"].as_str() {
        Some(reason) => format!("{} ({reason})", field(v, "status")),
        None => field(v, "status"),
    }
}

pub fn phase(p: ClusterPhase) -> String {
    crate::output::cell(&json!(p))
}

fn spell(e: Exposure) -> String {
    crate::output::cell(&json!(e))
}

fn exposure(c: &Cluster) -> String {
    match c.exposure_change {
        Some(change) => format!("{} → {}", spell(c.exposure), spell(change.to)),
        None => spell(c.exposure),
    }
}

async fn kubeconfig_command(s: &Session, command: KubeconfigCommand) -> Result<(), CliError> {
    match command {
        KubeconfigCommand::Show { cluster, expiry } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let yaml = download(s, &cluster, Duration::from_secs(1800), expiry).await?;
            print_out(&yaml)
        }
        KubeconfigCommand::Save {
            cluster,
            set_current,
            context_name,
            kubeconfig: file,
            wait_timeout,
            expiry,
        } => {
            let target = file
                .or_else(|| {
                    kubeconfig::target_path(
                        std::env::var_os("KUBECONFIG").as_deref(),
                        std::env::var_os("HOME")
                            .as_deref()
                            .map(std::path::Path::new),
                    )
                })
                .ok_or_else(|| {
                    CliError::usage(
                        "no kubeconfig file: set KUBECONFIG or HOME, or pass --kubeconfig",
                    )
                })?;
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let context = match context_name {
                Some(name) => name,
                None => {
                    s.api
                        .json::<Cluster>(&Call::get(cluster.path()))
                        .await?
                        .name
                }
            };
            let yaml = download(s, &cluster, Duration::from_secs(wait_timeout), expiry).await?;
            let existing = match std::fs::read_to_string(&target) {
                Ok(text) => Some(text),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(CliError::Local(format!("{}: {e}", target.display()))),
            };
            let local =
                |e: kubeconfig::KubeconfigError| CliError::Local(e.in_file(&target).to_string());
            let merged = kubeconfig::merge(existing.as_deref(), &yaml, &context, set_current)
                .map_err(local)?;
            kubeconfig::write_atomically(&target, &merged.yaml).map_err(local)?;
            let verb = if merged.replaced { "Updated" } else { "Added" };
            let context = merged.context;
            let current = if merged.current_set {
                "; it is kubectl's current context now".to_owned()
            } else {
                format!(
                    "; use it with `kubectl --context {context}` or `kubectl config use-context {context}`"
                )
            };
            eprintln!(
                "{verb} context {context:?} in {}{current}",
                target.display()
            );
            if s.out.format == crate::args::Output::Name {
                print_out(&format!("{context}\n"))?;
            }
            Ok(())
        }
    }
}

/// The kubeconfig's YAML, waiting through the API's "not ready yet" answers (202 with
/// Retry-After) up to `timeout`; Ctrl-C stops the waiting.
async fn download(
    s: &Session,
    cluster: &ClusterRef,
    timeout: Duration,
    expiry: ExpiryFlag,
) -> Result<String, CliError> {
    let deadline = Instant::now() + timeout;
    let mut call = Call::get(format!("{}/kubeconfig", cluster.path())).query("format", "plain");
    if let Some(seconds) = expiry.expiry_seconds {
        call = call.query("expiry_seconds", seconds);
    }
    let mut said = false;
    loop {
        let answer = s.api.send(&call).await?;
        if answer.status == StatusCode::OK {
            return String::from_utf8(answer.body)
                .map_err(|_| CliError::Network("the kubeconfig is not UTF-8 text".into()));
        }
        let pending: KubeconfigPending = answer.parse()?;
        let pause = answer
            .retry_after()
            .unwrap_or(Duration::from_secs(5))
            .clamp(Duration::from_secs(1), Duration::from_secs(30));
        if Instant::now() + pause > deadline {
            return Err(CliError::Failed(format!(
                "the control plane of cluster {} is not up yet (phase {}); try again later",
                cluster.label,
                phase(pending.phase)
            )));
        }
        if !said {
            eprintln!(
                "Cluster {} is {}: waiting for its control plane (Ctrl-C to stop)",
                cluster.label,
                phase(pending.phase)
            );
            said = true;
        }
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = tokio::signal::ctrl_c() => return Err(CliError::Interrupted(format!(
                "stopped waiting for the kubeconfig of cluster {}; nothing was written", cluster.label))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_flag_reads_name_size_and_count() {
        let pool = parse_pool("web:kube.c5.large:3").ok();
        assert_eq!(pool.as_ref().and_then(|p| p.name.as_deref()), Some("web"));
        assert_eq!(pool.as_ref().and_then(|p| p.count), Some(3));
        for bad in ["web", "web:kube.c5.large", "web:kube.c5.large:x", "a:b:1:2"] {
            assert_eq!(
                parse_pool(bad).err().map(|e| e.exit_code()),
                Some(2),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_bodies_are_the_ones_the_server_reads() {
        let create = CreateClusterRequest {
            organization: Some("acme".into()),
            name: Some("prod-1".into()),
            node_pools: parse_pool("web:kube.c5.large:3").ok().map(|p| vec![p]),
            exposure: Some(Exposure::Private),
            ..CreateClusterRequest::default()
        };
        let json = to_json(&create).unwrap_or_default();
        assert_eq!(
            json,
            json!({"organization": "acme", "name": "prod-1", "exposure": "private",
                   "node_pools": [{"name": "web", "size": "kube.c5.large", "count": 3}]})
        );
        assert_eq!(
            serde_json::from_value::<CreateClusterRequest>(json).ok(),
            Some(create)
        );
        let clear = ClusterPatch {
            description: Some(None),
            tags: None,
            control_plane_firewall: None,
            ..ClusterPatch::default()
        };
        assert_eq!(
            to_json(&clear).unwrap_or_default(),
            json!({"description": null})
        );
    }
}
