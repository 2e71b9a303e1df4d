//! Extractors: the request id, the authenticated caller, the Idempotency-Key, query
//! parameters and JSON bodies. Each failure is a problem+json answer with its documented status.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;

use actix_web::dev::Payload;
use actix_web::http::header;
use actix_web::web::{Bytes, Data};
use actix_web::{FromRequest, HttpMessage, HttpRequest};
use domain::DomainError;
use domain::access::OrgSelector;
use domain::error::AuthFailure;
use domain::model::idempotency::Fingerprint;
use domain::model::identity::Caller;
use domain::model::secret::Secret;
use domain::names::IdempotencyKey;
use domain::ports::storage::Freshness;
use domain::service::{Keyed, Record, Services};
use domain::validation::{Violations, redact_serde_message};
use serde::de::DeserializeOwned;
use serde_json::Value;
use uuid::Uuid;

use crate::problem::{ApiError, Failure, RequestError};
use crate::ratelimit::{self, Authentication};
use crate::state::AppState;

/// Largest request body accepted; a larger one is 413.
pub const MAX_BODY_BYTES: usize = 1 << 20;

/// The id of this request (echoed from `X-Request-Id` when sane, else a new UUID).
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

impl RequestId {
    /// A caller's id is echoed only when it is short and plain, so it cannot inject anything
    /// into logs or headers.
    pub fn from_header(value: Option<&str>) -> RequestId {
        match value {
            Some(v)
                if !v.is_empty()
                    && v.len() <= 128
                    && v.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_.:".contains(&b)) =>
            {
                RequestId(v.to_owned())
            }
            _ => RequestId(telemetry::random_uuid().to_string()),
        }
    }
}

tokio::task_local! {
    /// The id of the request being served, for the answers made deep in it (an error
    /// converted with `?`), set by `middleware::observe` around each request.
    static SERVING: RequestId;
}

/// Runs `f` as the serving of request `id`.
pub async fn serving<F: Future>(id: RequestId, f: F) -> F::Output {
    SERVING.scope(id, f).await
}

/// The id of the request being served (empty outside one).
pub fn current_request_id() -> String {
    SERVING.try_with(|r| r.0.clone()).unwrap_or_default()
}

/// The use cases serving `req`: the changes they make name the request, and the provisioning
/// they schedule joins the request's trace.
pub fn serving_services(services: &Services, req: &HttpRequest) -> Services {
    let serving = services.for_request(&request_id(req));
    match req.extensions().get::<telemetry::TraceContext>() {
        Some(trace) => serving.traced(&trace.header()),
        None => serving,
    }
}

pub fn request_id(req: &HttpRequest) -> String {
    req.extensions()
        .get::<RequestId>()
        .map(|r| r.0.clone())
        .unwrap_or_default()
}

/// Reads `Authorization: Bearer <token>`. The scheme matches without
/// regard to case; nothing or only spaces after it is an empty token.
pub fn bearer_token(header: Option<&str>) -> Result<Secret, AuthFailure> {
    let value = match header {
        None => return Err(AuthFailure::Missing),
        Some(v) if v.trim().is_empty() => return Err(AuthFailure::Missing),
        Some(v) => v.trim_start(),
    };
    let (scheme, rest) = match value.find(char::is_whitespace) {
        Some(i) => (&value[..i], &value[i..]),
        None => (value, ""),
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(AuthFailure::NotBearer);
    }
    let token = rest.trim();
    if token.is_empty() {
        return Err(AuthFailure::EmptyToken);
    }
    // A token never holds whitespace or control characters: refuse it here rather than
    // forward it to the platform.
    if token.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(AuthFailure::InvalidToken);
    }
    Ok(Secret::new(token))
}

fn header_str<'a>(req: &'a HttpRequest, name: &str) -> Option<&'a str> {
    req.headers()
        .get(name)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"))
}

/// The context of an authenticated request: the use cases, the caller and the request id.
pub struct Ctx {
    pub services: Services,
    pub caller: Caller,
    pub request_id: String,
    /// The `X-Platform-Organization` header, for collection reads.
    pub org_header: Option<String>,
}

impl Ctx {
    /// The organization a collection read names: the `organization` query parameter wins over
    /// the `X-Platform-Organization` header; neither means the caller's preferred one.
    pub fn organization(&self, query: &Query) -> OrgSelector {
        OrgSelector::first_named([query.get("organization"), self.org_header.as_deref()])
    }
}

