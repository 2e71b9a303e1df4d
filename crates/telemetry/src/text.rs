//! The log's default line: plain text, one line per event, written by a layer of the service's
//! own.
//!
//! The line is the one `tracing_subscriber::fmt().compact()` writes without colour, so nothing
//! that reads the log changes: the time, the level, the names of the spans the event is in,
//! its target, its message and fields, then the fields of each span from the outermost in:
//!
//! ```text
//! 2026-11-28T17:12:09.123456Z  INFO request: access: request status=200 latency_ms=0.41 method=GET route=/v1/public/clusters/{id} request_id=… trace_id=… caller=…
//! ```
//!
//! Why not that formatter: every request at `info` makes a span and an access line, and there
//! the generic formatter's costs add up to a share of the request's CPU (each field through
//! `Debug` adapters, the span's fields looked up through its extensions by type, the date
//! computed from the epoch for every line). This layer keeps a span's fields as the text they
//! are written as, writes numbers and the time without `core::fmt`'s padding machinery, and
//! computes the date once a second.
//!
//! One thing it does that the generic formatter does not: no value can break its line. A line
//! feed, a carriage return or a terminal control character in any field (not only the message)
//! is written escaped, so a hostile value cannot forge a line of its own.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::io::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_log::NormalizeEvent;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::registry::LookupSpan;

use crate::scope;

/// The layer: each event a line to `make`'s writer, in one write.
pub struct Text<W> {
    make: W,
}

impl<W> Text<W> {
    pub fn new(make: W) -> Text<W> {
        Text { make }
    }
}

/// A span's fields, as they are written after an event's own: ` name=value` pairs, each with
/// its leading space.
struct Fields(String);

impl<S, W> Layer<S> for Text<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = String::new();
        attrs.record(&mut Values::after(&mut fields));
        span.extensions_mut().insert(Fields(fields));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(Fields(fields)) = extensions.get_mut::<Fields>() {
            values.record(&mut Values::after(fields));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() == scope::NOTE {
            if let Some(request) = scope::current() {
                event.record(&mut Note(&request));
            }
            return;
        }
        LINE.with(|line| {
            // A line logged while this thread writes one (a field's Display that logs) gets a
            // buffer of its own rather than a borrow that would panic.
            let mut own = String::new();
            let mut held = line.try_borrow_mut();
            let line = match held.as_deref_mut() {
                Ok(line) => line,
                Err(_) => &mut own,
            };
            line.clear();
            write_event(line, event, &ctx);
            let _ = self.make.make_writer().write_all(line.as_bytes());
            // A rare long line does not keep its memory in every thread for good.
            if line.capacity() > LINE_KEEP {
                *line = String::with_capacity(LINE_START);
            }
        });
    }
}

const LINE_START: usize = 512;
const LINE_KEEP: usize = 16 * 1024;

thread_local! {
    static LINE: RefCell<String> = RefCell::new(String::with_capacity(LINE_START));
    static CLOCK: RefCell<Clock> = const { RefCell::new(Clock { second: u64::MAX, text: [0; 20] }) };
}

fn write_event<S>(line: &mut String, event: &Event<'_>, ctx: &Context<'_, S>)
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let normalized = event.normalized_metadata();
    let meta = normalized.as_ref().unwrap_or_else(|| event.metadata());
    write_now(line);
    line.push(' ');
    line.push_str(level(meta.level()));
    line.push(' ');
    // A request kept without a span is written as the outermost span would be.
    let request = scope::current();
    let mut named = false;
    if request.is_some() {
        line.push_str("request:");
        named = true;
    }
    for span in ctx
        .event_scope(event)
        .into_iter()
        .flat_map(|s| s.from_root())
    {
        line.push_str(span.name());
        line.push(':');
        named = true;
    }
    if named {
        line.push(' ');
    }
    line.push_str(meta.target());
    line.push_str(": ");
    event.record(&mut Values::first(line));
    if let Some(request) = &request {
        request.write_fields(line);
    }
    for span in ctx
        .event_scope(event)
        .into_iter()
        .flat_map(|s| s.from_root())
    {
        if let Some(Fields(fields)) = span.extensions().get::<Fields>() {
            line.push_str(fields);
        }
    }
    line.push('\n');
}

