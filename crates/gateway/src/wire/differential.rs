//! The differential check of the worker's own HTTP/1.1 client against hyper's (`client::conn::
//! http1` with its default settings, the client the gateway's other upstream requests go
//! through). One upstream's side of a connection is played to both, in the same pieces, and
//! they must agree on every answer: refused or read; its status, version, header fields, body
//! and trailers; and whether the connection carries the next request, which is where the two
//! would part if they disagreed on where the answer ends (a connection is kept only when
//! nothing came after its answer). This client runs its own code here (`exchange`, `answer`,
//! the body, the pool's check-in and check-out) over a scripted upstream in place of the
//! socket.
//!
//! The few ways the two may part are listed below: this client's refusals of what hyper reads
//! ([`STRICTER_REFUSALS`]), its connections given up where hyper keeps them
//! ([`closes_where_hyper_keeps`]), one refusing before the other has the rest
//! ([`REFUSED_SOONER`], and in `agree`), and hyper's wrong refusals ([`HYPER_REFUSES_WRONGLY`]);
//! any other difference is a [`Disagreement`]. docs/gateway.md says what is checked and why.
//!
//! A [`Script`] is written as the upstream's bytes, one answer per request:
//!
//! ```text
//! #HG c 3            optional options line: H or G per request (HEAD, GET; repeated when
//!                    there are more answers), c: the upstream closes the connection after its
//!                    last answer (else it holds it open), a number: bytes per read (else all)
//! HTTP/1.1 200 OK    the answer to the first request (and whatever the upstream sends
//! content-length: 2  after it, before the next request)
//!
//! ok
//! ~~~                a line of three tildes between two answers
//! HTTP/1.1 204 No Content
//! ```
//!
//! Line ends are the bytes themselves: a corpus file holds its CRLFs.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use bytes::{BufMut, Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderValue};
use http::uri::Authority;
use http::{Method, Request, StatusCode, Version};
use http_body::{Body as _, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::{Conn, IDLE, Outgoing, READ_SIZE, WireError, answer, checkout, encode, exchange};

/// wire.rs's refusals of answers hyper reads, by wire.rs's reason: each is a rule wire.rs
/// states (its module comment, docs/gateway.md). Anything else wire.rs refuses and hyper
/// reads is a disagreement.
pub const STRICTER_REFUSALS: &[&str] = &[
    // hyper reads an answer whose last coding is not `chunked` until the upstream closes;
    // with `chunked` before another coding, wire.rs does not guess where it ends.
    "chunked is not the last coding",
    // hyper reads a Transfer-Encoding field that is not visible ASCII as one coding, not
    // chunked, and the answer until the upstream closes.
    "Transfer-Encoding is not text",
    // hyper hands a 101 nobody asked for to the caller as an answer without a body.
    "a protocol switch nobody asked for",
    // wire.rs's bounds are tighter than hyper's: a head over 64 KiB (hyper: about 400 KiB),
    // a chunk-size line over 4 KiB (hyper: 16 KiB of extensions per body).
    "the head is too large",
    "a chunk-size line is too long",
    // A chunk extension is a name and a value, tokens or quoted strings, without control
    // characters; hyper skips any byte but CR and LF in them.
    "a chunk extension",
    // A trailer line ended by a bare LF: hyper reads the LF as a byte of the line (and the
    // line's end at the next CRLF), httparse as the line's end.
    "a trailer line not ended by CRLF",
];

/// wire.rs's refusals of a head hyper has not looked at yet. wire.rs parses a head once its
/// buffer holds an empty line, a leading one (which httparse skips) included; hyper once a
/// head's end may have come. These are httparse's own refusals, which stand whatever follows:
/// hyper refuses the same head once the rest is in.
pub const REFUSED_SOONER: &[&str] = &["not an HTTP/1.x answer head", "too many header fields"];

/// hyper's refusals of answers wire.rs reads, where hyper is the one that is wrong: each
/// says whether it applies to the head wire.rs read.
pub const HYPER_REFUSES_WRONGLY: &[(&str, Applies)] = &[(
    // hyper keeps the two largest u64 values for itself (its marks of chunked and until-close
    // bodies) and refuses them as lengths; HTTP/1.1 sets no bound, and wire.rs reads up to
    // u64's own.
    "a Content-Length of 2^64 - 2 or more",
    |head| {
        head.headers
            .get_all(header::CONTENT_LENGTH)
            .iter()
            .flat_map(|v| v.as_bytes().split(|&b| b == b','))
            .filter_map(|v| {
                std::str::from_utf8(v.trim_ascii())
                    .ok()?
                    .parse::<u64>()
                    .ok()
            })
            .any(|n| n >= u64::MAX - 1)
    },
)];

pub type Applies = fn(&Head) -> bool;

/// wire.rs gives up a connection hyper would keep after the same answer, and why. A connection
/// given up costs a new one; one kept wrongly would read forged bytes as the next answer.
pub fn closes_where_hyper_keeps(head: &Head, method: &Method) -> Option<&'static str> {
    if *method == Method::HEAD
        || head.status == StatusCode::NO_CONTENT
        || head.status == StatusCode::NOT_MODIFIED
    {
        // No body by its framing: one the upstream sends anyway, after the connection went
        // back to the pool, would be read as the next request's answer.
        return Some("an answer without a body by its framing (to HEAD, a 204, a 304)");
    }
    if head.version != Version::HTTP_11 {
        // wire.rs keeps connections of HTTP/1.1 upstreams only; hyper also those of HTTP/1.0
        // upstreams that say `Connection: keep-alive`.
        return Some("an HTTP/1.0 answer");
    }
    if head.headers.contains_key(header::TRANSFER_ENCODING)
        && head.headers.contains_key(header::CONTENT_LENGTH)
    {
        // The upstream may have meant the length: what follows the chunked end is not read
        // as the next answer.
        return Some("an answer framed both ways");
    }
    let close_not_text = head.headers.get_all(header::CONNECTION).iter().any(|v| {
        v.to_str().is_err()
            && v.as_bytes()
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close"))
    });
    if close_not_text {
        // hyper skips a `Connection` field that is not visible ASCII, `close` and all.
        return Some("`close` in a Connection field hyper does not read");
    }
    None
}

