//! The bodies the gateway answers and forwards: its own small ones, whole in memory, and the
//! streamed ones of its two peers, passed on frame by frame (never buffered whole), each cut
//! when it stalls for the route's idle timeout and, going upstream, when it passes the
//! route's size limit.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

/// What the gateway answers with.
pub type Response = http::Response<Body>;

pub enum Body {
    /// The gateway's own: a problem, a redirect, a health answer (`None` once sent, or empty).
    Full(Option<Bytes>),
    /// A peer's, streamed.
    Streamed(Streamed),
}

/// Why a streamed body ended early.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("the body stalled")]
    Stalled,
    #[error("the request body passed the route's limit")]
    OverLimit,
    #[error("the peer's body failed: {0}")]
    Peer(#[from] hyper::Error),
    #[error("the upstream's body failed: {0}")]
    Wire(#[from] crate::wire::WireError),
}

/// A body as one of the gateway's peers sends it: read by hyper, or by the worker's own
/// HTTP/1.1 client (`wire.rs`).
pub enum PeerBody {
    Hyper(Incoming),
    Wire(crate::wire::WireBody),
}

impl PeerBody {
    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self {
            PeerBody::Hyper(incoming) => Pin::new(incoming)
                .poll_frame(cx)
                .map(|f| f.map(|f| f.map_err(BodyError::from))),
            PeerBody::Wire(wire) => wire
                .poll_frame(cx)
                .map(|f| f.map(|f| f.map_err(BodyError::from))),
        }
    }

    pub fn is_end_stream(&self) -> bool {
        match self {
            PeerBody::Hyper(incoming) => incoming.is_end_stream(),
            PeerBody::Wire(wire) => wire.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            PeerBody::Hyper(incoming) => incoming.size_hint(),
            PeerBody::Wire(wire) => wire.size_hint(),
        }
    }
}

impl Body {
    pub fn empty() -> Body {
        Body::Full(None)
    }

    pub fn full(bytes: impl Into<Bytes>) -> Body {
        let bytes = bytes.into();
        Body::Full((!bytes.is_empty()).then_some(bytes))
    }

    /// A client's request body on its way upstream: at most `limit` bytes pass, and no
    /// trailers (header fields after the body, which the gateway never checked and some
    /// servers merge into the headers: an `X-Auth-User` there would pose as the identity).
    pub fn request(incoming: Incoming, idle: Duration, limit: Option<u64>) -> Body {
        Body::streamed(PeerBody::Hyper(incoming), idle, limit, false)
    }

    /// An upstream's answer body on its way to the client, trailers included (gRPC's status).
    pub fn answer(peer: PeerBody, idle: Duration) -> Body {
        Body::streamed(peer, idle, None, true)
    }

    fn streamed(incoming: PeerBody, idle: Duration, limit: Option<u64>, trailers: bool) -> Body {
        Body::Streamed(Streamed {
            inner: incoming,
            idle,
            timer: None,
            limit,
            passed: 0,
            trailers,
        })
    }
}

/// A peer's body, with its idle timer (made only the first time the body has to wait: a body
/// whose frames are already there never arms one) and what has passed of it.
pub struct Streamed {
    inner: PeerBody,
    idle: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    limit: Option<u64>,
    passed: u64,
    /// Whether trailers pass.
    trailers: bool,
}

impl Streamed {
    fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.inner.poll_frame(cx) {
            // Trailers come last: dropping them ends the body.
            Poll::Ready(Some(Ok(frame))) if frame.is_trailers() && !self.trailers => {
                Poll::Ready(None)
            }
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.passed = self.passed.saturating_add(data.len() as u64);
                    if self.limit.is_some_and(|max| self.passed > max) {
                        return Poll::Ready(Some(Err(BodyError::OverLimit)));
                    }
                }
                if let Some(timer) = &mut self.timer {
                    timer.as_mut().reset(Instant::now() + self.idle);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let idle = self.idle;
                let timer = self
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                ready!(timer.as_mut().poll(cx));
                Poll::Ready(Some(Err(BodyError::Stalled)))
            }
        }
    }
}

use http_body::Body as _;

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            Body::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Streamed(s) => s.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Full(bytes) => bytes.is_none(),
            Body::Streamed(s) => s.inner.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Body::Streamed(s) => s.inner.size_hint(),
        }
    }
}

/// Whether `error` (an upstream call's) came from the request body passing its limit.
pub fn over_limit(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if matches!(e.downcast_ref::<BodyError>(), Some(BodyError::OverLimit)) {
            return true;
        }
        next = e.source();
    }
    false
}