impl FromRequest for Ctx {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Ctx, ApiError>>>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let request_id = request_id(&req);
            let Some(state) = req.app_data::<Data<AppState>>().cloned() else {
                return Err(ApiError::new(
                    DomainError::Internal("application state missing".into()),
                    request_id,
                ));
            };
            let token = bearer_token(header_str(&req, header::AUTHORIZATION.as_str()))
                .map_err(|f| ApiError::new(DomainError::Unauthorized(f), request_id.clone()))?;
            let caller = match state.services.authenticate(&token).await {
                Ok(caller) => {
                    ratelimit::record(&req, Authentication::Accepted);
                    caller
                }
                Err(e) => {
                    if matches!(e, DomainError::Unauthorized(_)) {
                        ratelimit::record(&req, Authentication::Refused);
                    }
                    return Err(ApiError::new(e, request_id));
                }
            };
            crate::middleware::note_caller(&caller.user.id);
            let org_header = header_str(&req, "X-Platform-Organization").map(str::to_owned);
            Ok(Ctx {
                services: serving_services(&state.services, &req),
                caller,
                request_id,
                org_header,
            })
        })
    }
}

/// The `Idempotency-Key` header: absent, or valid (400 `invalid_idempotency_key` otherwise).
pub struct Idempotency(pub Option<IdempotencyKey>);

impl FromRequest for Idempotency {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Idempotency, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let result = match req.headers().get("Idempotency-Key") {
            None => Ok(Idempotency(None)),
            Some(v) => v
                .to_str()
                .ok()
                .and_then(IdempotencyKey::parse)
                .map(|k| Idempotency(Some(k)))
                .ok_or_else(|| ApiError::new(DomainError::InvalidIdempotencyKey, request_id(req))),
        };
        std::future::ready(result)
    }
}

impl Idempotency {
    /// The key with the request's fingerprint, as this adapter counts "the same request":
    /// method, path and the canonical JSON body (key order and whitespace do not matter).
    pub fn keyed<'a, T>(
        &self,
        req: &HttpRequest,
        body: Option<&Value>,
        record: &'a dyn Record<T>,
    ) -> Option<Keyed<'a, T>> {
        self.0.clone().map(|key| Keyed {
            key,
            fingerprint: fingerprint(req.method().as_str(), req.path(), body),
            record,
        })
    }
}

/// The fingerprint of an HTTP request: SHA-256 of method, path and body digest, joined by
/// spaces (the form the keys stored before fingerprints were converted to).
pub fn fingerprint(method: &str, path: &str, body: Option<&Value>) -> Fingerprint {
    Fingerprint::of(&[
        &method.to_ascii_uppercase(),
        path,
        &Fingerprint::body_digest(body),
    ])
}

/// A resource id from the path. A segment that is not a UUID (36 characters, hyphenated)
/// names nothing: it reads as the nil UUID, which the id generator never gives a resource, so
/// the use case answers it exactly as an unknown id (404, and 403 first for a writer who is
/// super_admin nowhere, since existence is not revealed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Id(pub Uuid);

impl Id {
    pub fn parse(segment: &str) -> Id {
        let id = (segment.len() == 36)
            .then(|| Uuid::parse_str(segment).ok())
            .flatten();
        Id(id.unwrap_or(Uuid::nil()))
    }
}

impl<'de> serde::Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let segment = String::deserialize(d)?;
        Ok(Id::parse(&segment))
    }
}

/// How current a read must be, from the request's caching headers: `Cache-Control: no-cache`
/// (or `no-store`, or `max-age=0`), or `Pragma: no-cache` without a `Cache-Control`, asks for
/// the database (`Freshness::Latest`); anything else may be answered from the watch cache
/// (`Freshness::Recent`). Unreadable headers count as absent: they never fail a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadFreshness(pub Freshness);

impl ReadFreshness {
    pub fn from_headers(cache_control: Option<&str>, pragma: Option<&str>) -> ReadFreshness {
        let directives = |value: &str| {
            value
                .split(',')
                .map(|d| d.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        };
        let latest = match (cache_control, pragma) {
            (Some(cc), _) => directives(cc)
                .iter()
                .any(|d| matches!(d.as_str(), "no-cache" | "no-store" | "max-age=0")),
            (None, Some(p)) => directives(p).iter().any(|d| d == "no-cache"),
            (None, None) => false,
        };
        ReadFreshness(if latest {
            Freshness::Latest
        } else {
            Freshness::Recent
        })
    }
}

impl FromRequest for ReadFreshness {
    type Error = ApiError;
    type Future = std::future::Ready<Result<ReadFreshness, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
        std::future::ready(Ok(ReadFreshness::from_headers(
            header(header::CACHE_CONTROL),
            header(header::PRAGMA),
        )))
    }
}

