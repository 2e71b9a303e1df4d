//! `operations list|retry|cancel`.

use domain::model::operation::ClusterOperation;

use crate::args::OperationsCommand;
use crate::output::{printable, time};
use crate::{AdminError, Outcome, context};

pub async fn run(command: OperationsCommand) -> Result<Outcome, AdminError> {
    let store = context::store().await?;
    let m = context::maintenance(&store, None)?;
    match command {
        OperationsCommand::List {
            older_than_minutes,
            failing,
            limit,
        } => {
            let older_than = chrono::Duration::minutes(i64::from(older_than_minutes));
            let mut stuck = m.stuck_operations(older_than, limit).await?;
            if failing {
                stuck.retain(|s| s.operation.attempts > 0);
            }
            println!(
                "{} operations running for more than {older_than_minutes} minutes{}",
                stuck.len(),
                if failing {
                    " that failed at least once"
                } else {
                    ""
                }
            );
            for s in &stuck {
                println!("{}", printable(&summary(&s.operation)));
                println!(
                    "  queue: {}",
                    printable(&crate::cluster::queue(s.queue.as_ref()))
                );
            }
        }
        OperationsCommand::Retry { id } => {
            let retried = m.retry_operation(id).await?;
            println!(
                "retried: cluster {} scheduled for provisioning now",
                retried.operation.cluster_id
            );
            println!(
                "  queue: {}",
                printable(&crate::cluster::queue(retried.queue.as_ref()))
            );
        }
        OperationsCommand::Cancel { id, reason } => {
            let cancelled = m.cancel_operation(id, &reason).await?;
            println!("{}", printable(&summary(&cancelled)));
        }
    }
    Ok(Outcome::Done)
}

/// One line about an operation.
pub fn summary(o: &ClusterOperation) -> String {
    let mut s = format!(
        "{} {} {} of {} {}",
        o.id,
        o.status.as_str(),
        o.kind.as_str(),
        o.resource.as_str(),
        o.resource_id,
    );
    if o.resource_id != o.cluster_id.to_string() {
        s.push_str(&format!(" on cluster {}", o.cluster_id));
    }
    s.push_str(&format!(
        ", started {} by {}",
        time(o.created_at),
        o.requested_by.user_id
    ));
    if o.attempts > 0 {
        s.push_str(&format!(", {} failed attempts", o.attempts));
    }
    if let Some(e) = &o.last_error {
        s.push_str(&format!(": {e}"));
    }
    s
}
