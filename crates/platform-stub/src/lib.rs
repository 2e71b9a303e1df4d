//! A small HTTP account platform for the project's own tests and manual runs:
//! `GET /v1/me` and `GET /v1/organizations/{id-or-slug}` answered from a [`Directory`], with call
//! counters and fault modes (500, garbage, hang; stopping it gives refused connections).

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use actix_web::dev::ServerHandle;
use actix_web::http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use domain::model::identity::Organization;
use domain::names::OrgRef;
use serde::Serialize;
use serde_json::{Value, json};

pub use account_platform::dev::{Directory, DirectoryUser};

/// The service token the stub expects unless told otherwise. Test-only, like the stub.
pub const DEFAULT_SERVICE_TOKEN: &str = "platform-stub-service-token-for-tests-only-4d2a9c7e1b";

/// Long enough that any client timeout fires first; the stub's shutdown drops it.
const HANG_FOR: Duration = Duration::from_secs(3600);

/// How the stub answers every request, settable while it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Fault {
    /// Answers as the account platform does (docs/configuration.md, "The account platform").
    #[default]
    Normal = 0,
    /// 500 with a small JSON body.
    Status500 = 1,
    /// 200 with a body that is not JSON.
    Garbage = 2,
    /// Never answers within any sane client timeout.
    Hang = 3,
}

impl Fault {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Fault::Status500,
            2 => Fault::Garbage,
            3 => Fault::Hang,
            _ => Fault::Normal,
        }
    }
}

/// What the stub serves; users are kept as JSON so tests can serve shapes no `Caller` has
/// (unknown roles, extra fields).
struct State {
    users: RwLock<HashMap<String, Value>>,
    organizations: RwLock<Vec<Organization>>,
    service_token: String,
    fault: AtomicU8,
    me_calls: AtomicU64,
    org_calls: AtomicU64,
}

/// Starts stubs.
pub struct StubPlatform;

impl StubPlatform {
    /// Starts a stub serving `directory` on a free loopback port, with [`DEFAULT_SERVICE_TOKEN`].
    /// Works from plain and from `#[tokio::test]` tests alike: it runs on its own thread and
    /// runtime.
    ///
    /// # Panics
    /// When no loopback port can be bound (a broken test machine).
    #[expect(
        clippy::expect_used,
        reason = "test support: failing loudly is the point"
    )]
    pub fn start(directory: Directory) -> StubHandle {
        let addr = SocketAddr::from(([127, 0, 0, 1], 0));
        Self::start_on(addr, directory, DEFAULT_SERVICE_TOKEN).expect("start the platform stub")
    }

    /// The demo directory of the development platform.
    pub fn start_demo() -> StubHandle {
        Self::start(Directory::demo())
    }

    pub fn start_on(
        addr: SocketAddr,
        directory: Directory,
        service_token: &str,
    ) -> io::Result<StubHandle> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let users = directory
            .users
            .iter()
            .map(|u| Ok((u.token.clone(), serde_json::to_value(&u.caller)?)))
            .collect::<Result<HashMap<_, _>, serde_json::Error>>()?;
        let state = Arc::new(State {
            users: RwLock::new(users),
            organizations: RwLock::new(directory.organizations),
            service_token: service_token.to_owned(),
            fault: AtomicU8::new(Fault::Normal as u8),
            me_calls: AtomicU64::new(0),
            org_calls: AtomicU64::new(0),
        });
        let (tx, rx) = std::sync::mpsc::channel::<io::Result<ServerHandle>>();
        let data = web::Data::from(Arc::clone(&state));
        let thread = std::thread::Builder::new()
            .name("platform-stub".into())
            .spawn(move || {
                actix_web::rt::System::new().block_on(async move {
                    let server = HttpServer::new(move || {
                        App::new()
                            .app_data(data.clone())
                            .route("/v1/me", web::get().to(me))
                            .route("/v1/organizations/{org}", web::get().to(organization))
                    })
                    .workers(1)
                    .disable_signals()
                    .shutdown_timeout(0)
                    .listen(listener);
                    let server = match server {
                        Ok(s) => s.run(),
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = tx.send(Ok(server.handle()));
                    if let Err(e) = server.await {
                        tracing::warn!(error = %e, "platform stub stopped with an error");
                    }
                });
            })?;
        let server = rx
            .recv()
            .map_err(|_| io::Error::other("the platform stub thread ended before serving"))??;
        Ok(StubHandle {
            addr: local,
            state,
            server,
            thread: Some(thread),
        })
    }
}