/// An upstream's side of one connection, as both clients are played it.
#[derive(Clone, PartialEq, Eq)]
pub struct Script {
    /// The requests' methods, in turn (repeated over the answers).
    pub methods: Vec<Method>,
    /// Bytes per read.
    pub piece: usize,
    /// Whether the upstream closes the connection after its last answer.
    pub closes: bool,
    /// What the upstream sends after each request.
    pub answers: Vec<Vec<u8>>,
}

const SEPARATOR: &[u8] = b"\n~~~\n";
/// The most requests one script makes: each needs the one before kept by both clients.
const MAX_REQUESTS: usize = 8;

impl Script {
    /// Reads any bytes as a script (the fuzzer's inputs are arbitrary).
    pub fn parse(input: &[u8]) -> Script {
        let (options, rest) = match input.strip_prefix(b"#") {
            Some(after) => match after.iter().position(|&b| b == b'\n') {
                Some(end) => (&after[..end], &after[end + 1..]),
                None => (after, &b""[..]),
            },
            None => (&b""[..], input),
        };
        let mut methods = Vec::new();
        let mut piece: usize = 0;
        let mut closes = false;
        for &b in options {
            match b {
                b'G' => methods.push(Method::GET),
                b'H' => methods.push(Method::HEAD),
                b'c' => closes = true,
                b'0'..=b'9' => {
                    piece = piece
                        .saturating_mul(10)
                        .saturating_add(usize::from(b - b'0'));
                }
                _ => {}
            }
        }
        if methods.is_empty() {
            methods.push(Method::GET);
        }
        let mut answers = Vec::new();
        let mut rest = rest;
        while answers.len() + 1 < MAX_REQUESTS {
            let Some(at) = rest.windows(SEPARATOR.len()).position(|w| w == SEPARATOR) else {
                break;
            };
            answers.push(rest[..at].to_vec());
            rest = &rest[at + SEPARATOR.len()..];
        }
        answers.push(rest.to_vec());
        Script {
            methods,
            piece: if piece == 0 { usize::MAX } else { piece },
            closes,
            answers,
        }
    }

    /// The script as [`Script::parse`] reads it back (a corpus file).
    pub fn render(&self) -> Vec<u8> {
        let mut out = b"#".to_vec();
        for method in &self.methods {
            out.push(if *method == Method::HEAD { b'H' } else { b'G' });
        }
        if self.closes {
            out.extend_from_slice(b" c");
        }
        if self.piece != usize::MAX {
            out.extend_from_slice(format!(" {}", self.piece).as_bytes());
        }
        out.push(b'\n');
        out.extend_from_slice(&self.answers.join(SEPARATOR));
        out
    }

    fn method(&self, request: usize) -> &Method {
        &self.methods[request % self.methods.len()]
    }
}

/// As it is written, bytes escaped (proptest prints a failing script with it).
impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b\"{}\"", self.render().escape_ascii())
    }
}