/// Query parameters by name (the first value of each). A query string that does not decode
/// is 400.
pub struct Query(pub HashMap<String, String>);

impl Query {
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

impl FromRequest for Query {
    type Error = ApiError;
    type Future = std::future::Ready<Result<Query, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let parsed = serde_urlencoded::from_str::<Vec<(String, String)>>(req.query_string());
        std::future::ready(match parsed {
            Ok(pairs) => {
                let mut map = HashMap::new();
                for (k, v) in pairs {
                    map.entry(k).or_insert(v);
                }
                Ok(Query(map))
            }
            Err(_) => Err(ApiError::new(
                RequestError::InvalidQuery {
                    parameter: "query",
                    message: "the query string could not be decoded".into(),
                },
                request_id(req),
            )),
        })
    }
}

/// A JSON body: 415 for another media type, 413 past 1 MiB, 422 for malformed JSON, wrong
/// types and unknown fields (with the field's path). Keeps the parsed JSON for the
/// idempotency fingerprint.
pub struct Body<T> {
    pub value: T,
    pub json: Value,
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    // Any other media type is 415 (parameters such as charset are fine).
    essence == "application/json"
}

fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<(T, Value), DomainError> {
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        bytes
    };
    let json: Value = serde_json::from_slice(bytes).map_err(|e| {
        DomainError::validation(
            "",
            format!(
                "the body is not valid JSON: {}",
                redact_serde_message(&e.to_string())
            ),
        )
    })?;
    let value = serde_path_to_error::deserialize::<_, T>(&json).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { path };
        DomainError::Validation(Violations::one(
            field,
            redact_serde_message(&e.inner().to_string()),
        ))
    })?;
    Ok((value, json))
}

