//! The one canonical form of a request path. Every decision the gateway makes about a path
//! (which route, which auth server, whether it is a sign-in callback) and the path it sends
//! upstream come from this form, computed once, so the gateway and the upstream can never read
//! two different paths out of one request.
//!
//! The form (RFC 3986 §6.2.2 normalisation plus dot-segment removal, §5.2.4):
//! - percent-encodings of unreserved characters (`A-Z a-z 0-9 - . _ ~`) are decoded, every other
//!   percent-encoding is kept with upper-case hex, and characters a path may not carry raw are
//!   percent-encoded; reserved characters keep the form they came in (`;` and `%3B` differ to
//!   many servers, so they are not made equal here);
//! - `.` and `..` segments are resolved after that decoding (so `%2e%2E` is `..`); a `..` that
//!   would climb above `/` is refused rather than clamped;
//! - empty segments (`//`) are dropped; one trailing `/` is kept, it means something to many
//!   applications.
//!
//! Refused outright (the request gets 400 and goes nowhere): a path that is not origin-form, a
//! malformed percent-encoding, a `/` or `\` that was percent-encoded (it would become a
//! separator in some upstream and not here), a backslash (one in some servers, Windows and IIS
//! among them), a control character in any form, and a dot segment carrying parameters
//! (`..;x`: Tomcat and Jetty read it as `..`).

use std::fmt;

/// Why a request path has no canonical form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("the request target must be a path starting with '/'")]
    NotOriginForm,
    #[error("the path holds a malformed percent-encoding")]
    BadEncoding,
    #[error("the path holds an encoded '/' or '\\'")]
    EncodedSeparator,
    #[error("the path holds a backslash")]
    Backslash,
    #[error("the path holds a control character")]
    ControlCharacter,
    #[error("the path holds a '.' or '..' segment with parameters")]
    DotSegmentWithParameters,
    #[error("the path climbs above '/'")]
    AboveRoot,
}

/// A path in canonical form: segments none empty and none a dot segment, and maybe one
/// trailing `/`. Held as its text, made in one allocation: every request has one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CanonicalPath {
    /// The path itself: `/`, or `/a/b`, or `/a/b/`.
    text: String,
    trailing_slash: bool,
}

/// Characters a path segment may carry without encoding (RFC 3986 `pchar` less `%`).
fn is_pchar(b: u8) -> bool {
    is_unreserved(b) || b"!$&'()*+,;=:@".contains(&b)
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

fn push_encoded(out: &mut String, b: u8) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    out.push('%');
    out.push(char::from(HEX[usize::from(b >> 4)]));
    out.push(char::from(HEX[usize::from(b & 0x0f)]));
}

/// One raw segment in canonical encoding, written at the end of `out`.
fn canonical_segment(raw: &[u8], out: &mut String) -> Result<(), PathError> {
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b == b'%' {
            let (Some(hi), Some(lo)) = (
                raw.get(i + 1).copied().and_then(hex_value),
                raw.get(i + 2).copied().and_then(hex_value),
            ) else {
                return Err(PathError::BadEncoding);
            };
            let decoded = hi << 4 | lo;
            match decoded {
                b'/' | b'\\' => return Err(PathError::EncodedSeparator),
                0x00..=0x1f | 0x7f => return Err(PathError::ControlCharacter),
                d if is_unreserved(d) => out.push(char::from(d)),
                d => push_encoded(out, d),
            }
            i += 3;
            continue;
        }
        match b {
            b'\\' => return Err(PathError::Backslash),
            0x00..=0x1f | 0x7f => return Err(PathError::ControlCharacter),
            b if is_pchar(b) => out.push(char::from(b)),
            b => push_encoded(out, b),
        }
        i += 1;
    }
    Ok(())
}

/// What a segment does to the path built so far.
enum Step {
    Keep,
    /// Empty or `.`: nothing, but the path now ends with `/`.
    Stay,
    /// `..`: the segment before goes.
    Up,
}

