//! docs/architecture.md against the code: every port the domain defines is in its table of
//! ports, and its table of dependencies is what each crate's `Cargo.toml` names. The document
//! cannot drift from the crates without this test failing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of the markdown table whose header row starts with `| {first} |`: each row's
/// first cell, with the backticks taken off, and its second cell.
fn table(doc: &str, first: &str) -> Vec<(String, String)> {
    let header = format!("| {first} |");
    let mut rows = Vec::new();
    let mut inside = false;
    for line in doc.lines() {
        if line.starts_with(&header) {
            inside = true;
            continue;
        }
        if !inside || line.starts_with("|---") {
            continue;
        }
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        rows.push((cells[1].replace('`', ""), cells[2].to_owned()));
    }
    rows
}

/// Each workspace crate's package name and its `[dependencies]` among the workspace crates.
fn crates() -> BTreeMap<String, BTreeSet<String>> {
    let mut manifests = Vec::new();
    for entry in std::fs::read_dir(root().join("crates")).unwrap_or_else(|e| panic!("{e}")) {
        let manifest = entry.map(|e| e.path().join("Cargo.toml")).ok();
        if let Some(m) = manifest.filter(|m| m.is_file()) {
            manifests.push(read(&m));
        }
    }
    let name_of = |text: &str| -> String {
        text.lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .map(|n| n.trim_end_matches('"').to_owned())
            .unwrap_or_default()
    };
    let names: BTreeSet<String> = manifests.iter().map(|m| name_of(m)).collect();
    manifests
        .iter()
        .map(|m| {
            let deps = m
                .split("[dependencies]")
                .nth(1)
                .map(|d| d.split("\n[").next().unwrap_or_default())
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.split(['.', ' ', '=']).next())
                .filter(|d| names.contains(*d))
                .map(str::to_owned)
                .collect();
            (name_of(m), deps)
        })
        .collect()
}

#[test]
fn every_port_of_the_domain_is_in_the_table_of_ports() {
    let doc = read(&root().join("docs/architecture.md"));
    let listed: BTreeSet<String> = table(&doc, "port | what it is for")
        .into_iter()
        .flat_map(|(ports, _)| {
            ports
                .split(',')
                .map(|p| p.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    let mut defined = BTreeSet::new();
    let ports = root().join("crates/domain/src/ports");
    for entry in std::fs::read_dir(&ports).unwrap_or_else(|e| panic!("{e}")) {
        let Ok(path) = entry.map(|e| e.path()) else {
            continue;
        };
        for line in read(&path).lines() {
            if let Some(rest) = line.trim_start().strip_prefix("pub trait ") {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                defined.insert(name);
            }
        }
    }
    assert!(defined.len() > 10, "{defined:?}");
    assert_eq!(
        listed, defined,
        "docs/architecture.md's ports against crates/domain/src/ports"
    );
}

#[test]
fn the_table_of_dependencies_is_what_the_manifests_say() {
    let doc = read(&root().join("docs/architecture.md"));
    let drawn: BTreeMap<String, BTreeSet<String>> = table(&doc, "crate | depends on")
        .into_iter()
        .map(|(name, deps)| {
            let deps = deps
                .split(',')
                .map(|d| d.trim().replace('`', ""))
                .filter(|d| !d.is_empty() && d != "—")
                .collect();
            (name, deps)
        })
        .collect();
    assert_eq!(
        drawn,
        crates(),
        "docs/architecture.md's dependencies against the manifests"
    );
}