fn level(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => " INFO",
        Level::WARN => " WARN",
        _ => "ERROR",
    }
}

/// The date and time of the current second, written once a second per thread
/// (`2026-11-28T17:12:09`).
struct Clock {
    second: u64,
    text: [u8; 20],
}

/// The time as RFC 3339 in UTC with microseconds: `2026-11-28T17:12:09.123456Z`.
fn write_now(line: &mut String) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let second = now.as_secs();
    CLOCK.with(|clock| {
        let mut clock = clock.borrow_mut();
        if clock.second != second {
            clock.second = second;
            clock.text = civil(second);
        }
        // Written from ASCII digits and separators only.
        line.push_str(std::str::from_utf8(&clock.text[..19]).unwrap_or("0000-00-00T00:00:00"));
    });
    line.push('.');
    push_digits(line, u64::from(now.subsec_micros()), 6);
    line.push('Z');
}

/// `YYYY-MM-DDTHH:MM:SS` of a second since the epoch (the proleptic Gregorian calendar, as
/// Howard Hinnant's `civil_from_days`).
fn civil(second: u64) -> [u8; 20] {
    let days = second / 86_400;
    let of_day = second % 86_400;
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    let mut text = [0u8; 20];
    let mut at = 0;
    let mut put = |n: u64, width: u32, sep: u8| {
        for i in (0..width).rev() {
            text[at] = b'0' + ((n / 10u64.pow(i)) % 10) as u8;
            at += 1;
        }
        text[at] = sep;
        at += 1;
    };
    put(year.min(9_999), 4, b'-');
    put(month, 2, b'-');
    put(day, 2, b'T');
    put(of_day / 3_600, 2, b':');
    put(of_day / 60 % 60, 2, b':');
    put(of_day % 60, 2, b' ');
    text
}

/// A number as `Debug` writes it (the shortest text that reads back as the same number): by
/// `ryu` where the two cannot differ, by `Debug` elsewhere.
///
/// Both write the shortest digits closest to the number, in plain decimal between 1e-4 and
/// 1e9. They may differ only when two such texts are equally close, which needs the number's
/// exact decimal expansion to be at most 18 significant digits long; a number whose lowest
/// binary digit is worth 2^-24 or less has at least 24 decimal places, so at least 20
/// significant digits from 1e-4 up. A measured latency or ratio nearly always is one.
fn push_f64(line: &mut String, value: f64) {
    let bits = value.to_bits();
    let mantissa = (bits & ((1 << 52) - 1)) | (1 << 52);
    let exponent = ((bits >> 52) & 0x7ff) as i64 - 1075;
    let lowest_digit = exponent + i64::from(mantissa.trailing_zeros());
    if (1e-4..1e9).contains(&value.abs()) && lowest_digit <= -24 {
        line.push_str(ryu::Buffer::new().format_finite(value));
    } else {
        let _ = write!(line, "{value:?}");
    }
}

