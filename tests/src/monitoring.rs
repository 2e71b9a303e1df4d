//! What the monitoring files of deploy/monitoring/ ask of a scrape: every series an expression
//! of the rules or the dashboard selects must be one the server or the gateway exports (or one
//! the rules record), with the labels it filters on. A small PromQL scanner finds the selectors;
//! the OpenMetrics text of a real scrape says what exists.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;

use serde_json::Value;

use crate::TestApp;

/// Labels Prometheus itself puts on every series it scrapes (the target's), which no scrape
/// shows.
const TARGET_LABELS: [&str; 2] = ["instance", "job"];

/// Words of PromQL that are not series: aggregations, operators and modifiers.
const KEYWORDS: [&str; 25] = [
    "sum",
    "min",
    "max",
    "avg",
    "group",
    "stddev",
    "stdvar",
    "count",
    "count_values",
    "bottomk",
    "topk",
    "quantile",
    "limitk",
    "limit_ratio",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
];

/// Keywords followed by a list of label names in parentheses.
const LABEL_LISTS: [&str; 6] = [
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// One series selector: its metric name and the labels its matchers name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    pub name: String,
    pub labels: Vec<String>,
}

/// The series selectors of a PromQL expression (Grafana's `$variables` included), in order.
pub fn selectors(expr: &str) -> Vec<Selector> {
    let chars: Vec<char> = expr.chars().collect();
    let mut found: Vec<Selector> = Vec::new();
    let mut i = 0;
    // Whether the last thing read was a selector's name, whose matchers may follow.
    let mut after_name = false;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '"' | '\'' | '`' => {
                i = skip_string(&chars, i);
                after_name = false;
            }
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '[' => {
                while i < chars.len() && chars[i] != ']' {
                    i += 1;
                }
                i += 1;
                after_name = false;
            }
            '{' => {
                let (labels, end) = matchers(&chars, i);
                match found.last_mut() {
                    Some(last) if after_name => last.labels.extend(labels),
                    // `{__name__=…}` or a bare matcher list: nothing names a metric here.
                    _ => {}
                }
                i = end;
                after_name = false;
            }
            '$' => {
                i += 1;
                if chars.get(i) == Some(&'{') {
                    while i < chars.len() && chars[i] != '}' {
                        i += 1;
                    }
                    i += 1;
                } else {
                    while i < chars.len() && is_word(chars[i]) {
                        i += 1;
                    }
                }
                after_name = false;
            }
            c if c.is_ascii_digit() || (c == '.' && next_is_digit(&chars, i)) => {
                // Numbers, durations (5m) and exponents (1e3).
                while i < chars.len() && (is_word(chars[i]) || chars[i] == '.') {
                    i += 1;
                }
                after_name = false;
            }
            c if c.is_ascii_alphabetic() || c == '_' || c == ':' => {
                let start = i;
                while i < chars.len() && (is_word(chars[i]) || chars[i] == ':') {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let mut next = i;
                while next < chars.len() && chars[next].is_whitespace() {
                    next += 1;
                }
                after_name = false;
                if LABEL_LISTS.contains(&word.as_str()) {
                    if chars.get(next) == Some(&'(') {
                        while next < chars.len() && chars[next] != ')' {
                            next += 1;
                        }
                        i = next + 1;
                    }
                } else if chars.get(next) == Some(&'(')
                    || KEYWORDS.contains(&word.as_str())
                    || matches!(word.to_ascii_lowercase().as_str(), "inf" | "nan")
                {
                    // A function or an aggregation: its argument follows.
                } else {
                    found.push(Selector {
                        name: word,
                        labels: Vec::new(),
                    });
                    after_name = true;
                }
            }
            _ => {
                i += 1;
                if !c.is_whitespace() {
                    after_name = false;
                }
            }
        }
    }
    found
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn next_is_digit(chars: &[char], i: usize) -> bool {
    chars.get(i + 1).is_some_and(char::is_ascii_digit)
}

