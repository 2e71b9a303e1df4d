//! Secrets: never in a response, never in a log line.

use super::*;

const PASSWORD: &str = "faults-basic-password-Pw71q";
const PASSWORD_2: &str = "faults-second-password-Pw82r";
const STATIC_TOKEN: &str = "faults-static-token-Tk63s";
const STATIC_TOKEN_2: &str = "faults-second-token-Tk94t";
const SHORT_TOKEN: &str = "shrt-Tk05u";
const CLIENT_SECRET: &str = "faults-oidc-client-secret-Cs36v";
const CLIENT_SECRET_2: &str = "faults-rotated-secret-Cs47w";
const MISPLACED: &str = "faults-misplaced-secret-Ms58x";
const WRONG_BEARER: &str = "faults-unknown-bearer-Br69y";

/// Every answer the server gave, with what it was for, to be searched for secrets at the end.
#[derive(Default)]
struct Answers(Vec<(String, Answer)>);

impl Answers {
    /// Keeps the answer; its status.
    fn record(&mut self, label: &str, a: Answer) -> u16 {
        let status = a.status;
        self.0.push((label.to_owned(), a));
        status
    }
}

/// A create body of each kind of auth server, each carrying its secret.
struct AuthServerBodies {
    oidc: Value,
    basic: Value,
    token: Value,
}

fn auth_server_bodies() -> AuthServerBodies {
    AuthServerBodies {
        oidc: json!({"organization": "acme", "name": "sso", "environment": "production",
            "type": "oidc", "config": {"issuer_url": "https://login.example.com/realms/acme",
            "redirect_path": "/oauth2/callback", "client_id": "gateway",
            "client_secret": CLIENT_SECRET, "authorized_domain": "app.example.com"}}),
        basic: json!({"organization": "acme", "name": "ops", "environment": "production",
            "type": "basic", "config": {"realm": "Ops",
            "credentials": [{"username": "ops", "password": PASSWORD}]}}),
        token: token_server("api", STATIC_TOKEN),
    }
}

/// The ids of the auth servers made from [`AuthServerBodies`].
struct AuthServerIds {
    oidc: String,
    basic: String,
    token: String,
}

/// The credentials collection of an auth server.
fn cred(id: &str) -> String {
    format!("{AUTH_SERVERS}/{id}/credentials")
}