/// A running stub. Dropping it (or [`StubHandle::stop`]) shuts it down at once, hanging
/// requests included; its port then refuses connections.
pub struct StubHandle {
    addr: SocketAddr,
    state: Arc<State>,
    server: ServerHandle,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for StubHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StubHandle")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl StubHandle {
    /// `http://127.0.0.1:PORT`, the `ACCOUNT_PLATFORM_URL` to give a client.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn service_token(&self) -> &str {
        &self.state.service_token
    }

    /// Requests that reached `GET /v1/me`, faulted ones included.
    pub fn me_calls(&self) -> u64 {
        self.state.me_calls.load(Ordering::SeqCst)
    }

    /// Requests that reached `GET /v1/organizations/{ref}`, faulted ones included.
    pub fn org_calls(&self) -> u64 {
        self.state.org_calls.load(Ordering::SeqCst)
    }

    pub fn reset_counters(&self) {
        self.state.me_calls.store(0, Ordering::SeqCst);
        self.state.org_calls.store(0, Ordering::SeqCst);
    }

    pub fn set_fault(&self, fault: Fault) {
        self.state.fault.store(fault as u8, Ordering::SeqCst);
    }

    pub fn fault(&self) -> Fault {
        Fault::from_u8(self.state.fault.load(Ordering::SeqCst))
    }

    /// Serves `caller` (a `Caller` or any JSON) for `token` from now on.
    ///
    /// # Panics
    /// When `caller` cannot be turned into JSON (a test bug).
    #[expect(
        clippy::expect_used,
        reason = "test support: failing loudly is the point"
    )]
    pub fn add_user(&self, token: &str, caller: &impl Serialize) {
        let v = serde_json::to_value(caller).expect("caller as JSON");
        write(&self.state.users).insert(token.to_owned(), v);
    }

    /// Makes `token` invalid (401) from now on.
    pub fn remove_user(&self, token: &str) {
        write(&self.state.users).remove(token);
    }

    /// Adds an organization, replacing any with the same id or slug.
    pub fn add_organization(&self, org: Organization) {
        let mut orgs = write(&self.state.organizations);
        orgs.retain(|o| o.id != org.id && o.slug != org.slug);
        orgs.push(org);
    }

    pub fn remove_organization(&self, r: &OrgRef) {
        write(&self.state.organizations).retain(|o| !r.matches(&o.id, &o.slug));
    }

    /// Stops the stub now; equivalent to dropping the handle.
    pub fn stop(self) {}

    fn shutdown(&mut self) {
        if let Some(thread) = self.thread.take() {
            // Not graceful: a hanging request must not hold the test up.
            futures::executor::block_on(self.server.stop(false));
            let _ = thread.join();
        }
    }
}

impl Drop for StubHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A poisoned lock only means another test thread panicked; the data is still usable.
fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// The token of `Authorization: Bearer <token>` (scheme case-insensitive), if any.
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn unauthorized() -> HttpResponse {
    HttpResponse::Unauthorized()
        .insert_header(("WWW-Authenticate", "Bearer"))
        .json(json!({"error": "invalid_token"}))
}

/// The fault's answer, or `None` to answer normally.
async fn faulted(state: &State) -> Option<HttpResponse> {
    match Fault::from_u8(state.fault.load(Ordering::SeqCst)) {
        Fault::Normal => None,
        Fault::Status500 => {
            Some(HttpResponse::InternalServerError().json(json!({"error": "internal"})))
        }
        Fault::Garbage => Some(
            HttpResponse::Ok()
                .insert_header((CONTENT_TYPE, "application/json"))
                .body("<html>this is not json"),
        ),
        Fault::Hang => {
            actix_web::rt::time::sleep(HANG_FOR).await;
            Some(HttpResponse::GatewayTimeout().finish())
        }
    }
}

async fn me(state: web::Data<State>, req: HttpRequest) -> HttpResponse {
    state.me_calls.fetch_add(1, Ordering::SeqCst);
    if let Some(r) = faulted(&state).await {
        return r;
    }
    let caller = bearer(req.headers()).and_then(|t| read(&state.users).get(t).cloned());
    match caller {
        Some(c) => HttpResponse::Ok().json(c),
        None => unauthorized(),
    }
}

