//! What every gateway test stands on: a fresh database, an echo upstream that counts what
//! reaches it, the gateway itself in-process, and clients (reqwest, and raw TCP for requests a
//! client library would tidy up before sending).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actix_web::{App, HttpRequest, HttpResponse, HttpServer, web};
use base64::Engine;
use chrono::Utc;
use domain::model::audit::{
    Actor, Audit, AuditAction, AuditEvent, AuditResource, Channel, Outcome, Parent,
};
use domain::model::auth_server::{
    AuthServer, AuthServerConfig, BasicConfig, BasicCredential, TokenConfig, TokenCredential,
};
use domain::model::identity::ClientKind;
use domain::model::secret::Secret;
use domain::names::DnsLabel;
use domain::ports::secrets::SecretVault;
use domain::ports::storage::{AuthServerChange, AuthServerRepository, AuthServerWrite};
use futures::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use store_postgres::{PgStore, TestDatabase};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

pub const ORG_SLUG: &str = "acme";
/// A second organization, for the tests where one tenant tries to reach another.
pub const OTHER_ORG_SLUG: &str = "globex";
pub const ENV: &str = "production";

// ---------------------------------------------------------------------------------------------
// The upstream
// ---------------------------------------------------------------------------------------------

/// What the upstream received, as it reports it.
#[derive(Debug)]
pub struct Echo {
    pub status: u16,
    pub body: Value,
}

impl Echo {
    pub fn header(&self, name: &str) -> Option<String> {
        self.body["headers"][name].as_str().map(str::to_owned)
    }
}