/// One answer as a client read it, and whether its connection carries the next request.
#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub answer: Answer,
    pub kept: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Refused, or the connection ended first: why, in the client's words.
    Failed(String),
    /// Not decided: the upstream holds the connection open and has not sent what is missing.
    Waiting,
    Read(Box<Head>, Body),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Head {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// Read to its end; trailers empty when there were none.
    Whole { data: Bytes, trailers: HeaderMap },
    /// Cut by an error (what came before it is not compared).
    Failed(String),
    /// The upstream holds the connection open before the body's end.
    Waiting,
}

/// The first answer on which the two clients part.
#[derive(Debug)]
pub struct Disagreement {
    /// The request it answers, from 0.
    pub request: usize,
    pub wire: Exchange,
    pub hyper: Exchange,
    pub script: Script,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "wire.rs and hyper disagree on answer {} ({}):",
            self.request,
            self.script.method(self.request)
        )?;
        writeln!(f, "  wire.rs: {:?}", self.wire)?;
        writeln!(f, "  hyper:   {:?}", self.hyper)?;
        write!(f, "  script:  {:?}", self.script)
    }
}

impl std::error::Error for Disagreement {}

/// Plays `input` (any bytes, read as a [`Script`]) to both clients: an error at the first
/// answer they disagree on beyond the listed asymmetries.
pub fn check(input: &[u8]) -> Result<(), Box<Disagreement>> {
    check_script(&Script::parse(input))
}

pub fn check_script(script: &Script) -> Result<(), Box<Disagreement>> {
    let wire = read_with_wire(script);
    let hyper = read_with_hyper(script);
    for (request, (w, h)) in wire.iter().zip(&hyper).enumerate() {
        if !agree(w, h, script.method(request)) {
            return Err(Box::new(Disagreement {
                request,
                wire: w.clone(),
                hyper: h.clone(),
                script: script.clone(),
            }));
        }
        if !(w.kept && h.kept) {
            return Ok(());
        }
    }
    // Both read every answer they were sent to the end and kept the connection each time: the
    // same number of exchanges, or the shorter side stopped without saying so.
    if wire.len() != hyper.len() {
        let request = wire.len().min(hyper.len());
        let missing = || Exchange {
            answer: Answer::Failed("no exchange".into()),
            kept: false,
        };
        return Err(Box::new(Disagreement {
            request,
            wire: wire.get(request).cloned().unwrap_or_else(missing),
            hyper: hyper.get(request).cloned().unwrap_or_else(missing),
            script: script.clone(),
        }));
    }
    Ok(())
}

/// Whether the two exchanges agree, or part only in a listed way.
fn agree(wire: &Exchange, hyper: &Exchange, method: &Method) -> bool {
    let answers = match (&wire.answer, &hyper.answer) {
        (Answer::Failed(_), Answer::Failed(_)) | (Answer::Waiting, Answer::Waiting) => true,
        (Answer::Failed(reason), Answer::Waiting) if REFUSED_SOONER.contains(&reason.as_str()) => {
            true
        }
        (Answer::Failed(reason), _) => STRICTER_REFUSALS.contains(&reason.as_str()),
        // hyper may parse what it has of a head before its end has come, and refuse it there
        // (httparse's refusals of a head's start); wire.rs refuses it once the end or the
        // upstream's close comes.
        (Answer::Waiting, Answer::Failed(_)) => true,
        (Answer::Read(head, _), Answer::Failed(_)) => HYPER_REFUSES_WRONGLY
            .iter()
            .any(|(_, applies)| applies(head)),
        (Answer::Read(w_head, w_body), Answer::Read(h_head, h_body)) => {
            w_head == h_head && bodies_agree(w_body, h_body)
        }
        (Answer::Waiting, Answer::Read(..)) | (Answer::Read(..), Answer::Waiting) => false,
    };
    if !answers {
        return false;
    }
    match (wire.kept, hyper.kept) {
        (false, true) => match &wire.answer {
            Answer::Read(head, Body::Whole { .. }) => {
                closes_where_hyper_keeps(head, method).is_some()
            }
            // Refused or undecided by wire.rs (in a way allowed above): the connection is
            // given up.
            _ => true,
        },
        (wire, hyper) => wire == hyper,
    }
}

fn bodies_agree(wire: &Body, hyper: &Body) -> bool {
    match (wire, hyper) {
        (Body::Whole { .. }, Body::Whole { .. }) => wire == hyper,
        (Body::Failed(_), Body::Failed(_)) | (Body::Waiting, Body::Waiting) => true,
        (Body::Failed(reason), _) => STRICTER_REFUSALS.contains(&reason.as_str()),
        // hyper judges chunk framing byte by byte, wire.rs a chunk-size line once its CRLF
        // has come and a trailer section once its empty line has.
        (Body::Waiting, Body::Failed(_)) => true,
        _ => false,
    }
}

// ---- wire.rs's side: its own code, on a scripted stream.