async fn organization(
    state: web::Data<State>,
    req: HttpRequest,
    path: web::Path<String>,
) -> HttpResponse {
    state.org_calls.fetch_add(1, Ordering::SeqCst);
    if let Some(r) = faulted(&state).await {
        return r;
    }
    if bearer(req.headers()) != Some(state.service_token.as_str()) {
        return unauthorized();
    }
    let r = OrgRef::classify(&path.into_inner());
    let org = read(&state.organizations)
        .iter()
        .find(|o| r.matches(&o.id, &o.slug))
        .cloned();
    match org {
        Some(o) => HttpResponse::Ok().json(o),
        None => HttpResponse::NotFound().json(json!({"error": "not_found"})),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::io::{Read, Write};
    use std::net::TcpStream;

    use super::*;

    /// One raw HTTP/1.1 GET, so these tests need no client and no runtime.
    fn get(stub: &StubHandle, path: &str, token: Option<&str>) -> String {
        let mut s = TcpStream::connect(stub.addr()).expect("connect");
        let auth = token
            .map(|t| format!("Authorization: Bearer {t}\r\n"))
            .unwrap_or_default();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: stub\r\n{auth}Connection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn serves_me_and_organizations_from_a_plain_test() {
        let stub = StubPlatform::start_demo();
        let me = get(
            &stub,
            "/v1/me",
            Some(account_platform::dev::TOKEN_ACME_MEMBER),
        );
        assert!(
            me.starts_with("HTTP/1.1 200") && me.contains("\"bob\""),
            "{me}"
        );
        assert!(get(&stub, "/v1/me", Some("nope")).starts_with("HTTP/1.1 401"));
        assert!(get(&stub, "/v1/me", None).starts_with("HTTP/1.1 401"));
        let token = stub.service_token().to_owned();
        let org = get(&stub, "/v1/organizations/globex", Some(&token));
        assert!(
            org.starts_with("HTTP/1.1 200") && org.contains("50000"),
            "{org}"
        );
        assert!(get(&stub, "/v1/organizations/umbrella", Some(&token)).starts_with("HTTP/1.1 404"));
        assert_eq!((stub.me_calls(), stub.org_calls()), (3, 2));
        stub.reset_counters();
        assert_eq!((stub.me_calls(), stub.org_calls()), (0, 0));
    }

    #[test]
    fn organizations_need_the_service_token() {
        let stub = StubPlatform::start_demo();
        let wrong = get(
            &stub,
            "/v1/organizations/acme",
            Some(account_platform::dev::TOKEN_ACME_MEMBER),
        );
        assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
        assert!(get(&stub, "/v1/organizations/acme", None).starts_with("HTTP/1.1 401"));
    }

    #[test]
    fn faults_change_every_answer() {
        let stub = StubPlatform::start_demo();
        stub.set_fault(Fault::Status500);
        assert!(get(&stub, "/v1/me", Some("x")).starts_with("HTTP/1.1 500"));
        stub.set_fault(Fault::Garbage);
        let g = get(&stub, "/v1/me", Some("x"));
        assert!(
            g.starts_with("HTTP/1.1 200") && g.contains("not json"),
            "{g}"
        );
        assert_eq!(stub.fault(), Fault::Garbage);
    }

    #[test]
    fn a_stopped_stub_refuses_connections_even_with_a_hanging_request() {
        let stub = StubPlatform::start_demo();
        stub.set_fault(Fault::Hang);
        let addr = stub.addr();
        let mut hung = TcpStream::connect(addr).expect("connect");
        write!(hung, "GET /v1/me HTTP/1.1\r\nHost: stub\r\n\r\n").unwrap();
        // Wait until the request is in the handler so shutdown really has to cut it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while stub.me_calls() == 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        stub.stop();
        assert!(
            TcpStream::connect(addr).is_err(),
            "a stopped stub must refuse connections"
        );
    }

    #[test]
    fn runtime_additions_are_served() {
        let stub = StubPlatform::start(Directory::default());
        let token = stub.service_token().to_owned();
        assert!(get(&stub, "/v1/me", Some("t-1")).starts_with("HTTP/1.1 401"));
        stub.add_user(
            "t-1",
            &serde_json::json!({"user": {"id": "z"}, "memberships": []}),
        );
        assert!(get(&stub, "/v1/me", Some("t-1")).contains("\"z\""));
        stub.remove_user("t-1");
        assert!(get(&stub, "/v1/me", Some("t-1")).starts_with("HTTP/1.1 401"));
        let org = Directory::demo().organizations.remove(0);
        stub.add_organization(org);
        assert!(get(&stub, "/v1/organizations/acme", Some(&token)).starts_with("HTTP/1.1 200"));
        stub.remove_organization(&OrgRef::classify("acme"));
        assert!(get(&stub, "/v1/organizations/acme", Some(&token)).starts_with("HTTP/1.1 404"));
    }
}