/// The index just past the string literal that starts at `start`.
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() && chars[i] != quote {
        if chars[i] == '\\' && quote != '`' {
            i += 1;
        }
        i += 1;
    }
    i + 1
}

/// The label names of the matchers in the braces that open at `start`, and the index past them.
fn matchers(chars: &[char], start: usize) -> (Vec<String>, usize) {
    let mut labels = Vec::new();
    let mut i = start + 1;
    let mut expecting_label = true;
    while i < chars.len() && chars[i] != '}' {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i = skip_string(chars, i);
            continue;
        }
        if c == ',' {
            expecting_label = true;
        } else if expecting_label && (c.is_ascii_alphabetic() || c == '_') {
            let begin = i;
            while i < chars.len() && is_word(chars[i]) {
                i += 1;
            }
            labels.push(chars[begin..i].iter().collect());
            expecting_label = false;
            continue;
        }
        i += 1;
    }
    (labels, i + 1)
}

/// What one scrape in the OpenMetrics text format holds: each family's type, and each series
/// name with the labels its samples carry.
#[derive(Debug, Default)]
pub struct Scrape {
    families: BTreeMap<String, String>,
    series: BTreeMap<String, BTreeSet<String>>,
}

impl Scrape {
    pub fn parse(text: &str) -> Scrape {
        let mut scrape = Scrape::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut parts = rest.split_whitespace();
                if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                    scrape.families.insert(name.to_owned(), kind.to_owned());
                }
                continue;
            }
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let name = &line[..name_end];
            let mut labels = BTreeSet::new();
            if line[name_end..].starts_with('{') {
                let chars: Vec<char> = line[name_end..].chars().collect();
                labels.extend(matchers(&chars, 0).0);
            }
            scrape
                .series
                .entry(name.to_owned())
                .or_default()
                .extend(labels);
        }
        scrape
    }

    /// Whether Prometheus stores series of this name from this scrape: a gauge's own name, a
    /// counter's `_total`, a histogram's `_bucket`, `_sum` and `_count` (and `_created` of
    /// either), or a name a sample line carries.
    pub fn exports(&self, name: &str) -> bool {
        if self.series.contains_key(name) {
            return true;
        }
        self.families.iter().any(|(family, kind)| {
            let suffixes: &[&str] = match kind.as_str() {
                "counter" => &["_total", "_created"],
                "histogram" | "gaugehistogram" => &["_bucket", "_sum", "_count", "_created"],
                "summary" => &["", "_sum", "_count", "_created"],
                "info" => &["_info"],
                _ => &[""],
            };
            suffixes
                .iter()
                .any(|suffix| name.strip_suffix(suffix) == Some(family.as_str()))
        })
    }

    /// The labels the samples of this name carry (`None` when no sample has the name).
    pub fn labels(&self, name: &str) -> Option<&BTreeSet<String>> {
        self.series.get(name)
    }
}

/// The series names the scrapes and the recording rules provide, and what an expression needs
/// that they do not: one line per problem, naming where the expression is.
pub fn problems(
    scrapes: &[&Scrape],
    recorded: &BTreeSet<String>,
    expressions: &[(String, String)],
) -> Vec<String> {
    let mut problems = Vec::new();
    for (place, expr) in expressions {
        for selector in selectors(expr) {
            if recorded.contains(&selector.name) {
                continue;
            }
            let Some(scrape) = scrapes.iter().find(|s| s.exports(&selector.name)) else {
                problems.push(format!(
                    "{place}: {} is not exported (nor recorded by the rules)",
                    selector.name
                ));
                continue;
            };
            let Some(known) = scrape.labels(&selector.name) else {
                if !selector.labels.is_empty() {
                    problems.push(format!(
                        "{place}: {} has no sample in the scrape to check its labels {:?} against",
                        selector.name, selector.labels
                    ));
                }
                continue;
            };
            for label in &selector.labels {
                if !known.contains(label) && !TARGET_LABELS.contains(&label.as_str()) {
                    problems.push(format!(
                        "{place}: {} has no label {label} (it has {known:?})",
                        selector.name
                    ));
                }
            }
        }
    }
    problems
}