/// The pool key of the scripted upstream; the check takes out what it puts in.
const AUTHORITY: &str = "differential.invalid";

fn read_with_wire(script: &Script) -> Vec<Exchange> {
    let authority = Authority::from_static(AUTHORITY);
    let host = HeaderValue::from_static(AUTHORITY);
    let no_fields = HeaderMap::new();
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    forget_pool(&authority);
    let mut conn = Some(Box::new(Conn {
        tcp: Stream::Played(Played::new(script)),
        buf: BytesMut::with_capacity(READ_SIZE),
    }));
    let mut exchanges = Vec::new();
    for request in 0..script.answers.len() {
        let Some(mut current) = conn.take() else {
            break;
        };
        let method = script.method(request);
        let head = encode(&Outgoing {
            method,
            target: "/",
            host: &host,
            headers: &no_fields,
        });
        // Nothing here waits on anything but the script: pending is for good.
        let exchanged = pin!(exchange(&mut current, &head)).poll(&mut cx);
        let answer = match exchanged {
            Poll::Pending => Answer::Waiting,
            Poll::Ready(Err(failed)) => Answer::Failed(reason(&failed.error)),
            Poll::Ready(Ok(parsed)) => {
                match answer(parsed, current, &authority, *method == Method::HEAD) {
                    Err(error) => Answer::Failed(reason(&error)),
                    Ok(response) => {
                        let head = Box::new(Head {
                            status: response.status(),
                            version: response.version(),
                            headers: response.headers().clone(),
                        });
                        let mut body = response.into_body();
                        let body = drain(|cx| body.poll_frame(cx), &mut cx, |e| reason(&e));
                        Answer::Read(head, body)
                    }
                }
            }
        };
        // Kept: the body gave it back to the pool and the pool hands it out again.
        conn = checkout(&authority);
        exchanges.push(Exchange {
            kept: conn.is_some(),
            answer,
        });
    }
    forget_pool(&authority);
    exchanges
}

fn reason(error: &WireError) -> String {
    match error {
        WireError::Malformed(why) => (*why).to_owned(),
        other => other.to_string(),
    }
}

fn forget_pool(authority: &Authority) {
    IDLE.with(|idle| idle.borrow_mut().retain(|(a, _)| a != authority));
}

/// Reads a body to its end, its error or the point where it waits for good.
fn drain<E>(
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, E>>>,
    cx: &mut Context<'_>,
    reason: impl Fn(E) -> String,
) -> Body {
    let mut data = BytesMut::new();
    let mut trailers = HeaderMap::new();
    loop {
        match poll(cx) {
            Poll::Pending => return Body::Waiting,
            Poll::Ready(None) => {
                return Body::Whole {
                    data: data.freeze(),
                    trailers,
                };
            }
            Poll::Ready(Some(Err(e))) => return Body::Failed(reason(e)),
            Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                Ok(bytes) => data.extend_from_slice(&bytes),
                Err(frame) => {
                    if let Ok(fields) = frame.into_trailers() {
                        trailers.extend(fields);
                    }
                }
            },
        }
    }
}

// ---- hyper's side.

fn read_with_hyper(script: &Script) -> Vec<Exchange> {
    let mut exchanges = Vec::new();
    let played = Rc::new(Played::new(script));
    let woken = Arc::new(Woken(AtomicBool::new(false)));
    let waker = Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    let handshake =
        hyper::client::conn::http1::Builder::new().handshake::<_, NoBody>(HyperIo(played.clone()));
    let (mut sender, conn) = match pin!(handshake).poll(&mut cx) {
        Poll::Ready(Ok(parts)) => parts,
        Poll::Ready(Err(e)) => {
            exchanges.push(Exchange {
                answer: Answer::Failed(e.to_string()),
                kept: false,
            });
            return exchanges;
        }
        Poll::Pending => return exchanges,
    };
    let mut driver = Driver {
        conn: Some(conn),
        woken,
        played,
    };
    for request in 0..script.answers.len() {
        let ready = driver.run(&mut cx, |cx| sender.poll_ready(cx));
        if !matches!(ready, Some(Ok(()))) {
            break;
        }
        let method = script.method(request);
        let Ok(outgoing) = Request::builder()
            .method(method.clone())
            .uri("/")
            .header(header::HOST, AUTHORITY)
            .body(NoBody)
        else {
            break;
        };
        let mut sent = pin!(sender.send_request(outgoing));
        let answer = match driver.run(&mut cx, |cx| sent.as_mut().poll(cx)) {
            None => Answer::Waiting,
            Some(Err(e)) => Answer::Failed(error_chain(&e)),
            Some(Ok(response)) => {
                let head = Box::new(Head {
                    status: response.status(),
                    version: response.version(),
                    headers: response.headers().clone(),
                });
                let mut body = response.into_body();
                let body = driver.drain(&mut cx, &mut body);
                Answer::Read(head, body)
            }
        };
        // Kept: after the answer, with everything the upstream sent read, hyper's connection
        // has neither ended nor refused to take another request.
        driver.run(&mut cx, |_| Poll::<()>::Pending);
        let kept = driver.conn.is_some() && !sender.is_closed();
        exchanges.push(Exchange { answer, kept });
        if !kept {
            break;
        }
    }
    exchanges
}