/// Answers every request with what it received, as JSON. A path ending in `/slow` answers after
/// half a second, `/download` streams 10 MB back, `/teapot` answers 418, `/set-cookie` plants cookies (one named like the
/// gateway's own), `/cacheable` says a shared cache may keep it.
async fn echo(
    req: HttpRequest,
    mut body: web::Payload,
    hits: web::Data<AtomicUsize>,
) -> HttpResponse {
    hits.fetch_add(1, Ordering::SeqCst);
    let mut len = 0usize;
    let mut hasher = Sha256::new();
    while let Some(chunk) = body.next().await {
        let Ok(chunk) = chunk else {
            // The gateway cut the body short (a limit): nothing to answer.
            return HttpResponse::BadRequest().finish();
        };
        len += chunk.len();
        hasher.update(&chunk);
    }
    let path = req.path();
    if path.ends_with("/slow") {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    if path.ends_with("/stall-head") {
        // An upstream that took the request and never answers.
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if path.ends_with("/stall-body") {
        // One piece of the body, then nothing, the connection kept open.
        let first = futures::stream::once(async { Ok::<_, std::io::Error>(web::Bytes::from("x")) });
        return HttpResponse::Ok().streaming(first.chain(futures::stream::pending()));
    }
    if path.ends_with("/download") {
        // 10 MB in 64 KiB chunks, streamed.
        let chunks = futures::stream::iter(
            (0..160).map(|_| Ok::<_, std::io::Error>(web::Bytes::from(vec![b'x'; 65_536]))),
        );
        return HttpResponse::Ok()
            .insert_header(("x-upstream", "yes"))
            .streaming(chunks);
    }
    let mut headers = serde_json::Map::new();
    for (name, value) in req.headers() {
        headers.insert(
            name.as_str().to_owned(),
            Value::String(value.to_str().unwrap_or("").to_owned()),
        );
    }
    let status = if path.ends_with("/teapot") { 418 } else { 200 };
    let mut response =
        HttpResponse::build(actix_web::http::StatusCode::from_u16(status).expect("status"));
    response.insert_header(("x-upstream", "yes"));
    if path.ends_with("/set-cookie") {
        response
            .append_header(("set-cookie", "gateway_session_0123=planted; Path=/"))
            .append_header((
                "set-cookie",
                "__Host-gateway_login_abc=planted; Path=/; Secure",
            ))
            .append_header(("set-cookie", "theme=dark; Path=/"));
    }
    if path.ends_with("/cacheable") {
        response.insert_header(("cache-control", "public, max-age=60"));
    }
    response.json(json!({
        "method": req.method().as_str(),
        "version": format!("{:?}", req.version()),
        "path": path,
        "query": req.query_string(),
        "headers": headers,
        "body_len": len,
        "body_sha256": format!("{:x}", hasher.finalize()),
    }))
}

async fn start_echo(hits: Arc<AtomicUsize>) -> SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind echo");
    let addr = listener.local_addr().expect("echo addr");
    let hits = web::Data::from(hits);
    let server = HttpServer::new(move || {
        App::new()
            .app_data(hits.clone())
            .default_service(web::to(echo))
    })
    .workers(1)
    // HTTP/1.1 and, when a client starts with HTTP/2's preface, h2c.
    .listen_auto_h2c(listener)
    .expect("listen echo")
    .run();
    tokio::spawn(server);
    addr
}

// ---------------------------------------------------------------------------------------------
// The gateway
// ---------------------------------------------------------------------------------------------

/// One `[[route]]` of the routes file, to the echo upstream.
#[derive(Debug, Clone)]
pub struct RouteSpec {
    pub prefix: String,
    pub server: String,
    pub organization: &'static str,
    pub host: Option<String>,
    /// The upstream's own base path (`""` for none).
    pub base: String,
    /// More lines of the route's table (its timeouts, its body limit).
    pub extra: String,
    /// Another upstream than the harness's echo server.
    pub upstream: Option<SocketAddr>,
}

/// A route of `acme` to `server`, under no host and no base path.
pub fn route(prefix: &str, server: &str) -> RouteSpec {
    RouteSpec {
        prefix: prefix.into(),
        server: server.into(),
        organization: ORG_SLUG,
        host: None,
        base: String::new(),
        extra: String::new(),
        upstream: None,
    }
}

impl RouteSpec {
    pub fn of(mut self, organization: &'static str) -> Self {
        self.organization = organization;
        self
    }

    pub fn on_host(mut self, host: &str) -> Self {
        self.host = Some(host.into());
        self
    }

    pub fn under(mut self, base: &str) -> Self {
        self.base = base.into();
        self
    }

    /// The route to another upstream than the echo server.
    pub fn to(mut self, upstream: SocketAddr) -> Self {
        self.upstream = Some(upstream);
        self
    }

    /// The route with these TOML lines added to its table.
    pub fn with(mut self, lines: &str) -> Self {
        self.extra.push_str(lines);
        self.extra.push('\n');
        self
    }
}

fn routes_toml(upstream: SocketAddr, routes: &[RouteSpec]) -> String {
    routes
        .iter()
        .map(|r| {
            let host = r
                .host
                .as_ref()
                .map(|h| format!("host = \"{h}\"\n"))
                .unwrap_or_default();
            format!(
                "[[route]]\n{host}path_prefix = \"{}\"\nupstream = \"http://{upstream}{}\"\n\
                 organization = \"{}\"\nenvironment = \"{ENV}\"\nauth_server = \"{}\"\n{}\n",
                r.prefix,
                r.base,
                r.organization,
                r.server,
                r.extra,
                upstream = r.upstream.unwrap_or(upstream)
            )
        })
        .collect()
}

pub struct TempFile(pub PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub struct Harness {
    pub db: TestDatabase,
    pub store: PgStore,
    pub org: Uuid,
    pub other_org: Uuid,
    pub gateway: SocketAddr,
    /// The TLS listener, when the test asked for one.
    pub tls: Option<SocketAddr>,
    /// The admin listener (`/metrics`), when the test asked for one.
    pub admin: Option<SocketAddr>,
    pub key: String,
    hits: Arc<AtomicUsize>,
    upstream: SocketAddr,
    routes_file: TempFile,
}

/// A gateway with `(prefix, auth server)` routes of `acme`, default settings.
pub async fn harness(routes: &[(&str, &str)]) -> Harness {
    let routes: Vec<RouteSpec> = routes.iter().map(|(p, s)| route(p, s)).collect();
    harness_with(&routes, &[]).await
}

/// A gateway with these routes and these settings on top of the test defaults.
pub async fn harness_with(routes: &[RouteSpec], settings: &[(&str, &str)]) -> Harness {
    harness_with_text(routes, "", settings).await
}

/// The same, with `more` (tables other than routes: certificates) at the end of the routes file.
pub async fn harness_with_text(
    routes: &[RouteSpec],
    more: &str,
    settings: &[(&str, &str)],
) -> Harness {
    let db = TestDatabase::create();
    let url = db.url.clone();
    let store = tokio::task::spawn_blocking(move || {
        PgStore::connect(&url, 2, Duration::from_secs(5)).expect("store")
    })
    .await
    .expect("connect");
    let hits = Arc::new(AtomicUsize::new(0));
    let upstream = start_echo(hits.clone()).await;
    let path = std::env::temp_dir().join(format!("gateway-routes-{}.toml", Uuid::new_v4()));
    std::fs::write(&path, routes_toml(upstream, routes) + more).expect("routes file");
    let mut h = Harness {
        db,
        store,
        org: Uuid::new_v4(),
        other_org: Uuid::new_v4(),
        gateway: "127.0.0.1:1".parse().expect("placeholder"),
        tls: None,
        admin: None,
        key: secrets::Vault::generate_key(),
        hits,
        upstream,
        routes_file: TempFile(path),
    };
    let running = h.launch(settings).await;
    h.tls = running.tls_addr;
    h.admin = running.admin_addr;
    h.gateway = running.spawn();
    h
}

impl Harness {
    /// Starts a gateway process-alike on this harness's database, key and routes; returns its
    /// address and its admin listener's. Tests start a second one to show what two gateway
    /// processes share (and what they do not).
    pub async fn start_gateway(&self, extra: &[(&str, &str)]) -> (SocketAddr, Option<SocketAddr>) {
        let running = self.launch(extra).await;
        let admin = running.admin_addr;
        (running.spawn(), admin)
    }

    /// A gateway on this harness's database, key and routes, serving (its handle stops it).
    pub async fn launch(&self, extra: &[(&str, &str)]) -> gateway::Running {
        self.try_launch(extra).await.expect("gateway starts")
    }

    /// The same, or why it did not start.
    pub async fn try_launch(
        &self,
        extra: &[(&str, &str)],
    ) -> Result<gateway::Running, gateway::StartError> {
        let settings = gateway::Settings::from_lookup(|name| {
            if let Some((_, value)) = extra.iter().find(|(n, _)| *n == name) {
                return Some((*value).to_owned());
            }
            Some(match name {
                "DATABASE_URL" => self.db.url.clone(),
                "GATEWAY_BIND_ADDR" => "127.0.0.1:0".into(),
                "SECRETS_KEY" => self.key.clone(),
                "GATEWAY_ROUTES_FILE" => self.routes_file.0.display().to_string(),
                "GATEWAY_JWKS_MIN_REFRESH_S" => "1".into(),
                // Far beyond any test: every change a test waits for arrives by notification.
                "GATEWAY_RELOAD_INTERVAL_S" => "3600".into(),
                _ => return None,
            })
        })
        .expect("settings");
        gateway::start(settings).await
    }

    /// Replaces the routes file the way an operator's tool would: the new text written beside
    /// it, then renamed over it.
    pub fn replace_routes_file(&self, text: &str) {
        let next = self.routes_file.0.with_extension("next");
        std::fs::write(&next, text).expect("write the new routes file");
        std::fs::rename(&next, &self.routes_file.0).expect("rename over the routes file");
    }

    /// The routes file's text for these routes (to this harness's upstream).
    pub fn routes_text(&self, routes: &[RouteSpec]) -> String {
        routes_toml(self.upstream, routes)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.gateway)
    }

    /// How many requests reached the upstream so far.
    pub fn upstream_hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    pub fn vault(&self) -> secrets::Vault {
        secrets::Vault::from_base64_key(&self.key).expect("vault")
    }

    /// An auth server of `acme`.
    pub fn server(&self, name: &str, config: AuthServerConfig) -> AuthServer {
        self.server_of(ORG_SLUG, name, config)
    }

    /// An auth server of `organization` (`acme` or `globex`).
    pub fn server_of(
        &self,
        organization: &str,
        name: &str,
        config: AuthServerConfig,
    ) -> AuthServer {
        let organization_id = if organization == ORG_SLUG {
            self.org
        } else {
            assert_eq!(organization, OTHER_ORG_SLUG);
            self.other_org
        };
        AuthServer {
            id: Uuid::new_v4(),
            organization_id,
            organization_slug: organization.into(),
            name: DnsLabel::parse(name).expect("name"),
            environment: DnsLabel::parse(ENV).expect("env"),
            config,
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    /// A Token server whose one token is keyed as the API stores it.
    pub fn token_server(&self, organization: &str, name: &str, token: &str) -> AuthServer {
        let credential = TokenCredential {
            id: Uuid::new_v4(),
            digest: self.vault().digest_token(&Secret::new(token)),
            hint: Secret::new(token).hint(),
        };
        self.server_of(
            organization,
            name,
            AuthServerConfig::Token(TokenConfig {
                tokens: vec![credential],
            }),
        )
    }

    /// A Basic server with these `(username, password)` pairs.
    pub fn basic_server(
        &self,
        organization: &str,
        name: &str,
        users: &[(&str, &str)],
    ) -> AuthServer {
        self.server_of(
            organization,
            name,
            AuthServerConfig::Basic(BasicConfig {
                realm: None,
                credentials: users.iter().map(|(u, p)| basic_credential(u, p)).collect(),
            }),
        )
    }

    pub async fn write(&self, change: AuthServerChange, server: &AuthServer) {
        self.store
            .write_auth_server(AuthServerWrite {
                change,
                audit: test_event(server),
                idempotency: None,
            })
            .await
            .expect("write auth server");
    }

    pub async fn insert(&self, server: &AuthServer) {
        self.write(AuthServerChange::Insert(server.clone()), server)
            .await;
    }

    /// Writes `servers` in order, then waits until the gateway has loaded them: until `probe`, a
    /// path on the route of the LAST server, stops answering 503. (A reload reads every server
    /// at once, so once the last write shows, the earlier ones do too.)
    pub async fn insert_all(&self, servers: &[&AuthServer], probe: &str) {
        for server in servers {
            self.insert(server).await;
        }
        let loaded = eventually(Duration::from_secs(10), || async {
            http()
                .get(self.url(probe))
                .send()
                .await
                .is_ok_and(|r| r.status() != 503)
        })
        .await;
        assert!(loaded, "the auth servers were never loaded");
    }
}

pub fn basic_credential(username: &str, password: &str) -> BasicCredential {
    BasicCredential {
        id: Uuid::new_v4(),
        username: username.into(),
        password_hash: secrets::hash_password_blocking(&Secret::new(password)).expect("hash"),
    }
}

/// A token credential as earlier versions stored it (unkeyed SHA-256): still verified.
pub fn token_credential(token: &str) -> TokenCredential {
    TokenCredential {
        id: Uuid::new_v4(),
        digest: secrets::legacy_digest(token),
        hint: Secret::new(token).hint(),
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

// ---------------------------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------------------------

pub fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// `POST /.gateway/<page>` (`sign-out?rd=/`, `sign-out-everywhere`) with `client`'s cookies, as
/// a page of the gateway's own origin posts it (`Origin`, `Sec-Fetch-Site: same-origin`), with
/// these headers added or replacing those.
pub async fn post_gateway_page(
    h: &Harness,
    client: &reqwest::Client,
    page: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = client.post(h.url(&format!("/.gateway/{page}")));
    let own = format!("http://{}", h.gateway);
    for (name, value) in [("origin", own.as_str()), ("sec-fetch-site", "same-origin")] {
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)) {
            request = request.header(name, value);
        }
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("an answer")
}

pub fn basic(user_pass: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(user_pass)
    )
}

pub async fn echo_of(response: reqwest::Response) -> Echo {
    let status = response.status().as_u16();
    let body = response.json().await.unwrap_or(Value::Null);
    Echo { status, body }
}

pub fn header(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// Polls `f` until it returns true, for at most `limit`.
pub async fn eventually<F, Fut>(limit: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < limit {
        if f().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

/// `gateway_routes_reload_failures_total` on the admin listener (`None` without one).
pub async fn routes_refusals(h: &Harness) -> Option<u64> {
    let admin = h.admin?;
    let text = http()
        .get(format!("http://{admin}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("gateway_routes_reload_failures_total "))
        .and_then(|n| n.trim().parse().ok())
}

pub async fn problem_code(response: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = response.status().as_u16();
    let content_type = header(&response, "content-type");
    let body: Value = response.json().await.unwrap_or(Value::Null);
    (status, content_type, body)
}

/// An answer read off a raw connection.
#[derive(Debug)]
pub struct Raw {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Raw {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the answer came from the upstream (the echo marks its own).
    pub fn answered_by_upstream(&self) -> bool {
        self.header("x-upstream") == Some("yes")
    }

    /// The echo's report of the request it received.
    pub fn echo(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// `request` sent byte for byte on a new connection; the answer read until the gateway closes
/// it (send `Connection: close`) or 10 s pass.
pub async fn raw(addr: SocketAddr, request: &str) -> Raw {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream
        .write_all(request.as_bytes())
        .await
        .expect("write request");
    let mut bytes = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut bytes)).await;
    parse_raw(&bytes)
}

/// `GET uri` over HTTP/2 by prior knowledge (h2c) on a new connection, the URI's authority sent
/// as the request's `:authority` whatever it holds, with these header fields.
pub async fn h2c_get(addr: SocketAddr, uri: &str, headers: &[(&str, &str)]) -> Raw {
    use http_body_util::BodyExt;
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .expect("an h2c handshake");
    tokio::spawn(connection);
    let mut request = hyper::Request::get(uri);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("a request");
    let response = sender.send_request(request).await.expect("an answer");
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    let body = response
        .into_body()
        .collect()
        .await
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
        .unwrap_or_default();
    Raw {
        status,
        headers,
        body,
    }
}

/// `GET target` with `Host`, `Connection: close` and these header lines.
pub async fn raw_get(addr: SocketAddr, target: &str, headers: &[&str]) -> Raw {
    raw(addr, &raw_request("GET", addr, target, headers)).await
}

pub fn raw_request(method: &str, addr: SocketAddr, target: &str, headers: &[&str]) -> String {
    let mut request =
        format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for line in headers {
        request.push_str(line);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    request
}

fn parse_raw(bytes: &[u8]) -> Raw {
    raw_answer(&String::from_utf8_lossy(bytes))
}

/// One HTTP/1.1 answer as read off the wire.
pub fn raw_answer(text: &str) -> Raw {
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Raw {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16);
        let Ok(size) = size else { break };
        if size == 0 || after.len() < size {
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].trim_start_matches("\r\n");
    }
    out
}

/// The failed-attempt limit counts in wall-clock minutes: a test that counts failures starts
/// early in one, so the count is not split across two windows.
pub async fn wait_for_a_fresh_minute() {
    let second = Utc::now().timestamp().rem_euclid(60);
    if second > 40 {
        let wait = u64::try_from(61 - second).unwrap_or(1);
        tokio::time::sleep(Duration::from_secs(wait)).await;
    }
}

/// Reads up to the end of a head; the head (lower case), and what came after it.
pub async fn read_head(stream: &mut tokio::net::TcpStream) -> Option<(String, Vec<u8>)> {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = bytes.split_off(end + 4);
            return Some((String::from_utf8_lossy(&bytes).to_ascii_lowercase(), rest));
        }
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&buf[..n]);
    }
}

/// An upstream that reads one request head on each connection, writes `answer` as given, then
/// drops the connection; with the count of connections it accepted.
pub async fn raw_upstream(answer: &'static [u8]) -> (SocketAddr, Arc<AtomicUsize>) {
    keep_alive_upstream(move |_| (answer.to_vec(), true)).await
}

/// The audit event the harness's writes carry (the trail is not what these tests look at).
fn test_event(server: &AuthServer) -> AuditEvent {
    let Audit {
        resource,
        resource_id,
        action,
        changes,
    } = Audit::new(
        AuditResource::AuthServer,
        server.id,
        AuditAction::Updated,
        json!({}),
    );
    AuditEvent {
        id: Uuid::new_v4(),
        organization_id: server.organization_id,
        at: Utc::now(),
        actor: Actor {
            user_id: "test".into(),
            email: None,
            client: ClientKind::Api,
        },
        via: Channel::Api,
        resource,
        resource_id,
        parent: Some(Parent::AuthServer(server.id)),
        action: action.as_str().into(),
        changes,
        request_id: None,
        outcome: Outcome::Applied,
        approval: None,
    }
}

/// A gateway with one route, `prefix`, to `upstream`, behind a Token auth server ("machines")
/// that accepts `token`; ready once the route answers.
pub async fn token_gateway(prefix: &str, upstream: SocketAddr, token: &str) -> Harness {
    token_gateway_with(prefix, upstream, token, &[]).await
}

/// The same, with these settings.
pub async fn token_gateway_with(
    prefix: &str,
    upstream: SocketAddr,
    token: &str,
    settings: &[(&str, &str)],
) -> Harness {
    let h = harness_with(&[route(prefix, "machines").to(upstream)], settings).await;
    let machines = h.token_server(ORG_SLUG, "machines", token);
    h.insert_all(&[&machines], prefix).await;
    h
}

/// An upstream that keeps its connections: every request head read on one is answered with
/// what `answer` makes of it (the head, lower case), and the connection is closed after the
/// answer when `answer` says so. Counts the connections it accepted.
pub async fn keep_alive_upstream(
    answer: impl Fn(&str) -> (Vec<u8>, bool) + Copy + Send + 'static,
) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                // The gateway sends bodiless requests here one at a time: nothing follows a
                // head before its answer.
                while let Some((head, _)) = read_head(&mut tcp).await {
                    let (bytes, close) = answer(&head);
                    if tcp.write_all(&bytes).await.is_err() || close {
                        break;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// `GET target` with these header lines on a connection kept open: the answer is read to the
/// end its framing gives (chunked, or `Content-Length`; HEAD's has no body).
pub async fn kept_request(
    stream: &mut tokio::net::TcpStream,
    method: &str,
    target: &str,
    headers: &[&str],
) -> Raw {
    let mut request = format!("{method} {target} HTTP/1.1\r\nHost: gateway\r\n");
    for line in headers {
        request.push_str(line);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut bytes = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let answer = raw_answer(&text);
            let complete = if method == "HEAD" {
                true
            } else if head
                .to_ascii_lowercase()
                .contains("transfer-encoding: chunked")
            {
                body.ends_with("0\r\n\r\n")
            } else {
                let length: usize = answer
                    .header("content-length")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                body.len() >= length
            };
            if complete {
                return answer;
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("an answer within 10 s")
            .expect("read");
        assert!(n > 0, "the gateway closed the connection: {text}");
        bytes.extend_from_slice(&buf[..n]);
    }
}

/// The request heads a raw upgrading upstream saw, lower case.
pub type Heads = Arc<Mutex<Vec<String>>>;

/// An upstream speaking a made-up protocol, `echo/1`: a request upgrading to it gets 101 and
/// then its bytes back until it closes its side; `/up/unasked` switches whatever was asked;
/// `/up/refuse` and requests without the upgrade get a plain 200 `plain`.
pub async fn upgrading_upstream() -> (SocketAddr, Heads) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads: Heads = Arc::default();
    let seen = heads.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                while let Some((head, _)) = read_head(&mut tcp).await {
                    seen.lock().unwrap().push(head.clone());
                    let switch = !head.contains("/up/refuse")
                        && (head.contains("\r\nupgrade: echo/1") || head.contains("/up/unasked"));
                    if !switch {
                        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nplain";
                        if tcp.write_all(plain).await.is_err() {
                            return;
                        }
                        continue;
                    }
                    let switched =
                        b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: echo/1\r\n\r\n";
                    if tcp.write_all(switched).await.is_err() {
                        return;
                    }
                    let mut buf = [0u8; 4096];
                    while let Ok(n) = tcp.read(&mut buf).await {
                        if n == 0 || tcp.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = tcp.shutdown().await;
                    return;
                }
            });
        }
    });
    (addr, heads)
}

/// A request head for `path` on the gateway with these header lines, its connection kept.
pub fn upgrade_request(h: &Harness, path: &str, lines: &[&str]) -> String {
    let mut request = format!("GET {path} HTTP/1.1\r\nHost: {}\r\n", h.gateway);
    for line in lines {
        request.push_str(line);
        request.push_str("\r\n");
    }
    request.push_str("\r\n");
    request
}