/// The canonical form of `raw`, the path of a request target as received (no query).
pub fn normalize(raw: &str) -> Result<CanonicalPath, PathError> {
    let body = raw.strip_prefix('/').ok_or(PathError::NotOriginForm)?;
    // The segments kept so far, each as `/segment` (no trailing slash yet).
    let mut text = String::with_capacity(raw.len() + 1);
    let mut trailing_slash = false;
    for raw_segment in body.split('/') {
        let start = text.len();
        text.push('/');
        canonical_segment(raw_segment.as_bytes(), &mut text)?;
        let segment = &text[start + 1..];
        let bare = segment.split(';').next().unwrap_or("");
        let step = match segment {
            "" | "." => Step::Stay,
            ".." => Step::Up,
            _ if bare == "." || bare == ".." => return Err(PathError::DotSegmentWithParameters),
            _ => Step::Keep,
        };
        trailing_slash = !matches!(step, Step::Keep);
        match step {
            Step::Keep => {}
            Step::Stay => text.truncate(start),
            Step::Up => {
                text.truncate(start);
                let before = text.rfind('/').ok_or(PathError::AboveRoot)?;
                text.truncate(before);
            }
        }
    }
    let trailing_slash = trailing_slash && !text.is_empty();
    if text.is_empty() || trailing_slash {
        text.push('/');
    }
    Ok(CanonicalPath {
        text,
        trailing_slash,
    })
}

impl CanonicalPath {
    /// The root path `/`.
    pub fn root() -> CanonicalPath {
        CanonicalPath {
            text: "/".to_owned(),
            trailing_slash: false,
        }
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The segments without the trailing slash: `""` for the root, else `/a/b`.
    fn body(&self) -> &str {
        if self.is_root() {
            ""
        } else if self.trailing_slash {
            &self.text[..self.text.len() - 1]
        } else {
            &self.text
        }
    }

    pub fn segment_count(&self) -> usize {
        self.body().bytes().filter(|&b| b == b'/').count()
    }

    /// Whether `prefix` is a whole-segment prefix of this path (`/app` of `/app` and `/app/x`,
    /// not of `/apple`).
    pub fn starts_with(&self, prefix: &CanonicalPath) -> bool {
        let (own, theirs) = (self.body(), prefix.body());
        own.starts_with(theirs)
            && (own.len() == theirs.len() || own.as_bytes()[theirs.len()] == b'/')
    }

    /// Whether this is `/`.
    pub fn is_root(&self) -> bool {
        self.text == "/"
    }

    /// [`CanonicalPath::under`] written at the end of `out`, without making the path.
    pub fn push_under(&self, base: &CanonicalPath, out: &mut String) {
        if !base.is_root() {
            out.push_str(base.body());
        }
        out.push_str(&self.text);
    }

    /// The path below `base`'s path: `base` + this path, for an upstream with a base path
    /// (`/base` and `/app/x` give `/base/app/x`; an empty base gives this path).
    pub fn under(&self, base: &CanonicalPath) -> CanonicalPath {
        if base.is_root() {
            return self.clone();
        }
        let base = base.body();
        let mut text = String::with_capacity(base.len() + self.text.len());
        text.push_str(base);
        text.push_str(&self.text);
        CanonicalPath {
            // The root below a base is the base's directory: `/base/`.
            trailing_slash: self.trailing_slash || self.is_root(),
            text,
        }
    }
}

impl fmt::Display for CanonicalPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(raw: &str) -> Result<String, PathError> {
        normalize(raw).map(|p| p.to_string())
    }

    #[test]
    fn dot_segments_are_resolved_in_every_spelling() {
        for (raw, want) in [
            ("/token/../basic/x", "/basic/x"),
            ("/token/%2e%2e/basic/x", "/basic/x"),
            ("/token/.%2E/basic/x", "/basic/x"),
            ("/token/%2E./basic", "/basic"),
            ("/a/./b/.", "/a/b/"),
            ("/a/b/..", "/a/"),
            ("/a/%2e/b", "/a/b"),
            ("/a/...", "/a/..."),
            ("/a/..x", "/a/..x"),
        ] {
            assert_eq!(norm(raw).as_deref(), Ok(want), "{raw}");
        }
    }

