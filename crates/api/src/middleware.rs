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
    // platform's client, the use cases) is inside this span; the extractor records the caller
    // once it is known, and each use case's own span names the organization it acted in.
    let span = tracing::info_span!(
        "request",
        method = %method,
        route = %route,
        request_id = %id.0,
        trace_id = tracing::field::Empty,
        caller = tracing::field::Empty,
        // Named by a use case whose own span is off at this level (a read's, at info).
        organization = tracing::field::Empty,
    );
    // The request's own place: under the caller's span, or the root of a new trace. The use
    // cases pass it on to the provisioning they schedule.
    let trace = telemetry::export::join(&span, parent.as_ref());
    span.record("trace_id", tracing::field::display(trace.trace_id()));
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
            let mut res = crate::extract::serving(id.clone(), next.call(req))
                .instrument(span.clone())
                .await?;
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
    let _inside = span.enter();
    // Method, route and request id are the span's: every line carries them, this one included
    // (written again here, they cost a tenth of a read's time to format).
    tracing::info!(
        target: "access",
        status,
        latency_ms = latency.as_secs_f64() * 1000.0,
        "request"
    );
    Ok(res)
}

fn api_metrics_start(m: &crate::metrics::Metrics) -> crate::metrics::InFlight<'_> {
    m.start_request()
}
