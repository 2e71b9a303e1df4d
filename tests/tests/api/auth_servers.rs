//! Gateway auth server management: create, read, list, PATCH, credentials,
//! delete; secrets are write-only and never stored in plain text.

use blackbox::*;
use reqwest::Method;
use serde_json::{Value, json};

const CLIENT_SECRET: &str = "oidc-client-secret-Zq81x";
const PASSWORD: &str = "basic-password-Pw93k";
const TOKEN: &str = "static-token-value-Tk47m";
const TOKEN_2: &str = "second-static-token-Yv26p";
const PASSWORD_2: &str = "other-password-Qr55n";
const NEW_SECRET: &str = "rotated-client-secret-Ns11z";

fn oidc(name: &str, env: &str) -> Value {
    json!({"organization": "acme", "name": name, "environment": env, "type": "oidc", "config": {
        "issuer_url": "https://login.example.com/realms/acme", "redirect_path": "/oauth2/callback",
        "client_id": "gateway", "client_secret": CLIENT_SECRET, "authorized_domain": "app.example.com",
        "email_claim": "email"}})
}

fn basic(name: &str) -> Value {
    json!({"organization": "acme", "name": name, "environment": "production", "type": "basic",
           "config": {"realm": "Acme", "credentials": [{"username": "ops", "password": PASSWORD}]}})
}

fn token(name: &str) -> Value {
    json!({"organization": "acme", "name": name, "environment": "production", "type": "token", "config": {"tokens": [TOKEN]}})
}

fn no_secret(text: &str) {
    for s in [
        CLIENT_SECRET,
        PASSWORD,
        TOKEN,
        TOKEN_2,
        PASSWORD_2,
        NEW_SECRET,
    ] {
        assert!(!text.contains(s), "a secret in an answer: {text}");
    }
}

async fn create(app: &TestApp, body: &Value) -> Value {
    let a = app.post(AUTH_SERVERS, TOKEN_ACME_SUPER_ADMIN, body).await;
    assert_eq!(a.status, 201, "{}", a.text());
    no_secret(&a.text());
    let j = a.json();
    assert_eq!(
        a.header("location"),
        Some(format!("{AUTH_SERVERS}/{}", j["id"].as_str().unwrap()))
    );
    j
}

