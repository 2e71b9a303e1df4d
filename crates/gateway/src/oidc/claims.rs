//! The configured claims of a verified token as the `X-Auth-*` headers the upstream trusts.
//! The upstream cannot tell a header the gateway derived carelessly from one it should believe,
//! so derivation refuses what would let a user shape them:
//! - an email the provider marks `email_verified: false` is not asserted (many providers let a
//!   user type any address);
//! - every value is trimmed of surrounding whitespace, and one that is then empty, holds a
//!   comma or a control character is not a value: a header's values are read as a
//!   comma-separated list (RFC 9110 §5.3), so a role `viewer,admin` would read upstream as two
//!   roles. A single-valued claim holding one is not sent at all; an entry of a list claim
//!   holding one is left out of the comma-joined list (a group named `devs,admins` would
//!   otherwise read as two groups).

use domain::model::auth_server::ClaimNames;
use serde_json::{Map, Value};

/// One value as the header carries it: trimmed, and `None` when it could read as several
/// values, or none, or break the header.
fn one_value(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(s) => s.trim().to_owned(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        _ => return None,
    };
    let whole = !text.is_empty() && !text.contains(',') && !text.chars().any(char::is_control);
    whole.then_some(text)
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::Array(items) => Some(
            items
                .iter()
                .filter_map(one_value)
                .collect::<Vec<_>>()
                .join(","),
        ),
        other => one_value(other),
    }
}

fn email_unverified(claims: &Map<String, Value>) -> bool {
    match claims.get("email_verified") {
        Some(Value::Bool(false)) => true,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("false"),
        _ => false,
    }
}

/// The configured claims as `X-Auth-*` headers.
pub fn headers(names: &ClaimNames, claims: &Map<String, Value>) -> Vec<(&'static str, String)> {
    [
        ("x-auth-user", &names.username_claim),
        ("x-auth-email", &names.email_claim),
        ("x-auth-role", &names.role_claim),
        ("x-auth-groups", &names.group_claim),
    ]
    .into_iter()
    .filter(|(header, _)| *header != "x-auth-email" || !email_unverified(claims))
    .filter_map(|(header, claim)| Some((header, text(claims.get(claim.as_deref()?)?)?)))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names() -> ClaimNames {
        ClaimNames {
            username_claim: Some("preferred_username".into()),
            email_claim: Some("email".into()),
            role_claim: Some("role".into()),
            group_claim: Some("groups".into()),
        }
    }

    fn of(claims: Value) -> Vec<(&'static str, String)> {
        headers(&names(), claims.as_object().unwrap_or(&Map::new()))
    }

    #[test]
    fn array_claims_are_joined_with_commas() {
        assert_eq!(
            of(json!({"preferred_username": "alice", "groups": ["a", "b"], "role": "admin"})),
            vec![
                ("x-auth-user", "alice".to_owned()),
                ("x-auth-role", "admin".to_owned()),
                ("x-auth-groups", "a,b".to_owned())
            ]
        );
    }

    #[test]
    fn an_entry_holding_a_comma_cannot_add_an_entry() {
        assert_eq!(
            of(json!({"groups": ["devs", "devs,admins", 7]})),
            vec![("x-auth-groups", "devs,7".to_owned())]
        );
    }

    #[test]
    fn an_unverified_email_is_not_asserted() {
        assert_eq!(
            of(json!({"email": "ceo@corp.example", "email_verified": false})),
            vec![]
        );
        assert_eq!(
            of(json!({"email": "ceo@corp.example", "email_verified": "false"})),
            vec![]
        );
        assert_eq!(
            of(json!({"email": "a@corp.example", "email_verified": true})),
            vec![("x-auth-email", "a@corp.example".to_owned())]
        );
        assert_eq!(
            of(json!({"email": "a@corp.example"})),
            vec![("x-auth-email", "a@corp.example".to_owned())]
        );
    }

    #[test]
    fn every_value_is_trimmed_and_none_can_read_as_several() {
        assert_eq!(
            of(json!({
                "preferred_username": "  alice\t",
                "role": "viewer,admin",
                "groups": [" devs ", "devs,admins", "   ", "ops", "a\u{1}b"],
            })),
            vec![
                ("x-auth-user", "alice".to_owned()),
                ("x-auth-groups", "devs,ops".to_owned())
            ]
        );
        assert_eq!(of(json!({"preferred_username": "   "})), vec![]);
        assert_eq!(
            of(json!({"email": "Doe, Jane <jane@corp.example>"})),
            vec![]
        );
        assert_eq!(
            of(json!({"role": ["viewer", "editor"]})),
            vec![("x-auth-role", "viewer,editor".to_owned())]
        );
    }

    #[test]
    fn control_characters_drop_the_value() {
        assert_eq!(
            of(json!({"preferred_username": "alice\r\nX-Auth-Role: admin"})),
            vec![]
        );
        assert_eq!(
            of(json!({"preferred_username": "José"})),
            vec![("x-auth-user", "José".to_owned())]
        );
    }
}
