//! Answers as bytes. The same renderer makes the live answer and the one recorded for
//! Idempotency-Key replays, so a replay is byte-identical to the first answer.

use actix_web::HttpResponse;
use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderName, HeaderValue};
use domain::DomainError;
use domain::model::idempotency::Replay;
use domain::service::{Answer, OperationRef, Record, Scheduled};
use serde::Serialize;

use crate::problem::{self, PROBLEM_JSON};
use crate::replay::HttpAnswer;

/// A renderer: what a use case's answer is as HTTP, fresh or recorded for replays.
pub trait Render<T>: Record<T> {
    fn http(&self, value: &T) -> HttpAnswer;
    /// The request it answers.
    fn request_id(&self) -> &str;
}

pub const JSON: &str = "application/json";

/// Makes the `Location` of a created object.
type Locator<T> = Box<dyn Fn(&T) -> String + Send + Sync>;

/// Renders `T` as JSON with a fixed status (or 202 when the change started an operation, for
/// a route whose change may or may not start one) and an optional `Location`.
pub struct JsonRender<T> {
    status: StatusCode,
    accepted_when_scheduled: bool,
    location: Option<Locator<T>>,
    request_id: String,
}

impl<T> JsonRender<T> {
    pub fn new(status: StatusCode, request_id: &str) -> Self {
        JsonRender {
            status,
            accepted_when_scheduled: false,
            location: None,
            request_id: request_id.to_owned(),
        }
    }

    /// 202 instead of the status when the change handed work to provisioning (a cluster's
    /// PATCH: a description is done when answered, a control-plane firewall is not).
    pub fn accepted_when_scheduled(mut self) -> Self {
        self.accepted_when_scheduled = true;
        self
    }

    pub fn with_location(mut self, f: impl Fn(&T) -> String + Send + Sync + 'static) -> Self {
        self.location = Some(Box::new(f));
        self
    }
}

/// A domain value and the shape it is answered in (from the `wire` crate).
pub trait Shown {
    type Wire<'a>: Serialize
    where
        Self: 'a;
    fn wire(&self) -> Self::Wire<'_>;
    /// The operation the answer's change started, if it started one.
    fn operation(&self) -> Option<OperationRef> {
        None
    }
}

/// A change's answer is shown as its object, with the operation it started in the headers.
impl<T: Shown> Shown for Scheduled<T> {
    type Wire<'a>
        = T::Wire<'a>
    where
        Self: 'a;
    fn wire(&self) -> Self::Wire<'_> {
        self.value.wire()
    }
    fn operation(&self) -> Option<OperationRef> {
        self.operation
    }
}

/// Where an operation is followed.
pub fn operation_url(op: &OperationRef) -> String {
    format!("/v1/public/clusters/{}/operations/{}", op.cluster_id, op.id)
}

/// The headers that point at the operation a change started: `Operation-Location` always,
/// and `Location` on a 202 (the object itself is not what was created: the work is).
pub fn operation_headers(status: StatusCode, op: &OperationRef) -> Vec<(String, String)> {
    let url = operation_url(op);
    let mut headers = vec![(OPERATION_LOCATION.to_owned(), url.clone())];
    if status == StatusCode::ACCEPTED {
        headers.push((header::LOCATION.to_string(), url));
    }
    headers
}

/// `response` with the headers that point at `operation`, when there is one.
pub fn with_operation(
    mut response: HttpResponse,
    operation: Option<&OperationRef>,
) -> HttpResponse {
    if let Some(op) = operation {
        let status = response.status();
        insert_headers(response.headers_mut(), &operation_headers(status, op));
    }
    response
}

/// Adds stored `(name, value)` pairs to a response's headers; a pair that is not a valid
/// header (none the renderers make) is left out.
fn insert_headers(map: &mut actix_web::http::header::HeaderMap, headers: &[(String, String)]) {
    for (name, value) in headers {
        if let (Ok(n), Ok(v)) = (
            HeaderName::try_from(name.as_str()),
            HeaderValue::try_from(value.as_str()),
        ) {
            map.insert(n, v);
        }
    }
}

/// The header naming the operation a change started.
pub const OPERATION_LOCATION: &str = "operation-location";

/// Domain values answered in a shape of the `wire` crate, built `From` them.
macro_rules! shown_as {
    ($($domain:ty => $wire:ty),+ $(,)?) => {$(
        impl Shown for $domain {
            type Wire<'a> = $wire;
            fn wire(&self) -> $wire {
                <$wire>::from(self)
            }
        }
    )+};
}

