//! `check [--fix]`.

use domain::maintenance::Repair;

use crate::args::CheckArgs;
use crate::output::printable;
use crate::{AdminError, Outcome, context};

pub async fn run(args: CheckArgs) -> Result<Outcome, AdminError> {
    let store = context::store().await?;
    // A repair may seal a cluster's credentials; a plain check opens nothing.
    let vault = if args.fix {
        Some(context::vault(&store).await?)
    } else {
        None
    };
    let m = context::maintenance(&store, vault)?;
    let findings = m.check().await?;
    for f in &findings {
        println!("{}: {}", f.invariant(), printable(&f.to_string()));
    }
    if !args.fix {
        println!("{} problems found", findings.len());
        return Ok(if findings.is_empty() {
            Outcome::Done
        } else {
            Outcome::Problems
        });
    }
    let mut repaired = 0;
    for f in &findings {
        let what = printable(&f.to_string());
        match m.repair(f).await {
            Ok(Repair::Repaired) => {
                repaired += 1;
                println!("  repaired: {what}");
            }
            Ok(Repair::AlreadyResolved) => println!("  already resolved: {what}"),
            Err(e) => println!("  not repaired: {what}: {}", printable(&e.to_string())),
        }
    }
    // What is left is what the database shows now, not what the repairs believe they did.
    let left = m.check().await?;
    println!(
        "{} problems found, {repaired} repaired, {} left",
        findings.len(),
        left.len()
    );
    Ok(if left.is_empty() {
        Outcome::Done
    } else {
        Outcome::Problems
    })
}
