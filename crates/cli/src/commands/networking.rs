//! `eip allocate|list|get|release` and `firewall-rule create|list|get|delete`.

use domain::model::cluster::Exposure;
use reqwest::Method;
use serde_json::{Value, json};
use wire::networking::{ElasticIpList, ElasticIpView, FirewallRule, FirewallRuleList};
use wire::request::networking::{
    CreateElasticIpRequest, CreateFirewallRuleRequest, PortRangeRequest,
};

use super::clusters::{follow, to_json};
use super::{key, parse, spelled};
use crate::args::{EipCommand, FirewallCommand, WaitFlags};
use crate::client::Call;
use crate::confirm::{Answer, Question};
use crate::error::CliError;
use crate::output::{Table, View, age, cell};
use crate::resolve::{self, ClusterRef};
use crate::session::Session;
use crate::wait::Progress;

/// One kind of object under a cluster, followed by its `status`.
struct Kind {
    collection: &'static str,
    /// `Elastic IP`, `firewall rule`.
    what: &'static str,
    /// The command group, for the resume hint.
    command: &'static str,
    /// The status it settles in.
    done: &'static str,
}

const EIPS: Kind = Kind {
    collection: "elastic-ips",
    what: "Elastic IP",
    command: "eip",
    done: "Ready",
};

const RULES: Kind = Kind {
    collection: "firewall-rules",
    what: "firewall rule",
    command: "firewall-rule",
    done: "Active",
};

pub async fn eips(s: &Session, command: EipCommand) -> Result<(), CliError> {
    match command {
        EipCommand::Allocate {
            cluster,
            name,
            exposure,
            wait,
            key: k,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let body = CreateElasticIpRequest {
                name,
                exposure: exposure
                    .map(|e| spelled::<Exposure>("--exposure", &e, "public or private"))
                    .transpose()?,
            };
            let call = Call::new(Method::POST, format!("{}/elastic-ips", cluster.path()))
                .body(to_json(&body)?)
                .key(Some(&key(&k)));
            let raw = s.api.send(&call).await?.json()?;
            let raw = settle(s, &cluster, &EIPS, raw, &wait).await?;
            show_eips(s, raw.map(|r| vec![r]))
        }
        EipCommand::List { cluster } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let raw = s
                .api
                .send(&Call::get(format!("{}/elastic-ips", cluster.path())))
                .await?
                .json()?;
            show_eip_list(s, raw)
        }
        EipCommand::Get { cluster, eip } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let id = resolve::item_id(&s.api, &cluster, EIPS.collection, EIPS.what, &eip).await?;
            let raw = s
                .api
                .send(&Call::get(format!("{}/elastic-ips/{id}", cluster.path())))
                .await?
                .json()?;
            show_eips(s, Some(vec![raw]))
        }
        EipCommand::Release {
            cluster,
            eip,
            wait,
            yes,
            key: k,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let id = resolve::item_id(&s.api, &cluster, EIPS.collection, EIPS.what, &eip).await?;
            Question {
                action: format!("release Elastic IP {eip} of cluster {}", cluster.label),
                consequence: "Its address returns to the provider's pool: whoever reaches the \
                              cluster by it stops reaching it, and the same address may not come \
                              back.",
                answer: Answer::Yes,
            }
            .ask(yes)?;
            let call = Call::new(
                Method::DELETE,
                format!("{}/elastic-ips/{id}", cluster.path()),
            )
            .key(Some(&key(&k)));
            let raw = s.api.send(&call).await?.json()?;
            let raw = settle(s, &cluster, &EIPS, raw, &wait).await?;
            show_eips(s, raw.map(|r| vec![r]))
        }
    }
}

