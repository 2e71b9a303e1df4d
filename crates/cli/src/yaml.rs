//! YAML written for every reader, YAML 1.1 ones included.
//!
//! kubectl (Go's yaml.v2) and PyYAML read YAML 1.1, where a bare `y`, `no` or `on` is a
//! boolean and `012` an octal number; a YAML 1.2 writer leaves such strings bare, and kubectl
//! then refuses the whole kubeconfig ("cannot unmarshal bool into … string"). So every string
//! value here is written double-quoted (JSON's escapes are YAML's), and a key only bare when it
//! cannot be read as anything but a string. Block style, two-space indent, lists at their key's
//! indentation, as kubectl writes them.

use yaml_serde::Value;

/// `value` as a YAML document.
pub fn to_string(value: &Value) -> String {
    match inline(value) {
        Some(scalar) => format!("{scalar}\n"),
        None => {
            let mut out = String::new();
            block(value, 0, &mut out);
            out
        }
    }
}

/// A scalar (or an empty collection) on one line; None for a collection with items.
fn inline(value: &Value) -> Option<String> {
    Some(match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quoted(s),
        Value::Sequence(items) if items.is_empty() => "[]".to_owned(),
        Value::Mapping(map) if map.is_empty() => "{}".to_owned(),
        Value::Tagged(tagged) => return inline(&tagged.value),
        Value::Sequence(_) | Value::Mapping(_) => return None,
    })
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

/// A key bare when it is a plain word no YAML version reads as a boolean, null or number.
fn key(k: &Value) -> String {
    match k {
        Value::String(s) if is_plain_word(s) => s.clone(),
        other => inline(other).unwrap_or_else(|| quoted(&format!("{other:?}"))),
    }
}

fn is_plain_word(s: &str) -> bool {
    const WORDS: [&str; 11] = [
        "y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", "<<",
    ];
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !WORDS.contains(&s.to_ascii_lowercase().as_str())
}

/// A collection with items, each line indented by `indent`.
fn block(value: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match value {
        Value::Mapping(map) => {
            for (k, v) in map {
                out.push_str(&format!("{pad}{}:", key(k)));
                match inline(v) {
                    Some(scalar) => out.push_str(&format!(" {scalar}\n")),
                    None => {
                        out.push('\n');
                        // Lists sit at their key's indentation, maps one step in.
                        let step = if matches!(v, Value::Sequence(_)) {
                            0
                        } else {
                            2
                        };
                        block(v, indent + step, out);
                    }
                }
            }
        }
        Value::Sequence(items) => {
            for item in items {
                match inline(item) {
                    Some(scalar) => out.push_str(&format!("{pad}- {scalar}\n")),
                    None => {
                        // The item's first line goes after the dash, the rest under it.
                        let mut inner = String::new();
                        block(item, indent + 2, &mut inner);
                        out.push_str(&format!("{pad}- {}", &inner[indent + 2..]));
                    }
                }
            }
        }
        Value::Tagged(tagged) => block(&tagged.value, indent, out),
        scalar => out.push_str(&format!("{pad}{}\n", inline(scalar).unwrap_or_default())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Value {
        yaml_serde::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    #[test]
    fn strings_a_yaml_1_1_reader_would_take_for_something_else_are_quoted() {
        let doc =
            read("a: \"y\"\nb: \"no\"\nc: \"on\"\nd: \"012\"\ne: \"1e3\"\nf: \"~\"\ng: plain\n");
        let text = to_string(&doc);
        for line in [
            "a: \"y\"",
            "b: \"no\"",
            "c: \"on\"",
            "d: \"012\"",
            "e: \"1e3\"",
            "f: \"~\"",
            "g: \"plain\"",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert_eq!(read(&text), doc);
    }

    #[test]
    fn nested_lists_and_maps_read_back_the_same_in_kubectls_layout() {
        let source = "apiVersion: v1\nclusters:\n- name: prod-1\n  cluster:\n    server: https://h:6443\n    insecure-skip-tls-verify: true\ncontexts: []\npreferences: {}\nlists:\n- - 1\n  - 2\n- []\n\"y\": odd key\n";
        let doc = read(source);
        let text = to_string(&doc);
        assert!(
            text.contains(
                "clusters:\n- name: \"prod-1\"\n  cluster:\n    server: \"https://h:6443\"\n"
            ),
            "{text}"
        );
        assert!(text.contains("\"y\": \"odd key\""), "{text}");
        assert_eq!(read(&text), doc);
    }

    #[test]
    fn awkward_strings_survive() {
        let doc = read(
            "a: \"line 1\\nline 2\"\nb: \"quote \\\" and \\\\ and \\t tab\"\nc: \"é ☃\"\nd: \"- dash\"\ne: \"#hash\"\nf: \"\"\n",
        );
        assert_eq!(read(&to_string(&doc)), doc);
    }
}
