//! The request bodies the API reads: their JSON shapes and OpenAPI schemas.
//!
//! Serde decides the shape here (unknown fields, wrong types and malformed JSON are refused
//! with the offending field's path before any rule runs); each body then becomes the domain's
//! draft of the same command (`From`), whose rules decide the content and collect every
//! problem with its field path. A client that links this crate builds exactly what the server
//! reads.

pub mod auth_server;
pub mod cluster;
pub mod networking;
pub mod node_pool;
pub mod upgrade;

use serde::{Deserialize, Deserializer};

/// For PATCH fields where `null` differs from absent: absent is `None`, `null` is
/// `Some(None)`, a value is `Some(Some(v))`. Use with `#[serde(default)]`.
pub fn nullable<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// A field a PATCH may leave out but not set to null: what it names cannot be cleared.
pub fn not_null<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    match Option::<T>::deserialize(d)? {
        Some(v) => Ok(Some(v)),
        None => Err(serde::de::Error::custom(
            "may be left out, but not null: it cannot be cleared",
        )),
    }
}

/// An integer that JSON may also spell as an integral float (`3.0`): JSON Schema counts
/// `3.0` as an integer, and clients generated from the OpenAPI document may send it.
fn integral(n: serde_json::Number) -> Option<i64> {
    n.as_i64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15)
            .map(|f| f as i64)
    })
}

fn integer_error<E: serde::de::Error>() -> E {
    E::custom("invalid type: expected an integer")
}

/// For `Option<i64>` fields: absent or null is `None`.
pub fn opt_integer<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match Option::<serde_json::Number>::deserialize(d)? {
        None => Ok(None),
        Some(n) => integral(n).map(Some).ok_or_else(integer_error::<D::Error>),
    }
}

/// For PATCH integer fields where `null` differs from absent (use with `#[serde(default)]`).
pub fn nullable_integer<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<i64>>, D::Error> {
    opt_integer(d).map(Some)
}

/// For required `i64` fields.
pub fn integer<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    integral(serde_json::Number::deserialize(d)?).ok_or_else(integer_error::<D::Error>)
}

/// Item shapes the OpenAPI document gives to lists of strings (a JSON schema says them with a
/// pattern; the rules themselves are the domain's).
pub mod schema {
    /// A DNS label: 1-63 of `a-z`, `0-9` and `-`, starting and ending alphanumeric.
    #[derive(utoipa::ToSchema)]
    #[schema(pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    pub struct DnsLabelText(pub String);

    /// A static token: at least 16 visible ASCII characters.
    #[derive(utoipa::ToSchema)]
    #[schema(pattern = "^[!-~]{16,}$")]
    pub struct StaticTokenText(pub String);

    /// An IPv4 CIDR such as `203.0.113.0/24` (host bits zero: checked by the server).
    #[derive(utoipa::ToSchema)]
    #[schema(pattern = "^([0-9]{1,3}\\.){3}[0-9]{1,3}/[0-9]{1,2}$")]
    pub struct Ipv4CidrText(pub String);
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Sized {
        #[serde(default, deserialize_with = "super::opt_integer")]
        n: Option<i64>,
        #[serde(default, deserialize_with = "super::nullable_integer")]
        m: Option<Option<i64>>,
    }

    fn read(json: &str) -> Option<(Option<i64>, Option<Option<i64>>)> {
        serde_json::from_str::<Sized>(json).ok().map(|s| (s.n, s.m))
    }

    #[test]
    fn integers_may_be_spelled_as_integral_floats_but_not_fractions_or_strings() {
        let cases = [
            (r#"{"n": 3}"#, Some((Some(3), None))),
            (r#"{"n": 3.0}"#, Some((Some(3), None))),
            (r#"{"n": 3.5}"#, None),
            (r#"{"n": "3"}"#, None),
            (r#"{"n": null}"#, Some((None, None))),
            (r#"{"m": null}"#, Some((None, Some(None)))),
            (r#"{"m": 2}"#, Some((None, Some(Some(2))))),
            (r#"{}"#, Some((None, None))),
        ];
        for (json, want) in cases {
            assert_eq!(read(json), want, "{json}");
        }
    }
}
