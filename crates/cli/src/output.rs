//! Showing answers: aligned tables (cut to the terminal's width), the API's own JSON or YAML,
//! or bare names for scripts; colours only on a terminal and never with `NO_COLOR`.

use std::io::Write;

use serde_json::Value;

use crate::args::Output;
use crate::error::CliError;

/// How one invocation prints.
#[derive(Debug, Clone)]
pub struct Printer {
    pub format: Output,
    pub header: bool,
    pub color: bool,
    /// The terminal's width when standard output is one: tables are cut to it.
    pub width: Option<usize>,
}

/// Rows under a header.
#[derive(Debug, Clone, Default)]
pub struct Table {
    pub header: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }
}

/// What a command shows: the API's answer as it came, and how to show it as a table and as
/// names.
pub struct View {
    pub raw: Value,
    pub table: Table,
    pub names: Vec<String>,
}

impl Printer {
    /// Prints `view` in the chosen format to standard output.
    pub fn show(&self, view: &View) -> Result<(), CliError> {
        let text = match self.format {
            Output::Json => format!("{}\n", pretty(&view.raw)),
            Output::Yaml => yaml(&view.raw)?,
            Output::Name => view.names.iter().map(|n| format!("{n}\n")).collect(),
            Output::Table => self.render(&view.table),
        };
        print_out(&text)
    }

    /// The table as text: columns padded to their widest cell, two spaces apart; on a
    /// terminal, the widest columns are cut (ending in `…`) until the line fits.
    pub fn render(&self, table: &Table) -> String {
        let columns = table.header.len();
        let mut widths: Vec<usize> = (0..columns)
            .map(|c| {
                let cells = table
                    .rows
                    .iter()
                    .map(|r| r.get(c).map_or(0, |s| printable(s).chars().count()));
                let head = if self.header {
                    table.header[c].len()
                } else {
                    0
                };
                cells.chain([head]).max().unwrap_or(0)
            })
            .collect();
        if let Some(width) = self.width {
            fit(&mut widths, width, self.header.then_some(&table.header));
        }
        let mut out = String::new();
        if self.header {
            let cells: Vec<String> = table.header.iter().map(|h| (*h).to_owned()).collect();
            out.push_str(&self.line(&cells, &widths, true));
        }
        for row in &table.rows {
            out.push_str(&self.line(row, &widths, false));
        }
        out
    }