type HyperConn = hyper::client::conn::http1::Connection<HyperIo, NoBody>;

/// Polls hyper's connection beside whatever waits on it, as an executor would, until that is
/// ready or nothing can go on: everything pending, nothing woken, and no byte read or written
/// in the last round (the script has nothing more to give).
struct Driver {
    conn: Option<HyperConn>,
    woken: Arc<Woken>,
    played: Rc<Played>,
}

impl Driver {
    fn run<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>,
    ) -> Option<T> {
        // A bound against a connection that wakes itself for ever (a bug of the check's or of
        // hyper's); a script of 8 KiB read a byte at a time takes a few thousand rounds.
        for _ in 0..1_000_000 {
            self.woken.0.store(false, Ordering::SeqCst);
            let before = self.played.moves();
            let mut moved = false;
            if let Some(conn) = self.conn.as_mut()
                && Pin::new(conn).poll(cx).is_ready()
            {
                self.conn = None;
                moved = true;
            }
            if let Poll::Ready(value) = poll(cx) {
                return Some(value);
            }
            if !moved && !self.woken.0.load(Ordering::SeqCst) && self.played.moves() == before {
                return None;
            }
        }
        panic!("hyper's connection neither ends nor waits");
    }

    fn drain(&mut self, cx: &mut Context<'_>, body: &mut hyper::body::Incoming) -> Body {
        drain(
            |cx| match self.run(cx, |cx| Pin::new(&mut *body).poll_frame(cx)) {
                Some(frame) => Poll::Ready(frame),
                None => Poll::Pending,
            },
            cx,
            |e| error_chain(&e),
        )
    }
}

/// An error and its sources, as one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The request's body: none, as the gateway's own client sends.
struct NoBody;

impl http_body::Body for NoBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        true
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(0)
    }
}

struct HyperIo(Rc<Played>);

impl hyper::rt::Read for HyperIo {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.0.take(buf.remaining()) {
            Some(bytes) => {
                buf.put_slice(&bytes);
                Poll::Ready(Ok(()))
            }
            None => Poll::Pending,
        }
    }
}