shown_as! {
    domain::model::cluster::Cluster => wire::cluster::Cluster,
    domain::model::node_pool::NodePool => wire::cluster::NodePool,
    domain::model::node::Node => wire::cluster::Node,
    domain::model::elastic_ip::ElasticIpView => wire::networking::ElasticIpView,
    domain::model::firewall::FirewallRule => wire::networking::FirewallRule,
    domain::model::auth_server::AuthServerView => wire::auth_server::AuthServerView,
    domain::model::auth_server::CredentialView => wire::auth_server::CredentialView,
}

impl<T: Shown> Record<T> for JsonRender<T> {
    fn answer(&self, value: &T) -> Replay {
        self.http(value).encode()
    }

    fn refusal(&self, error: &DomainError) -> Replay {
        problem_answer(error, &self.request_id).encode()
    }
}

impl<T: Shown> Render<T> for JsonRender<T> {
    fn request_id(&self) -> &str {
        &self.request_id
    }

    fn http(&self, value: &T) -> HttpAnswer {
        let body = serde_json::to_vec(&value.wire()).unwrap_or_default();
        let status = match value.operation() {
            Some(_) if self.accepted_when_scheduled => StatusCode::ACCEPTED,
            _ => self.status,
        };
        let mut headers = vec![
            (header::CONTENT_TYPE.to_string(), JSON.to_owned()),
            (
                header::ETAG.to_string(),
                crate::conditional::entity_tag(&body),
            ),
        ];
        if let Some(f) = &self.location {
            headers.push((header::LOCATION.to_string(), f(value)));
        }
        if let Some(op) = value.operation() {
            headers.extend(operation_headers(status, &op));
        }
        HttpAnswer {
            status: status.as_u16(),
            headers,
            body,
        }
    }
}

/// A refusal as it is answered, and recorded for replays.
fn problem_answer(error: &DomainError, request_id: &str) -> HttpAnswer {
    let problem = problem::of_domain(error, request_id);
    let mut headers = vec![(header::CONTENT_TYPE.to_string(), PROBLEM_JSON.to_owned())];
    if let Some(s) = error.retry_after_seconds() {
        headers.push((header::RETRY_AFTER.to_string(), s.to_string()));
    }
    HttpAnswer {
        status: problem.status,
        headers,
        body: problem.to_json(),
    }
}

/// Renders nothing: a 204.
pub struct EmptyRender {
    request_id: String,
}

impl EmptyRender {
    pub fn new(request_id: &str) -> Self {
        EmptyRender {
            request_id: request_id.to_owned(),
        }
    }
}

impl<T> Record<T> for EmptyRender {
    fn answer(&self, value: &T) -> Replay {
        self.http(value).encode()
    }

    fn refusal(&self, error: &DomainError) -> Replay {
        problem_answer(error, &self.request_id).encode()
    }
}

impl<T> Render<T> for EmptyRender {
    fn request_id(&self) -> &str {
        &self.request_id
    }

    fn http(&self, _: &T) -> HttpAnswer {
        HttpAnswer {
            status: 204,
            headers: vec![],
            body: vec![],
        }
    }
}

/// A recorded or fresh answer as an HTTP response.
pub fn stored(response: &HttpAnswer, replay: bool) -> HttpResponse {
    let mut r =
        HttpResponse::build(StatusCode::from_u16(response.status).unwrap_or(StatusCode::OK))
            .body(response.body.clone());
    insert_headers(r.headers_mut(), &response.headers);
    if replay {
        r.headers_mut().insert(
            HeaderName::from_static("idempotency-replay"),
            HeaderValue::from_static("true"),
        );
    }
    r
}

/// The HTTP response for a use case's answer: the fresh one, or the one the first request
/// with the same key got, marked as a replay.
pub fn answer<T>(render: &dyn Render<T>, a: Answer<T>) -> HttpResponse {
    match a {
        Answer::Fresh(value) => stored(&render.http(&value), false),
        Answer::Replayed(r) => match HttpAnswer::decode(&r) {
            Some(recorded) => stored(&recorded, true),
            // Only this adapter records answers: bytes it cannot read are a fault of ours.
            None => problem::problem_response(
                &DomainError::Internal(
                    "an idempotency key holds an answer this server cannot read".into(),
                ),
                render.request_id(),
            ),
        },
    }
}

/// The answer of a change made without an idempotency key, which is always fresh.
pub fn fresh<T>(a: Answer<T>) -> Result<T, DomainError> {
    match a {
        Answer::Fresh(value) => Ok(value),
        Answer::Replayed(_) => Err(DomainError::Internal(
            "a replay answered a change that carried no key".into(),
        )),
    }
}

/// A plain JSON answer.
pub fn json<T: Serialize>(status: StatusCode, value: &T) -> HttpResponse {
    HttpResponse::build(status)
        .content_type(JSON)
        .body(serde_json::to_vec(value).unwrap_or_default())
}
