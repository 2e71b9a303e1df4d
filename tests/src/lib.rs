//! The black-box harness: a fresh database, the stub account platform over real HTTP and the
//! full server on a free port, driven only through HTTP (zero2prod's `spawn_app`).

pub mod admin;
pub mod cli;
pub mod console;
pub mod monitoring;
pub mod process;

use std::time::Duration;

pub use account_platform::dev::{
    ACME_ID, GLOBEX_ID, INITECH_ID, TOKEN_ACME_ASSISTANT, TOKEN_ACME_MEMBER,
    TOKEN_ACME_PROJECT_ADMIN, TOKEN_ACME_SUPER_ADMIN, TOKEN_INITECH_SUPER_ADMIN, TOKEN_TWO_ORGS,
};
use platform_stub::{StubHandle, StubPlatform};
use reqwest::{Client, Method, RequestBuilder, Response};
use serde_json::Value;
use server::config::{Config, Source};
use store_postgres::TestDatabase;

/// What a test sent, kept to be written down if the server refuses it with 422.
struct Sent {
    method: String,
    path: String,
    content_type: Option<String>,
    body: Option<Vec<u8>>,
}

impl Sent {
    fn of(request: &reqwest::Request) -> Sent {
        Sent {
            method: request.method().to_string(),
            path: request.url().path().to_owned(),
            content_type: request
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned),
            body: request
                .body()
                .and_then(|b| b.as_bytes())
                .map(<[u8]>::to_vec),
        }
    }

    /// With `KUBESVC_RECORD_422` set to a directory, appends the refused request (a JSON body
    /// only) and the fields the server named to `<dir>/<process id>.jsonl`: `make test` then
    /// checks that the OpenAPI document refuses each such body too (tests/client/refusals.py).
    fn record_refusal(&self, answer: &Answer) {
        let Some(dir) = std::env::var_os("KUBESVC_RECORD_422") else {
            return;
        };
        let is_json = self
            .content_type
            .as_deref()
            .is_some_and(|c| c.starts_with("application/json"));
        let Some(body) = self.body.as_deref().filter(|_| is_json) else {
            return;
        };
        let Ok(body) = serde_json::from_slice::<Value>(body) else {
            return;
        };
        let fields: Vec<Value> = answer.json()["errors"]
            .as_array()
            .map(|errors| errors.iter().map(|e| e["field"].clone()).collect())
            .unwrap_or_default();
        let line = serde_json::json!({
            "method": self.method, "path": self.path, "body": body, "fields": fields,
        });
        let file = std::path::Path::new(&dir).join(format!("{}.jsonl", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&file)
            .and_then(|mut f| std::io::Write::write_all(&mut f, format!("{line}\n").as_bytes()));
        if let Err(e) = written {
            panic!("recording a refused request in {}: {e}", file.display());
        }
    }
}

/// A fixed test key: base64 of 32 bytes.
pub const TEST_SECRETS_KEY: &str = "dGVzdC1vbmx5LXNlY3JldHMta2V5LTMyLWJ5dGVzISE=";

/// The clusters collection.
pub const CLUSTERS: &str = "/v1/public/clusters";
/// The auth servers collection.
pub const AUTH_SERVERS: &str = "/v1/public/gateway/auth-servers";

/// A caller of a cluster's API server where no control-plane firewall is in the way.
pub const SOME_CALLER: std::net::IpAddr =
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(198, 51, 100, 10));

/// A minimal valid create body: one pool of two small nodes.
pub fn cluster_body(org: &str, name: &str) -> Value {
    serde_json::json!({"organization": org, "name": name,
        "node_pools": [{"name": "default", "size": "kube.c5.large", "count": 2}]})
}

pub struct TestApp {
    pub url: String,
    pub platform: StubHandle,
    pub db: TestDatabase,
    pub client: Client,
    /// The simulated clusters' API servers, which ask this server's control plane whether a
    /// bearer token is good (see `provisioner_sim::SimulatedApiServer`).
    pub cluster_api: provisioner_sim::SimulatedApiServer,
    /// The server's use cases, for what no HTTP route of this server starts (an assistant's
    /// request for approval comes through `/mcp`, which has its own tests).
    pub services: domain::service::Services,
}

/// A second server sharing a [`TestApp`]'s database.
pub struct SecondServer {
    pub url: String,
    pub client: Client,
    /// The simulated clusters' API servers, authenticating through this server.
    pub cluster_api: provisioner_sim::SimulatedApiServer,
}