impl<T: DeserializeOwned + 'static> FromRequest for Body<T> {
    type Error = ApiError;
    type Future = Pin<Box<dyn Future<Output = Result<Body<T>, ApiError>>>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let rid = request_id(req);
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap_or("?").to_owned());
        let declared_len = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok());
        // An absent body reads as `{}` (a POST whose fields all have defaults), except for a
        // PATCH: there `{}` changes nothing, and a PATCH sent without its body is a mistake
        // the caller should hear about before any precondition is weighed.
        let needs_body = req.method() == actix_web::http::Method::PATCH;
        let bytes = Bytes::from_request(req, payload);
        Box::pin(async move {
            let fail = |e: Failure| ApiError::new(e, rid.clone());
            if let Some(ct) = &content_type
                && !is_json(ct)
            {
                return Err(fail(RequestError::UnsupportedMediaType.into()));
            }
            if declared_len.is_some_and(|n| n > MAX_BODY_BYTES) {
                return Err(fail(
                    RequestError::PayloadTooLarge {
                        limit: MAX_BODY_BYTES,
                    }
                    .into(),
                ));
            }
            let bytes = bytes.await.map_err(|e| {
                if e.as_response_error().status_code()
                    == actix_web::http::StatusCode::PAYLOAD_TOO_LARGE
                {
                    fail(
                        RequestError::PayloadTooLarge {
                            limit: MAX_BODY_BYTES,
                        }
                        .into(),
                    )
                } else {
                    fail(DomainError::validation("", "the body could not be read").into())
                }
            })?;
            if needs_body && bytes.iter().all(u8::is_ascii_whitespace) {
                return Err(fail(
                    DomainError::validation(
                        "",
                        "the body is missing: send a JSON object of the fields to change",
                    )
                    .into(),
                ));
            }
            let (value, json) = parse_body::<T>(&bytes).map_err(|e| fail(e.into()))?;
            Ok(Body { value, json })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_cache_in_the_request_asks_for_the_database() {
        use Freshness::{Latest, Recent};
        let cases: &[(Option<&str>, Option<&str>, Freshness)] = &[
            (None, None, Recent),
            (Some("no-cache"), None, Latest),
            (Some("No-Cache"), None, Latest),
            (Some("max-stale=5, no-store"), None, Latest),
            (Some("max-age=0"), None, Latest),
            (Some("max-age=60"), None, Recent),
            (Some("no-transform"), None, Recent),
            (Some("no-cachex"), None, Recent),
            (None, Some("no-cache"), Latest),
            // Cache-Control wins over the HTTP/1.0 Pragma.
            (Some("max-age=60"), Some("no-cache"), Recent),
        ];
        for (cache_control, pragma, expected) in cases {
            assert_eq!(
                ReadFreshness::from_headers(*cache_control, *pragma).0,
                *expected,
                "{cache_control:?} {pragma:?}"
            );
        }
    }

    #[test]
    fn a_path_id_is_a_hyphenated_uuid_and_anything_else_names_nothing() {
        let id = "0b6f9c3e-8d1f-4e57-a3c2-5f1d2e3a4b5c";
        let parsed = Uuid::parse_str(id).ok();
        assert_eq!(Some(Id::parse(id).0), parsed);
        assert_eq!(Some(Id::parse(&id.to_uppercase()).0), parsed);
        for nothing in [
            "not-a-uuid",
            "../../etc/passwd",
            "0b6f9c3e8d1f4e57a3c25f1d2e3a4b5c",
            "{0b6f9c3e-8d1f-4e57-a3c2-5f1d2e3a4b5c}",
            "urn:uuid:0b6f9c3e-8d1f-4e57-a3c2-5f1d2e3a4b5c",
            "",
        ] {
            assert_eq!(Id::parse(nothing), Id(Uuid::nil()), "{nothing}");
        }
    }

    #[test]
    fn bearer_header_missing() {
        assert_eq!(bearer_token(None), Err(AuthFailure::Missing));
        assert_eq!(bearer_token(Some("")), Err(AuthFailure::Missing));
    }

    #[test]
    fn bearer_scheme_must_be_bearer_case_insensitive() {
        assert_eq!(
            bearer_token(Some("Basic dXNlcjpwYXNz")),
            Err(AuthFailure::NotBearer)
        );
        assert_eq!(bearer_token(Some("Token abc")), Err(AuthFailure::NotBearer));
        assert_eq!(
            bearer_token(Some("Bearertoken")),
            Err(AuthFailure::NotBearer)
        );
        assert_eq!(
            bearer_token(Some("bearer abc")).map(|s| s.expose().to_owned()),
            Ok("abc".to_owned())
        );
        assert_eq!(
            bearer_token(Some("BEARER abc")).map(|s| s.expose().to_owned()),
            Ok("abc".to_owned())
        );
    }

    #[test]
    fn bearer_nothing_or_only_spaces_is_an_empty_token() {
        assert_eq!(bearer_token(Some("Bearer")), Err(AuthFailure::EmptyToken));
        assert_eq!(bearer_token(Some("Bearer ")), Err(AuthFailure::EmptyToken));
        assert_eq!(
            bearer_token(Some("Bearer     ")),
            Err(AuthFailure::EmptyToken)
        );
    }

    #[test]
    fn bearer_token_with_inner_space_is_invalid() {
        assert_eq!(
            bearer_token(Some("Bearer a b")),
            Err(AuthFailure::InvalidToken)
        );
    }

    #[test]
    fn json_media_types() {
        assert!(is_json("application/json"));
        assert!(is_json("application/json; charset=utf-8"));
        assert!(!is_json("application/merge-patch+json"));
        assert!(!is_json("text/plain"));
        assert!(!is_json("application/x-www-form-urlencoded"));
    }

    #[test]
    fn wrong_types_name_their_path() {
        let e = parse_body::<wire::request::cluster::CreateClusterRequest>(
            br#"{"node_pools":[{"count":"3"}]}"#,
        )
        .err();
        match e {
            Some(DomainError::Validation(v)) => {
                assert_eq!(v.errors()[0].field, "node_pools[0].count")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn deep_nesting_is_refused_not_a_crash() {
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(matches!(
            parse_body::<Value>(deep.as_bytes()),
            Err(DomainError::Validation(_))
        ));
    }

    #[test]
    fn request_ids_are_echoed_only_when_plain() {
        assert_eq!(RequestId::from_header(Some("abc-123")).0, "abc-123");
        assert_ne!(RequestId::from_header(Some("a\r\nb")).0, "a\r\nb");
        assert_ne!(RequestId::from_header(Some(&"x".repeat(200))).0.len(), 200);
    }
}
