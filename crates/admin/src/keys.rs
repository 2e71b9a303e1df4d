//! `keys status|reseal|verify`: the `SECRETS_KEY` ring over every sealed value the database
//! holds. docs/operations.md has the rotation procedure these serve.

use std::collections::BTreeMap;

use domain::ports::secrets::SecretVault;
use secrets::{SealedBy, Vault};
use store_postgres::{PgStore, SealedColumn, SealedValue};

use crate::args::KeysCommand;
use crate::output::printable;
use crate::{AdminError, Outcome, context};

/// Rows read per page by `status` and `verify`.
const PAGE: i64 = 500;

pub async fn run(command: KeysCommand) -> Result<Outcome, AdminError> {
    let store = context::store().await?;
    let vault = context::vault(&store).await?;
    match command {
        KeysCommand::Status => status(&store, &vault).await,
        KeysCommand::Reseal { batch_size } => reseal(&store, &vault, batch_size).await,
        KeysCommand::Verify => verify(&store, &vault).await,
    }
}

/// Calls `each` on every value of `column`, a page of `size` at a time.
async fn for_each_page(
    store: &PgStore,
    column: SealedColumn,
    size: i64,
    mut each: impl AsyncFnMut(Vec<SealedValue>) -> Result<(), AdminError>,
) -> Result<(), AdminError> {
    let mut after = None;
    loop {
        let page = store.sealed_page(column, after.clone(), size).await?;
        let last = page.last().map(|v| v.row.clone());
        let full = page.len() as i64 == size;
        each(page).await?;
        match last {
            Some(row) if full => after = Some(row),
            _ => return Ok(()),
        }
    }
}

fn ring_line(vault: &Vault) -> String {
    let ids = vault.key_ids();
    let mut parts = vec![format!("{} (SECRETS_KEY, seals)", ids[0])];
    parts.extend(
        ids[1..]
            .iter()
            .map(|id| format!("{id} (SECRETS_KEY_PREVIOUS)")),
    );
    format!("key ring: {}", parts.join(", "))
}

fn label(vault: &Vault, by: Option<SealedBy>) -> String {
    match by {
        Some(SealedBy::Key(id)) if id == vault.current_key_id() => format!("{id} (current)"),
        Some(SealedBy::Key(id)) if vault.key_ids().contains(&id) => format!("{id} (previous)"),
        Some(SealedBy::Key(id)) => format!("{id} (not in the ring)"),
        Some(SealedBy::Unnamed) => "the first format, which names no key".into(),
        None => "not a sealed value".into(),
    }
}

async fn status(store: &PgStore, vault: &Vault) -> Result<Outcome, AdminError> {
    println!("{}", ring_line(vault));
    let mut not_current = 0u64;
    for column in SealedColumn::ALL {
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for_each_page(store, column, PAGE, async |page| {
            for v in page {
                let by = vault.sealed_by(&v.sealed);
                if by != Some(SealedBy::Key(vault.current_key_id())) {
                    not_current += 1;
                }
                *counts.entry(label(vault, by)).or_default() += 1;
            }
            Ok(())
        })
        .await?;
        println!("{}: {}", column.name(), counts.values().sum::<u64>());
        for (key, n) in &counts {
            println!("  {n} under {key}");
        }
    }
    println!("not under the current key: {not_current}");
    Ok(Outcome::Done)
}

/// What a re-seal did, counted.
#[derive(Default)]
struct Resealed {
    moved: u64,
    current: u64,
    /// Written meanwhile by the service (so under the key it seals with): left as it is.
    changed: u64,
    failed: u64,
}

async fn reseal(store: &PgStore, vault: &Vault, batch: i64) -> Result<Outcome, AdminError> {
    println!("{}", ring_line(vault));
    let mut all = Resealed::default();
    for column in SealedColumn::ALL {
        let mut done = Resealed::default();
        for_each_page(store, column, batch, async |page| {
            for v in page {
                match vault.reseal(&v.sealed) {
                    Ok(None) => done.current += 1,
                    Ok(Some(new)) => {
                        if store
                            .replace_sealed(column, &v.row, &v.sealed, &new)
                            .await?
                        {
                            done.moved += 1;
                        } else {
                            done.changed += 1;
                        }
                    }
                    Err(_) => {
                        done.failed += 1;
                        eprintln!(
                            "not opened: {} of {} (sealed by {})",
                            column.name(),
                            printable(&v.row),
                            label(vault, vault.sealed_by(&v.sealed))
                        );
                    }
                }
            }
            Ok(())
        })
        .await?;
        println!(
            "{}: {} re-sealed, {} already under the current key, {} changed meanwhile, {} not opened",
            column.name(),
            done.moved,
            done.current,
            done.changed,
            done.failed
        );
        all.moved += done.moved;
        all.current += done.current;
        all.changed += done.changed;
        all.failed += done.failed;
    }
    println!(
        "re-sealed {} values under {}; {} were already; {} changed meanwhile; {} did not open",
        all.moved,
        vault.current_key_id(),
        all.current,
        all.changed,
        all.failed
    );
    Ok(if all.failed == 0 {
        Outcome::Done
    } else {
        Outcome::Problems
    })
}

async fn verify(store: &PgStore, vault: &Vault) -> Result<Outcome, AdminError> {
    println!("{}", ring_line(vault));
    let mut failed = 0u64;
    for column in SealedColumn::ALL {
        let (mut opened, mut not) = (0u64, 0u64);
        for_each_page(store, column, PAGE, async |page| {
            for v in page {
                if vault.open(&v.sealed).is_ok() {
                    opened += 1;
                } else {
                    not += 1;
                    eprintln!(
                        "does not open: {} of {} (sealed by {})",
                        column.name(),
                        printable(&v.row),
                        label(vault, vault.sealed_by(&v.sealed))
                    );
                }
            }
            Ok(())
        })
        .await?;
        println!("{}: {opened} open, {not} do not", column.name());
        failed += not;
    }
    Ok(if failed == 0 {
        Outcome::Done
    } else {
        Outcome::Problems
    })
}