pub async fn rules(s: &Session, command: FirewallCommand) -> Result<(), CliError> {
    match command {
        FirewallCommand::Create {
            cluster,
            name,
            description,
            protocol,
            port,
            sources,
            wait,
            key: k,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let body = CreateFirewallRuleRequest {
                name,
                description,
                direction: None,
                protocol: Some(protocol),
                source_cidrs: Some(sources),
                port_range: port.as_deref().map(port_range).transpose()?,
            };
            let call = Call::new(Method::POST, format!("{}/firewall-rules", cluster.path()))
                .body(to_json(&body)?)
                .key(Some(&key(&k)));
            let raw = s.api.send(&call).await?.json()?;
            let raw = settle(s, &cluster, &RULES, raw, &wait).await?;
            show_rules(s, raw.map(|r| vec![r]))
        }
        FirewallCommand::List { cluster } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let raw: Value = s
                .api
                .send(&Call::get(format!("{}/firewall-rules", cluster.path())))
                .await?
                .json()?;
            let list: FirewallRuleList = parse(raw.clone())?;
            let view = rule_view(&list.items, raw);
            s.out.show(&view)
        }
        FirewallCommand::Get { cluster, rule } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let id =
                resolve::item_id(&s.api, &cluster, RULES.collection, RULES.what, &rule).await?;
            let raw = s
                .api
                .send(&Call::get(format!(
                    "{}/firewall-rules/{id}",
                    cluster.path()
                )))
                .await?
                .json()?;
            show_rules(s, Some(vec![raw]))
        }
        FirewallCommand::Delete {
            cluster,
            rule,
            wait,
            yes,
            key: k,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let id =
                resolve::item_id(&s.api, &cluster, RULES.collection, RULES.what, &rule).await?;
            Question {
                action: format!("delete firewall rule {rule} of cluster {}", cluster.label),
                consequence: "The traffic it lets in is refused once the deletion is applied.",
                answer: Answer::Yes,
            }
            .ask(yes)?;
            let call = Call::new(
                Method::DELETE,
                format!("{}/firewall-rules/{id}", cluster.path()),
            )
            .key(Some(&key(&k)));
            let raw = s.api.send(&call).await?.json()?;
            let raw = settle(s, &cluster, &RULES, raw, &wait).await?;
            show_rules(s, raw.map(|r| vec![r]))
        }
    }
}

/// `443` or `8000-8100`.
fn port_range(text: &str) -> Result<PortRangeRequest, CliError> {
    let bad = || {
        CliError::usage(format!(
            "--port takes a port or FROM-TO (e.g. 443 or 30000-30100), not {text:?}"
        ))
    };
    let (from, to) = text.split_once('-').unwrap_or((text, text));
    Ok(PortRangeRequest {
        from: from.trim().parse().map_err(|_| bad())?,
        to: to.trim().parse().map_err(|_| bad())?,
    })
}

/// With --wait, follows the object `raw` shows until it settles in `kind.done` (Some, as it
/// then is), `Failed`, or is gone (None); without, `raw` as it is.
async fn settle(
    s: &Session,
    cluster: &ClusterRef,
    kind: &Kind,
    raw: Value,
    wait: &WaitFlags,
) -> Result<Option<Value>, CliError> {
    let Some(id) = raw["id"].as_str().map(str::to_owned).filter(|_| wait.wait) else {
        return Ok(Some(raw));
    };
    let path = format!("{}/{}/{id}", cluster.path(), kind.collection);
    let label = raw["name"]
        .as_str()
        .map_or_else(|| id.clone(), str::to_owned);
    let what = format!("{} {label}", kind.what);
    let resume = format!("kubesvc {} get {} {label}", kind.command, cluster.label);
    let last = follow(s, cluster, wait, what, resume)
        .until(|| async {
            match s.api.send(&Call::get(path.clone())).await {
                Ok(answer) => {
                    let v = answer.json()?;
                    let status = cell(&v["status"]);
                    Ok(match status.as_str() {
                        "Failed" => Progress::Failed(
                            v["failure_reason"]
                                .as_str()
                                .unwrap_or("no reason given")
                                .to_owned(),
                        ),
                        s if s == kind.done => Progress::Done(status),
                        _ => Progress::Pending(status),
                    })
                }
                Err(e) if e.is_status(404) => Ok(Progress::Done("deleted".into())),
                Err(e) => Err(e),
            }
        })
        .await?;
    if last == "deleted" {
        return Ok(None);
    }
    Ok(Some(s.api.send(&Call::get(path)).await?.json()?))
}

