//! The request's place in a trace, passed on to the upstream: the client's trace when it sent
//! one valid `traceparent`, a new trace otherwise. The upstream receives the gateway's own
//! `traceparent` (the same trace, the gateway's span as parent), never the client's bytes, and
//! `tracestate` only beside a valid `traceparent` and only when it is bounded and printable.

use http::HeaderMap;
use http::header::HeaderValue;
use telemetry::TraceContext;

pub struct Trace {
    pub context: TraceContext,
    pub state: Option<HeaderValue>,
}

impl Trace {
    pub fn of(headers: &HeaderMap) -> Trace {
        let mut parents = headers.get_all("traceparent").iter();
        // Two `traceparent` fields are no trace context: which one would be believed?
        let parent = match (parents.next(), parents.next()) {
            (Some(v), None) => v.to_str().ok().and_then(TraceContext::parse),
            _ => None,
        };
        let Some(parent) = parent else {
            return Trace {
                context: TraceContext::root(),
                state: None,
            };
        };
        // Several `tracestate` fields are one list, joined as the specification joins them.
        let joined = headers
            .get_all("tracestate")
            .iter()
            .map(|v| v.to_str().ok())
            .collect::<Option<Vec<&str>>>()
            .map(|parts| parts.join(","));
        let state = joined
            .as_deref()
            .and_then(telemetry::tracestate)
            .and_then(|s| HeaderValue::from_str(s).ok());
        Trace {
            context: parent.child(),
            state,
        }
    }

    pub fn traceparent(&self) -> HeaderValue {
        // Always 55 visible ASCII characters.
        HeaderValue::from_str(&self.context.header()).unwrap_or(HeaderValue::from_static(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            if let Ok(value) = HeaderValue::from_str(value) {
                h.append(*name, value);
            }
        }
        h
    }

    #[test]
    fn a_client_trace_is_continued_with_a_span_of_the_gateway_s() {
        let t = Trace::of(&headers(&[
            ("traceparent", GOOD),
            ("tracestate", "a=1"),
            ("tracestate", "b=2"),
        ]));
        assert_eq!(t.context.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_ne!(t.context.span_id, 0x00f0_67aa_0ba9_02b7);
        assert_eq!(t.state, Some(HeaderValue::from_static("a=1,b=2")));
    }

    #[test]
    fn what_is_not_one_valid_traceparent_starts_a_new_trace_without_state() {
        let cases: [&[(&'static str, &str)]; 4] = [
            &[("tracestate", "a=1")],
            &[("traceparent", "00-zz"), ("tracestate", "a=1")],
            &[
                ("traceparent", GOOD),
                ("traceparent", GOOD),
                ("tracestate", "a=1"),
            ],
            &[(
                "traceparent",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            )],
        ];
        for case in cases {
            let t = Trace::of(&headers(case));
            assert_ne!(
                t.context.trace_id_hex(),
                "4bf92f3577b34da6a3ce929d0e0e4736",
                "{case:?}"
            );
            assert_eq!(t.state, None, "{case:?}");
        }
        let long = "a=".to_owned() + &"x".repeat(telemetry::TRACESTATE_MAX);
        let t = Trace::of(&headers(&[("traceparent", GOOD), ("tracestate", &long)]));
        assert_eq!(t.state, None, "an overlong tracestate is dropped");
    }
}
