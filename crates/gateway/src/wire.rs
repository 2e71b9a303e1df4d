//! The worker's own HTTP/1.1 client for the requests most traffic is made of: no body, no
//! upgrade, to a plain `http://` upstream. The request head is written by hand from what the
//! proxy built (never from the client's bytes), the answer's head is parsed with `httparse`
//! and its body is read straight from the connection by the body that carries it to the
//! client, in the worker's own task: no channel, no second task, no copy of a body that is
//! already in the read buffer. It took about a microsecond of user CPU off each request of the
//! gateway's Token route, a sixth of its user time (in a bare forwarder without checks, hyper's
//! client cost 2.5 µs more than this one: docs/performance.md).
//!
//! What it refuses, the answer's framing above all, it refuses as an upstream failure (the
//! client gets a 502): `Content-Length` values that disagree or are not numbers, `chunked`
//! anywhere but last (empty elements count) or a `Transfer-Encoding` that is not text, chunk
//! framing that is not exactly RFC 9112's, a head over [`MAX_ANSWER_HEAD`] or with more than
//! [`MAX_ANSWER_HEADERS`] fields, an unasked `101`.
//! An answer with both `Transfer-Encoding` and `Content-Length` is read by the first (the
//! proxy never passes the length on) and its connection is closed after it. A connection goes
//! back to the worker's pool only after an answer whose end it read exactly, with nothing
//! after it, from an upstream that did not ask to close, and that had a body to read: after an
//! answer without one by its framing (to HEAD, a 204, a 304) a body the upstream sends anyway,
//! late, would be read as the next request's answer.

use std::cell::RefCell;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::uri::Authority;
use http::{Method, Response, StatusCode, Version};
use http_body::{Frame, SizeHint};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::upstream::{self, MAX_IDLE_PER_UPSTREAM};

/// The differential check against hyper's client: it runs this module's own code on a scripted
/// upstream in place of the socket.
#[cfg(any(test, feature = "fuzzing"))]
pub mod differential;
#[cfg(any(test, feature = "fuzzing"))]
use differential::Stream;
#[cfg(not(any(test, feature = "fuzzing")))]
type Stream = tokio::net::TcpStream;

/// The most an answer's head may take, status line included.
pub const MAX_ANSWER_HEAD: usize = 64 * 1024;
/// The most header fields an answer's head (or its trailers) may have: hyper's own bound.
pub const MAX_ANSWER_HEADERS: usize = 100;
/// The longest chunk-size line (with its extensions) read before the framing is refused.
const MAX_CHUNK_LINE: usize = 4 * 1024;
/// Bytes asked of the socket per read.
const READ_SIZE: usize = 8 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum WireError {
    #[error("the upstream closed the connection before its answer was complete")]
    Closed,
    #[error("the upstream's answer is malformed: {0}")]
    Malformed(&'static str),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl WireError {
    /// As the proxy reads upstream errors (an I/O error's kind, a timed-out connect: 504).
    fn into_io(self) -> std::io::Error {
        match self {
            WireError::Io(e) => e,
            other => std::io::Error::other(other),
        }
    }
}

/// One connection to an upstream, with what was read of it and not consumed yet.
struct Conn {
    tcp: Stream,
    buf: BytesMut,
}

thread_local! {
    // Boxed once per connection: the box travels with the answer's body, which stays small to
    // move (a `Vec<Conn>` would move each connection in and out of the pool by value).
    #[allow(clippy::vec_box)]
    static IDLE: RefCell<Vec<(Authority, Vec<Box<Conn>>)>> = const { RefCell::new(Vec::new()) };
}

/// An idle connection to `authority` that has not been closed by the upstream meanwhile (as
/// far as the worker's reactor has seen).
fn checkout(authority: &Authority) -> Option<Box<Conn>> {
    IDLE.with(|idle| {
        let mut idle = idle.borrow_mut();
        let (_, conns) = idle.iter_mut().find(|(a, _)| a == authority)?;
        while let Some(conn) = conns.pop() {
            // An idle connection has nothing to say: a read that finds bytes or the end means
            // the upstream closed it (or spoke out of turn). No system call while the reactor
            // has seen nothing on it.
            match conn.tcp.try_read(&mut [0u8; 1]) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Some(conn),
                _ => continue,
            }
        }
        None
    })
}

