//! `RUST_LOG`'s filter, without the per-span work it does not need.
//!
//! `EnvFilter` takes a lock on its table of spans when a span is made, entered, left, recorded
//! and closed, so that a directive naming a span (`kubesvc[request{route=…}]=debug`) can
//! enable what happens inside it. Directives of targets and levels only (`info`,
//! `info,store_postgres=debug`) never put a span in that table: each of those locks finds it
//! empty, a handful of times per request on every worker. [`Levels`] asks `EnvFilter` what is
//! enabled, and tells it of spans only when a directive names one.

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::{Context, Layer};

/// The filter of a set of directives (`RUST_LOG`'s syntax).
pub struct Levels {
    inner: EnvFilter,
    /// A directive names a span (`[…]`): the filter must follow every span.
    follows_spans: bool,
    /// Notes about the current request (`crate::scope::NOTE`) pass whatever the directives
    /// say (requests are kept without spans), or never (they are spans).
    notes: bool,
}

impl Levels {
    /// `RUST_LOG` when it is set and valid, `default` otherwise.
    pub fn from_env(default: &str) -> Levels {
        let directives = std::env::var(EnvFilter::DEFAULT_ENV).unwrap_or_default();
        match EnvFilter::try_new(&directives) {
            Ok(inner) if !directives.trim().is_empty() => Levels::of(inner, &directives),
            _ => Levels::of(EnvFilter::new(default), default),
        }
    }

    fn of(inner: EnvFilter, directives: &str) -> Levels {
        Levels {
            inner,
            follows_spans: directives.contains('['),
            notes: false,
        }
    }

    /// Lets notes about the current request through: for when requests are kept without
    /// spans (`crate::scope`), whose text layer reads them.
    pub fn with_notes(self, notes: bool) -> Levels {
        Levels { notes, ..self }
    }

    fn is_note(metadata: &Metadata<'_>) -> bool {
        metadata.target() == crate::scope::NOTE
    }
}

impl<S: Subscriber> Layer<S> for Levels {
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        match (Levels::is_note(metadata), self.notes) {
            (true, true) => Interest::always(),
            (true, false) => Interest::never(),
            _ => Layer::<S>::register_callsite(&self.inner, metadata),
        }
    }

    fn enabled(&self, metadata: &Metadata<'_>, ctx: Context<'_, S>) -> bool {
        if Levels::is_note(metadata) {
            return self.notes;
        }
        Layer::<S>::enabled(&self.inner, metadata, ctx)
    }

    fn event_enabled(&self, event: &Event<'_>, ctx: Context<'_, S>) -> bool {
        Layer::<S>::event_enabled(&self.inner, event, ctx)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        Layer::<S>::max_level_hint(&self.inner)
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if self.follows_spans {
            Layer::<S>::on_new_span(&self.inner, attrs, id, ctx);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if self.follows_spans {
            Layer::<S>::on_record(&self.inner, id, values, ctx);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if self.follows_spans {
            Layer::<S>::on_enter(&self.inner, id, ctx);
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if self.follows_spans {
            Layer::<S>::on_exit(&self.inner, id, ctx);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if self.follows_spans {
            Layer::<S>::on_close(&self.inner, id, ctx);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// The messages of the events that passed the filter.
    #[derive(Clone, Default)]
    struct Seen(Arc<Mutex<Vec<String>>>);

    impl<S: Subscriber> Layer<S> for Seen {
        fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
            struct Message<'a>(&'a mut Vec<String>);
            impl tracing::field::Visit for Message<'_> {
                fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                    if f.name() == "message" {
                        self.0.push(format!("{v:?}"));
                    }
                }
            }
            event.record(&mut Message(&mut self.0.lock().unwrap()));
        }
    }

    fn seen(directives: &str) -> Vec<String> {
        let seen = Seen::default();
        let filter = Levels::of(EnvFilter::new(directives), directives);
        tracing::subscriber::with_default(
            tracing_subscriber::registry()
                .with(filter)
                .with(seen.clone()),
            || {
                tracing::info!("outside");
                tracing::debug!("outside, debug");
                let span = tracing::info_span!("request", route = "/v1/a");
                let _in = span.enter();
                tracing::debug!("inside, debug");
                tracing::trace!("inside, trace");
            },
        );
        seen.0.lock().unwrap().clone()
    }

    #[test]
    fn it_enables_what_the_directives_enable() {
        let cases: [(&str, &[&str]); 4] = [
            ("info", &["outside"]),
            ("debug", &["outside", "outside, debug", "inside, debug"]),
            ("warn", &[]),
            // A directive naming a span: only what happens inside it.
            ("info,[request]=debug", &["outside", "inside, debug"]),
        ];
        for (directives, want) in cases {
            assert_eq!(seen(directives), want, "{directives}");
        }
    }

    #[test]
    fn notes_pass_only_when_asked_for() {
        for (notes, want) in [(true, vec!["noted"]), (false, vec![])] {
            let seen = Seen::default();
            let filter = Levels::of(EnvFilter::new("info,kubesvc=off"), "").with_notes(notes);
            tracing::subscriber::with_default(
                tracing_subscriber::registry()
                    .with(filter)
                    .with(seen.clone()),
                || tracing::info!(target: "kubesvc::note", "noted"),
            );
            assert_eq!(*seen.0.lock().unwrap(), want, "notes {notes}");
        }
    }

    #[test]
    fn it_follows_spans_only_for_directives_that_name_one() {
        assert!(!Levels::of(EnvFilter::new("info"), "info").follows_spans);
        assert!(Levels::of(EnvFilter::new("[request]=debug"), "[request]=debug").follows_spans);
    }
}
