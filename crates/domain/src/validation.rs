//! Field-addressed validation problems: one entry per problem, each naming its field as a path
//! (`node_pools[3].count`), so a client can point at the exact input that was wrong.

use std::fmt;

/// One problem with one input field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field, e.g. `node_pools[0].count`; empty for the input as a whole.
    pub field: String,
    /// What is wrong, in words a person can act on. Never echoes a secret value.
    pub message: String,
}

/// Every problem found in one input. Validation collects all of them rather than stopping at the
/// first, so a client fixes its request in one round trip.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violations(Vec<FieldError>);

impl Violations {
    pub fn new() -> Self {
        Self::default()
    }

    /// A single problem, for the many places that find exactly one.
    pub fn one(field: impl Into<String>, message: impl Into<String>) -> Self {
        let mut v = Self::new();
        v.push(field, message);
        v
    }

    pub fn push(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.0.push(FieldError {
            field: field.into(),
            message: message.into(),
        });
    }

    /// Records the problem of a parse result under `field`, returning the value when it parsed.
    pub fn check<T>(&mut self, field: &str, result: Result<T, String>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(message) => {
                self.push(field, message);
                None
            }
        }
    }

    pub fn extend(&mut self, other: Violations) {
        self.0.extend(other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn errors(&self) -> &[FieldError] {
        &self.0
    }

    pub fn into_errors(self) -> Vec<FieldError> {
        self.0
    }

    /// `Ok(value)` when nothing was recorded, otherwise every recorded problem.
    pub fn into_result<T>(self, value: T) -> Result<T, Violations> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }

    /// Whether a problem was recorded for exactly this field.
    pub fn has(&self, field: &str) -> bool {
        self.0.iter().any(|e| e.field == field)
    }

    /// Converts the nested report of a `validator` derive into path-addressed entries, so derived
    /// and hand-written rules read the same on the wire.
    pub fn from_validator(prefix: &str, errors: &validator::ValidationErrors) -> Self {
        let mut out = Self::new();
        flatten_validator(prefix, errors, &mut out);
        out
    }
}

fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_owned()
    } else {
        format!("{prefix}.{field}")
    }
}

fn flatten_validator(prefix: &str, errors: &validator::ValidationErrors, out: &mut Violations) {
    use validator::ValidationErrorsKind as Kind;
    // Sorted so the order of entries is stable between runs (the map is a HashMap).
    let mut fields: Vec<_> = errors.errors().iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    for (field, kind) in fields {
        let path = join(prefix, field);
        match kind {
            Kind::Field(list) => {
                for e in list {
                    let message = e
                        .message
                        .as_ref()
                        .map(|m| m.to_string())
                        .unwrap_or_else(|| format!("failed the `{}` rule", e.code));
                    out.push(path.clone(), message);
                }
            }
            Kind::Struct(inner) => flatten_validator(&path, inner, out),
            Kind::List(items) => {
                for (index, inner) in items {
                    flatten_validator(&format!("{path}[{index}]"), inner, out);
                }
            }
        }
    }
}

impl fmt::Display for Violations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|e| {
                if e.field.is_empty() {
                    e.message.clone()
                } else {
                    format!("{}: {}", e.field, e.message)
                }
            })
            .collect();
        f.write_str(&parts.join("; "))
    }
}

impl std::error::Error for Violations {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_joins_every_problem_with_its_path() {
        let mut v = Violations::new();
        v.push("name", "must be a DNS label");
        v.push(
            "node_pools[3].count",
            "must be at least 1 unless auto_scale is true",
        );
        assert_eq!(
            v.to_string(),
            "name: must be a DNS label; node_pools[3].count: must be at least 1 unless auto_scale is true"
        );
        assert!(v.has("node_pools[3].count"));
        assert_eq!(v.len(), 2);
    }

    #[test]
    fn into_result_is_ok_only_without_problems() {
        assert_eq!(Violations::new().into_result(5), Ok(5));
        assert!(Violations::one("x", "bad").into_result(5).is_err());
    }
}

/// A serde error message without the offending value: `invalid type: integer `12345`,
/// expected a string` becomes `invalid type: integer, expected a string`. An input may carry a
/// secret in the wrong place, and an error text must never repeat it; field names stay.
pub fn redact_serde_message(message: &str) -> String {
    use std::sync::LazyLock;
    #[expect(
        clippy::expect_used,
        reason = "constant pattern, exercised by the unit test"
    )]
    static VALUE: LazyLock<regex::Regex> = LazyLock::new(|| {
        regex::Regex::new(r#"(invalid (?:type|value): [a-z ]+?) (?:`[^`]*`|"(?:[^"\\]|\\.)*")"#)
            .expect("valid pattern")
    });
    VALUE.replace_all(message, "$1").into_owned()
}

#[cfg(test)]
mod redact_tests {
    use super::redact_serde_message;

    #[test]
    fn serde_messages_lose_the_value_but_keep_field_names() {
        assert_eq!(
            redact_serde_message("invalid type: integer `12345`, expected a string"),
            "invalid type: integer, expected a string"
        );
        assert_eq!(
            redact_serde_message(
                r#"invalid type: string "hunter2", expected u32 at line 1 column 9"#
            ),
            "invalid type: string, expected u32 at line 1 column 9"
        );
        assert_eq!(
            redact_serde_message("unknown field `flavor`, expected one of `name`, `size`"),
            "unknown field `flavor`, expected one of `name`, `size`"
        );
    }
}