/// An answer, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts the problem+json contract: the content type, `status` equal to the HTTP status,
    /// a `code`, and returns the code.
    pub fn problem_code(&self) -> String {
        assert_eq!(
            self.header("content-type").as_deref(),
            Some("application/problem+json"),
            "{self:?} {}",
            self.text()
        );
        let j = self.json();
        assert_eq!(j["status"], self.status, "{}", self.text());
        j["code"].as_str().unwrap_or_default().to_owned()
    }
}

/// Starts the whole server in-process on a free port over this database and platform, with
/// provisioning steps of 0 ms and these settings on top; returns its base URL and the
/// simulated clusters' API servers that authenticate through it.
async fn start_server(
    db_url: &str,
    platform: &StubHandle,
    settings: &[(&str, &str)],
) -> (
    String,
    provisioner_sim::SimulatedApiServer,
    domain::service::Services,
) {
    let platform_url = platform.url();
    let mut pairs: Vec<(&str, &str)> = vec![
        ("DATABASE_URL", db_url),
        ("ACCOUNT_PLATFORM_URL", platform_url.as_str()),
        ("ACCOUNT_PLATFORM_SERVICE_TOKEN", platform.service_token()),
        ("SECRETS_KEY", TEST_SECRETS_KEY),
        ("BIND_ADDR", "127.0.0.1:0"),
        ("PROVISIONER_STEP_MS", "0"),
        ("DATABASE_POOL_SIZE", "4"),
        // Tests send far more than a person would; the rate-limit tests set their own.
        ("RATE_LIMIT_PER_TOKEN", "0"),
        ("RATE_LIMIT_WRITES_PER_TOKEN", "0"),
        ("RATE_LIMIT_WRITES_PER_ORGANIZATION", "0"),
        ("RATE_LIMIT_UNAUTHENTICATED_PER_ADDRESS", "0"),
    ];
    for (k, v) in settings {
        pairs.retain(|(name, _)| name != k);
        pairs.push((k, v));
    }
    let config = Config::load(&Source::from_pairs(&pairs), false)
        .unwrap_or_else(|e| panic!("test settings: {e}"));
    let running = server::start(config)
        .await
        .unwrap_or_else(|e| panic!("server start: {e:#}"));
    let url = format!("http://{}", running.addr);
    let services = running.services.clone();
    let cluster_api =
        provisioner_sim::SimulatedApiServer::new(std::sync::Arc::new(running.services));
    tokio::spawn(running.server);
    (url, cluster_api, services)
}

impl TestApp {
    /// A server with provisioning steps of 0 ms and these extra settings.
    pub async fn spawn_with(settings: &[(&str, &str)]) -> TestApp {
        let db = TestDatabase::create();
        let platform = StubPlatform::start_demo();
        let (url, cluster_api, services) = start_server(&db.url, &platform, settings).await;
        let client = Client::builder()
            .timeout(Duration::from_secs(90))
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        TestApp {
            url,
            platform,
            db,
            client,
            cluster_api,
            services,
        }
    }

    /// Another server on the same database and platform (a second process in effect: its own
    /// pool, its own LISTEN connection, its own workers).
    pub async fn second_server(&self, settings: &[(&str, &str)]) -> SecondServer {
        let (url, cluster_api, _) = start_server(&self.db.url, &self.platform, settings).await;
        SecondServer {
            url,
            client: self.client.clone(),
            cluster_api,
        }
    }

    pub async fn spawn() -> TestApp {
        Self::spawn_with(&[]).await
    }

    /// A server (provisioning off) on `db`, which it migrates the rest of the way: the release
    /// this build is, started on a database an earlier release left.
    pub async fn spawn_on(db: TestDatabase, settings: &[(&str, &str)]) -> TestApp {
        let platform = StubPlatform::start_demo();
        let mut all = vec![("RECONCILER_WORKERS", "0")];
        all.extend_from_slice(settings);
        let (url, cluster_api, services) = start_server(&db.url, &platform, &all).await;
        let client = Client::builder()
            .timeout(Duration::from_secs(90))
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        TestApp {
            url,
            platform,
            db,
            client,
            cluster_api,
            services,
        }
    }

    /// A server with provisioning switched off (`RECONCILER_WORKERS=0`): clusters stay
    /// `Pending` and deletions stay `Deleting`, so tests of what the API decides by itself
    /// see a phase that does not move under them.
    pub async fn spawn_api_only(settings: &[(&str, &str)]) -> TestApp {
        let mut all = vec![("RECONCILER_WORKERS", "0")];
        all.extend_from_slice(settings);
        Self::spawn_with(&all).await
    }

    pub fn request(&self, method: Method, path: &str, token: Option<&str>) -> RequestBuilder {
        let mut r = self.client.request(method, format!("{}{path}", self.url));
        if let Some(t) = token {
            r = r.bearer_auth(t);
        }
        r
    }