fn path(s: &Value) -> String {
    format!("{AUTH_SERVERS}/{}", s["id"].as_str().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_each_type_and_never_answer_a_secret() {
    let app = TestApp::spawn_api_only(&[]).await;
    let o = create(&app, &oidc("sso", "production")).await;
    assert_eq!(
        (o["type"].as_str(), o["organization_slug"].as_str()),
        (Some("oidc"), Some("acme"))
    );
    assert_eq!(o["organization_id"], ACME_ID.to_string());
    assert_eq!(o["config"]["client_secret_set"], true);
    assert!(o["config"].get("client_secret").is_none());
    assert_eq!(o["config"]["email_claim"], "email");
    let b = create(&app, &basic("ops")).await;
    let creds = b["config"]["credentials"].as_array().unwrap();
    assert_eq!(creds.len(), 1);
    assert_eq!(creds[0]["username"], "ops");
    assert!(creds[0]["id"].is_string());
    assert_eq!(creds[0].as_object().unwrap().len(), 2, "{}", creds[0]);
    assert_eq!(b["config"]["realm"], "Acme");
    let t = create(&app, &token("api")).await;
    let tokens = t["config"]["tokens"].as_array().unwrap();
    assert_eq!(tokens[0]["hint"], format!("…{}", &TOKEN[TOKEN.len() - 4..]));
    assert_eq!(tokens[0].as_object().unwrap().len(), 2, "{}", tokens[0]);
    // Reads answer the same, and no secret either.
    for s in [&o, &b, &t] {
        let a = app.get(&path(s), TOKEN_ACME_MEMBER).await;
        assert_eq!(a.status, 200);
        no_secret(&a.text());
        assert_eq!(a.json()["config"], s["config"]);
    }
    let list = app
        .get(
            &format!("{AUTH_SERVERS}?organization=acme"),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(list.json()["items"].as_array().map(Vec::len), Some(3));
    no_secret(&list.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_validation_is_422_with_the_field() {
    let app = TestApp::spawn_api_only(&[]).await;
    let set = |mut body: Value, key: &str, v: Value| {
        body["config"][key] = v;
        body
    };
    let cases: Vec<(Value, &str)> = vec![
        (
            set(
                oidc("a", "prod"),
                "issuer_url",
                json!("http://login.example.com"),
            ),
            "config.issuer_url",
        ),
        (
            set(oidc("a", "prod"), "issuer_url", json!("not a url")),
            "config.issuer_url",
        ),
        (
            set(oidc("a", "prod"), "redirect_path", json!("callback")),
            "config.redirect_path",
        ),
        (
            set(
                oidc("a", "prod"),
                "authorized_domain",
                json!("https://app.example.com/"),
            ),
            "config.authorized_domain",
        ),
        (
            set(basic("a"), "realm", json!("say \"hi\"")),
            "config.realm",
        ),
        (
            set(basic("a"), "realm", json!("back\\slash")),
            "config.realm",
        ),
        (
            set(basic("a"), "credentials", json!([])),
            "config.credentials",
        ),
        (
            set(token("a"), "tokens", json!(["short-token-15c"])),
            "config.tokens[0]",
        ),
        (set(token("a"), "tokens", json!([])), "config.tokens"),
        // The gateway matches redirect paths on normalised request paths: only those can match.
        (
            set(oidc("a", "prod"), "redirect_path", json!("/cb/../other")),
            "config.redirect_path",
        ),
        (
            set(oidc("a", "prod"), "redirect_path", json!("/cb/%2e%2e/x")),
            "config.redirect_path",
        ),
        // No provider lives at a cloud metadata or link-local address.
        (
            set(
                oidc("a", "prod"),
                "issuer_url",
                json!("https://169.254.169.254/latest"),
            ),
            "config.issuer_url",
        ),
    ];
    for (body, field) in &cases {
        let a = app.post(AUTH_SERVERS, TOKEN_ACME_SUPER_ADMIN, body).await;
        expect(&a, 422, "validation_failed");
        assert!(
            fields(&a)
                .iter()
                .any(|f| f == field || f.starts_with(&format!("{field}."))),
            "{body}: want {field}: {}",
            a.text()
        );
        no_secret(&a.text());
    }
    for body in [
        json!({"organization": "acme", "name": "a", "environment": "Prod", "type": "token", "config": {"tokens": [TOKEN]}}),
        json!({"organization": "acme", "name": "a", "environment": "prod", "type": "saml", "config": {}}),
        json!({"organization": "acme", "name": "a", "environment": "prod", "type": "token", "config": {"tokens": [TOKEN]}, "extra": 1}),
        json!({"name": "a", "environment": "prod", "type": "token", "config": {"tokens": [TOKEN]}}),
        json!({"organization": "acme", "name": "a", "environment": "prod", "type": "token", "config": {"credentials": []}}),
    ] {
        expect(
            &app.post(AUTH_SERVERS, TOKEN_ACME_SUPER_ADMIN, &body).await,
            422,
            "validation_failed",
        );
    }
    // Loopback http issuers are fine (RFC 8252), and a 16-character token is enough.
    create(
        &app,
        &set(
            oidc("local", "dev"),
            "issuer_url",
            json!("http://127.0.0.1:8080/realms/dev"),
        ),
    )
    .await;
    create(
        &app,
        &set(
            oidc("local2", "dev"),
            "issuer_url",
            json!("http://localhost:9000"),
        ),
    )
    .await;
    create(
        &app,
        &set(token("sixteen"), "tokens", json!(["0123456789abcdef"])),
    )
    .await;
    assert_eq!(app.count_rows("auth_servers"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_100_credentials_per_server_and_the_bound_is_checked_before_hashing() {
    let app = TestApp::spawn_api_only(&[]).await;
    // 300 passwords would be 300 Argon2id hashes: refused whole, with one error for the list.
    let pairs: Vec<Value> = (0..300)
        .map(|i| json!({"username": format!("user-{i}"), "password": PASSWORD}))
        .collect();
    let mut many = basic("crowd");
    many["config"]["credentials"] = json!(pairs);
    let a = app.post(AUTH_SERVERS, TOKEN_ACME_SUPER_ADMIN, &many).await;
    expect(&a, 422, "validation_failed");
    assert_eq!(fields(&a), vec!["config.credentials"], "{}", a.text());
    let tokens: Vec<String> = (0..101).map(|i| format!("{TOKEN}-{i:03}")).collect();
    let mut over = token("machines");
    over["config"]["tokens"] = json!(tokens);
    let a = app.post(AUTH_SERVERS, TOKEN_ACME_SUPER_ADMIN, &over).await;
    expect(&a, 422, "validation_failed");
    assert_eq!(fields(&a), vec!["config.tokens"]);
    assert_eq!(app.count_rows("auth_servers"), 0);

    // Exactly 100 is fine; the 101st through the credentials route is refused the same way.
    let mut full = token("machines");
    full["config"]["tokens"] = json!(tokens[..100]);
    let server = create(&app, &full).await;
    let a = app
        .post(
            &format!("{}/credentials", path(&server)),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"token": tokens[100]}),
        )
        .await;
    expect(&a, 422, "validation_failed");
    assert_eq!(fields(&a), vec!["credentials"]);
    no_secret(&a.text());
    assert_eq!(app.count_rows("auth_server_credentials"), 100);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_unique_per_organization_and_environment() {
    let app = TestApp::spawn_api_only(&[]).await;
    create(&app, &token("api")).await;
    let a = app
        .post(AUTH_SERVERS, TOKEN_ACME_SUPER_ADMIN, &basic("api"))
        .await;
    expect(&a, 409, "name_conflict");
    no_secret(&a.text());
    let mut staging = token("api");
    staging["environment"] = json!("staging");
    create(&app, &staging).await;
    // Another organization may use the name too.
    let mut g = token("api");
    g["organization"] = json!("globex");
    assert_eq!(app.post(AUTH_SERVERS, TOKEN_TWO_ORGS, &g).await.status, 201);
    // Filtered by environment.
    let names = |a: &Answer| {
        a.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["environment"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let all = app
        .get(
            &format!("{AUTH_SERVERS}?organization=acme"),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(names(&all).len(), 2);
    let prod = app
        .get(
            &format!("{AUTH_SERVERS}?organization=acme&environment=production"),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(names(&prod), ["production"]);
    let none = app
        .get(
            &format!("{AUTH_SERVERS}?organization=acme&environment=nowhere"),
            TOKEN_ACME_MEMBER,
        )
        .await;
    assert_eq!(names(&none).len(), 0);
    expect(
        &app.get(
            &format!("{AUTH_SERVERS}?organization=acme&environment=Not_A_Label"),
            TOKEN_ACME_MEMBER,
        )
        .await,
        400,
        "invalid_query",
    );
    // Renaming into a taken name is a conflict too.
    let s = create(&app, &token("other")).await;
    expect(
        &app.patch(&path(&s), TOKEN_ACME_SUPER_ADMIN, &json!({"name": "api"}))
            .await,
        409,
        "name_conflict",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patch_merges_config_and_rotates_the_client_secret() {
    let app = TestApp::spawn_api_only(&[]).await;
    let o = create(&app, &oidc("sso", "production")).await;
    let a = app.patch(&path(&o), TOKEN_ACME_SUPER_ADMIN, &json!({"config": {"issuer_url": "https://id.example.org", "client_secret": NEW_SECRET}})).await;
    assert_eq!(a.status, 200, "{}", a.text());
    no_secret(&a.text());
    let c = &a.json()["config"];
    assert_eq!(c["issuer_url"], "https://id.example.org");
    assert_eq!(
        (
            c["client_id"].as_str(),
            c["redirect_path"].as_str(),
            c["email_claim"].as_str()
        ),
        (Some("gateway"), Some("/oauth2/callback"), Some("email"))
    );
    assert_eq!(c["client_secret_set"], true);
    let b = create(&app, &basic("ops")).await;
    let a = app
        .patch(
            &path(&b),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"config": {"realm": "Ops Area"}, "environment": "staging"}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(
        (
            a.json()["config"]["realm"].as_str(),
            a.json()["environment"].as_str()
        ),
        (Some("Ops Area"), Some("staging"))
    );
    assert_eq!(
        a.json()["config"]["credentials"],
        b["config"]["credentials"]
    );
    // Bad PATCHes.
    for body in [
        json!({}),
        json!({"config": {"realm": "a\"b"}}),
        json!({"config": {"credentials": [{"username": "x", "password": "y"}]}}),
        json!({"type": "token"}),
        json!({"organization": "globex"}),
    ] {
        let a = app.patch(&path(&b), TOKEN_ACME_SUPER_ADMIN, &body).await;
        expect(&a, 422, "validation_failed");
    }
    expect(
        &app.patch(
            &path(&o),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"config": {"issuer_url": "http://evil.example.com"}}),
        )
        .await,
        422,
        "validation_failed",
    );
    expect(
        &app.patch(
            &path(&o),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"config": {"redirect_path": "cb"}}),
        )
        .await,
        422,
        "validation_failed",
    );
    expect(
        &app.patch(&path(&o), TOKEN_ACME_MEMBER, &json!({"name": "x"}))
            .await,
        403,
        "forbidden",
    );
}

/// Every change answers the object as a read shows it next, `updated_at` included (a PATCH
/// answered the old one, a credential change too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_answers_what_a_read_shows_next() {
    let app = TestApp::spawn_api_only(&[]).await;
    let o = create(&app, &oidc("sso", "production")).await;
    let t = create(&app, &token("keys")).await;
    let credential = json!({"token": "another-token-0123456789"});
    let changes = [
        (
            &o,
            path(&o),
            json!({"config": {"client_secret": NEW_SECRET}}),
        ),
        (&o, path(&o), json!({"name": "sso-2"})),
        (&t, format!("{}/credentials", path(&t)), credential),
    ];
    for (server, url, body) in changes {
        let answer = if url.ends_with("/credentials") {
            app.post(&url, TOKEN_ACME_SUPER_ADMIN, &body).await
        } else {
            app.patch(&url, TOKEN_ACME_SUPER_ADMIN, &body).await
        };
        assert!(
            answer.status == 200 || answer.status == 201,
            "{}",
            answer.text()
        );
        let read = app.get(&path(server), TOKEN_ACME_SUPER_ADMIN).await.json();
        assert!(
            read["updated_at"].as_str() > server["updated_at"].as_str(),
            "{read}"
        );
        if answer.status == 200 {
            assert_eq!(answer.json(), read, "{url} {body}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_add_remove_and_their_conflicts() {
    let app = TestApp::spawn_api_only(&[]).await;
    let b = create(&app, &basic("ops")).await;
    let creds = format!("{}/credentials", path(&b));
    let a = app
        .post(
            &creds,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"username": "dev", "password": PASSWORD_2}),
        )
        .await;
    assert_eq!(a.status, 201, "{}", a.text());
    no_secret(&a.text());
    let added = a.json();
    assert_eq!(added["username"], "dev");
    assert_eq!(added.as_object().unwrap().len(), 2, "{added}");
    let a = app
        .post(
            &creds,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"username": "dev", "password": "whatever-else-long"}),
        )
        .await;
    expect(&a, 409, "name_conflict");
    expect(
        &app.post(&creds, TOKEN_ACME_SUPER_ADMIN, &json!({"token": TOKEN_2}))
            .await,
        422,
        "validation_failed",
    );
    expect(
        &app.delete(
            &format!("{creds}/{}", uuid::Uuid::new_v4()),
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await,
        404,
        "not_found",
    );
    expect(
        &app.delete(&format!("{creds}/not-a-uuid"), TOKEN_ACME_SUPER_ADMIN)
            .await,
        404,
        "not_found",
    );
    let d = app
        .delete(
            &format!("{creds}/{}", added["id"].as_str().unwrap()),
            TOKEN_ACME_SUPER_ADMIN,
        )
        .await;
    assert_eq!((d.status, d.body.len()), (204, 0));
    let first = b["config"]["credentials"][0]["id"].as_str().unwrap();
    expect(
        &app.delete(&format!("{creds}/{first}"), TOKEN_ACME_SUPER_ADMIN)
            .await,
        409,
        "last_credential",
    );
    assert_eq!(
        app.get(&path(&b), TOKEN_ACME_MEMBER).await.json()["config"]["credentials"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    // Token servers: 201 with the hint; a token already there is a conflict.
    let t = create(&app, &token("api")).await;
    let tcreds = format!("{}/credentials", path(&t));
    let a = app
        .post(&tcreds, TOKEN_ACME_SUPER_ADMIN, &json!({"token": TOKEN_2}))
        .await;
    assert_eq!(a.status, 201, "{}", a.text());
    assert_eq!(
        a.json()["hint"],
        format!("…{}", &TOKEN_2[TOKEN_2.len() - 4..])
    );
    no_secret(&a.text());
    expect(
        &app.post(&tcreds, TOKEN_ACME_SUPER_ADMIN, &json!({"token": TOKEN}))
            .await,
        409,
        "name_conflict",
    );
    expect(
        &app.post(
            &tcreds,
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"token": "too-short"}),
        )
        .await,
        422,
        "validation_failed",
    );
    // OIDC servers have no credentials.
    let o = create(&app, &oidc("sso", "production")).await;
    expect(
        &app.post(
            &format!("{}/credentials", path(&o)),
            TOKEN_ACME_SUPER_ADMIN,
            &json!({"username": "a", "password": "b-long-enough"}),
        )
        .await,
        422,
        "validation_failed",
    );
    // Members may not touch credentials.
    expect(
        &app.post(
            &creds,
            TOKEN_ACME_MEMBER,
            &json!({"username": "x", "password": "y-long-enough"}),
        )
        .await,
        403,
        "forbidden",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_is_204_then_404() {
    let app = TestApp::spawn_api_only(&[]).await;
    let s = create(&app, &token("api")).await;
    expect(
        &app.delete(&path(&s), TOKEN_ACME_MEMBER).await,
        403,
        "forbidden",
    );
    let a = app.delete(&path(&s), TOKEN_ACME_SUPER_ADMIN).await;
    assert_eq!((a.status, a.body.len()), (204, 0));
    expect(
        &app.get(&path(&s), TOKEN_ACME_MEMBER).await,
        404,
        "not_found",
    );
    expect(
        &app.delete(&path(&s), TOKEN_ACME_SUPER_ADMIN).await,
        404,
        "not_found",
    );
    assert_eq!(app.count_rows("auth_servers"), 0);
    assert_eq!(app.count_rows("auth_server_credentials"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_holds_no_secret_in_plain_text() {
    let app = TestApp::spawn_api_only(&[]).await;
    let key = |k: &str| [("Idempotency-Key", k.to_owned())];
    for (i, body) in [oidc("sso", "production"), basic("ops"), token("api")]
        .iter()
        .enumerate()
    {
        let k = key(&format!("secret-key-{i:04}"));
        let a = app
            .post_with(
                AUTH_SERVERS,
                TOKEN_ACME_SUPER_ADMIN,
                &[(k[0].0, k[0].1.as_str())],
                body,
            )
            .await;
        assert_eq!(a.status, 201, "{}", a.text());
    }
    let list = app
        .get(
            &format!("{AUTH_SERVERS}?organization=acme"),
            TOKEN_ACME_MEMBER,
        )
        .await
        .json();
    for s in list["items"].as_array().unwrap() {
        let creds = format!("{}/credentials", path(s));
        match s["type"].as_str() {
            Some("basic") => assert_eq!(
                app.post(
                    &creds,
                    TOKEN_ACME_SUPER_ADMIN,
                    &json!({"username": "dev", "password": PASSWORD_2})
                )
                .await
                .status,
                201
            ),
            Some("token") => assert_eq!(
                app.post(&creds, TOKEN_ACME_SUPER_ADMIN, &json!({"token": TOKEN_2}))
                    .await
                    .status,
                201
            ),
            _ => assert_eq!(
                app.patch(
                    &path(s),
                    TOKEN_ACME_SUPER_ADMIN,
                    &json!({"config": {"client_secret": NEW_SECRET}})
                )
                .await
                .status,
                200
            ),
        }
    }
    // Every column of every table, as text (bytea also decoded), searched for each secret in
    // plain text and in hex.
    let tables = app.texts("SELECT table_name::text AS v FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'");
    assert!(
        tables.contains(&"auth_server_credentials".to_owned()),
        "{tables:?}"
    );
    let mut dump = String::new();
    for t in &tables {
        dump.extend(app.texts(&format!("SELECT t::text AS v FROM \"{t}\" t")));
        let bytea = app.texts(&format!(
            "SELECT column_name::text AS v FROM information_schema.columns WHERE table_schema = 'public' AND table_name = '{t}' AND data_type = 'bytea'"
        ));
        for c in bytea {
            dump.extend(app.texts(&format!(
                "SELECT coalesce(encode(\"{c}\", 'escape'), '') AS v FROM \"{t}\""
            )));
        }
    }
    assert!(dump.len() > 1000, "the dump is suspiciously small");
    let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    for s in [
        CLIENT_SECRET,
        PASSWORD,
        TOKEN,
        TOKEN_2,
        PASSWORD_2,
        NEW_SECRET,
    ] {
        assert!(!dump.contains(s), "{s} stored in plain text");
        assert!(!dump.contains(&hex(s)), "{s} stored as hex");
    }
    // The idempotency rows hold the answers, which hold no secret either, and replay.
    let k = key("secret-key-0002");
    let a = app
        .post_with(
            AUTH_SERVERS,
            TOKEN_ACME_SUPER_ADMIN,
            &[(k[0].0, k[0].1.as_str())],
            &token("api"),
        )
        .await;
    assert_eq!(
        (a.status, a.header("idempotency-replay").as_deref()),
        (201, Some("true"))
    );
    no_secret(&a.text());
    let _ = Method::GET;
}