/// `n` in decimal (a status, a count), without `core::fmt`.
fn push_u64(line: &mut String, mut n: u64) {
    let mut text = [0u8; 20];
    let mut at = text.len();
    loop {
        at -= 1;
        text[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // Decimal digits are ASCII.
    line.push_str(std::str::from_utf8(&text[at..]).unwrap_or_default());
}

/// `n` in exactly `width` decimal digits (leading zeros).
fn push_digits(line: &mut String, n: u64, width: u32) {
    for i in (0..width).rev() {
        line.push(char::from(b'0' + ((n / 10u64.pow(i)) % 10) as u8));
    }
}

/// Fields written as `name=value`, separated by one space: an event's own (the first written
/// without a leading space) or a span's (each with one).
struct Values<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Values<'a> {
    fn first(out: &'a mut String) -> Values<'a> {
        Values { out, first: true }
    }

    fn after(out: &'a mut String) -> Values<'a> {
        Values { out, first: false }
    }

    /// The space before a field, and its name (`message` has none).
    fn name(&mut self, field: &Field) -> bool {
        let name = field.name();
        // Metadata of a `log` record, already written as the line's target.
        if name.starts_with("log.") {
            return false;
        }
        if self.first {
            self.first = false;
        } else {
            self.out.push(' ');
        }
        if name != "message" {
            self.out.push_str(name.strip_prefix("r#").unwrap_or(name));
            self.out.push('=');
        }
        true
    }
}

impl Visit for Values<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if self.name(field) {
            let mut out = OneLine(self.out);
            // A message is written as it is; any other text quoted, as `Debug` writes it.
            let _ = if field.name() == "message" {
                out.write_str(value)
            } else {
                write!(out, "{value:?}")
            };
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if self.name(field) {
            push_u64(self.out, value);
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if self.name(field) {
            let _ = write!(self.out, "{value}");
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if self.name(field) {
            push_f64(self.out, value);
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if self.name(field) {
            self.out.push_str(if value { "true" } else { "false" });
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.name(field) {
            let mut out = OneLine(self.out);
            let _ = write!(out, "{value}");
            if let Some(mut source) = value.source() {
                let _ = write!(out, " {}.sources=[", field.name());
                let mut first = true;
                loop {
                    if !first {
                        let _ = out.write_str(", ");
                    }
                    first = false;
                    let _ = write!(out, "{source}");
                    match source.source() {
                        Some(next) => source = next,
                        None => break,
                    }
                }
                let _ = out.write_str("]");
            }
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.name(field) {
            let _ = write!(OneLine(self.out), "{value:?}");
        }
    }
}

/// Whether every byte is printable ASCII (space to `~`), eight at a time: nearly every value
/// is, and this is what a line's values cost to check.
fn printable_ascii(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut eight = [0u8; 8];
        eight.copy_from_slice(word);
        let x = u64::from_le_bytes(eight);
        // A byte below 0x20 borrows into its high bit; a byte of 0x7f or more has it set once
        // 1 is added to its low seven bits, or had it already.
        let below = x.wrapping_sub(ONES * 0x20) & !x & HIGH;
        let above = (((x & !HIGH) + ONES) | x) & HIGH;
        if below | above != 0 {
            return false;
        }
    }
    words
        .remainder()
        .iter()
        .all(|&b| b.wrapping_sub(0x20) < 0x5f)
}

/// A note's fields, kept on the request they are about.
struct Note<'a>(&'a scope::Request);

impl Visit for Note<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "organization" {
            // An id: 36 characters.
            let mut text = String::with_capacity(40);
            let _ = write!(text, "{value:?}");
            self.0.note_organization(text);
        }
    }
}

/// Text written into a line with the characters that would end it, or act on a terminal,
/// escaped: `\n`, `\r`, and the control characters ESC, BEL, BS, FF, DEL and C1.
pub(crate) struct OneLine<'a>(pub(crate) &'a mut String);

impl fmt::Write for OneLine<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some(at) = first_to_escape(rest) {
            self.0.push_str(&rest[..at]);
            let Some(c) = rest[at..].chars().next() else {
                break;
            };
            match c {
                '\n' => self.0.push_str("\\n"),
                '\r' => self.0.push_str("\\r"),
                c if (c as u32) < 0x80 => {
                    let _ = write!(self.0, "\\x{:02x}", c as u32);
                }
                c => {
                    let _ = write!(self.0, "\\u{{{:x}}}", c as u32);
                }
            }
            rest = &rest[at + c.len_utf8()..];
        }
        self.0.push_str(rest);
        Ok(())
    }
}