fn checkin(authority: &Authority, conn: Box<Conn>) {
    IDLE.with(|idle| {
        let mut idle = idle.borrow_mut();
        match idle.iter_mut().find(|(a, _)| a == authority) {
            Some((_, conns)) if conns.len() < MAX_IDLE_PER_UPSTREAM => conns.push(conn),
            Some(_) => {}
            None => idle.push((authority.clone(), vec![conn])),
        }
    })
}

// Outside the differential check the stream is the socket itself.
#[cfg_attr(not(any(test, feature = "fuzzing")), allow(clippy::useless_conversion))]
async fn open(authority: &Authority, connect: Duration) -> std::io::Result<Box<Conn>> {
    Ok(Box::new(Conn {
        tcp: upstream::connect_tcp(authority, false, connect)
            .await?
            .into(),
        buf: BytesMut::with_capacity(READ_SIZE),
    }))
}

/// What goes upstream: the proxy's request, minus a body it does not have.
pub struct Outgoing<'a> {
    pub method: &'a Method,
    /// Origin form: the path and the query.
    pub target: &'a str,
    pub host: &'a HeaderValue,
    pub headers: &'a HeaderMap,
}

/// The request head as it is written: the proxy's own fields, one per line, nothing else.
fn encode(request: &Outgoing<'_>) -> Vec<u8> {
    let fields: usize = request
        .headers
        .iter()
        .map(|(n, v)| n.as_str().len() + v.len() + 4)
        .sum();
    let mut out = Vec::with_capacity(request.target.len() + fields + 64);
    out.extend_from_slice(request.method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(request.target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(request.host.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in request.headers {
        if name == header::HOST {
            continue;
        }
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    // A method whose requests carry a body says that this one's is empty, as hyper does.
    let expects_body = matches!(*request.method, Method::POST | Method::PUT | Method::PATCH);
    if expects_body && !request.headers.contains_key(header::CONTENT_LENGTH) {
        out.extend_from_slice(b"content-length: 0\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// Sends `request` to `authority` on one of the worker's connections (a new one when none is
/// idle) and reads its answer's head; the body follows in the answer.
///
/// A connection taken from the pool may have been closed by the upstream just before the
/// request went out (its keep-alive timeout): when nothing at all came back on it, an
/// idempotent request is sent again on another connection, as nginx and hyper's client do.
pub async fn send(
    authority: &Authority,
    connect: Duration,
    request: Outgoing<'_>,
) -> Result<Response<WireBody>, std::io::Error> {
    let head = encode(&request);
    let bodiless = *request.method == Method::HEAD;
    loop {
        let (mut conn, reused) = match checkout(authority) {
            Some(conn) => (conn, true),
            // Boxed: connecting (the resolver's future above all) is rare and large.
            None => (Box::pin(open(authority, connect)).await?, false),
        };
        match exchange(&mut conn, &head).await {
            Ok(parts) => {
                return answer(parts, conn, authority, bodiless).map_err(WireError::into_io);
            }
            Err(Failed { error, heard }) => {
                if reused && !heard && request.method.is_idempotent() {
                    continue;
                }
                return Err(error.into_io());
            }
        }
    }
}

struct Failed {
    error: WireError,
    /// Whether any byte of an answer came back.
    heard: bool,
}

/// An answer's head, parsed.
struct Head {
    status: StatusCode,
    version: Version,
    headers: HeaderMap,
}

/// Writes the request head and reads the final answer's head (informational ones, `100
/// Continue` or `103 Early Hints`, are read and dropped, as hyper's client does).
async fn exchange(conn: &mut Conn, head: &[u8]) -> Result<Head, Failed> {
    let unheard = |error: WireError| Failed {
        error,
        heard: false,
    };
    conn.tcp
        .write_all(head)
        .await
        .map_err(|e| unheard(e.into()))?;
    // How much of the buffer is known to hold no complete head.
    let mut looked = 0;
    loop {
        if ends_a_section(&conn.buf, looked) {
            if let Some(head) =
                parse_head(&mut conn.buf).map_err(|error| Failed { error, heard: true })?
            {
                return Ok(head);
            }
            looked = conn.buf.len();
        } else {
            looked = conn.buf.len();
        }
        if conn.buf.len() >= MAX_ANSWER_HEAD {
            return Err(Failed {
                error: WireError::Malformed("the head is too large"),
                heard: true,
            });
        }
        conn.buf.reserve(READ_SIZE);
        let heard = !conn.buf.is_empty();
        match conn.tcp.read_buf(&mut conn.buf).await {
            Ok(0) => {
                return Err(Failed {
                    error: WireError::Closed,
                    heard,
                });
            }
            Ok(_) => {}
            Err(error) => {
                return Err(Failed {
                    error: error.into(),
                    heard,
                });
            }
        }
    }
}

/// Whether `buf` holds the empty line that ends a head or a trailer section, looking from `from`
/// on (the bytes before it were looked at and held none). A head is parsed only once it can be
/// complete: parsed again at every read, an upstream sending a byte at a time would make the
/// gateway's work grow with the square of the head's length.
fn ends_a_section(buf: &[u8], from: usize) -> bool {
    // An empty line: one starting the buffer or right after a line's end.
    let start = from.saturating_sub(2).min(buf.len());
    (start..buf.len()).any(|j| {
        let rest = &buf[j..];
        (j == 0 || buf[j - 1] == b'\n') && (rest.starts_with(b"\n") || rest.starts_with(b"\r\n"))
    })
}

/// The final answer's head at the front of `buf` (removed from it), `None` while incomplete.
fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, WireError> {
    loop {
        let mut fields = [httparse::EMPTY_HEADER; MAX_ANSWER_HEADERS];
        let mut parsed = httparse::Response::new(&mut fields);
        let len = match parsed.parse(buf) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(httparse::Error::TooManyHeaders) => {
                return Err(WireError::Malformed("too many header fields"));
            }
            Err(_) => return Err(WireError::Malformed("not an HTTP/1.x answer head")),
        };
        let code = parsed.code.unwrap_or(0);
        if (100..200).contains(&code) && code != 101 {
            buf.advance(len);
            continue;
        }
        let status =
            StatusCode::from_u16(code).map_err(|_| WireError::Malformed("the status code"))?;
        let version = match parsed.version {
            Some(1) => Version::HTTP_11,
            _ => Version::HTTP_10,
        };
        let headers = header_map(parsed.headers)?;
        buf.advance(len);
        return Ok(Some(Head {
            status,
            version,
            headers,
        }));
    }
}

/// Parsed fields as a header map; a name or value `http` does not take is malformed.
fn header_map(fields: &[httparse::Header<'_>]) -> Result<HeaderMap, WireError> {
    let mut map = HeaderMap::with_capacity(fields.len());
    for field in fields {
        let name = HeaderName::from_bytes(field.name.as_bytes())
            .map_err(|_| WireError::Malformed("a header name"))?;
        let value = HeaderValue::from_bytes(field.value)
            .map_err(|_| WireError::Malformed("a header value"))?;
        map.append(name, value);
    }
    Ok(map)
}

/// How an answer's body ends (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    /// This many bytes are left.
    Length(u64),
    Chunked(Chunk),
    /// Everything until the upstream closes the connection.
    UntilClose,
}

/// Where a chunked body's reading stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    /// A chunk-size line comes next; this many of its bytes were looked at and hold no CRLF.
    Size(usize),
    /// This many bytes of the current chunk are left, then its CRLF.
    Data(u64),
    /// The CRLF after a chunk's data.
    DataEnd,
    /// The trailer section, up to its empty line; this many bytes were looked at and hold none.
    Trailers(usize),
}

fn framing(head: &Head, bodiless_request: bool) -> Result<Framing, WireError> {
    if head.status == StatusCode::SWITCHING_PROTOCOLS {
        return Err(WireError::Malformed("a protocol switch nobody asked for"));
    }
    if bodiless_request
        || head.status == StatusCode::NO_CONTENT
        || head.status == StatusCode::NOT_MODIFIED
    {
        return Ok(Framing::Length(0));
    }
    let lengths = head.headers.get_all(header::CONTENT_LENGTH);
    if head.headers.contains_key(header::TRANSFER_ENCODING) {
        // With a Content-Length beside it, Transfer-Encoding decides (RFC 9112 §6.3), the
        // length is not passed on, and the connection is not used again (`answer`).
        if head.version != Version::HTTP_11 {
            return Err(WireError::Malformed(
                "Transfer-Encoding in an HTTP/1.0 answer",
            ));
        }
        let fields = head.headers.get_all(header::TRANSFER_ENCODING);
        // hyper takes a field that is not text for one coding, not chunked, whatever it says.
        if fields.iter().any(|v| v.to_str().is_err()) {
            return Err(WireError::Malformed("Transfer-Encoding is not text"));
        }
        // Empty elements count: after `chunked,` hyper reads until the upstream closes, where
        // a reader skipping the empty element would read chunked.
        let codings: Vec<&[u8]> = fields
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .map(<[u8]>::trim_ascii)
            .collect();
        let chunked = |c: &&[u8]| c.eq_ignore_ascii_case(b"chunked");
        return match codings.iter().position(chunked) {
            Some(at) if at + 1 == codings.len() => Ok(Framing::Chunked(Chunk::Size(0))),
            Some(_) => Err(WireError::Malformed("chunked is not the last coding")),
            None => Ok(Framing::UntilClose),
        };
    }
    let mut declared = None;
    for value in lengths
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
    {
        let n = number(value.trim_ascii(), 10)
            .ok_or(WireError::Malformed("Content-Length is not a length"))?;
        if declared.is_some_and(|d| d != n) {
            return Err(WireError::Malformed("Content-Length values disagree"));
        }
        declared = Some(n);
    }
    Ok(declared.map_or(Framing::UntilClose, Framing::Length))
}

fn answer(
    head: Head,
    conn: Box<Conn>,
    authority: &Authority,
    bodiless_request: bool,
) -> Result<Response<WireBody>, WireError> {
    let framing = framing(&head, bodiless_request)?;
    // Framed two ways: the upstream may mean the other one, and whatever it sends after the
    // chunked end must never be read as the next request's answer.
    let framed_twice = head.headers.contains_key(header::TRANSFER_ENCODING)
        && head.headers.contains_key(header::CONTENT_LENGTH);
    let closes = framed_twice
        || head.version != Version::HTTP_11
        || head
            .headers
            .get_all(header::CONNECTION)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"));
    // No body by its framing, whatever the upstream meant: bytes it sends later (a HEAD
    // answered like a GET) would reach the next request on this connection as its answer.
    let bodiless = bodiless_request
        || head.status == StatusCode::NO_CONTENT
        || head.status == StatusCode::NOT_MODIFIED;
    let mut body = WireBody {
        conn: Some(conn),
        framing,
        reusable: !closes && !bodiless && framing != Framing::UntilClose,
        authority: authority.clone(),
    };
    if framing == Framing::Length(0) {
        body.finish();
    }
    let mut response = Response::new(body);
    *response.status_mut() = head.status;
    *response.version_mut() = head.version;
    *response.headers_mut() = head.headers;
    Ok(response)
}

/// An answer's body, read from its connection as the client takes it. The connection goes
/// back to the worker's pool when the body's end is read (dropped unread, it is closed).
pub struct WireBody {
    conn: Option<Box<Conn>>,
    framing: Framing,
    reusable: bool,
    authority: Authority,
}

impl WireBody {
    /// The body is read to its end: the connection goes back when it may take another request.
    fn finish(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.reusable
            && conn.buf.is_empty()
        {
            checkin(&self.authority, conn);
        }
    }

    pub fn is_end_stream(&self) -> bool {
        self.conn.is_none()
    }

    pub fn size_hint(&self) -> SizeHint {
        match (self.conn.is_some(), self.framing) {
            (false, _) => SizeHint::with_exact(0),
            (true, Framing::Length(left)) => SizeHint::with_exact(left),
            _ => SizeHint::default(),
        }
    }

    pub fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, WireError>>> {
        loop {
            let Some(conn) = self.conn.as_mut() else {
                return Poll::Ready(None);
            };
            match self.framing {
                Framing::Length(left) => {
                    if !conn.buf.is_empty() {
                        let n = left.min(conn.buf.len() as u64);
                        let data = conn.buf.split_to(n as usize).freeze();
                        self.framing = Framing::Length(left - n);
                        if left == n {
                            self.finish();
                        }
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    if ready!(poll_fill(conn, cx))? == 0 {
                        self.conn = None;
                        return Poll::Ready(Some(Err(WireError::Closed)));
                    }
                }
                Framing::UntilClose => {
                    if !conn.buf.is_empty() {
                        let data = conn.buf.split().freeze();
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    if ready!(poll_fill(conn, cx))? == 0 {
                        self.conn = None;
                        return Poll::Ready(None);
                    }
                }
                Framing::Chunked(state) => match chunk_step(&mut conn.buf, state)? {
                    Step::Next(next, frame) => {
                        self.framing = Framing::Chunked(next);
                        if let Some(frame) = frame {
                            return Poll::Ready(Some(Ok(frame)));
                        }
                    }
                    Step::Done(trailers) => {
                        self.finish();
                        return Poll::Ready(trailers.map(|t| Ok(Frame::trailers(t))));
                    }
                    Step::More(next) => {
                        self.framing = Framing::Chunked(next);
                        if ready!(poll_fill(conn, cx))? == 0 {
                            self.conn = None;
                            return Poll::Ready(Some(Err(WireError::Closed)));
                        }
                    }
                },
            }
        }
    }
}

/// Reads what the socket has into the connection's buffer: the number of bytes, 0 at its end.
fn poll_fill(conn: &mut Conn, cx: &mut Context<'_>) -> Poll<Result<usize, WireError>> {
    conn.buf.reserve(READ_SIZE);
    loop {
        ready!(conn.tcp.poll_read_ready(cx))?;
        match conn.tcp.try_read_buf(&mut conn.buf) {
            Ok(n) => return Poll::Ready(Ok(n)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Poll::Ready(Err(e.into())),
        }
    }
}

enum Step {
    /// The next state, and a frame when the step made one.
    Next(Chunk, Option<Frame<Bytes>>),
    /// The body ended, with its trailers if it had any.
    Done(Option<HeaderMap>),
    /// More bytes are needed, then this state goes on.
    More(Chunk),
}

/// One step of reading a chunked body out of `buf`.
fn chunk_step(buf: &mut BytesMut, state: Chunk) -> Result<Step, WireError> {
    match state {
        Chunk::Size(looked) => {
            let from = looked.saturating_sub(1).min(buf.len());
            let Some(end) = buf[from..].windows(2).position(|w| w == b"\r\n") else {
                return if buf.len() > MAX_CHUNK_LINE {
                    Err(WireError::Malformed("a chunk-size line is too long"))
                } else {
                    Ok(Step::More(Chunk::Size(buf.len())))
                };
            };
            let end = from + end;
            let size = chunk_size(&buf[..end])?;
            buf.advance(end + 2);
            Ok(Step::Next(
                if size == 0 {
                    Chunk::Trailers(0)
                } else {
                    Chunk::Data(size)
                },
                None,
            ))
        }
        Chunk::Data(left) => {
            if buf.is_empty() {
                return Ok(Step::More(state));
            }
            let n = left.min(buf.len() as u64);
            let data = buf.split_to(n as usize).freeze();
            let next = if left == n {
                Chunk::DataEnd
            } else {
                Chunk::Data(left - n)
            };
            Ok(Step::Next(next, Some(Frame::data(data))))
        }
        Chunk::DataEnd => match buf.get(..2) {
            None if buf.first().is_none_or(|&b| b == b'\r') => Ok(Step::More(state)),
            Some(b"\r\n") => {
                buf.advance(2);
                Ok(Step::Next(Chunk::Size(0), None))
            }
            _ => Err(WireError::Malformed("a chunk does not end with CRLF")),
        },
        Chunk::Trailers(looked) => {
            // Its lines end with CRLF, as the chunk-size lines do: a bare LF is a line's end to
            // httparse and a byte of the line to hyper, which would end the body elsewhere.
            let from = looked.saturating_sub(3).min(buf.len());
            let end = if buf.starts_with(b"\r\n") {
                Some(2)
            } else {
                buf[from..]
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .map(|at| from + at + 4)
            };
            let section = &buf[..end.unwrap_or(buf.len())];
            let bare_lf = (looked.min(section.len())..section.len())
                .any(|i| section[i] == b'\n' && (i == 0 || section[i - 1] != b'\r'));
            if bare_lf {
                return Err(WireError::Malformed("a trailer line not ended by CRLF"));
            }
            let Some(end) = end else {
                return if buf.len() > MAX_ANSWER_HEAD {
                    Err(WireError::Malformed("the trailers are too large"))
                } else {
                    Ok(Step::More(Chunk::Trailers(buf.len())))
                };
            };
            let mut fields = [httparse::EMPTY_HEADER; MAX_ANSWER_HEADERS];
            match httparse::parse_headers(&buf[..end], &mut fields) {
                Ok(httparse::Status::Complete((len, fields))) => {
                    let trailers = if fields.is_empty() {
                        None
                    } else {
                        Some(header_map(fields)?)
                    };
                    buf.advance(len);
                    Ok(Step::Done(trailers))
                }
                Ok(httparse::Status::Partial) => Err(WireError::Malformed("the trailers")),
                Err(_) => Err(WireError::Malformed("the trailers")),
            }
        }
    }
}

/// The number `digits` spell in `radix` (10 or 16), leading zeros and all, as hyper reads
/// lengths and chunk sizes; `None` when one is not a digit or the number is over u64's bound.
fn number(digits: &[u8], radix: u32) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        let digit = char::from(b).to_digit(radix)?;
        n.checked_mul(u64::from(radix))?
            .checked_add(u64::from(digit))
    })
}

/// A chunk-size line's size: hex digits, then nothing or extensions after `;` (skipped,
/// without control characters), with spaces or tabs before either.
fn chunk_size(line: &[u8]) -> Result<u64, WireError> {
    let malformed = WireError::Malformed("a chunk size");
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let size = number(&line[..digits], 16).ok_or(WireError::Malformed("a chunk size"))?;
    // Spaces and tabs only, the blanks HTTP/1.1 allows there: hyper refuses any other byte, a
    // CR or an LF above all.
    let blank = line[digits..]
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    let rest = &line[digits + blank..];
    match rest.first() {
        None => {}
        Some(b';') if !rest.iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f)) => {
            return Err(WireError::Malformed("a chunk extension"));
        }
        Some(b';') => {}
        Some(_) => return Err(malformed),
    }
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(status: u16, version: Version, fields: &[(&str, &str)]) -> Head {
        let mut headers = HeaderMap::new();
        for (n, v) in fields {
            if let (Ok(n), Ok(v)) = (
                HeaderName::from_bytes(n.as_bytes()),
                HeaderValue::from_bytes(v.as_bytes()),
            ) {
                headers.append(n, v);
            }
        }
        Head {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::IM_A_TEAPOT),
            version,
            headers,
        }
    }

    #[test]
    fn the_framing_of_an_answer_is_read_one_way_or_refused() {
        use Framing::*;
        let v11 = Version::HTTP_11;
        for (status, version, fields, bodiless, expected) in [
            (
                200,
                v11,
                vec![("content-length", "3")],
                false,
                Some(Length(3)),
            ),
            (
                200,
                v11,
                vec![("content-length", "3"), ("content-length", "3")],
                false,
                Some(Length(3)),
            ),
            (
                200,
                v11,
                vec![("content-length", "3, 3")],
                false,
                Some(Length(3)),
            ),
            (
                200,
                v11,
                vec![("content-length", "3"), ("content-length", "4")],
                false,
                None,
            ),
            (200, v11, vec![("content-length", "+3")], false, None),
            (200, v11, vec![("content-length", "0x3")], false, None),
            (200, v11, vec![("content-length", "")], false, None),
            (
                200,
                v11,
                vec![("content-length", "99999999999999999999")],
                false,
                None,
            ),
            // Leading zeros are no digits too many (hyper reads them).
            (
                200,
                v11,
                vec![("content-length", "000000000000000000003")],
                false,
                Some(Length(3)),
            ),
            (
                200,
                v11,
                vec![("transfer-encoding", "chunked")],
                false,
                Some(Chunked(Chunk::Size(0))),
            ),
            (
                200,
                v11,
                vec![("transfer-encoding", "gzip, CHUNKED")],
                false,
                Some(Chunked(Chunk::Size(0))),
            ),
            (
                200,
                v11,
                vec![("transfer-encoding", "chunked, gzip")],
                false,
                None,
            ),
            (
                200,
                v11,
                vec![("transfer-encoding", "gzip")],
                false,
                Some(UntilClose),
            ),
            // An empty element after chunked leaves it not last (hyper reads until close).
            (
                200,
                v11,
                vec![("transfer-encoding", "chunked,")],
                false,
                None,
            ),
            (
                200,
                v11,
                vec![("transfer-encoding", "chunked"), ("transfer-encoding", "")],
                false,
                None,
            ),
            (
                200,
                v11,
                vec![("transfer-encoding", ", chunked")],
                false,
                Some(Chunked(Chunk::Size(0))),
            ),
            // Not text: hyper takes it for a coding that is not chunked.
            (
                200,
                v11,
                vec![("transfer-encoding", "gzip\u{ff}, chunked")],
                false,
                None,
            ),
            (
                200,
                v11,
                vec![("transfer-encoding", "chunked"), ("content-length", "3")],
                false,
                Some(Chunked(Chunk::Size(0))),
            ),
            (
                200,
                Version::HTTP_10,
                vec![("transfer-encoding", "chunked")],
                false,
                None,
            ),
            (200, v11, vec![], false, Some(UntilClose)),
            (
                200,
                v11,
                vec![("content-length", "3")],
                true,
                Some(Length(0)),
            ),
            (
                204,
                v11,
                vec![("content-length", "3")],
                false,
                Some(Length(0)),
            ),
            (
                304,
                v11,
                vec![("transfer-encoding", "chunked")],
                false,
                Some(Length(0)),
            ),
            (101, v11, vec![("upgrade", "websocket")], false, None),
        ] {
            let got = framing(&head(status, version, &fields), bodiless).ok();
            assert_eq!(got, expected, "{status} {fields:?} bodiless {bodiless}");
        }
    }

    #[test]
    fn a_section_ends_at_its_empty_line_wherever_the_looking_resumes() {
        // The buffer, and where its empty line starts (`None`: it has none yet).
        for (buf, empty_line) in [
            (&b"HTTP/1.1 200 OK\r\nA: b\r\n\r\n"[..], Some(25)),
            (b"HTTP/1.1 200 OK\nA: b\n\n", Some(22)),
            (b"HTTP/1.1 200 OK\r\nA: b\r\n", None),
            (b"HTTP/1.1 200 OK\r\nA: b\r\n\r", None),
            (b"\r\n", Some(0)),
            (b"\n", Some(0)),
            (b"\r", None),
            (b"x-t: 1\r\n\r\n", Some(8)),
        ] {
            // Looking resumed anywhere up to the empty line (what came before held none).
            let last = empty_line.unwrap_or(buf.len());
            for from in 0..=last {
                assert_eq!(
                    ends_a_section(buf, from),
                    empty_line.is_some(),
                    "{:?} from {from}",
                    String::from_utf8_lossy(buf)
                );
            }
        }
    }

    #[test]
    fn chunk_sizes_are_hex_with_optional_extensions() {
        for (line, expected) in [
            (&b"0"[..], Some(0)),
            (b"1a", Some(26)),
            (b"FF;name=value", Some(255)),
            (b"10 ; ext", Some(16)),
            (b"ffffffffffffffff", Some(u64::MAX)),
            (b"10000000000000000", None),
            // Leading zeros are no digits too many (hyper reads them).
            (b"00000000000000001a", Some(26)),
            (b"", None),
            (b" 1", None),
            (b"-1", None),
            (b"1 2", None),
            (b"1;\x00", None),
            (b"0x10", None),
            (b"5 \t;x", Some(5)),
            (b"5\t", Some(5)),
            // Only spaces and tabs after the size: a CR, an LF or a form feed is no blank to
            // hyper, which refuses the line.
            (b"5\r", None),
            (b"5\n;x", None),
            (b"5\x0c", None),
        ] {
            assert_eq!(
                chunk_size(line).ok(),
                expected,
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
    }

    /// Reads a whole chunked body out of `wire`, fed to the reader in pieces of `piece` bytes.
    fn decode(wire: &[u8], piece: usize) -> Result<(Vec<u8>, Option<HeaderMap>, usize), WireError> {
        let mut buf = BytesMut::new();
        let mut fed = 0;
        let mut body = Vec::new();
        let mut state = Chunk::Size(0);
        loop {
            match chunk_step(&mut buf, state)? {
                Step::Next(next, frame) => {
                    state = next;
                    if let Some(data) = frame.as_ref().and_then(Frame::data_ref) {
                        body.extend_from_slice(data);
                    }
                }
                Step::Done(trailers) => return Ok((body, trailers, buf.len())),
                Step::More(next) => {
                    state = next;
                    if fed == wire.len() {
                        return Err(WireError::Closed);
                    }
                    let end = (fed + piece).min(wire.len());
                    buf.extend_from_slice(&wire[fed..end]);
                    fed = end;
                }
            }
        }
    }

    #[test]
    fn a_chunked_body_is_read_whole_however_it_arrives() {
        let wire = b"5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\ngrpc-status: 0\r\n\r\nNEXT";
        for piece in [1, 2, 3, 7, 64] {
            let Ok((body, Some(trailers), left)) = decode(wire, piece) else {
                panic!("piece {piece}: not read whole, with its trailers");
            };
            assert_eq!(body, b"hello, world", "piece {piece}");
            assert_eq!(trailers["grpc-status"], "0");
            // What follows the body stays for whoever reads next (and keeps the connection
            // out of the pool).
            assert!(left <= 4);
        }
        assert!(matches!(decode(b"0\r\n\r\n", 1), Ok((body, None, 0)) if body.is_empty()));
    }

    #[test]
    fn chunk_framing_that_is_not_exact_is_refused() {
        for wire in [
            &b"5\r\nhelloX\r\n0\r\n\r\n"[..],
            b"5\nhello\r\n0\r\n\r\n",
            b"g\r\n",
            b"5\r\nhello\r\n0\r\nbad trailer\r\n\r\n",
            // Trailer lines end with CRLF: hyper takes a bare LF for a byte of the line and
            // reads on, where taking it for the end would end the body sooner.
            b"0\r\n\nHTTP/1.1 200 OK\r\n\r\n",
            b"0\r\nx-t: 1\nx-u: 2\r\n\r\n",
        ] {
            assert!(
                matches!(decode(wire, 3), Err(WireError::Malformed(_))),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
        // A chunk-size line that never ends is refused at its bound, not buffered forever.
        let endless = vec![b'1'; MAX_CHUNK_LINE + 10];
        assert!(matches!(
            decode(&endless, 1024),
            Err(WireError::Malformed(_))
        ));
    }

    #[test]
    fn the_request_head_is_the_proxys_fields_and_nothing_else() {
        let mut headers = HeaderMap::new();
        headers.insert("x-request-id", HeaderValue::from_static("abc"));
        headers.insert(header::HOST, HeaderValue::from_static("spoofed"));
        let host = HeaderValue::from_static("upstream:8080");
        let get = encode(&Outgoing {
            method: &Method::GET,
            target: "/a?b=c",
            host: &host,
            headers: &headers,
        });
        assert_eq!(
            String::from_utf8_lossy(&get),
            "GET /a?b=c HTTP/1.1\r\nhost: upstream:8080\r\nx-request-id: abc\r\n\r\n"
        );
        let post = encode(&Outgoing {
            method: &Method::POST,
            target: "/",
            host: &host,
            headers: &HeaderMap::new(),
        });
        assert!(String::from_utf8_lossy(&post).ends_with("content-length: 0\r\n\r\n"));
    }

    #[test]
    fn informational_answers_are_skipped_and_the_head_taken_off_the_buffer() {
        let mut buf = BytesMut::from(
            &b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"[..],
        );
        let Ok(Some(head)) = parse_head(&mut buf) else {
            panic!("no head parsed");
        };
        assert_eq!(head.status, StatusCode::OK);
        assert_eq!(&buf[..], b"ok");
        let mut partial = BytesMut::from(&b"HTTP/1.1 200 OK\r\ncontent-len"[..]);
        assert!(matches!(parse_head(&mut partial), Ok(None)));
        let mut bad = BytesMut::from(&b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n"[..]);
        assert!(parse_head(&mut bad).is_err());
    }
}
