//! The listeners and the workers behind them. Each worker is a thread with a single-threaded
//! Tokio runtime and its own listening socket on every address (`SO_REUSEPORT`: the kernel
//! spreads new connections over the workers), as nginx runs a worker process per core. A
//! connection lives on the worker that accepted it, with that worker's upstream connections
//! (see `upstream.rs`), so a request crosses no thread.
//!
//! `SO_REUSEPORT` would also let another process of the same user join the group and take a
//! share of the connections (a second gateway started by mistake, an old one never stopped):
//! before binding its sockets, the gateway binds the address once without it, so an address
//! already listened on fails the start as it would without `SO_REUSEPORT`.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

use crate::current::Current;
use crate::head_timer::HeadTimer;
use crate::tls::{Certificates, Negotiated};
use crate::{StartError, State};

/// How the connection a request came on was made.
#[derive(Debug, Clone)]
pub struct Peer {
    pub addr: IpAddr,
    /// On the TLS listener, what its handshake was for: set by the listener, never by anything
    /// the client sends.
    pub tls: Option<Arc<Negotiated>>,
}

/// The most a request head may take: the most header bytes any route takes, and 8 KiB for the
/// request line. (hyper's own bound on header fields, 100, stays: a larger one makes it
/// allocate the parse's index on the heap for every request.)
const MAX_HEAD_BYTES: usize = crate::routes::MAX_REQUEST_HEADERS as usize + 8 * 1024;
/// A client that has not sent its whole request head by then is let go (slow-header attacks).
const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a stop waits for requests in flight before closing their connections.
const DRAIN: Duration = Duration::from_secs(30);

/// `count` listening sockets on `addr`, all on one port (the first one's, when `addr` asks for
/// any port).
pub fn bind(
    addr: &str,
    count: usize,
) -> Result<(Vec<std::net::TcpListener>, SocketAddr), StartError> {
    let failed = |reason: String| StartError::Bind {
        addr: addr.to_owned(),
        reason,
    };
    let mut target = addr
        .to_socket_addrs()
        .map_err(|e| failed(e.to_string()))?
        .next()
        .ok_or_else(|| failed("the name has no address".into()))?;
    if target.port() != 0 {
        // Fails with "address in use" when anything listens there, reuseport or not.
        let probe = socket2::Socket::new(
            socket2::Domain::for_address(target),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .and_then(|probe| {
            probe.set_reuse_address(true)?;
            probe.bind(&target.into())?;
            Ok(probe)
        })
        .map_err(|e| failed(e.to_string()))?;
        drop(probe);
    }
    let mut sockets = Vec::with_capacity(count);
    for _ in 0..count.max(1) {
        let socket = socket2::Socket::new(
            socket2::Domain::for_address(target),
            socket2::Type::STREAM,
            Some(socket2::Protocol::TCP),
        )
        .map_err(|e| failed(e.to_string()))?;
        let setup = || -> std::io::Result<std::net::TcpListener> {
            socket.set_reuse_address(true)?;
            socket.set_reuse_port(true)?;
            socket.set_nonblocking(true)?;
            socket.bind(&target.into())?;
            socket.listen(1024)?;
            Ok(socket.try_clone()?.into())
        };
        let listener = setup().map_err(|e| failed(e.to_string()))?;
        target = listener.local_addr().map_err(|e| failed(e.to_string()))?;
        sockets.push(listener);
    }
    Ok((sockets, target))
}

/// The running workers: stopped together, waited for together.
pub struct Workers {
    stop: watch::Sender<bool>,
    done: mpsc::Receiver<()>,
}

/// Stops the workers: they stop accepting at once, and close each connection when its request
/// in flight is answered (or after the drain time).
#[derive(Clone)]
pub struct Handle {
    stop: watch::Sender<bool>,
}

impl Handle {
    pub fn stop(&self) {
        let _ = self.stop.send(true);
    }
}

impl Workers {
    pub fn handle(&self) -> Handle {
        Handle {
            stop: self.stop.clone(),
        }
    }

    /// Until every worker has ended.
    pub async fn wait(&mut self) {
        while self.done.recv().await.is_some() {}
    }
}

/// One worker's sockets: the plain listener's, and the TLS one's when there is one.
pub struct Sockets {
    pub plain: std::net::TcpListener,
    pub tls: Option<TlsSocket>,
}

/// A worker's socket of the TLS listener, its handshakes, and the certificates they choose
/// from.
pub struct TlsSocket {
    pub socket: std::net::TcpListener,
    pub acceptor: TlsAcceptor,
    pub certificates: Current<Certificates>,
}

/// The client connections open on every listener, against the most there may be.
#[derive(Debug)]
pub struct Connections {
    open: AtomicUsize,
    max: usize,
}

impl Connections {
    pub fn new(max: usize) -> Arc<Connections> {
        Arc::new(Connections {
            open: AtomicUsize::new(0),
            max,
        })
    }

    /// A place for one more connection, held until the guard drops; `None` when all are taken.
    fn admit(self: &Arc<Self>) -> Option<Admitted> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()?;
        Some(Admitted(self.clone()))
    }
}

