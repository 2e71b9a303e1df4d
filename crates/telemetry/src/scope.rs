//! A request's place in the plain-text log, kept without a tracing span.
//!
//! Every line logged while a request is served carries the request's fields (method, route,
//! request id, trace id, caller, and the organization it turned out to be about), as if it were
//! inside a `request` span. Where spans are needed (a JSON log, span timings, a terminal, an
//! exporter), the API makes that span. Where they are not (plain text to a file or a pipe, the
//! production default), a span per request costs more than the rest of a cached read's logging
//! together: a slot in the registry, bookkeeping on every poll of the request's future, its
//! fields formatted as they are recorded. There the request's fields are a [`Request`] held in
//! a task-local for the request's future (and carried to the blocking pool by the store), and
//! the text layer (`crate::text`) writes them into each line exactly where the span's fields
//! would be.
//!
//! Code deep inside a use case (the domain, which knows nothing of this module) names the
//! organization it acts for with an event of target [`NOTE`]; the text layer reads it into the
//! current request instead of writing a line. The filter (`crate::filter::Levels`) lets notes
//! through only when requests are kept this way; with spans, the same code records the
//! organization on the current span.

use std::fmt::Write as _;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::text::OneLine;

/// The target of the events that note a fact about the current request (`organization`)
/// instead of being written as lines.
pub const NOTE: &str = "kubesvc::note";

/// Whether requests are traced with spans (the default) or kept as [`Request`]s.
static SPANS: AtomicBool = AtomicBool::new(true);

/// Chooses, once at start, whether each request gets a tracing span (`true`, the default) or
/// a [`Request`] the text layer writes.
pub fn use_spans(spans: bool) {
    SPANS.store(spans, Ordering::Relaxed);
}

/// Whether each request gets a tracing span.
pub fn spans() -> bool {
    SPANS.load(Ordering::Relaxed)
}

/// The fields of the request being served, as its span would hold them.
pub struct Request {
    /// ` method=… route=… request_id=… trace_id=…`, written once when the request starts.
    head: String,
    /// Where the request id is in `head`.
    request_id: std::ops::Range<usize>,
    caller: OnceLock<String>,
    organization: OnceLock<String>,
}

tokio::task_local! {
    static CURRENT: Arc<Request>;
}

impl Request {
    pub fn new(method: &str, route: &str, request_id: &str, trace_id: u128) -> Arc<Request> {
        let mut head = String::with_capacity(128);
        push_field(&mut head, "method", method);
        push_field(&mut head, "route", route);
        let start = head.len() + " request_id=".len();
        push_field(&mut head, "request_id", request_id);
        let request_id = start..head.len();
        head.push_str(" trace_id=");
        crate::push_hex(&mut head, trace_id);
        Arc::new(Request {
            head,
            request_id,
            caller: OnceLock::new(),
            organization: OnceLock::new(),
        })
    }

    /// Runs `f` as this request's serving: each line logged while it is polled carries the
    /// request's fields.
    pub async fn serve<F: Future>(self: Arc<Request>, f: F) -> F::Output {
        CURRENT.scope(self, f).await
    }

    /// Runs `f` inside this request (a line written after the future is done, the access line).
    pub fn enter<R>(self: &Arc<Request>, f: impl FnOnce() -> R) -> R {
        CURRENT.sync_scope(self.clone(), f)
    }

    /// The request's id, as every line of it carries it.
    pub fn request_id(&self) -> &str {
        self.head.get(self.request_id.clone()).unwrap_or_default()
    }

    /// The caller, once authenticated (the first one named stays).
    pub fn note_caller(&self, caller: &str) {
        let _ = self.caller.set(caller.to_owned());
    }

    pub(crate) fn note_organization(&self, organization: String) {
        let _ = self.organization.set(organization);
    }

    /// The fields as the text layer writes a span's: ` name=value` each, in the span's order.
    pub(crate) fn write_fields(&self, line: &mut String) {
        line.push_str(&self.head);
        if let Some(caller) = self.caller.get() {
            push_field(line, "caller", caller);
        }
        if let Some(organization) = self.organization.get() {
            push_field(line, "organization", organization);
        }
    }
}

fn push_field(line: &mut String, name: &str, value: &str) {
    line.push(' ');
    line.push_str(name);
    line.push('=');
    let _ = OneLine(line).write_str(value);
}

/// The request being served on this task or thread, if it is kept as a [`Request`].
pub fn current() -> Option<Arc<Request>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// Runs `f` inside `request` when there is one: what the store's blocking pool does for the
/// work a request hands it.
pub fn in_request<R>(request: Option<Arc<Request>>, f: impl FnOnce() -> R) -> R {
    match request {
        Some(r) => CURRENT.sync_scope(r, f),
        None => f(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn its_fields_are_written_as_the_spans_would_be() {
        let r = Request::new("GET", "/v1/public/clusters/{id}", "abc", 0x4bf9);
        let mut line = String::new();
        r.write_fields(&mut line);
        assert_eq!(
            line,
            " method=GET route=/v1/public/clusters/{id} request_id=abc trace_id=00000000000000000000000000004bf9"
        );
        r.note_caller("alice\nINFO forged");
        r.note_caller("bob");
        r.note_organization("0a0c".into());
        line.clear();
        r.write_fields(&mut line);
        assert!(
            line.ends_with(r" caller=alice\nINFO forged organization=0a0c"),
            "{line}"
        );
    }

    #[test]
    fn it_is_current_only_inside_its_serving() {
        assert!(current().is_none());
        let r = Request::new("GET", "/a", "id-1", 1);
        let seen = r.enter(|| current().map(|c| c.request_id().to_owned()));
        assert_eq!(seen.as_deref(), Some("id-1"));
        assert!(in_request(Some(r.clone()), || current().is_some()));
        assert!(!in_request(None, || current().is_some()));
    }
}