    #[test]
    fn climbing_above_the_root_is_refused() {
        for raw in ["/..", "/%2e%2e", "/a/../..", "/a/%2e%2e/%2e%2e/elsewhere"] {
            assert_eq!(norm(raw), Err(PathError::AboveRoot), "{raw}");
        }
    }

    #[test]
    fn separators_that_are_not_slashes_are_refused() {
        for (raw, err) in [
            ("/token/..\\basic", PathError::Backslash),
            ("/a/%5cb", PathError::EncodedSeparator),
            ("/a/%2Fb", PathError::EncodedSeparator),
            ("/a/%2f..%2f..%2fx", PathError::EncodedSeparator),
            ("/a%00b", PathError::ControlCharacter),
            ("/a%0d%0aSet-Cookie:x", PathError::ControlCharacter),
            ("/a/%zz", PathError::BadEncoding),
            ("/a/%4", PathError::BadEncoding),
            ("/token/..;/basic", PathError::DotSegmentWithParameters),
            ("/token/.;x/basic", PathError::DotSegmentWithParameters),
            (
                "/token/%2e%2e;jsessionid=1/basic",
                PathError::DotSegmentWithParameters,
            ),
            ("*", PathError::NotOriginForm),
            ("", PathError::NotOriginForm),
            ("http://evil/x", PathError::NotOriginForm),
        ] {
            assert_eq!(norm(raw), Err(err), "{raw}");
        }
    }

    #[test]
    fn encodings_are_made_canonical_and_reserved_characters_keep_their_form() {
        for (raw, want) in [
            ("/%41%62c", "/Abc"),
            ("/a%7eb", "/a~b"),
            ("/a%3bb;c", "/a%3Bb;c"),
            ("/a%3Ab:c", "/a%3Ab:c"),
            ("/caf%c3%a9", "/caf%C3%A9"),
            ("/a b", "/a%20b"),
            ("/v1/things/abc:cancel", "/v1/things/abc:cancel"),
            ("/a%25b", "/a%25b"),
            ("/a%2525", "/a%2525"),
        ] {
            assert_eq!(norm(raw).as_deref(), Ok(want), "{raw}");
        }
    }

    #[test]
    fn empty_segments_merge_and_one_trailing_slash_stays() {
        for (raw, want) in [
            ("/", "/"),
            ("//", "/"),
            ("/a//b", "/a/b"),
            ("//a///b//", "/a/b/"),
            ("/a/", "/a/"),
            ("/a//..//b", "/b"),
        ] {
            assert_eq!(norm(raw).as_deref(), Ok(want), "{raw}");
        }
    }

    #[test]
    fn the_canonical_form_is_a_fixed_point() {
        for raw in ["/a/%2e%2e/b/./c//d/", "/caf%c3%a9/%41", "/x;y=1/z"] {
            let once = norm(raw).unwrap_or_default();
            assert_eq!(norm(&once).as_deref(), Ok(once.as_str()), "{raw}");
        }
    }

    #[test]
    fn prefixes_match_whole_segments_and_paths_go_under_a_base() {
        let p = |s: &str| normalize(s).unwrap_or_else(|_| CanonicalPath::root());
        assert!(p("/app/x").starts_with(&p("/app")));
        assert!(p("/app").starts_with(&p("/app")));
        assert!(!p("/apple").starts_with(&p("/app")));
        assert!(p("/anything").starts_with(&CanonicalPath::root()));
        assert_eq!(p("/app/x/").under(&p("/base")).to_string(), "/base/app/x/");
        assert_eq!(p("/").under(&p("/base")).to_string(), "/base/");
        assert_eq!(p("/").under(&CanonicalPath::root()).to_string(), "/");
        assert_eq!(p("/a").under(&CanonicalPath::root()).to_string(), "/a");
        for (path, base) in [
            ("/app/x/", "/base"),
            ("/", "/base/"),
            ("/", "/"),
            ("/a", "/"),
        ] {
            let mut pushed = String::from(">");
            p(path).push_under(&p(base), &mut pushed);
            assert_eq!(
                pushed,
                format!(">{}", p(path).under(&p(base))),
                "{path} {base}"
            );
        }
    }
}