/// `v` with `value` put at `path`.
fn with(v: &Value, path: &[&str], value: Value) -> Value {
    let mut v = v.clone();
    let mut at = &mut v;
    for p in &path[..path.len() - 1] {
        at = &mut at[*p];
    }
    at[path[path.len() - 1]] = value;
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_a_response_or_a_log_line() {
    let app = TestApp::spawn_with(&[("RECONCILER_WORKERS", "0")]).await;
    let scratch = Scratch::new("secrets");
    let env = binary_env(
        &app.platform,
        &app.db.url,
        &[
            ("PROVISIONER_STEP_MS", "0"),
            ("RECONCILER_POLL_MS", "20"),
            ("TOKEN_CACHE_TTL_S", "0"),
            ("RUST_LOG", "debug"),
        ],
    );
    let (mut server, http) = start_ready(&env, free_port(), scratch.path("server.log")).await;
    let mut answers = Answers::default();
    let bodies = auth_server_bodies();

    let ids = create_each_kind_of_auth_server_then_replay_it(&http, &mut answers, &bodies).await;
    add_credentials_twice_rotate_a_secret_and_read_everything(&http, &mut answers, &ids).await;
    misplaced_secrets_in_auth_server_creates_are_client_errors(&http, &mut answers, &bodies).await;
    misplaced_secrets_in_credentials_and_patches_are_client_errors(&http, &mut answers, &ids).await;
    misplaced_secrets_in_cluster_creates_are_client_errors(&http, &mut answers).await;
    truncated_json_carrying_a_token_is_422(&http, &mut answers).await;
    unknown_bearers_and_the_wrong_scheme_are_401(&http, &mut answers).await;
    a_failing_platform_is_502_while_logging_at_debug(&app.platform, &http, &mut answers).await;
    other_roles_read_and_another_organization_is_403(&http, &mut answers).await;
    remove_a_credential_and_every_auth_server(&http, &mut answers, &ids).await;

    server.terminate();
    let log = server.log_text();
    dump_what_is_checked_when_asked(&answers, &log);
    the_server_logged_at_debug(&server, &log);
    let secrets = every_secret_in_play(app.platform.service_token());
    no_response_carries_a_secret(&answers, &secrets);
    no_log_line_carries_a_secret(&log, &secrets);
    eprintln!(
        "secrets: {} responses and {} log lines checked for {} secrets",
        answers.0.len(),
        log.lines().count(),
        secrets.len()
    );
}

/// Each kind created (201) under an Idempotency-Key, then the stored answer replayed.
async fn create_each_kind_of_auth_server_then_replay_it(
    http: &Http,
    answers: &mut Answers,
    bodies: &AuthServerBodies,
) -> AuthServerIds {
    let mut ids = HashMap::new();
    for (kind, body) in [
        ("oidc", &bodies.oidc),
        ("basic", &bodies.basic),
        ("token", &bodies.token),
    ] {
        let key = format!("secrets-{kind}-0001");
        let headers = [("Idempotency-Key", key.as_str())];
        let a = http
            .send(
                Method::POST,
                AUTH_SERVERS,
                Some(TOKEN_ACME_SUPER_ADMIN),
                &headers,
                Some(body),
            )
            .await;
        let id = a.json()["id"].as_str().unwrap_or_default().to_owned();
        assert_eq!(answers.record(kind, a), 201, "create {kind}");
        ids.insert(kind, id);
        // A replay of the stored answer.
        let a = http
            .send(
                Method::POST,
                AUTH_SERVERS,
                Some(TOKEN_ACME_SUPER_ADMIN),
                &headers,
                Some(body),
            )
            .await;
        assert_eq!(answers.record(&format!("replay {kind}"), a), 201);
    }
    AuthServerIds {
        oidc: ids["oidc"].clone(),
        basic: ids["basic"].clone(),
        token: ids["token"].clone(),
    }
}

/// Credentials added, one of them twice (409), a rotation, reads.
async fn add_credentials_twice_rotate_a_secret_and_read_everything(
    http: &Http,
    answers: &mut Answers,
    ids: &AuthServerIds,
) {
    for (label, path, body, want) in [
        (
            "add password",
            cred(&ids.basic),
            json!({"username": "dev", "password": PASSWORD_2}),
            201,
        ),
        (
            "add token",
            cred(&ids.token),
            json!({"token": STATIC_TOKEN_2}),
            201,
        ),
        (
            "same token again",
            cred(&ids.token),
            json!({"token": STATIC_TOKEN_2}),
            409,
        ),
        (
            "same user again",
            cred(&ids.basic),
            json!({"username": "dev", "password": PASSWORD}),
            409,
        ),
    ] {
        assert_eq!(
            answers.record(label, http.post(&path, &body).await),
            want,
            "{label}"
        );
    }
    let a = http
        .patch(
            &format!("{AUTH_SERVERS}/{}", ids.oidc),
            &json!({"config": {"client_secret": CLIENT_SECRET_2}}),
        )
        .await;
    assert_eq!(answers.record("rotate", a), 200);
    for id in [&ids.oidc, &ids.basic, &ids.token] {
        let a = http.get(&format!("{AUTH_SERVERS}/{id}")).await;
        assert_eq!(answers.record("read", a), 200);
    }
    let a = http
        .get(&format!(
            "{AUTH_SERVERS}?organization=acme&environment=production"
        ))
        .await;
    assert_eq!(answers.record("list", a), 200);
}

/// Sends each bad request as acme's super_admin; each is a client error.
async fn each_is_a_client_error(
    http: &Http,
    answers: &mut Answers,
    bad: &[(&str, Method, String, Value)],
) {
    for (label, method, path, body) in bad {
        let a = http
            .send(
                method.clone(),
                path,
                Some(TOKEN_ACME_SUPER_ADMIN),
                &[],
                Some(body),
            )
            .await;
        let status = answers.record(label, a);
        assert!(
            (400..500).contains(&status),
            "{label}: {status} (a client error expected)"
        );
    }
}

/// Auth server creates carrying the secrets in the wrong places: unknown fields, wrong JSON
/// types, a static token too short.
async fn misplaced_secrets_in_auth_server_creates_are_client_errors(
    http: &Http,
    answers: &mut Answers,
    b: &AuthServerBodies,
) {
    let bad = [
        (
            "unknown field",
            with(&b.oidc, &["config", "extra"], json!(MISPLACED)),
        ),
        (
            "unknown top field",
            with(&b.basic, &["secret"], json!(PASSWORD)),
        ),
        (
            "secret as an array client id",
            with(&b.oidc, &["config", "client_id"], json!([CLIENT_SECRET])),
        ),
        (
            "secret where an object goes",
            with(&b.oidc, &["config"], json!(CLIENT_SECRET)),
        ),
        (
            "client_secret wrong type",
            with(
                &b.oidc,
                &["config", "client_secret"],
                json!({"v": CLIENT_SECRET}),
            ),
        ),
        (
            "tokens as a string",
            with(&b.token, &["config", "tokens"], json!(STATIC_TOKEN)),
        ),
        (
            "token too short",
            with(&b.token, &["config", "tokens"], json!([SHORT_TOKEN])),
        ),
        (
            "token as an array name",
            with(&b.token, &["name"], json!([STATIC_TOKEN])),
        ),
        (
            "password wrong type",
            with(
                &b.basic,
                &["config", "credentials"],
                json!([{"username": "x", "password": [PASSWORD]}]),
            ),
        ),
        (
            "password as the realm",
            with(
                &b.basic,
                &["config", "realm"],
                json!(format!("\"{PASSWORD}")),
            ),
        ),
        (
            "secret in the environment",
            with(&b.token, &["environment"], json!(MISPLACED)),
        ),
    ]
    .map(|(label, body)| (label, Method::POST, AUTH_SERVERS.to_owned(), body));
    each_is_a_client_error(http, answers, &bad).await;
}

/// Credentials of the wrong type, too short or for another kind of server, and credentials or
/// a badly typed secret in a PATCH.
async fn misplaced_secrets_in_credentials_and_patches_are_client_errors(
    http: &Http,
    answers: &mut Answers,
    ids: &AuthServerIds,
) {
    let (post, patch) = (Method::POST, Method::PATCH);
    let server = |id: &str| format!("{AUTH_SERVERS}/{id}");
    let bad = [
        (
            "credential as a number",
            post.clone(),
            cred(&ids.token),
            json!({"token": 12345}),
        ),
        (
            "credential wrong type",
            post.clone(),
            cred(&ids.token),
            json!({"token": [STATIC_TOKEN]}),
        ),
        (
            "short credential",
            post.clone(),
            cred(&ids.token),
            json!({"token": SHORT_TOKEN}),
        ),
        (
            "password on a token server",
            post.clone(),
            cred(&ids.token),
            json!({"username": "x", "password": PASSWORD}),
        ),
        (
            "token on an oidc server",
            post.clone(),
            cred(&ids.oidc),
            json!({"token": STATIC_TOKEN}),
        ),
        (
            "credentials in a patch",
            patch.clone(),
            server(&ids.basic),
            json!({"config": {"credentials": [{"username": "x", "password": PASSWORD}]}}),
        ),
        (
            "tokens in a patch",
            patch.clone(),
            server(&ids.token),
            json!({"config": {"tokens": [STATIC_TOKEN]}}),
        ),
        (
            "client secret wrong type in a patch",
            patch,
            server(&ids.oidc),
            json!({"config": {"client_secret": [CLIENT_SECRET_2]}}),
        ),
    ];
    each_is_a_client_error(http, answers, &bad).await;
}

async fn misplaced_secrets_in_cluster_creates_are_client_errors(
    http: &Http,
    answers: &mut Answers,
) {
    let cluster = cluster_body("acme", "c1");
    let bad = [
        (
            "secret in a cluster body",
            with(&cluster, &["description"], json!([MISPLACED])),
        ),
        (
            "secret as the cluster tags",
            with(&cluster, &["tags"], json!(MISPLACED)),
        ),
    ]
    .map(|(label, body)| (label, Method::POST, CLUSTERS.to_owned(), body));
    each_is_a_client_error(http, answers, &bad).await;
}

/// Malformed JSON cut off inside a static token.
async fn truncated_json_carrying_a_token_is_422(http: &Http, answers: &mut Answers) {
    let truncated = format!(
        "{{\"organization\": \"acme\", \"type\": \"token\", \"config\": {{\"tokens\": [\"{STATIC_TOKEN}"
    );
    let a = http
        .client
        .post(format!("{}{AUTH_SERVERS}", http.base))
        .bearer_auth(TOKEN_ACME_SUPER_ADMIN)
        .header("Content-Type", "application/json")
        .body(truncated)
        .send()
        .await
        .unwrap();
    let a = Answer {
        status: a.status().as_u16(),
        headers: a.headers().clone(),
        body: a.bytes().await.unwrap().to_vec(),
    };
    assert_eq!(answers.record("truncated JSON", a), 422);
}

async fn unknown_bearers_and_the_wrong_scheme_are_401(http: &Http, answers: &mut Answers) {
    let path = format!("{CLUSTERS}?organization=acme");
    let wrong_scheme = format!("Token {TOKEN_ACME_MEMBER}");
    for (label, token, headers) in [
        ("unknown bearer", Some(WRONG_BEARER), vec![]),
        (
            "wrong scheme",
            None,
            vec![("Authorization", wrong_scheme.as_str())],
        ),
    ] {
        let a = http.send(Method::GET, &path, token, &headers, None).await;
        assert_eq!(answers.record(label, a), 401);
    }
}

/// A valid bearer while the platform fails, with the server logging at debug.
async fn a_failing_platform_is_502_while_logging_at_debug(
    platform: &platform_stub::StubHandle,
    http: &Http,
    answers: &mut Answers,
) {
    for fault in [Fault::Status500, Fault::Garbage] {
        platform.set_fault(fault);
        fault_injected(&format!(
            "account platform {fault:?} while logging at debug"
        ));
        let a = http.get(&format!("{CLUSTERS}?organization=acme")).await;
        assert_eq!(answers.record("platform down", a), 502);
    }
    platform.set_fault(Fault::Normal);
}

/// Every other role lists auth servers (whatever the answer); another organization is 403.
async fn other_roles_read_and_another_organization_is_403(http: &Http, answers: &mut Answers) {
    for (token, org) in [
        (TOKEN_ACME_MEMBER, "acme"),
        (TOKEN_ACME_PROJECT_ADMIN, "acme"),
        (TOKEN_ACME_ASSISTANT, "acme"),
        (TOKEN_INITECH_SUPER_ADMIN, "initech"),
        (TOKEN_TWO_ORGS, "acme"),
    ] {
        let a = http
            .send(
                Method::GET,
                &format!("{AUTH_SERVERS}?organization={org}&environment=production"),
                Some(token),
                &[],
                None,
            )
            .await;
        answers.record("other roles", a);
    }
    let a = http
        .send(
            Method::GET,
            &format!("{AUTH_SERVERS}?organization=globex&environment=production"),
            Some(TOKEN_ACME_MEMBER),
            &[],
            None,
        )
        .await;
    assert_eq!(answers.record("other organization", a), 403);
}

/// Removing the credentials and the servers.
async fn remove_a_credential_and_every_auth_server(
    http: &Http,
    answers: &mut Answers,
    ids: &AuthServerIds,
) {
    let delete = |path: String| async move {
        http.send(
            Method::DELETE,
            &path,
            Some(TOKEN_ACME_SUPER_ADMIN),
            &[],
            None,
        )
        .await
    };
    let list = http
        .get(&format!("{AUTH_SERVERS}/{}", ids.token))
        .await
        .json();
    if let Some(first) = list["config"]["tokens"][0]["id"].as_str() {
        let a = delete(format!("{}/{first}", cred(&ids.token))).await;
        assert_eq!(answers.record("remove credential", a), 204);
    }
    for id in [&ids.oidc, &ids.basic, &ids.token] {
        let a = delete(format!("{AUTH_SERVERS}/{id}")).await;
        assert_eq!(answers.record("delete", a), 204);
    }
}

/// FAULTS_DUMP=1 prints what was checked, to see the test still bites.
fn dump_what_is_checked_when_asked(answers: &Answers, log: &str) {
    if std::env::var("FAULTS_DUMP").is_ok() {
        for (l, a) in &answers.0 {
            eprintln!("{l}: {} {}", a.status, a.text());
        }
        eprintln!("{log}");
    }
}

fn the_server_logged_at_debug(server: &ServerProcess, log: &str) {
    assert!(
        log.contains("DEBUG") && log.contains("request"),
        "the server logged at debug: {}",
        server.log_tail()
    );
}

/// Every secret the test sent or the server holds: the auth servers' secrets, the bearers, the
/// platform's service token and the secrets key.
fn every_secret_in_play(service_token: &str) -> [&str; 17] {
    [
        PASSWORD,
        PASSWORD_2,
        STATIC_TOKEN,
        STATIC_TOKEN_2,
        SHORT_TOKEN,
        CLIENT_SECRET,
        CLIENT_SECRET_2,
        MISPLACED,
        WRONG_BEARER,
        TOKEN_ACME_SUPER_ADMIN,
        TOKEN_ACME_MEMBER,
        TOKEN_ACME_PROJECT_ADMIN,
        TOKEN_ACME_ASSISTANT,
        TOKEN_INITECH_SUPER_ADMIN,
        TOKEN_TWO_ORGS,
        service_token,
        TEST_SECRETS_KEY,
    ]
}

/// Neither the body nor a header of any answer.
fn no_response_carries_a_secret(answers: &Answers, secrets: &[&str]) {
    for (label, a) in &answers.0 {
        let mut seen = a.text();
        for (name, value) in &a.headers {
            seen.push_str(&format!(
                "\n{name}: {}",
                String::from_utf8_lossy(value.as_bytes())
            ));
        }
        for s in secrets {
            assert!(
                !seen.contains(s),
                "{label}: the response carries a secret: {seen}"
            );
        }
    }
}

fn no_log_line_carries_a_secret(log: &str, secrets: &[&str]) {
    for (n, line) in log.lines().enumerate() {
        for s in secrets {
            assert!(!line.contains(s), "log line {n} carries a secret: {line}");
        }
    }
}