fn show_eip_list(s: &Session, raw: Value) -> Result<(), CliError> {
    let list: ElasticIpList = parse(raw.clone())?;
    s.out.show(&eip_view(&list.items, raw))
}

/// One object shown (None: it is gone, nothing to show).
fn show_eips(s: &Session, raw: Option<Vec<Value>>) -> Result<(), CliError> {
    let Some(mut items) = raw else { return Ok(()) };
    let one = items.pop().unwrap_or(Value::Null);
    let eip: ElasticIpView = parse(one.clone())?;
    s.out.show(&eip_view(&[eip], one))
}

fn eip_view(items: &[ElasticIpView], raw: Value) -> View {
    let mut table = Table::new(&["ID", "NAME", "EXPOSURE", "STATUS", "ADDRESS", "AGE"]);
    for e in items {
        table.row(vec![
            e.id.to_string(),
            e.name.clone().unwrap_or_else(|| "-".into()),
            cell(&json!(e.exposure)),
            cell(&json!(e.status)),
            e.address.clone().unwrap_or_else(|| "-".into()),
            age(&e.created_at),
        ]);
    }
    View {
        raw,
        names: items.iter().map(|e| e.id.to_string()).collect(),
        table,
    }
}

fn show_rules(s: &Session, raw: Option<Vec<Value>>) -> Result<(), CliError> {
    let Some(mut items) = raw else { return Ok(()) };
    let one = items.pop().unwrap_or(Value::Null);
    let rule: FirewallRule = parse(one.clone())?;
    s.out.show(&rule_view(&[rule], one))
}

fn rule_view(items: &[FirewallRule], raw: Value) -> View {
    let mut table = Table::new(&[
        "ID", "NAME", "PROTOCOL", "PORTS", "SOURCES", "STATUS", "AGE",
    ]);
    for r in items {
        table.row(vec![
            r.id.to_string(),
            r.name.clone().unwrap_or_else(|| "-".into()),
            cell(&json!(r.protocol)),
            r.port_range.map_or_else(
                || "-".into(),
                |p| {
                    if p.from == p.to {
                        p.from.to_string()
                    } else {
                        format!("{}-{}", p.from, p.to)
                    }
                },
            ),
            r.source_cidrs.join(","),
            cell(&json!(r.status)),
            age(&r.created_at),
        ]);
    }
    View {
        raw,
        names: items.iter().map(|r| r.id.to_string()).collect(),
        table,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_or_a_range_is_read() {
        let read = |t: &str| port_range(t).ok().map(|r| (r.from, r.to));
        assert_eq!(read("443"), Some((443, 443)));
        assert_eq!(read("30000-30100"), Some((30000, 30100)));
        assert_eq!(read("https"), None);
        assert_eq!(read("1-"), None);
    }

    #[test]
    fn the_rule_body_is_the_one_the_server_reads() {
        let body = CreateFirewallRuleRequest {
            name: Some("https".into()),
            protocol: Some("tcp".into()),
            source_cidrs: Some(vec!["203.0.113.0/24".into()]),
            port_range: port_range("443").ok(),
            ..CreateFirewallRuleRequest::default()
        };
        let json = to_json(&body).unwrap_or_default();
        assert_eq!(
            json,
            json!({"name": "https", "protocol": "tcp", "source_cidrs": ["203.0.113.0/24"],
                   "port_range": {"from": 443, "to": 443}})
        );
        assert_eq!(
            serde_json::from_value::<CreateFirewallRuleRequest>(json).ok(),
            Some(body)
        );
    }
}
