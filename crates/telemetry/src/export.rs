//! Spans sent to a tracing back end (OpenTelemetry's OTLP over HTTP, JSON), when the operator
//! names one with `OTEL_EXPORTER_OTLP_ENDPOINT`; nothing is sent otherwise. A span joins the
//! trace the request brought ([`join`]), so the back end shows the caller's span, the API's
//! request, its use case and change, and the reconcile steps the change scheduled as one tree.

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider,
};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use crate::TraceContext;

/// Keeps the exporter running; dropping it sends the spans still buffered, then stops it.
pub struct Export {
    provider: SdkTracerProvider,
}

impl Drop for Export {
    fn drop(&mut self) {
        let _ = self.provider.shutdown();
    }
}

/// The layer that exports every span to `endpoint` (the collector's base URL; spans go to
/// `<endpoint>/v1/traces`) as `service`.
pub fn layer<S>(endpoint: &str, service: &str) -> Result<(impl Layer<S> + use<S>, Export), String>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let url = format!("{}/v1/traces", endpoint.trim_end_matches('/'));
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpJson)
        .with_endpoint(url)
        .build()
        .map_err(|e| format!("OTEL_EXPORTER_OTLP_ENDPOINT: {e}"))?;
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(
            Resource::builder()
                .with_service_name(service.to_owned())
                .build(),
        )
        .build();
    let tracer = provider.tracer(service.to_owned());
    Ok((
        tracing_opentelemetry::layer().with_tracer(tracer),
        Export { provider },
    ))
}

/// The export the environment asks for: `OTEL_EXPORTER_OTLP_ENDPOINT` (none when unset or
/// empty) and `OTEL_SERVICE_NAME` (`service` otherwise). An endpoint that cannot be used is said
/// on standard error by `program`, and nothing is exported.
pub fn from_env<S>(program: &str, service: &str) -> (Option<impl Layer<S> + use<S>>, Option<Export>)
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let Some(endpoint) = std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT")
        .ok()
        .filter(|e| !e.trim().is_empty())
    else {
        return (None, None);
    };
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| service.to_owned());
    match layer(&endpoint, &service) {
        Ok((layer, export)) => (Some(layer), Some(export)),
        Err(e) => {
            eprintln!("{program}: {e}: spans are not exported");
            (None, None)
        }
    }
}

/// Makes `span` part of the trace `parent` names (the caller's span, or the request that
/// scheduled some work), or the root of a new trace; answers the span's own place in it, to
/// be passed on. Without an exporter the span has no place of its own: a new span id under
/// the same trace stands for it.
pub fn join(span: &tracing::Span, parent: Option<&TraceContext>) -> TraceContext {
    if let Some(p) = parent {
        let remote = SpanContext::new(
            TraceId::from_bytes(p.trace_id.to_be_bytes()),
            SpanId::from_bytes(p.span_id.to_be_bytes()),
            if p.sampled {
                TraceFlags::SAMPLED
            } else {
                TraceFlags::default()
            },
            true,
            TraceState::default(),
        );
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
    let own = span.context().span().span_context().clone();
    if own.is_valid() {
        return TraceContext {
            trace_id: u128::from_be_bytes(own.trace_id().to_bytes()),
            span_id: u64::from_be_bytes(own.span_id().to_bytes()),
            sampled: own.is_sampled(),
        };
    }
    parent.map_or_else(TraceContext::root, TraceContext::child)
}