    fn line(&self, cells: &[String], widths: &[usize], header: bool) -> String {
        let last = widths.len().saturating_sub(1);
        let mut line = String::new();
        for (i, width) in widths.iter().enumerate() {
            let cell = cut(&printable(cells.get(i).map_or("", String::as_str)), *width);
            let pad = width.saturating_sub(cell.chars().count());
            // Colour after padding: escape codes take no columns.
            let shown = match (self.color, header) {
                (true, true) => format!("\x1b[1m{cell}\x1b[0m"),
                (true, false) => paint(&cell),
                _ => cell,
            };
            line.push_str(&shown);
            if i < last {
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        // An empty last cell would leave the padding of the one before it.
        line.truncate(line.trim_end().len());
        line.push('\n');
        line
    }

    /// `label: value` lines, for one object.
    pub fn details(&self, pairs: &[(&str, String)]) -> String {
        let width = pairs.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
        pairs
            .iter()
            .map(|(label, value)| {
                let value = printable(value);
                let value = if self.color {
                    paint(&value)
                } else {
                    value.into_owned()
                };
                format!("{label:width$}  {value}\n")
            })
            .collect()
    }

    /// Whether the answer is printed as data (JSON, YAML, names) rather than for reading.
    pub fn is_data(&self) -> bool {
        self.format != Output::Table
    }
}

/// Narrows the widest columns, one character at a time, until the line fits `total` (never
/// below the header's width or 3 characters).
fn fit(widths: &mut [usize], total: usize, header: Option<&Vec<&'static str>>) {
    let line = |w: &[usize]| w.iter().sum::<usize>() + 2 * w.len().saturating_sub(1);
    while line(widths) > total {
        let floor = |i: usize| header.map_or(3, |h| h[i].len().max(3));
        let widest = (0..widths.len())
            .filter(|&i| widths[i] > floor(i))
            .max_by_key(|&i| widths[i]);
        match widest {
            Some(i) => widths[i] -= 1,
            None => break,
        }
    }
}

/// `text` with every control character written out as its escape (`\u{1b}`), so that what
/// the API holds (a description any super_admin of the organization may set) cannot drive
/// the reader's terminal: move the cursor, hide text, set the title, write the clipboard.
pub fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    std::borrow::Cow::Owned(
        text.chars()
            .map(|c| {
                if c.is_control() {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

/// `text` cut to `width` characters, ending in `…` when cut.
fn cut(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// States that settled well green, failures red, work in progress yellow.
fn paint(cell: &str) -> String {
    let code = match cell {
        "Provisioned" | "Ready" | "Active" | "ready" => "32",
        "Failed" | "failed" => "31",
        "Pending" | "Provisioning" | "ControlPlaneReady" | "Scaling" | "Deleting" | "pending" => {
            "33"
        }
        _ => return cell.to_owned(),
    };
    format!("\x1b[{code}m{cell}\x1b[0m")
}

pub fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string())
}

pub fn yaml(value: &Value) -> Result<String, CliError> {
    let value = yaml_serde::to_value(value)
        .map_err(|e| CliError::Local(format!("cannot write YAML: {e}")))?;
    Ok(crate::yaml::to_string(&value))
}

/// Writes to standard output; a closed pipe (`| head`) ends quietly.
pub fn print_out(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(CliError::Local(format!("writing the output: {e}")))
        }
        _ => Ok(()),
    }
}

/// A JSON value as a table cell: strings bare, null as `-`.
pub fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        Value::Array(items) if items.is_empty() => "-".to_owned(),
        Value::Array(items) => items.iter().map(cell).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// A timestamp as its age (`5m`, `3h`, `2d`), as kubectl shows it.
pub fn age(created: &chrono::DateTime<chrono::Utc>) -> String {
    span((chrono::Utc::now() - *created).num_seconds().max(0))
}

/// A span of seconds as kubectl writes ages: `45s`, `12m`, `5h`, `3d`.
fn span(secs: i64) -> String {
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// A moment as a person reads it in a table: `5m ago`, `in 3h` (the exact value is in
/// `-o json`).
pub fn when(at: &chrono::DateTime<chrono::Utc>) -> String {
    when_from(at, chrono::Utc::now())
}

fn when_from(at: &chrono::DateTime<chrono::Utc>, now: chrono::DateTime<chrono::Utc>) -> String {
    let secs = (now - *at).num_seconds();
    match secs {
        -4..=4 => "just now".into(),
        s if s > 0 => format!("{} ago", span(s)),
        s => format!("in {}", span(-s)),
    }
}

/// A moment in a detail view: the date and time in UTC to the second, then how long ago.
pub fn stamp(at: &chrono::DateTime<chrono::Utc>) -> String {
    format!("{} ({})", at.format("%Y-%m-%d %H:%M:%S UTC"), when(at))
}

/// `s` with its first letter upper case (a prompt's first word).
pub fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_read_as_spans_from_now() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-28T12:00:00Z")
            .map(|t| t.to_utc())
            .unwrap_or_default();
        let table = [
            (0, "just now"),
            (-30, "30s ago"),
            (-600, "10m ago"),
            (-3 * 3600, "3h ago"),
            (-5 * 86_400, "5d ago"),
            (3600, "in 60m"),
            (30 * 86_400, "in 30d"),
        ];
        for (offset, said) in table {
            let at = now + chrono::Duration::seconds(offset);
            assert_eq!(when_from(&at, now), said, "{offset}");
        }
    }

    fn printer(width: Option<usize>, header: bool) -> Printer {
        Printer {
            format: Output::Table,
            header,
            color: false,
            width,
        }
    }

    fn table() -> Table {
        let mut t = Table::new(&["NAME", "PHASE", "DESCRIPTION"]);
        t.row(vec![
            "prod-1".into(),
            "Provisioned".into(),
            "the payments cluster of team a".into(),
        ]);
        t.row(vec!["db".into(), "Pending".into(), "-".into()]);
        t
    }

    #[test]
    fn columns_are_aligned_two_spaces_apart_without_trailing_padding() {
        let text = printer(None, true).render(&table());
        assert_eq!(
            text,
            "NAME    PHASE        DESCRIPTION\n\
             prod-1  Provisioned  the payments cluster of team a\n\
             db      Pending      -\n"
        );
        let bare = printer(None, false).render(&table());
        assert!(bare.starts_with("prod-1  "), "{bare}");
    }

    #[test]
    fn a_terminal_too_narrow_cuts_the_widest_column_first() {
        let text = printer(Some(32), true).render(&table());
        for line in text.lines() {
            assert!(line.chars().count() <= 32, "{line:?}");
        }
        assert!(text.contains("prod-1  Provisioned  the pay"), "{text}");
        assert!(
            text.lines().nth(1).is_some_and(|l| l.ends_with('…')),
            "{text}"
        );
    }

    #[test]
    fn colours_do_not_shift_the_columns() {
        let mut p = printer(None, true);
        p.color = true;
        let text = p.render(&table());
        let plain: String = text
            .replace("\x1b[1m", "")
            .replace("\x1b[0m", "")
            .replace("\x1b[32m", "")
            .replace("\x1b[33m", "");
        assert_eq!(plain, printer(None, true).render(&table()));
        assert!(text.contains("\x1b[32mProvisioned\x1b[0m"));
    }

    #[test]
    fn control_characters_from_the_api_are_shown_not_obeyed() {
        let mut t = Table::new(&["NAME", "DESCRIPTION"]);
        t.row(vec![
            "prod-1".into(),
            "\x1b]52;c;cm0gLXJmIH4=\x07 \x1b[8mhidden".into(),
        ]);
        let text = printer(None, true).render(&t);
        assert!(!text.contains('\x1b') && !text.contains('\x07'), "{text:?}");
        assert!(text.contains("\\u{1b}]52;c;"), "{text:?}");
        let details = printer(None, true).details(&[("Description:", "a\rb".into())]);
        assert_eq!(details, "Description:  a\\u{d}b\n");
    }

    #[test]
    fn cells_and_ages_read_like_kubectl() {
        assert_eq!(cell(&Value::Null), "-");
        assert_eq!(cell(&serde_json::json!(["a", "b"])), "a,b");
        let now = chrono::Utc::now();
        assert_eq!(age(&(now - chrono::Duration::seconds(30))), "30s");
        assert_eq!(age(&(now - chrono::Duration::minutes(5))), "5m");
        assert_eq!(age(&(now - chrono::Duration::hours(5))), "5h");
        assert_eq!(age(&(now - chrono::Duration::days(3))), "3d");
    }
}
