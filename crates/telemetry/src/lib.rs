//! One trace through every part of the service: the API request, the provisioning work it
//! schedules (the reconciler's steps), and the gateway in front of an application.
//!
//! A trace is named by the W3C Trace Context (`traceparent: 00-<trace id>-<parent id>-<flags>`).
//! A request that brings a valid one joins its trace; one that brings none, or one that does
//! not parse, starts a new trace (an invalid value is never passed on). Each hop makes a span
//! id of its own and hands `traceparent` on with it: the gateway to its upstream, the API to
//! the provisioning work through the operation it records. The ids are in every log line of the
//! request's span (`trace_id`), so the lines of one story can be joined across processes.

use std::fmt;

pub mod export;
pub mod filter;
pub mod log;
pub mod scope;
pub mod text;

/// The most `tracestate` the gateway passes on: the limit W3C Trace Context asks a vendor to
/// keep to (32 list members of at most 256 bytes could be more; longer lists may be cut).
pub const TRACESTATE_MAX: usize = 512;

/// A position in a trace: its id, the span that is the parent of the next one, and whether
/// the caller sampled it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: u128,
    pub span_id: u64,
    pub sampled: bool,
}

impl TraceContext {
    /// Reads a `traceparent` value. Version `00` is read exactly; a later version by its first
    /// four fields, as the specification asks; `ff`, all-zero ids, upper-case hex or a wrong
    /// length are not a trace context.
    pub fn parse(value: &str) -> Option<TraceContext> {
        let bytes = value.as_bytes();
        // ASCII first: every split below is then on a character boundary.
        if bytes.len() < 55 || !value.is_ascii() {
            return None;
        }
        let (version, rest) = value.split_at(2);
        let version = hex_field(version, 2)?;
        if version == 0xff || (version == 0 && bytes.len() != 55) {
            return None;
        }
        // A later version may add fields after a dash, never change the first four.
        if version != 0 && bytes.len() > 55 && bytes[55] != b'-' {
            return None;
        }
        let rest = rest.strip_prefix('-')?;
        let (trace, rest) = rest.split_at(32);
        let rest = rest.strip_prefix('-')?;
        let (span, rest) = rest.split_at(16);
        let rest = rest.strip_prefix('-')?;
        let flags = hex_field(rest.get(..2)?, 2)?;
        let trace_id = hex_field(trace, 32)?;
        let span_id = u64::try_from(hex_field(span, 16)?).ok()?;
        if trace_id == 0 || span_id == 0 {
            return None;
        }
        Some(TraceContext {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// A new trace (sampled: nothing before this hop decided otherwise).
    pub fn root() -> TraceContext {
        TraceContext {
            trace_id: nonzero_u128(),
            span_id: span_id(),
            sampled: true,
        }
    }

    /// The next hop of the same trace: a span id of its own.
    pub fn child(&self) -> TraceContext {
        TraceContext {
            span_id: span_id(),
            ..*self
        }
    }

    /// The hop after a request that brought `traceparent` (or none): the same trace when it
    /// parses, a new one otherwise.
    pub fn continue_from(traceparent: Option<&str>) -> TraceContext {
        traceparent
            .and_then(TraceContext::parse)
            .map_or_else(TraceContext::root, |t| t.child())
    }

    /// The trace id as logs and tracing back ends write it: 32 lower-case hex digits.
    pub fn trace_id_hex(&self) -> String {
        self.trace_id().to_string()
    }

    /// The same, written where it is displayed (a span's field) without a string of its own.
    pub fn trace_id(&self) -> TraceIdHex {
        TraceIdHex(self.trace_id)
    }

    /// The `traceparent` value that makes this span the parent of the next hop.
    pub fn header(&self) -> String {
        format!(
            "00-{:032x}-{:016x}-{:02x}",
            self.trace_id,
            self.span_id,
            u8::from(self.sampled)
        )
    }
}

impl fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.header())
    }
}

/// A `tracestate` worth passing on beside a valid `traceparent`: visible ASCII and spaces, at
/// most [`TRACESTATE_MAX`] bytes. Anything else is dropped, not repaired.
pub fn tracestate(value: &str) -> Option<&str> {
    (!value.is_empty()
        && value.len() <= TRACESTATE_MAX
        && value.bytes().all(|b| b == b' ' || b.is_ascii_graphic()))
    .then_some(value)
}

/// `text` as a number when it is exactly `len` lower-case hex digits.
fn hex_field(text: &str, len: usize) -> Option<u128> {
    if text.len() != len
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    u128::from_str_radix(text, 16).ok()
}

