//! Printing what the database holds: customers wrote much of it (names, descriptions), so it is
//! shown, never obeyed, by the operator's terminal.

/// `text` with control characters escaped.
pub fn printable(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// A time as RFC 3339 in UTC, to the second.
pub fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(printable("a\x1b[31mb\nc"), "a\\u{1b}[31mb\\nc");
        assert_eq!(printable("plain ünïcode"), "plain ünïcode");
    }
}