/// deploy/monitoring/, where the rules and the dashboard are.
pub fn monitoring_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/monitoring")
}

fn read(name: &str) -> String {
    let path = monitoring_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The expressions of the rule file, each with its rule's name, and the names it records.
pub fn rule_expressions() -> (Vec<(String, String)>, BTreeSet<String>) {
    let file = "kubesvc.rules.yaml";
    let rules: Value = yaml_serde::from_str(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut expressions = Vec::new();
    let mut recorded = BTreeSet::new();
    for group in rules["groups"].as_array().into_iter().flatten() {
        for rule in group["rules"].as_array().into_iter().flatten() {
            let name = rule["record"]
                .as_str()
                .or_else(|| rule["alert"].as_str())
                .unwrap_or("?");
            if let Some(record) = rule["record"].as_str() {
                recorded.insert(record.to_owned());
            }
            let expr = rule["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}: rule {name} has no expr"));
            expressions.push((format!("{file} {name}"), expr.to_owned()));
        }
    }
    (expressions, recorded)
}

/// Every query of the dashboard (each `expr`, wherever it is), with its panel's title.
pub fn dashboard_expressions() -> Vec<(String, String)> {
    fn walk(value: &Value, title: &str, out: &mut Vec<(String, String)>) {
        match value {
            Value::Object(map) => {
                let title = map.get("title").and_then(Value::as_str).unwrap_or(title);
                for (key, v) in map {
                    match (key.as_str(), v) {
                        ("expr", Value::String(expr)) => {
                            out.push((format!("dashboard panel \"{title}\""), expr.clone()));
                        }
                        _ => walk(v, title, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| walk(v, title, out)),
            _ => {}
        }
    }
    let file = "kubesvc-dashboard.json";
    let dashboard: Value =
        serde_json::from_str(&read(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let mut out = Vec::new();
    walk(&dashboard, "", &mut out);
    out
}

/// A gateway running in this process: its proxied address and its admin listener's.
pub struct Gateway {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    routes_file: PathBuf,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.routes_file);
    }
}

/// A gateway in this process on the app's database and key, with these routes (TOML) and its
/// admin listener, as a deployment runs it beside the servers.
pub async fn start_gateway(app: &TestApp, routes: &str) -> Gateway {
    let routes_file = std::env::temp_dir().join(format!(
        "kubesvc-monitoring-routes-{}.toml",
        uuid::Uuid::new_v4()
    ));
    std::fs::write(&routes_file, routes).unwrap_or_else(|e| panic!("routes file: {e}"));
    let db_url = app.db.url.clone();
    let routes_path = routes_file.display().to_string();
    let settings = gateway::Settings::from_lookup(|name| {
        Some(match name {
            "DATABASE_URL" => db_url.clone(),
            "SECRETS_KEY" => crate::TEST_SECRETS_KEY.into(),
            "GATEWAY_BIND_ADDR" | "GATEWAY_ADMIN_BIND_ADDR" => "127.0.0.1:0".into(),
            "GATEWAY_ROUTES_FILE" => routes_path.clone(),
            "GATEWAY_WORKERS" => "1".into(),
            _ => return None,
        })
    })
    .unwrap_or_else(|e| panic!("gateway settings: {e}"));
    let running = gateway::start(settings)
        .await
        .unwrap_or_else(|e| panic!("gateway start: {e}"));
    let admin = running
        .admin_addr
        .unwrap_or_else(|| panic!("the gateway has no admin listener"));
    Gateway {
        addr: running.spawn(),
        admin,
        routes_file,
    }
}