struct Admitted(Arc<Connections>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Starts a worker thread for each entry of `sockets`.
pub fn start(
    sockets: Vec<Sockets>,
    state: Arc<State>,
    connections: Arc<Connections>,
) -> Result<Workers, StartError> {
    let (stop, _) = watch::channel(false);
    let (done_tx, done) = mpsc::channel(1);
    for (index, sockets) in sockets.into_iter().enumerate() {
        let state = state.clone();
        let connections = connections.clone();
        let stop = stop.subscribe();
        let done = done_tx.clone();
        std::thread::Builder::new()
            .name(format!("gateway-worker-{index}"))
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(r) => r,
                    Err(error) => {
                        tracing::error!(%error, "a worker could not start its runtime");
                        return;
                    }
                };
                runtime.block_on(work(sockets, state, connections, stop));
                drop(done);
            })
            .map_err(|e| StartError::Bind {
                addr: "worker".into(),
                reason: e.to_string(),
            })?;
    }
    Ok(Workers { stop, done })
}

/// The connections' settings; `head_timer` times their HTTP/1.1 request heads.
fn builder(head_timer: HeadTimer) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(head_timer)
        .header_read_timeout(HEAD_TIMEOUT)
        .max_buf_size(MAX_HEAD_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEAD_BYTES as u32);
    builder
}

/// One worker: accepts on its sockets until stopped, then drains its connections.
async fn work(
    sockets: Sockets,
    state: Arc<State>,
    connections: Arc<Connections>,
    mut stop: watch::Receiver<bool>,
) {
    let listen = |l: std::net::TcpListener| tokio::net::TcpListener::from_std(l);
    let plain = match listen(sockets.plain) {
        Ok(l) => l,
        Err(error) => return tracing::error!(%error, "a worker could not listen"),
    };
    let tls = match sockets.tls {
        None => None,
        Some(TlsSocket {
            socket,
            acceptor,
            certificates,
        }) => match listen(socket) {
            Ok(l) => Some((l, acceptor, certificates)),
            Err(error) => return tracing::error!(%error, "a worker could not listen"),
        },
    };
    let head_timer = HeadTimer::new();
    tokio::spawn(head_timer.clone().fire());
    let builder = Arc::new(builder(head_timer));
    let graceful = GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => break,
            accepted = plain.accept() => accepted.map(|a| (a, false)),
            accepted = async {
                match &tls {
                    Some((l, _, _)) => l.accept().await,
                    None => std::future::pending().await,
                }
            } => accepted.map(|a| (a, true)),
        };
        let ((tcp, peer), secure) = match accepted {
            Ok(a) => a,
            Err(error) => {
                // Out of file descriptors, most likely: a pause lets connections close.
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(admitted) = connections.admit() else {
            // Full: closed at once, before any byte is read (a flood of idle connections
            // would otherwise take every file descriptor).
            state.metrics.connection_refused();
            drop(tcp);
            continue;
        };
        // Answers are written in pieces (head, then the streamed body): with Nagle's algorithm
        // on, the client's delayed ACK would hold the last piece back about 40 ms.
        let _ = tcp.set_nodelay(true);
        let addr = peer.ip();
        let watcher = graceful.watcher();
        let builder = builder.clone();
        let state = state.clone();
        let handshake = secure
            .then(|| tls.as_ref().map(|(_, a, c)| (a.clone(), c.clone())))
            .flatten();
        tokio::spawn(async move {
            let _admitted = admitted;
            let service = move |peer: Peer| {
                hyper::service::service_fn(move |request| {
                    let state = state.clone();
                    let peer = peer.clone();
                    async move { Ok::<_, Infallible>(crate::handle(request, peer, &state).await) }
                })
            };
            match handshake {
                None => {
                    let service = service(Peer { addr, tls: None });
                    let conn = builder.serve_connection_with_upgrades(TokioIo::new(tcp), service);
                    let _ = watcher.watch(conn).await;
                }
                Some((acceptor, certificates)) => {
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                    else {
                        return;
                    };
                    let negotiated =
                        Negotiated::new(stream.get_ref().1.server_name(), &certificates);
                    let service = service(Peer {
                        addr,
                        tls: Some(Arc::new(negotiated)),
                    });
                    let conn =
                        builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                    let _ = watcher.watch(conn).await;
                }
            }
        });
    }
    drop(plain);
    drop(tls);
    let _ = tokio::time::timeout(DRAIN, graceful.shutdown()).await;
}