/// Where the first character to escape starts: a byte scan, since nearly every value has none.
/// A C1 control character is the two bytes `C2 80`-`C2 9F` in UTF-8.
fn first_to_escape(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    if printable_ascii(bytes) {
        return None;
    }
    // Printable ASCII (space to `~`) is one comparison a byte; anything else is looked at.
    let mut from = 0;
    while let Some(at) = bytes[from..]
        .iter()
        .position(|&b| b.wrapping_sub(0x20) >= 0x5f)
        .map(|at| from + at)
    {
        let escape = match bytes[at] {
            b'\n' | b'\r' | 0x1b | 0x07 | 0x08 | 0x0c | 0x7f => true,
            0xc2 => bytes.get(at + 1).is_some_and(|n| (0x80..=0x9f).contains(n)),
            _ => false,
        };
        if escape {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Lines written into memory, for the tests to read.
    #[derive(Clone, Default)]
    struct Memory(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Memory {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Memory {
        type Writer = Memory;

        fn make_writer(&'a self) -> Memory {
            self.clone()
        }
    }

    impl Memory {
        fn lines(&self) -> Vec<String> {
            String::from_utf8(self.0.lock().unwrap().clone())
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect()
        }
    }

    #[derive(Debug)]
    struct Outer(std::io::Error);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("the store failed")
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// What the service logs, in the shapes it logs them: a request (a span, or kept without
    /// one) with fields named later, a use case inside it, events with every kind of value, an
    /// event outside any request.
    fn story(kept: bool) {
        tracing::info!(addr = "127.0.0.1:8080", "listening");
        let (method, route, id, trace) = ("GET", "/v1/public/clusters/{id}", "4f1c", 0x4bf9);
        let inside = || {
            let use_case =
                tracing::info_span!("create_cluster", organization = tracing::field::Empty);
            use_case.record("organization", "0a0c0e00");
            let _u = use_case.enter();
            tracing::warn!(
                count = 3u64,
                delta = -2i64,
                ratio = 0.5f64,
                whole = 1.0f64,
                ok = true,
                name = "web \"one\"",
                id = ?Some(7),
                r#type = "x",
                "quota: {} of {}",
                3,
                4
            );
            let e = Outer(std::io::Error::other("connection reset"));
            tracing::error!(error = &e as &(dyn std::error::Error + 'static), "failed");
        };
        let access =
            || tracing::info!(target: "access", status = 200u64, latency_ms = 0.412f64, "request");
        if kept {
            let request = scope::Request::new(method, route, id, trace);
            request.enter(|| {
                scope::current().unwrap().note_caller("user-1");
                tracing::info!(target: scope::NOTE, organization = %"org-1");
                inside();
            });
            request.enter(access);
        } else {
            let request = tracing::info_span!(
                "request",
                method = %method,
                route = %route,
                request_id = %id,
                trace_id = tracing::field::Empty,
                caller = tracing::field::Empty,
                organization = tracing::field::Empty,
            );
            request.record(
                "trace_id",
                tracing::field::display(crate::TraceIdHex(trace)),
            );
            let _r = request.enter();
            tracing::Span::current().record("caller", tracing::field::display("user-1"));
            tracing::Span::current().record("organization", tracing::field::display("org-1"));
            inside();
            access();
        }
    }

    /// Without the time: what follows it.
    fn untimed(line: &str) -> &str {
        line.split_once(' ').map_or(line, |(_, rest)| rest)
    }

    #[test]
    fn its_lines_are_the_compact_formatters_lines() {
        let ours = Memory::default();
        tracing::subscriber::with_default(
            tracing_subscriber::registry().with(Text::new(ours.clone())),
            || story(false),
        );
        let theirs = Memory::default();
        tracing::subscriber::with_default(
            tracing_subscriber::registry().with(
                tracing_subscriber::fmt::layer()
                    .with_writer(theirs.clone())
                    .with_ansi(false)
                    .compact(),
            ),
            || story(false),
        );
        let (ours, theirs) = (ours.lines(), theirs.lines());
        assert_eq!(ours.len(), 4, "{ours:#?}");
        for (a, b) in ours.iter().zip(&theirs) {
            assert_eq!(untimed(a), untimed(b));
        }
        assert_eq!(ours.len(), theirs.len());
        assert!(
            ours[3].ends_with(
                "access: request status=200 latency_ms=0.412 method=GET route=/v1/public/clusters/{id} request_id=4f1c trace_id=00000000000000000000000000004bf9 caller=user-1 organization=org-1"
            ),
            "{}",
            ours[3]
        );
    }

    #[test]
    fn a_request_kept_without_a_span_is_written_as_its_span_would_be() {
        let [spanned, kept] = [false, true].map(|kept| {
            let out = Memory::default();
            tracing::subscriber::with_default(
                tracing_subscriber::registry().with(Text::new(out.clone())),
                || story(kept),
            );
            out.lines()
        });
        assert_eq!(kept.len(), 4, "{kept:#?}");
        for (a, b) in kept.iter().zip(&spanned) {
            assert_eq!(untimed(a), untimed(b));
        }
        assert_eq!(kept.len(), spanned.len());
    }

    #[test]
    fn its_time_is_rfc_3339_in_utc_with_microseconds() {
        let out = Memory::default();
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        tracing::subscriber::with_default(
            tracing_subscriber::registry().with(Text::new(out.clone())),
            || tracing::info!("now"),
        );
        let line = out.lines().remove(0);
        let (time, rest) = line.split_once(' ').unwrap();
        assert_eq!(rest, " INFO telemetry::text::tests: now");
        let (second, micros) = time.split_once('.').unwrap();
        let now = [before.as_secs(), before.as_secs() + 1].map(civil);
        assert!(now.iter().any(|c| &c[..19] == second.as_bytes()), "{time}");
        assert_eq!(micros.len(), 7, "six digits and Z: {time}");
        assert!(micros.ends_with('Z') && micros[..6].bytes().all(|b| b.is_ascii_digit()));
    }

    #[test]
    fn whole_numbers_are_written_in_decimal() {
        for n in [0, 7, 10, 200, 404, 65_535, u64::from(u32::MAX), u64::MAX] {
            let mut out = String::new();
            push_u64(&mut out, n);
            assert_eq!(out, n.to_string());
        }
    }

    #[test]
    fn numbers_are_written_as_debug_writes_them() {
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            0.412,
            1e-4,
            9.99e8,
            1e9,
            1e-5,
            123.456,
            f64::NAN,
        ];
        // Two shortest texts equally close: a tie each way can break.
        values.extend([
            600_000_000.0 + 7.0 / 256.0,
            659_156_236_737_419.0 + 0.25,
            1.0 / 8192.0,
        ]);
        values.extend([
            f64::INFINITY,
            f64::MIN_POSITIVE,
            f64::MAX,
            0.1 + 0.2,
            2.0 / 3.0,
        ]);
        // Latencies as the access line has them: a wide spread of magnitudes and digits.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x >> 12 | 0x3ff0_0000_0000_0000) - 1.0;
            values.push(v * 10f64.powi((x % 20) as i32 - 6));
        }
        for v in values {
            let mut ours = String::new();
            push_f64(&mut ours, v);
            assert_eq!(ours, format!("{v:?}"), "{v:e}");
        }
    }

    #[test]
    fn the_word_check_finds_every_byte_that_is_not_printable_ascii() {
        for b in 0..=255u8 {
            for at in 0..17 {
                let mut bytes = vec![b'a'; 17];
                bytes[at] = b;
                let want = (0x20..0x7f).contains(&b);
                assert_eq!(printable_ascii(&bytes), want, "byte {b:#04x} at {at}");
            }
        }
        assert!(printable_ascii(b""));
        assert!(printable_ascii(
            b" ~ /v1/public/clusters/{id} 0a0c0e00-0000-4000"
        ));
    }

    #[test]
    fn the_calendar_is_right_across_leap_days_and_centuries() {
        let cases = [
            (0, "1970-01-01T00:00:00"),
            (951_782_400, "2000-02-29T00:00:00"),
            (951_868_799, "2000-02-29T23:59:59"),
            (4_107_542_399, "2100-02-28T23:59:59"),
            (4_107_542_400, "2100-03-01T00:00:00"),
            (1_795_885_929, "2026-11-28T17:12:09"),
            (1_798_761_599, "2026-12-31T23:59:59"),
        ];
        for (second, want) in cases {
            assert_eq!(&civil(second)[..19], want.as_bytes(), "{second}");
        }
    }

    #[test]
    fn no_value_breaks_its_line_or_reaches_the_terminal() {
        let out = Memory::default();
        tracing::subscriber::with_default(
            tracing_subscriber::registry().with(Text::new(out.clone())),
            || {
                let span = tracing::info_span!("request", route = %"/a\n2026-01-01T00:00:00Z  INFO forged");
                let _s = span.enter();
                tracing::warn!(
                    value = %"x\r\ny",
                    bell = %"\x07\x1b[31mred",
                    c1 = %"\u{9b}31m",
                    "message\nwith a line\x1b[2J"
                );
            },
        );
        let lines = out.lines();
        assert_eq!(lines.len(), 1, "{lines:#?}");
        assert!(
            lines[0].ends_with(
                r"request: telemetry::text::tests: message\nwith a line\x1b[2J value=x\r\ny bell=\x07\x1b[31mred c1=\u{9b}31m route=/a\n2026-01-01T00:00:00Z  INFO forged"
            ),
            "{}",
            lines[0]
        );
    }
}