    pub async fn send(&self, r: RequestBuilder) -> Answer {
        let request = r
            .build()
            .unwrap_or_else(|e| panic!("request cannot be built: {e}"));
        // Kept only when refused requests are being recorded (see `Sent::record_refusal`).
        let sent = std::env::var_os("KUBESVC_RECORD_422").map(|_| Sent::of(&request));
        let res: Response = self
            .client
            .execute(request)
            .await
            .unwrap_or_else(|e| panic!("request failed: {e}"));
        let status = res.status().as_u16();
        let headers = res.headers().clone();
        let body = res.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
        let answer = Answer {
            status,
            headers,
            body,
        };
        if let Some(sent) = sent.filter(|_| answer.status == 422) {
            sent.record_refusal(&answer);
        }
        answer
    }

    pub async fn get(&self, path: &str, token: &str) -> Answer {
        self.send(self.request(Method::GET, path, Some(token)))
            .await
    }

    pub async fn delete(&self, path: &str, token: &str) -> Answer {
        self.send(self.request(Method::DELETE, path, Some(token)))
            .await
    }

    pub async fn post(&self, path: &str, token: &str, body: &Value) -> Answer {
        self.send(self.request(Method::POST, path, Some(token)).json(body))
            .await
    }

    pub async fn patch(&self, path: &str, token: &str, body: &Value) -> Answer {
        self.send(self.request(Method::PATCH, path, Some(token)).json(body))
            .await
    }

    /// Creates a cluster in acme as its super_admin and returns its JSON.
    pub async fn create_cluster(&self, name: &str) -> Value {
        let body = serde_json::json!({"organization": "acme", "name": name,
            "node_pools": [{"name": "default", "size": "kube.c5.large", "count": 2}]});
        let a = self
            .post("/v1/public/clusters", TOKEN_ACME_SUPER_ADMIN, &body)
            .await;
        assert_eq!(a.status, 201, "{}", a.text());
        a.json()
    }

    /// Creates a cluster (as [`TestApp::create_cluster`]) and waits until it is `Provisioned`
    /// (two minutes at most); its JSON then.
    pub async fn provisioned_cluster(&self, name: &str) -> Value {
        let made = self.create_cluster(name).await;
        let path = format!("{CLUSTERS}/{}", id(&made));
        self.wait_for(&path, Duration::from_secs(120), |c| {
            c["phase"] == "Provisioned"
        })
        .await
    }

