//! What happened and is happening: a cluster's operations, its kubeconfig credentials, and
//! the organization's audit trail.

use reqwest::Method;
use serde_json::Value;
use wire::audit::AuditEventList;
use wire::credential::{CredentialList, IssuedCredential};
use wire::operation::OperationList;

use super::parse;
use crate::args::{AuditCommand, KubeconfigCredentialCommand};
use crate::client::Call;
use crate::confirm::{Answer, Question};
use crate::error::CliError;
use crate::output::{Table, View, age, when};
use crate::resolve;
use crate::session::Session;

/// `kubesvc cluster operations CLUSTER`: newest first.
pub async fn operations(
    s: &Session,
    cluster: &str,
    status: Option<String>,
) -> Result<(), CliError> {
    let cluster = resolve::cluster(&s.api, cluster).await?;
    let mut call = Call::get(format!("{}/operations", cluster.path())).query("size", 100);
    if let Some(st) = status {
        call = call.query("status", st);
    }
    let raw = s.api.send(&call).await?.json()?;
    let list: OperationList = parse(raw.clone())?;
    let mut table = Table::new(&[
        "ID",
        "KIND",
        "OBJECT",
        "STATUS",
        "ATTEMPTS",
        "BY",
        "AGE",
        "LAST ERROR",
        "PROGRESS",
    ]);
    for o in &list.items {
        table.row(vec![
            o.id.to_string(),
            o.kind.clone(),
            o.resource_id.clone(),
            o.status.clone(),
            o.attempts.to_string(),
            o.requested_by.user_id.clone(),
            age(&o.created_at),
            o.last_error.clone().unwrap_or_else(|| "-".into()),
            o.progress.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    s.out.show(&View {
        raw,
        names: list.items.iter().map(|o| o.id.to_string()).collect(),
        table,
    })
}

/// `kubesvc cluster credential …`.
pub async fn credentials(
    s: &Session,
    command: KubeconfigCredentialCommand,
) -> Result<(), CliError> {
    match command {
        KubeconfigCredentialCommand::List { cluster } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let raw = s
                .api
                .send(&Call::get(format!("{}/credentials", cluster.path())))
                .await?
                .json()?;
            let list: CredentialList = parse(raw.clone())?;
            show_credentials(s, &list.items, raw)
        }
        KubeconfigCredentialCommand::Revoke {
            cluster,
            credential,
            yes,
        } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            let id = uuid::Uuid::parse_str(&credential).map_err(|_| {
                CliError::usage(format!(
                    "{credential:?} is not a credential id (see `kubesvc cluster credential list`)"
                ))
            })?;
            Question {
                action: format!("revoke credential {id} of cluster {}", cluster.label),
                consequence: "Every kubeconfig holding this credential stops working at once.",
                answer: Answer::Yes,
            }
            .ask(yes)?;
            let call = Call::new(
                Method::DELETE,
                format!("{}/credentials/{id}", cluster.path()),
            );
            let raw = s.api.send(&call).await?.json()?;
            let revoked: IssuedCredential = parse(raw.clone())?;
            show_credentials(s, &[revoked], raw)
        }
        KubeconfigCredentialCommand::Rotate { cluster, yes } => {
            let cluster = resolve::cluster(&s.api, &cluster).await?;
            Question {
                action: format!("revoke every credential of cluster {}", cluster.label),
                consequence: "Every kubeconfig of this cluster downloaded so far stops working; \
                              a new standing credential replaces them (save a kubeconfig again).",
                answer: Answer::Yes,
            }
            .ask(yes)?;
            let call = Call::new(Method::DELETE, format!("{}/credentials", cluster.path()));
            let raw = s.api.send(&call).await?.json()?;
            if s.out.is_data() {
                return s.out.show(&View {
                    raw,
                    names: vec![],
                    table: Table::new(&[]),
                });
            }
            crate::output::print_out(&format!(
                "Rotated the credentials of cluster {}: {} credential(s) of their own revoked and the standing one replaced. Download the kubeconfig again.\n",
                cluster.label, raw["revoked"]
            ))
        }
    }
}

fn show_credentials(s: &Session, items: &[IssuedCredential], raw: Value) -> Result<(), CliError> {
    let mut table = Table::new(&["ID", "HOLDER", "STATUS", "EXPIRES", "AGE"]);
    for c in items {
        table.row(vec![
            c.id.to_string(),
            c.issued_to.user_id.clone(),
            c.status.clone(),
            when(&c.expires_at),
            age(&c.created_at),
        ]);
    }
    s.out.show(&View {
        raw,
        names: items.iter().map(|c| c.id.to_string()).collect(),
        table,
    })
}

/// `kubesvc audit list`: one page, or every page with `--all` (shown as one list).
pub async fn audit(s: &Session, command: AuditCommand) -> Result<(), CliError> {
    let AuditCommand::List {
        resource,
        cluster,
        actor,
        since,
        until,
        limit,
        all,
    } = command;
    let cluster = match cluster {
        Some(c) => Some(resolve::cluster(&s.api, &c).await?.id),
        None => None,
    };
    let mut items: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut call = Call::get("/v1/public/audit-events".to_owned()).query("limit", limit);
        for (name, value) in [
            ("resource", resource.clone()),
            ("cluster_id", cluster.map(|c| c.to_string())),
            ("actor", actor.clone()),
            ("since", since.clone()),
            ("until", until.clone()),
            ("cursor", cursor.clone()),
        ] {
            if let Some(v) = value {
                call = call.query(name, v);
            }
        }
        let raw = s.api.send(&call).await?.json()?;
        let page: AuditEventList = parse(raw.clone())?;
        items.extend(raw["items"].as_array().cloned().unwrap_or_default());
        match page.next_cursor {
            Some(next) if all => cursor = Some(next),
            _ => break,
        }
    }
    let events: Vec<wire::audit::AuditEvent> = parse(Value::Array(items.clone()))?;
    let mut table = Table::new(&[
        "AT", "ACTOR", "VIA", "RESOURCE", "ACTION", "OUTCOME", "OBJECT",
    ]);
    for e in &events {
        table.row(vec![
            when(&e.at),
            e.actor.user_id.clone(),
            e.via.clone(),
            e.resource.clone(),
            e.action.clone(),
            e.outcome.clone(),
            e.resource_id.clone(),
        ]);
    }
    s.out.show(&View {
        raw: Value::Array(items),
        names: events.iter().map(|e| e.id.to_string()).collect(),
        table,
    })
}