/// A random version-4 UUID, from the thread's generator: what a request without an id of its
/// own is named.
///
/// `Uuid::new_v4` asks the operating system for every id (a `getrandom` system call each); made
/// here from the thread's generator, as the trace and span ids are, it costs none.
pub fn random_uuid() -> uuid::Uuid {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid()
}

fn nonzero_u128() -> u128 {
    loop {
        let n: u128 = rand::random();
        if n != 0 {
            return n;
        }
    }
}

fn span_id() -> u64 {
    loop {
        let n: u64 = rand::random();
        if n != 0 {
            return n;
        }
    }
}

/// `n` as 32 lower-case hex digits, appended to `out` (a trace id in a log line).
pub(crate) fn push_hex(out: &mut String, n: u128) {
    out.push_str(std::str::from_utf8(&hex_digits(n)).unwrap_or_default());
}

/// `n` as 32 lower-case hex digits (ASCII), without `core::fmt`'s padding machinery.
fn hex_digits(n: u128) -> [u8; 32] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = [0u8; 32];
    for (pair, byte) in text.chunks_exact_mut(2).zip(n.to_be_bytes()) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
    text
}

/// A trace id written as 32 lower-case hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceIdHex(u128);

impl std::fmt::Display for TraceIdHex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(std::str::from_utf8(&hex_digits(self.0)).unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_read_and_written_back_the_same() {
        let t = TraceContext::parse(GOOD).unwrap();
        assert_eq!(t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(t.span_id, 0x00f0_67aa_0ba9_02b7);
        assert!(t.sampled);
        assert_eq!(t.header(), GOOD);
    }

    #[test]
    fn what_is_not_a_trace_context_is_refused() {
        let cases = [
            ("", "empty"),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
                "no flags",
            ),
            (
                "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                "upper case",
            ),
            (
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "zero trace id",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                "zero span id",
            ),
            (
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "version ff",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x",
                "00 with more",
            ),
            (
                "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
                "later version, no dash",
            ),
            (
                "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "wrong separator",
            ),
            (
                "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
                "not hex",
            ),
            (
                "00-+bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "a sign",
            ),
            (
                "0é-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "not ASCII",
            ),
        ];
        for (value, why) in cases {
            assert_eq!(TraceContext::parse(value), None, "{why}: {value}");
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_first_four_fields() {
        let t = TraceContext::parse(
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-anything-new",
        )
        .unwrap();
        assert!(!t.sampled);
        assert_eq!(t.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    }

    #[test]
    fn the_next_hop_keeps_the_trace_and_takes_a_span_of_its_own() {
        let parent = TraceContext::parse(GOOD).unwrap();
        let next = TraceContext::continue_from(Some(GOOD));
        assert_eq!(next.trace_id, parent.trace_id);
        assert_ne!(next.span_id, parent.span_id);
        let fresh = TraceContext::continue_from(Some("garbage"));
        assert_ne!(fresh.trace_id, parent.trace_id);
        assert_eq!(TraceContext::parse(&fresh.header()), Some(fresh));
    }

    #[test]
    fn a_trace_id_is_32_lower_case_hex_digits_pushed_or_displayed() {
        for n in [
            1u128,
            u128::MAX,
            0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736,
            0xf0 << 64,
        ] {
            let mut out = String::from("x");
            push_hex(&mut out, n);
            assert_eq!(out, format!("x{n:032x}"));
            assert_eq!(TraceIdHex(n).to_string(), format!("{n:032x}"));
        }
    }

    #[test]
    fn a_random_uuid_is_a_version_4_uuid_and_never_repeats() {
        let ids: std::collections::HashSet<uuid::Uuid> =
            (0..10_000).map(|_| random_uuid()).collect();
        assert_eq!(ids.len(), 10_000);
        for id in ids.iter().take(100) {
            assert_eq!(id.get_version(), Some(uuid::Version::Random));
            assert_eq!(id.get_variant(), uuid::Variant::RFC4122);
        }
    }

    #[test]
    fn tracestate_is_passed_on_only_when_bounded_and_printable() {
        assert_eq!(tracestate("congo=t61rcWkgMzE"), Some("congo=t61rcWkgMzE"));
        assert_eq!(tracestate(""), None);
        assert_eq!(tracestate("a=b\r\nx: y"), None);
        assert_eq!(tracestate(&"a".repeat(TRACESTATE_MAX + 1)), None);
    }
}