    /// Polls a cluster until `pred` holds (or panics after `limit`).
    pub async fn wait_for(
        &self,
        path: &str,
        limit: Duration,
        pred: impl Fn(&Value) -> bool,
    ) -> Value {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let a = self.get(path, TOKEN_ACME_SUPER_ADMIN).await;
            let j = a.json();
            if pred(&j) {
                return j;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "{path} never reached the expected state; last: {}",
                    a.text()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Follows the operation `answer` points at (its `Operation-Location`) until it is no
    /// longer running (a minute at most, not a timing assertion); the operation then.
    pub async fn finished_operation(&self, answer: &Answer) -> Value {
        let url = answer
            .header("operation-location")
            .unwrap_or_else(|| panic!("no Operation-Location: {answer:?} {}", answer.text()));
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let op = self.get(&url, TOKEN_ACME_SUPER_ADMIN).await.json();
            if op["status"] != "running" {
                return op;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{url} never finished: {op}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The cluster's nodes as `GET …/nodes` lists them, by name.
    pub async fn nodes_of(&self, cluster: &str) -> Vec<Value> {
        let a = self
            .get(&format!("{CLUSTERS}/{cluster}/nodes"), TOKEN_ACME_MEMBER)
            .await;
        assert_eq!(a.status, 200, "{}", a.text());
        let mut nodes = a.json()["items"].as_array().cloned().unwrap_or_default();
        nodes.sort_by_key(|n| n["name"].as_str().unwrap_or_default().to_owned());
        nodes
    }

    /// Creates a cluster as `token` in `org` and returns its JSON (panics unless 201).
    pub async fn create_cluster_as(&self, token: &str, org: &str, name: &str) -> Value {
        let a = self.post(CLUSTERS, token, &cluster_body(org, name)).await;
        assert_eq!(a.status, 201, "{}", a.text());
        a.json()
    }

    /// Sends any method, path, headers (raw bytes allowed) and body.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        headers: &[(&str, &[u8])],
        body: Option<Vec<u8>>,
    ) -> Answer {
        let mut r = self.request(method, path, token);
        for (name, value) in headers {
            let v = reqwest::header::HeaderValue::from_bytes(value)
                .unwrap_or_else(|e| panic!("header {name}: {e}"));
            r = r.header(*name, v);
        }
        if let Some(b) = body {
            r = r.body(b);
        }
        self.send(r).await
    }

    /// A POST with extra headers (an Idempotency-Key, say) and a JSON body.
    pub async fn post_with(
        &self,
        path: &str,
        token: &str,
        headers: &[(&str, &str)],
        body: &Value,
    ) -> Answer {
        let mut r = self.request(Method::POST, path, Some(token)).json(body);
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        self.send(r).await
    }

    /// Row counts of the tables a failed request must not touch.
    pub fn counts(&self) -> [i64; 4] {
        ["clusters", "node_pools", "idempotency_keys", "auth_servers"].map(|t| self.count_rows(t))
    }

    /// Runs a query answering one text column `v` on this test's database.
    pub fn texts(&self, sql: &str) -> Vec<String> {
        use diesel::{Connection, QueryableByName, RunQueryDsl, sql_types::Text};
        #[derive(QueryableByName)]
        struct Row {
            #[diesel(sql_type = Text)]
            v: String,
        }
        let mut conn = diesel::PgConnection::establish(&self.db.url)
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let rows: Vec<Row> = diesel::sql_query(sql)
            .load(&mut conn)
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        rows.into_iter().map(|r| r.v).collect()
    }

    /// Waits (up to a minute) until every row of the provisioning queue is done. A
    /// reconcile commits a cluster's last phase, then settles its queue row in a transaction
    /// of its own: a read that saw the phase may still see the row running.
    pub async fn wait_until_the_queue_is_settled(&self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while self.count_rows("operations WHERE state <> 'done'") > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the provisioning queue never settled"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Rows in a table of this test's database (to show nothing was written).
    pub fn count_rows(&self, table: &str) -> i64 {
        use diesel::{Connection, QueryableByName, RunQueryDsl, sql_types::BigInt};
        #[derive(QueryableByName)]
        struct Count {
            #[diesel(sql_type = BigInt)]
            n: i64,
        }
        let mut conn = diesel::PgConnection::establish(&self.db.url)
            .unwrap_or_else(|e| panic!("connect: {e}"));
        let rows: Vec<Count> = diesel::sql_query(format!("SELECT count(*) AS n FROM {table}"))
            .load(&mut conn)
            .unwrap_or_else(|e| panic!("count {table}: {e}"));
        rows.first().map(|c| c.n).unwrap_or(-1)
    }
}

/// A new database migrated as far as an earlier release took it: every migration whose
/// version sorts before `first_new`.
pub fn database_of_an_earlier_release(first_new: &str) -> TestDatabase {
    use diesel::Connection;
    use diesel::migration::MigrationSource;
    use diesel_migrations::MigrationHarness;
    let db = TestDatabase::create_empty();
    let mut conn =
        diesel::PgConnection::establish(&db.url).unwrap_or_else(|e| panic!("connect: {e}"));
    // Creates the migrations' own table.
    conn.applied_migrations()
        .unwrap_or_else(|e| panic!("the migrations' own table: {e}"));
    let all: Vec<_> = MigrationSource::<diesel::pg::Pg>::migrations(&store_postgres::MIGRATIONS)
        .unwrap_or_else(|e| panic!("migrations: {e}"));
    let earlier: Vec<_> = all
        .into_iter()
        .filter(|m| m.name().version().to_string().as_str() < first_new)
        .collect();
    conn.run_migrations(&earlier)
        .unwrap_or_else(|e| panic!("the earlier migrations: {e}"));
    db
}

/// Runs `sql` on a database (a test setting up what an earlier release wrote).
pub fn execute_sql(db: &TestDatabase, sql: &str) {
    use diesel::{Connection, RunQueryDsl};
    let mut conn =
        diesel::PgConnection::establish(&db.url).unwrap_or_else(|e| panic!("connect: {e}"));
    diesel::sql_query(sql)
        .execute(&mut conn)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

// ---- Assertions shared by the black-box tests ----

/// The `id` of an answer's JSON.
pub fn id(c: &Value) -> String {
    c["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id in {c}"))
        .to_owned()
}

/// Asserts status and code (and the problem+json shape).
#[track_caller]
pub fn expect(a: &Answer, status: u16, code: &str) {
    assert_eq!(a.status, status, "{}", a.text());
    assert_eq!(a.problem_code(), code, "{}", a.text());
}

/// The `field` of each `errors` entry.
pub fn fields(a: &Answer) -> Vec<String> {
    a.json()["errors"]
        .as_array()
        .map(|e| {
            e.iter()
                .map(|x| x["field"].as_str().unwrap_or("?").to_owned())
                .collect()
        })
        .unwrap_or_default()
}
