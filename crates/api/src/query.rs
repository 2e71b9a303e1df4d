//! Query parameters, parsed before a use case runs: out of range or not an integer is 400
//! `invalid_query`. The bounds are the domain's (`domain::rules`).

use crate::problem::RequestError;
use domain::ports::storage::PageRequest;
use domain::rules::{
    PAGE_DEFAULT, SIZE_DEFAULT, SIZE_MAX, TIMEOUT_SECONDS_DEFAULT, TIMEOUT_SECONDS_MAX,
};

fn parse_int(
    parameter: &'static str,
    raw: Option<&str>,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, RequestError> {
    let Some(raw) = raw else { return Ok(default) };
    let bad = |message: String| RequestError::InvalidQuery { parameter, message };
    let value: u64 = raw
        .parse()
        .map_err(|_| bad(format!("must be an integer between {min} and {max}")))?;
    if value < min || value > max {
        return Err(bad(format!("must be between {min} and {max}")));
    }
    Ok(value)
}

/// `page` (>= 1, default 1) and `size` (1-100, default 20).
pub fn page(page: Option<&str>, size: Option<&str>) -> Result<PageRequest, RequestError> {
    let page = parse_int(
        "page",
        page,
        u64::from(PAGE_DEFAULT),
        1,
        i32::MAX as u64, // the OpenAPI document's int32
    )?;
    let size = parse_int(
        "size",
        size,
        u64::from(SIZE_DEFAULT),
        1,
        u64::from(SIZE_MAX),
    )?;
    Ok(PageRequest {
        page: page as u32,
        size: size as u32,
    })
}

/// `since` (>= 0, default 0).
pub fn since(raw: Option<&str>) -> Result<i64, RequestError> {
    parse_int("since", raw, 0, 0, i64::MAX as u64).map(|v| v as i64)
}

/// `timeout_seconds` (0-60, default 25).
pub fn timeout_seconds(raw: Option<&str>) -> Result<u32, RequestError> {
    parse_int(
        "timeout_seconds",
        raw,
        u64::from(TIMEOUT_SECONDS_DEFAULT),
        0,
        u64::from(TIMEOUT_SECONDS_MAX),
    )
    .map(|v| v as u32)
}

/// `environment` on the auth-server list: a DNS label when given.
pub fn environment(raw: Option<&str>) -> Result<Option<&str>, RequestError> {
    match raw {
        None => Ok(None),
        Some(e) if domain::names::is_dns_label(e) => Ok(Some(e)),
        Some(_) => Err(RequestError::InvalidQuery {
            parameter: "environment",
            message: "must be a DNS label".into(),
        }),
    }
}

/// `expiry_seconds` of a kubeconfig download: absent, or between the domain's minimum and the
/// operator's maximum.
pub fn expiry_seconds(raw: Option<&str>, max: u32) -> Result<Option<u32>, RequestError> {
    let min = u64::from(domain::model::kubeconfig::MIN_EXPIRY_SECONDS);
    raw.map(|_| parse_int("expiry_seconds", raw, min, min, u64::from(max)).map(|v| v as u32))
        .transpose()
}

/// Kubeconfig `format`: `plain` (default) or `json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KubeconfigFormat {
    Plain,
    Json,
}