impl hyper::rt::Write for HyperIo {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.0.hear(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

// ---- The scripted upstream, and the stream wire.rs reads in tests and fuzzing.

/// The upstream's side of one connection: each request it hears (a head, up to its empty
/// line) releases its next answer, which is read `piece` bytes at a time at most.
pub(super) struct Played(RefCell<Upstream>);

struct Upstream {
    answers: VecDeque<Vec<u8>>,
    /// Released and not read yet.
    sent: VecDeque<u8>,
    piece: usize,
    closes: bool,
    heard: Vec<u8>,
    /// Requests heard so far.
    requests: usize,
    /// Reads that got something (bytes or, once, the end) and writes, so far.
    moves: u64,
    /// Whether a read got the end.
    ended: bool,
}

impl Played {
    fn new(script: &Script) -> Played {
        Played(RefCell::new(Upstream {
            answers: script.answers.iter().cloned().collect(),
            sent: VecDeque::new(),
            piece: script.piece,
            closes: script.closes,
            heard: Vec::new(),
            requests: 0,
            moves: 0,
            ended: false,
        }))
    }

    /// What a read of at most `room` bytes gets: `None` while the upstream has nothing to say
    /// (no wake-up follows: the check polls again itself), empty at the connection's end.
    fn take(&self, room: usize) -> Option<Vec<u8>> {
        let mut up = self.0.borrow_mut();
        if up.sent.is_empty() {
            let ended = up.closes && up.answers.is_empty();
            // The end is news once.
            up.moves += u64::from(ended && !up.ended);
            up.ended |= ended;
            return ended.then(Vec::new);
        }
        up.moves += 1;
        let n = up.piece.min(room).min(up.sent.len());
        Some(up.sent.drain(..n).collect())
    }

    fn moves(&self) -> u64 {
        self.0.borrow().moves
    }

    fn readable(&self) -> bool {
        let up = self.0.borrow();
        !up.sent.is_empty() || (up.closes && up.answers.is_empty())
    }

    fn hear(&self, bytes: &[u8]) {
        let mut up = self.0.borrow_mut();
        up.moves += 1;
        up.heard.extend_from_slice(bytes);
        let heads = up.heard.windows(4).filter(|w| w == b"\r\n\r\n").count();
        while up.requests < heads {
            up.requests += 1;
            if let Some(answer) = up.answers.pop_front() {
                up.sent.extend(answer);
            }
        }
    }
}

/// A connection's stream: the socket, or (in the differential check) a scripted upstream.
pub(super) enum Stream {
    Tcp(TcpStream),
    Played(Played),
}

impl From<TcpStream> for Stream {
    fn from(tcp: TcpStream) -> Stream {
        Stream::Tcp(tcp)
    }
}

fn would_block() -> std::io::Error {
    std::io::ErrorKind::WouldBlock.into()
}

impl Stream {
    pub(super) fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self {
            Stream::Tcp(tcp) => tcp.poll_read_ready(cx),
            Stream::Played(played) if played.readable() => Poll::Ready(Ok(())),
            Stream::Played(_) => Poll::Pending,
        }
    }

    pub(super) fn try_read_buf<B: BufMut>(&self, buf: &mut B) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(tcp) => tcp.try_read_buf(buf),
            Stream::Played(played) => {
                let room = buf.chunk_mut().len();
                let bytes = played.take(room).ok_or_else(would_block)?;
                buf.put_slice(&bytes);
                Ok(bytes.len())
            }
        }
    }

    pub(super) fn try_read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Tcp(tcp) => tcp.try_read(buf),
            Stream::Played(played) => {
                let bytes = played.take(buf.len()).ok_or_else(would_block)?;
                buf[..bytes.len()].copy_from_slice(&bytes);
                Ok(bytes.len())
            }
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Stream::Played(played) => match played.take(buf.remaining()) {
                Some(bytes) => {
                    buf.put_slice(&bytes);
                    Poll::Ready(Ok(()))
                }
                None => Poll::Pending,
            },
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Stream::Played(played) => {
                played.hear(buf);
                Poll::Ready(Ok(buf.len()))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_flush(cx),
            Stream::Played(_) => Poll::Ready(Ok(())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Stream::Tcp(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Stream::Played(_) => Poll::Ready(Ok(())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use proptest::collection::vec;
    use proptest::prelude::*;
    use proptest::test_runner::RngSeed;

    use super::*;

    fn corpus() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/wire_differential")
    }

    /// The fuzz target's corpus: the seeds (every framing wire.rs reads or refuses) and what
    /// long runs found interesting.
    #[test]
    fn every_answer_of_the_corpus_reads_the_same_with_both_clients() {
        let mut files = 0;
        let mut disagreements = Vec::new();
        let entries = std::fs::read_dir(corpus()).unwrap_or_else(|e| panic!("the corpus: {e}"));
        for entry in entries {
            let path = entry.unwrap_or_else(|e| panic!("the corpus: {e}")).path();
            let input = std::fs::read(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
            files += 1;
            if let Err(d) = check(&input) {
                disagreements.push(format!("{}: {d}", path.display()));
            }
        }
        assert!(files >= 30, "only {files} corpus files");
        assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 1000,
            rng_seed: RngSeed::Fixed(0x5eed),
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Answers built of the framings both clients know, one byte changed now and then.
        #[test]
        fn generated_answers_read_the_same_with_both_clients(script in scripts()) {
            if let Err(d) = check_script(&script) {
                prop_assert!(false, "{d}");
            }
        }
    }

    fn exchange(answer: Answer, kept: bool) -> Exchange {
        Exchange { answer, kept }
    }

    fn read(version: Version, fields: &[(&'static str, &'static str)], body: Body) -> Answer {
        let mut headers = HeaderMap::new();
        for (name, value) in fields {
            headers.append(*name, HeaderValue::from_static(value));
        }
        Answer::Read(
            Box::new(Head {
                status: StatusCode::OK,
                version,
                headers,
            }),
            body,
        )
    }

    fn whole(data: &'static str) -> Body {
        Body::Whole {
            data: Bytes::from_static(data.as_bytes()),
            trailers: HeaderMap::new(),
        }
    }

    /// The check itself: every difference fails it but the listed ones.
    #[test]
    fn the_check_fails_on_any_difference_but_the_listed_ones() {
        use Version as V;
        let failed = |why: &str| Answer::Failed(why.to_owned());
        let ok = || read(V::HTTP_11, &[("content-length", "2")], whole("ok"));
        for (name, wire, hyper, agreed) in [
            ("the same", exchange(ok(), true), exchange(ok(), true), true),
            (
                "both refuse, for their own reasons",
                exchange(failed("a chunk size"), false),
                exchange(failed("Invalid chunk size line"), false),
                true,
            ),
            (
                "another body",
                exchange(ok(), true),
                exchange(
                    read(V::HTTP_11, &[("content-length", "2")], whole("ko")),
                    true,
                ),
                false,
            ),
            (
                "other fields",
                exchange(ok(), true),
                exchange(
                    read(V::HTTP_11, &[("content-length", "02")], whole("ok")),
                    true,
                ),
                false,
            ),
            (
                "kept by wire.rs only",
                exchange(ok(), true),
                exchange(ok(), false),
                false,
            ),
            (
                "kept by hyper only, for no listed reason",
                exchange(ok(), false),
                exchange(ok(), true),
                false,
            ),
            (
                "kept by hyper only: HTTP/1.0",
                exchange(read(V::HTTP_10, &[], whole("ok")), false),
                exchange(read(V::HTTP_10, &[], whole("ok")), true),
                true,
            ),
            (
                "refused by wire.rs for an unlisted reason",
                exchange(failed("Content-Length is not a length"), false),
                exchange(ok(), true),
                false,
            ),
            (
                "refused by wire.rs for a listed reason",
                exchange(failed("chunked is not the last coding"), false),
                exchange(ok(), false),
                true,
            ),
            (
                "a head refused by wire.rs, not complete for hyper",
                exchange(failed("not an HTTP/1.x answer head"), false),
                exchange(Answer::Waiting, true),
                true,
            ),
            (
                "a length refused by wire.rs, not complete for hyper",
                exchange(failed("Content-Length values disagree"), false),
                exchange(Answer::Waiting, true),
                false,
            ),
            (
                "refused by hyper only",
                exchange(ok(), false),
                exchange(failed("invalid content-length parsed"), false),
                false,
            ),
            (
                "a body cut by wire.rs for an unlisted reason",
                exchange(
                    read(V::HTTP_11, &[], Body::Failed("a chunk size".into())),
                    false,
                ),
                exchange(read(V::HTTP_11, &[], whole("ok")), true),
                false,
            ),
            (
                "ended by wire.rs, still read by hyper",
                exchange(read(V::HTTP_11, &[], whole("ok")), false),
                exchange(read(V::HTTP_11, &[], Body::Waiting), false),
                false,
            ),
            (
                "still read by wire.rs, refused by hyper",
                exchange(read(V::HTTP_11, &[], Body::Waiting), false),
                exchange(
                    read(V::HTTP_11, &[], Body::Failed("Invalid chunk size".into())),
                    false,
                ),
                true,
            ),
        ] {
            assert_eq!(agree(&wire, &hyper, &Method::GET), agreed, "{name}");
        }
    }

    #[test]
    fn a_script_reads_back_as_it_is_written() {
        let script = Script::parse(b"#HG c 3\nHTTP/1.1 204 x\r\n\r\n\n~~~\nHTTP/1.1 200 OK\r\n");
        assert_eq!(script.methods, [Method::HEAD, Method::GET]);
        assert_eq!((script.piece, script.closes), (3, true));
        assert_eq!(
            script.answers,
            [&b"HTTP/1.1 204 x\r\n\r\n"[..], b"HTTP/1.1 200 OK\r\n"]
        );
        assert_eq!(Script::parse(&script.render()), script);
        // Anything is a script: no options line, one GET, everything at once, held open.
        let bare = Script::parse(b"HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(bare.methods, [Method::GET]);
        assert_eq!((bare.piece, bare.closes), (usize::MAX, false));
    }

    // ---- The generated scripts.

    fn scripts() -> impl Strategy<Value = Script> {
        (
            vec(
                prop_oneof![4 => Just(Method::GET), 1 => Just(Method::HEAD)],
                1..3,
            ),
            prop_oneof![2 => Just(usize::MAX), 1 => 1usize..4, 1 => 4usize..40],
            any::<bool>(),
            vec(answer(), 1..4),
            prop::option::weighted(0.3, (any::<prop::sample::Index>(), any::<u8>(), 0..3u8)),
        )
            .prop_map(|(methods, piece, closes, mut answers, mutation)| {
                if let Some((at, byte, how)) = mutation {
                    let answer = at.index(answers.len());
                    let bytes = &mut answers[answer];
                    let at = at.index(bytes.len() + 1);
                    match how {
                        0 if at < bytes.len() => bytes[at] = byte,
                        1 if at < bytes.len() => {
                            bytes.remove(at);
                        }
                        _ => bytes.insert(at, byte),
                    }
                }
                Script {
                    methods,
                    piece,
                    closes,
                    answers,
                }
            })
    }

    /// The bytes of one chunk-size line's number, some with leading zeros.
    fn hex(size: usize, zeros: usize, upper: bool) -> String {
        let digits = if upper {
            format!("{size:X}")
        } else {
            format!("{size:x}")
        };
        format!("{}{digits}", "0".repeat(zeros))
    }

    fn answer() -> impl Strategy<Value = Vec<u8>> {
        let informational = prop_oneof![
            6 => Just(""),
            1 => Just("HTTP/1.1 100 Continue\r\n\r\n"),
            1 => Just("HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\n"),
        ];
        let status = prop_oneof![
            8 => Just("200 OK"),
            1 => Just("204 No Content"),
            1 => Just("304 Not Modified"),
            1 => Just("404 Not Found"),
            1 => Just("101 Switching Protocols"),
            1 => Just("205 Reset Content"),
        ];
        let version = prop_oneof![5 => Just("HTTP/1.1"), 1 => Just("HTTP/1.0")];
        let connection = prop_oneof![
            4 => Just(""),
            1 => Just("connection: close\r\n"),
            1 => Just("connection: keep-alive\r\n"),
            1 => Just("connection: upgrade, Close\r\n"),
        ];
        let fields = vec("[a-z]{1,6}: [ -~]{0,8}\r\n", 0..3);
        let after = prop_oneof![
            6 => Just(""),
            1 => Just("HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nforged"),
            1 => Just("\r\n"),
            1 => Just("x"),
        ];
        (
            informational,
            version,
            status,
            connection,
            fields,
            framed_body(),
            after,
        )
            .prop_map(
                |(informational, version, status, connection, fields, (framing, body), after)| {
                    let mut out = informational.as_bytes().to_vec();
                    out.extend_from_slice(format!("{version} {status}\r\n{connection}").as_bytes());
                    for field in fields {
                        out.extend_from_slice(field.as_bytes());
                    }
                    out.extend_from_slice(framing.as_bytes());
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(&body);
                    out.extend_from_slice(after.as_bytes());
                    out
                },
            )
    }

    /// The framing fields and the body as sent.
    fn framed_body() -> impl Strategy<Value = (String, Vec<u8>)> {
        let data = "[ -~]{0,24}";
        let length = (data, 0..6u8).prop_map(|(data, how)| {
            let n = data.len();
            let value = match how {
                0 => format!("content-length: {n}\r\n"),
                1 => format!("content-length: {n}, {n}\r\ncontent-length: {n}\r\n"),
                2 => format!("content-length: 0000000000000000000{n}\r\n"),
                3 => format!("content-length: {}\r\n", n + 1),
                4 => format!("content-length:  {n} \r\n"),
                _ => format!("content-length: {n},\r\n"),
            };
            (value, data.into_bytes())
        });
        let coding = prop_oneof![
            6 => Just("chunked"),
            1 => Just("gzip, chunked"),
            1 => Just("CHUNKED"),
            1 => Just("chunked, gzip"),
            1 => Just("chunked,"),
            1 => Just("chunked\r\ntransfer-encoding: "),
            1 => Just("identity"),
        ];
        let chunk = (
            "[ -~]{1,12}",
            0..3usize,
            any::<bool>(),
            prop_oneof![
                6 => Just(""),
                1 => Just(";a=b"),
                1 => Just(" ;a=\"b c\""),
                1 => Just("\t"),
                1 => Just(";\x01"),
            ],
            prop_oneof![8 => Just("\r\n"), 1 => Just("\n"), 1 => Just("\r\r\n")],
        )
            .prop_map(|(data, zeros, upper, extension, end)| {
                let mut out = format!("{}{extension}{end}", hex(data.len(), zeros, upper));
                out.push_str(&data);
                out.push_str("\r\n");
                out
            });
        let trailer = prop_oneof![
            Just("x-t: 1\r\n"),
            Just("grpc-status: 0\r\n"),
            Just("x-lf: 1\n"),
            Just("bad trailer\r\n"),
        ];
        let chunked = (
            coding,
            vec(chunk, 0..4),
            vec(trailer, 0..3),
            prop_oneof![4 => Just(""), 1 => Just("content-length: 3\r\n")],
            prop_oneof![6 => Just("\r\n"), 1 => Just("\n")],
        )
            .prop_map(|(coding, chunks, trailers, length, end)| {
                let fields = format!("transfer-encoding: {coding}\r\n{length}");
                let mut body = chunks.concat();
                body.push_str("0\r\n");
                body.push_str(&trailers.concat());
                body.push_str(end);
                (fields, body.into_bytes())
            });
        let until_close = "[ -~]{0,24}".prop_map(|data| (String::new(), data.into_bytes()));
        prop_oneof![3 => length, 3 => chunked, 1 => until_close]
    }
}
