//! A bare forwarder on hyper 1 / hyper-util, no auth: the ceiling a proxy path built on hyper
//! directly could reach on this machine, measured beside nginx and the gateway before the
//! gateway's path is rebuilt (docs/performance.md, "The proxy path: hyper measured first").
//!
//! `cargo run --release -p gateway --example hyper_forward -- 127.0.0.1:PORT http://127.0.0.1:UPSTREAM`

use std::convert::Infallible;
use std::net::SocketAddr;

use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

type Body = BoxBody<Bytes, hyper::Error>;

async fn forward(
    client: Client<HttpConnector, Incoming>,
    upstream: &'static str,
    mut req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    let Ok(uri) = format!("{upstream}{path}").parse::<Uri>() else {
        return Ok(status(StatusCode::BAD_REQUEST));
    };
    *req.uri_mut() = uri;
    req.headers_mut().remove(hyper::header::HOST);
    match client.request(req).await {
        Ok(res) => Ok(res.map(BodyExt::boxed)),
        Err(_) => Ok(status(StatusCode::BAD_GATEWAY)),
    }
}

fn status(code: StatusCode) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::new())
            .map_err(|never: Infallible| match never {})
            .boxed(),
    );
    *r.status_mut() = code;
    r
}

/// Serves `listen` on the current runtime until the process ends.
async fn serve(listener: tokio::net::TcpListener, upstream: &'static str) -> std::io::Result<()> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: Client<HttpConnector, Incoming> =
        Client::builder(TokioExecutor::new()).build(connector);
    loop {
        let (tcp, _) = listener.accept().await?;
        tcp.set_nodelay(true)?;
        let client = client.clone();
        tokio::spawn(async move {
            let service =
                hyper::service::service_fn(move |req| forward(client.clone(), upstream, req));
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}

/// A listener on `addr` that other threads may bind too (the kernel spreads connections).
fn reuse_port_listener(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = tokio::net::TcpSocket::new_v4()?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

/// `PER_CORE=1`: one single-threaded runtime per core, each with its own listener
/// (SO_REUSEPORT) and upstream pool, as nginx runs one worker per core; otherwise one
/// multi-threaded runtime.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let usage = "usage: hyper_forward LISTEN UPSTREAM";
    let listen: SocketAddr = args.next().ok_or(usage)?.parse()?;
    let upstream: &'static str = args.next().ok_or(usage)?.leak();
    if std::env::var("PER_CORE").is_ok_and(|v| v == "1") {
        let cores = std::env::var("THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
        let threads: Vec<_> = (0..cores)
            .map(|_| {
                std::thread::spawn(move || -> std::io::Result<()> {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    rt.block_on(async { serve(reuse_port_listener(listen)?, upstream).await })
                })
            })
            .collect();
        for t in threads {
            t.join().map_err(|_| "a worker thread panicked")??;
        }
        return Ok(());
    }
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async { serve(reuse_port_listener(listen)?, upstream).await })?;
    Ok(())
}