pub fn kubeconfig_format(raw: Option<&str>) -> Result<KubeconfigFormat, RequestError> {
    match raw {
        None | Some("") | Some("plain") => Ok(KubeconfigFormat::Plain),
        Some("json") => Ok(KubeconfigFormat::Json),
        Some(_) => Err(RequestError::InvalidQuery {
            parameter: "format",
            message: "must be `plain` or `json`".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<impl std::fmt::Debug, RequestError>) -> &'static str {
        r.err().map(|e| e.code()).unwrap_or("ok")
    }

    #[test]
    fn page_defaults_to_1_and_size_to_20() {
        let p = page(None, None);
        assert_eq!(p.map(|p| (p.page, p.size)).ok(), Some((1, 20)));
    }

    #[test]
    fn page_at_least_1() {
        assert_eq!(code(page(Some("1"), None)), "ok");
        assert_eq!(code(page(Some("0"), None)), "invalid_query");
        assert_eq!(code(page(Some("-1"), None)), "invalid_query");
        assert_eq!(code(page(Some("x"), None)), "invalid_query");
        assert_eq!(
            code(page(Some("99999999999999999999999"), None)),
            "invalid_query"
        );
    }

    #[test]
    fn size_between_1_and_100() {
        assert_eq!(code(page(None, Some("1"))), "ok");
        assert_eq!(code(page(None, Some("100"))), "ok");
        assert_eq!(code(page(None, Some("0"))), "invalid_query");
        assert_eq!(code(page(None, Some("101"))), "invalid_query");
        assert_eq!(code(page(None, Some("1.5"))), "invalid_query");
    }

    #[test]
    fn since_is_a_non_negative_integer_default_0() {
        assert_eq!(since(None).ok(), Some(0));
        assert_eq!(since(Some("7")).ok(), Some(7));
        assert_eq!(code(since(Some("-1"))), "invalid_query");
        assert_eq!(code(since(Some("abc"))), "invalid_query");
    }

    #[test]
    fn timeout_seconds_is_0_to_60_default_25() {
        assert_eq!(timeout_seconds(None).ok(), Some(25));
        assert_eq!(timeout_seconds(Some("0")).ok(), Some(0));
        assert_eq!(timeout_seconds(Some("60")).ok(), Some(60));
        assert_eq!(code(timeout_seconds(Some("61"))), "invalid_query");
        assert_eq!(code(timeout_seconds(Some("-1"))), "invalid_query");
    }

    #[test]
    fn environment_is_a_dns_label_when_given() {
        assert_eq!(environment(None), Ok(None));
        assert_eq!(environment(Some("production")), Ok(Some("production")));
        assert_eq!(code(environment(Some("Prod"))), "invalid_query");
        assert_eq!(code(environment(Some(""))), "invalid_query");
    }

    #[test]
    fn kubeconfig_format_is_plain_or_json() {
        assert_eq!(kubeconfig_format(None).ok(), Some(KubeconfigFormat::Plain));
        assert_eq!(
            kubeconfig_format(Some("json")).ok(),
            Some(KubeconfigFormat::Json)
        );
        assert_eq!(code(kubeconfig_format(Some("yaml"))), "invalid_query");
    }
}

/// The audit trail's filters and page, each parsed or refused by name.
pub mod audit {
    use chrono::{DateTime, SecondsFormat, Utc};
    use domain::model::audit::{AuditCursor, AuditResource, PAGE_DEFAULT, PAGE_MAX};
    use uuid::Uuid;

    use super::parse_int;
    use crate::problem::RequestError;

    /// The longest id or actor a filter takes: longer ones match nothing anyway.
    const MAX_TEXT: usize = 256;

    fn bad(parameter: &'static str, message: impl Into<String>) -> RequestError {
        RequestError::InvalidQuery {
            parameter,
            message: message.into(),
        }
    }

    pub fn resource(raw: Option<&str>) -> Result<Option<AuditResource>, RequestError> {
        raw.map(|r| {
            AuditResource::parse(r).ok_or_else(|| {
                let words: Vec<&str> = AuditResource::ALL.iter().map(|r| r.as_str()).collect();
                bad("resource", format!("must be one of {}", words.join(", ")))
            })
        })
        .transpose()
    }

    pub fn text(
        parameter: &'static str,
        raw: Option<&str>,
    ) -> Result<Option<String>, RequestError> {
        match raw {
            Some(v) if v.is_empty() || v.len() > MAX_TEXT => Err(bad(
                parameter,
                format!("must be 1 to {MAX_TEXT} characters"),
            )),
            v => Ok(v.map(str::to_owned)),
        }
    }

    pub fn cluster_id(raw: Option<&str>) -> Result<Option<Uuid>, RequestError> {
        raw.map(|v| Uuid::parse_str(v).map_err(|_| bad("cluster_id", "must be a UUID")))
            .transpose()
    }

    /// An RFC 3339 instant with its offset (`2026-11-26T10:00:00Z`).
    pub fn instant(
        parameter: &'static str,
        raw: Option<&str>,
    ) -> Result<Option<DateTime<Utc>>, RequestError> {
        raw.map(|v| {
            DateTime::parse_from_rfc3339(v)
                .map(|t| t.with_timezone(&Utc))
                .map_err(|_| {
                    bad(
                        parameter,
                        "must be an RFC 3339 instant, e.g. 2026-11-26T10:00:00Z",
                    )
                })
        })
        .transpose()
    }

    /// `limit` (1-100, default 50).
    pub fn limit(raw: Option<&str>) -> Result<u32, RequestError> {
        parse_int(
            "limit",
            raw,
            u64::from(PAGE_DEFAULT),
            1,
            u64::from(PAGE_MAX),
        )
        .map(|v| v as u32)
    }

    /// The cursor a page answered as `next_cursor`: opaque to clients, `<instant>~<event id>`
    /// here. A forged one can only move the page within the caller's own organization, which
    /// every read is scoped to.
    pub fn cursor(raw: Option<&str>) -> Result<Option<AuditCursor>, RequestError> {
        let Some(raw) = raw else { return Ok(None) };
        let invalid = || bad("cursor", "is not a cursor this API answered");
        let (at, id) = raw.split_once('~').ok_or_else(invalid)?;
        let at = DateTime::parse_from_rfc3339(at)
            .map_err(|_| invalid())?
            .with_timezone(&Utc);
        let id = Uuid::parse_str(id).map_err(|_| invalid())?;
        Ok(Some(AuditCursor { at, id }))
    }

    pub fn encode_cursor(c: &AuditCursor) -> String {
        format!(
            "{}~{}",
            c.at.to_rfc3339_opts(SecondsFormat::Micros, true),
            c.id
        )
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn a_cursor_reads_back_as_itself_and_garbage_is_refused() {
            let c = AuditCursor {
                at: DateTime::parse_from_rfc3339("2026-11-26T10:00:00.123456Z")
                    .map(|t| t.with_timezone(&Utc))
                    .unwrap_or_default(),
                id: Uuid::from_u128(7),
            };
            assert_eq!(cursor(Some(&encode_cursor(&c))), Ok(Some(c)));
            for bad in [
                "",
                "~",
                "x~y",
                "2026-11-26T10:00:00Z",
                "2026-11-26T10:00:00Z~nope",
            ] {
                assert!(cursor(Some(bad)).is_err(), "{bad:?}");
            }
        }

        #[test]
        fn filters_are_checked_by_name() {
            assert_eq!(
                resource(Some("node_pool")),
                Ok(Some(AuditResource::NodePool))
            );
            assert!(resource(Some("clusters")).is_err());
            assert!(text("actor", Some("")).is_err());
            assert!(text("actor", Some(&"a".repeat(257))).is_err());
            assert!(instant("since", Some("yesterday")).is_err());
            assert_eq!(limit(None), Ok(50));
            assert!(limit(Some("101")).is_err());
        }
    }
}
