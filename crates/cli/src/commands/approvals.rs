//! `approvals list|show|approve|decline`: what the person's AI assistant asked to change,
//! decided by the person themselves. The API answers only the caller's own approvals (anybody
//! else's is 404), so no organization is needed; the words shown are the API's, and
//! customer-written names inside them are printed as text, never obeyed by the terminal.

use reqwest::Method;
use serde_json::Value;
use uuid::Uuid;
use wire::approval::{Approval, ApprovalList};

use super::parse;
use crate::args::ApprovalsCommand;
use crate::client::Call;
use crate::confirm::{Answer, Question};
use crate::error::CliError;
use crate::output::{Table, View, print_out, stamp, when};
use crate::session::Session;

const STATUSES: [&str; 4] = ["pending", "approved", "declined", "expired"];

pub async fn run(s: &Session, command: ApprovalsCommand) -> Result<(), CliError> {
    match command {
        ApprovalsCommand::List { status } => list(s, status).await,
        ApprovalsCommand::Show { approval } => {
            let (a, raw) = fetch(s, &approval).await?;
            show(s, &a, raw)
        }
        ApprovalsCommand::Approve { approval, yes } => {
            let (a, _) = fetch(s, &approval).await?;
            // Only a pending approval runs anything: the others get the API's own refusal.
            if a.action.destructive && a.status == "pending" {
                Question {
                    action: format!("approve {} ({})", a.id, a.summary.trim_end_matches('.')),
                    consequence: "It runs at once, as you, and what it deletes cannot be brought back.",
                    answer: Answer::Yes,
                }
                .ask(yes)?;
            }
            let (a, raw) = decide(s, a.id, "approve").await?;
            if s.out.is_data() {
                s.out.show(&view(raw, std::slice::from_ref(&a)))?;
            } else {
                print_out(&format!("{}\n", approved_words(&a)))?;
            }
            match &a.outcome {
                Some(o) if o.result == "refused" => Err(CliError::Failed(format!(
                    "approved, but the change was refused when it ran: {} ({})",
                    o.detail.as_deref().unwrap_or("no reason given"),
                    o.code.as_deref().unwrap_or("-")
                ))),
                _ => Ok(()),
            }
        }
        ApprovalsCommand::Decline { approval } => {
            let id = id_of(&approval)?;
            let (a, raw) = decide(s, id, "decline").await?;
            if s.out.is_data() {
                return s.out.show(&view(raw, &[a]));
            }
            print_out(&format!("Declined: nothing runs. ({})\n", a.summary))
        }
    }
}

fn id_of(text: &str) -> Result<Uuid, CliError> {
    Uuid::parse_str(text).map_err(|_| {
        CliError::usage(format!(
            "{text:?} is not an approval id (see `kubesvc approvals list`)"
        ))
    })
}

async fn fetch(s: &Session, approval: &str) -> Result<(Approval, Value), CliError> {
    let id = id_of(approval)?;
    let raw = s
        .api
        .send(&Call::get(format!("/v1/public/approvals/{id}")))
        .await?
        .json()?;
    Ok((parse(raw.clone())?, raw))
}

