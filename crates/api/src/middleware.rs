//! Around every request: the request id (echoed or made), the fair-use limits
//! (`ratelimit`), the access log line and the metrics. The log carries method, route template, status, latency and request id; never a
//! header value, so no token can reach it.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::web::Data;
use actix_web::{Error, HttpMessage};
use tracing::Instrument;

use crate::extract::RequestId;
use crate::ratelimit::{self, Admission};
use crate::state::AppState;

pub async fn observe(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let started = Instant::now();
    let id = RequestId::from_header(
        req.headers()
            .get("X-Request-Id")
            .and_then(|v| v.to_str().ok()),
    );
    req.extensions_mut().insert(id.clone());
    // The caller's place in a trace, when it sent a valid `traceparent`.
    let parent = req
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(telemetry::TraceContext::parse);
    // A standard method's clone copies no bytes.
    let method = req.method().clone();
    let route = req
        .match_pattern()
        .unwrap_or_else(|| "unmatched".to_owned());
    // Every line logged while the request is served (the store's blocking pool, the account
    // platform's client, the use cases) carries the request's fields: inside its span, or,
    // where the log needs no spans, with the request kept as a `telemetry::scope::Request`
    // (the same lines, without a span's cost). The extractor names the caller once it is
    // known, and a use case whose own span is off at this level (a read's, at info) names the
    // organization it acted in.
    let (place, trace) = if telemetry::scope::spans() {
        let span = tracing::info_span!(
            "request",
            method = %method,
            route = %route,
            request_id = %id.0,
            trace_id = tracing::field::Empty,
            caller = tracing::field::Empty,
            organization = tracing::field::Empty,
        );
        // The request's own place: under the caller's span, or the root of a new trace. The
        // use cases pass it on to the provisioning they schedule.
        let trace = telemetry::export::join(&span, parent.as_ref());
        span.record("trace_id", tracing::field::display(trace.trace_id()));
        (Place::Span(span), trace)
    } else {
        let trace = parent.map_or_else(telemetry::TraceContext::root, |p| p.child());
        let place = if tracing::enabled!(tracing::Level::INFO) {
            Place::Kept(telemetry::scope::Request::new(
                method.as_str(),
                &route,
                &id.0,
                trace.trace_id,
            ))
        } else {
            Place::Span(tracing::Span::none())
        };
        (place, trace)
    };
    req.extensions_mut().insert(trace);
    let state = req.app_data::<Data<AppState>>().cloned();
    let in_flight = state.as_ref().map(|s| s.metrics.clone());
    let guard = in_flight.as_deref().map(api_metrics_start);
    let admission = state
        .as_ref()
        .map(|s| ratelimit::admit(&s.limiter, &req, &id.0))
        .unwrap_or(Admission::Pass(Vec::new(), None));
    let mut res = match admission {
        Admission::Pass(standings, ticket) => {
            let serving = crate::extract::serving(id.clone(), next.call(req));
            let mut res = match &place {
                Place::Span(span) => serving.instrument(span.clone()).await?,
                Place::Kept(request) => request.clone().serve(serving).await?,
            };
            if let (Some(ticket), Some(state)) = (ticket, &state) {
                ticket.settle(&state.limiter, res.request());
            }
            ratelimit::annotate(res.headers_mut(), &standings);
            res.map_into_left_body()
        }
        Admission::Refuse(refusal) => req.into_response(refusal).map_into_right_body(),
    };
    drop(guard);
    let status = res.status().as_u16();
    let latency = started.elapsed();
    if let Ok(v) = HeaderValue::from_str(&id.0) {
        res.headers_mut()
            .insert(HeaderName::from_static("x-request-id"), v);
    }
    if let Some(state) = state {
        state
            .metrics
            .record(method.as_str(), &route, status, latency);
    }
    // Method, route and request id are the request's: every line carries them, this one
    // included.
    let access = || {
        tracing::info!(
            target: "access",
            status,
            latency_ms = latency.as_secs_f64() * 1000.0,
            "request"
        );
    };
    match &place {
        Place::Span(span) => span.in_scope(access),
        Place::Kept(request) => request.enter(access),
    }
    Ok(res)
}

/// Where the lines of a request get its fields.
enum Place {
    /// Its tracing span (none when `info` is off).
    Span(tracing::Span),
    /// The request kept for the text layer, without a span.
    Kept(std::sync::Arc<telemetry::scope::Request>),
}

/// Names the request's caller on every later line of it.
pub fn note_caller(caller: &str) {
    match telemetry::scope::current() {
        Some(request) => request.note_caller(caller),
        None => {
            tracing::Span::current().record("caller", tracing::field::display(caller));
        }
    }
}

fn api_metrics_start(m: &crate::metrics::Metrics) -> crate::metrics::InFlight<'_> {
    m.start_request()
}