/// Approves or declines. Sent twice (the CLI's own retry included) it decides once: the API
/// answers a second approval with the first one's outcome.
async fn decide(s: &Session, id: Uuid, verb: &str) -> Result<(Approval, Value), CliError> {
    let call = Call::new(Method::POST, format!("/v1/public/approvals/{id}/{verb}")).idempotent();
    let raw = match s.api.send(&call).await {
        Ok(answer) => answer.json()?,
        Err(mut e) if e.is_status(409) => {
            // Decided already: said of this approval in words, keeping the API's status (and
            // so the exit code) and request id.
            if let (
                CliError::Api {
                    problem: Some(p), ..
                },
                Ok((now, _)),
            ) = (&mut e, fetch(s, &id.to_string()).await)
            {
                p.detail = format!(
                    "approval {id} is {}, so it can no longer be {verb}d{}",
                    now.status,
                    if now.status == "approved" {
                        ""
                    } else {
                        ": nothing ran"
                    }
                );
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    Ok((parse(raw.clone())?, raw))
}

async fn list(s: &Session, status: Option<String>) -> Result<(), CliError> {
    if let Some(st) = status.as_deref()
        && !STATUSES.contains(&st)
    {
        return Err(CliError::usage(format!(
            "--status must be pending, approved, declined or expired, not {st:?}"
        )));
    }
    let raw = s
        .api
        .send(&Call::get("/v1/public/approvals"))
        .await?
        .json()?;
    let all: ApprovalList = parse(raw.clone())?;
    let keep = |a: &Approval| status.as_deref().is_none_or(|st| a.status == st);
    let items: Vec<Approval> = all.items.into_iter().filter(keep).collect();
    let shown: Vec<Value> = raw["items"]
        .as_array()
        .map(|v| {
            v.iter()
                .filter(|a| status.as_deref().is_none_or(|st| a["status"] == st))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    s.out
        .show(&view(serde_json::json!({ "items": shown }), &items))
}

fn view(raw: Value, items: &[Approval]) -> View {
    let mut table = Table::new(&[
        "ID",
        "STATUS",
        "ORGANIZATION",
        "REQUESTED",
        "EXPIRES",
        "WHAT",
    ]);
    for a in items {
        table.row(vec![
            a.id.to_string(),
            a.status.clone(),
            a.organization_slug.clone(),
            when(&a.created_at),
            if a.status == "pending" {
                when(&a.expires_at)
            } else {
                "-".into()
            },
            a.summary.clone(),
        ]);
    }
    View {
        raw,
        names: items.iter().map(|a| a.id.to_string()).collect(),
        table,
    }
}

/// One approval for reading: its words, where it stands, then every argument as asked.
fn show(s: &Session, a: &Approval, raw: Value) -> Result<(), CliError> {
    if s.out.is_data() {
        return s.out.show(&view(raw, std::slice::from_ref(a)));
    }
    let mut pairs: Vec<(&str, String)> = vec![
        ("ID:", a.id.to_string()),
        ("What:", a.summary.clone()),
        (
            "Action:",
            format!(
                "{}{}",
                a.action.kind,
                if a.action.destructive {
                    " (deletes something)"
                } else {
                    ""
                }
            ),
        ),
        ("Organization:", a.organization_slug.clone()),
        ("Status:", a.status.clone()),
        ("Requested:", stamp(&a.created_at)),
        ("Expires:", stamp(&a.expires_at)),
    ];
    if let Some(at) = &a.decided_at {
        pairs.push(("Decided:", stamp(at)));
    }
    if let Some(o) = &a.outcome {
        pairs.push(("Outcome:", outcome_words(o)));
    }
    pairs.push(("Approve at:", a.approve_at.clone()));
    let mut text = s.out.details(&pairs);
    let mut rows = Vec::new();
    flatten("", &a.action.arguments, &mut rows);
    if !rows.is_empty() {
        text.push_str("\nArguments, exactly as asked:\n");
        let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        for (k, v) in rows {
            text.push_str(&format!("  {k:width$}  {}\n", crate::output::printable(&v)));
        }
    }
    if a.status == "pending" {
        text.push_str(&format!(
            "\nDecide: kubesvc approvals approve {0}  or  kubesvc approvals decline {0}\n",
            a.id
        ));
    }
    print_out(&text)
}

/// A JSON value as `path: value` rows (`node_pools[0].size: kube.c5.large`), so every argument
/// is a line of its own and no value is read as structure.
fn flatten(prefix: &str, v: &Value, rows: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&p, x, rows);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, x) in items.iter().enumerate() {
                flatten(&format!("{prefix}[{i}]"), x, rows);
            }
        }
        Value::Array(_) => rows.push((prefix.to_owned(), "(none)".into())),
        Value::Null => rows.push((prefix.to_owned(), "(cleared)".into())),
        Value::String(s) => rows.push((prefix.to_owned(), s.clone())),
        other => rows.push((prefix.to_owned(), other.to_string())),
    }
}

fn outcome_words(o: &wire::approval::ApprovalOutcome) -> String {
    match o.result.as_str() {
        "done" => format!(
            "done: {} {}",
            o.resource.as_deref().unwrap_or("object"),
            o.id.as_deref().unwrap_or("-")
        ),
        _ => format!(
            "refused when it ran: {} ({})",
            o.detail.as_deref().unwrap_or("no reason given"),
            o.code.as_deref().unwrap_or("-")
        ),
    }
}

/// What an approval set going, and how to follow it.
fn approved_words(a: &Approval) -> String {
    match &a.outcome {
        Some(o) if o.result == "done" => {
            let cluster = o.cluster_id.map(|c| c.to_string()).unwrap_or_default();
            let what = match a.action.kind.as_str() {
                "create_cluster" => "the cluster is being created",
                "delete_cluster" => "the cluster is being deleted",
                "add_node_pool" => "the node pool is being added",
                "scale_node_pool" => "the node pool is being resized",
                "delete_node_pool" => "the node pool is being deleted",
                "delete_node" => "the node is being replaced",
                _ => "the change is under way",
            };
            format!(
                "Approved: {what} ({}). Follow it: kubesvc cluster wait {cluster}",
                a.summary.trim_end_matches('.')
            )
        }
        Some(_) => format!("Approved: {}", a.summary),
        None => format!(
            "Approved: {} The change has not run yet; `kubesvc approvals show {}` says when it has.",
            a.summary, a.id
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_one_row_each() {
        let mut rows = Vec::new();
        let args = serde_json::json!({
            "name": "web-1",
            "tags": [],
            "node_pools": [{"size": "kube.c5.large", "count": 3, "labels": {"a": "b"}}],
            "patch": {"max_nodes": null}
        });
        flatten("", &args, &mut rows);
        let rows: Vec<String> = rows.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            rows,
            [
                "name=web-1",
                "node_pools[0].count=3",
                "node_pools[0].labels.a=b",
                "node_pools[0].size=kube.c5.large",
                "patch.max_nodes=(cleared)",
                "tags=(none)",
            ]
        );
    }

    #[test]
    fn an_id_is_checked_before_anything_is_sent() {
        assert_eq!(id_of("web-1").err().map(|e| e.exit_code()), Some(2));
        assert!(id_of("0a0c0e00-0000-4000-8000-000000000001").is_ok());
    }
}
