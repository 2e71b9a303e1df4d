//! `auth-server create|list|get|update|delete` and `auth-server credential add|remove`.
//!
//! Secrets (a token, a password, a client secret) come from a prompt, stdin or a named
//! environment variable (`secret` module), and only go into the request body. The bodies are
//! built as JSON here (the wire crate's shapes hold secrets the server never writes back) and
//! the tests read each through the server's own request types.

use reqwest::Method;
use serde_json::{Map, Value, json};
use wire::auth_server::{AuthServerConfigView, AuthServerList, AuthServerView, CredentialView};

use super::key;
use crate::args::{AuthServerCommand, CredentialCommand, OidcFlags, SecretFlags};
use crate::client::Call;
use crate::confirm::{Answer, Question};
use crate::error::CliError;
use crate::output::{Table, View, age, cell, print_out, stamp};
use crate::resolve;
use crate::secret;
use crate::session::Session;

const AUTH_SERVERS: &str = "/v1/public/gateway/auth-servers";

pub async fn run(s: &Session, command: AuthServerCommand) -> Result<(), CliError> {
    match command {
        AuthServerCommand::Create {
            name,
            environment,
            kind,
            username,
            realm,
            oidc,
            secret: from,
            key: k,
        } => {
            let config = create_config(&kind, username, realm, &oidc, &from)?;
            let body = json!({
                "organization": s.api.required_organization()?,
                "name": name, "environment": environment, "type": kind, "config": config,
            });
            let call = Call::new(Method::POST, AUTH_SERVERS)
                .body(body)
                .key(Some(&key(&k)));
            let raw = s.api.send(&call).await?.json()?;
            show(s, raw)
        }
        AuthServerCommand::List { environment } => {
            let mut call = Call::get(AUTH_SERVERS);
            if let Some(env) = environment {
                call = call.query("environment", env);
            }
            let answer = s.api.send(&call).await?;
            let list: AuthServerList = answer.parse()?;
            let mut table =
                Table::new(&["NAME", "ENVIRONMENT", "TYPE", "CREDENTIALS", "ID", "AGE"]);
            for a in &list.items {
                table.row(vec![
                    a.name.clone(),
                    a.environment.clone(),
                    cell(&json!(a.kind)),
                    credential_count(&a.config),
                    a.id.to_string(),
                    age(&a.created_at),
                ]);
            }
            s.out.show(&View {
                raw: answer.json()?,
                names: list.items.iter().map(|a| a.id.to_string()).collect(),
                table,
            })
        }
        AuthServerCommand::Get {
            server,
            environment,
        } => {
            let found = resolve::auth_server(&s.api, &server, environment.as_deref()).await?;
            show(s, serde_json::to_value(&found).unwrap_or_default())
        }
        AuthServerCommand::Update {
            server,
            environment,
            new_name,
            new_environment,
            realm,
            oidc,
            client_secret,
            secret: from,
        } => {
            let mut config = oidc_fields(&oidc);
            if let Some(realm) = realm {
                config.insert("realm".into(), json!(realm));
            }
            if client_secret {
                let secret = secret::read(&secret::From::of(&from), "client secret")?;
                config.insert("client_secret".into(), json!(secret));
            }
            let mut body = Map::new();
            if let Some(name) = new_name {
                body.insert("name".into(), json!(name));
            }
            if let Some(env) = new_environment {
                body.insert("environment".into(), json!(env));
            }
            if !config.is_empty() {
                body.insert("config".into(), Value::Object(config));
            }
            if body.is_empty() {
                return Err(CliError::usage(
                    "nothing to change: give --new-name, --new-environment, --realm, an OIDC setting or --client-secret",
                ));
            }
            let found = resolve::auth_server(&s.api, &server, environment.as_deref()).await?;
            // No Idempotency-Key on this route: sent once.
            let call = Call::new(Method::PATCH, format!("{AUTH_SERVERS}/{}", found.id))
                .body(Value::Object(body));
            let raw = s.api.send(&call).await?.json()?;
            show(s, raw)
        }
        AuthServerCommand::Delete {
            server,
            environment,
            yes,
            key: k,
        } => {
            let found = resolve::auth_server(&s.api, &server, environment.as_deref()).await?;
            Question {
                action: format!(
                    "delete auth server {} of environment {}",
                    found.name, found.environment
                ),
                consequence: "Its credentials go with it, and gateway routes that name it refuse \
                              every request until they name another server.",
                answer: Answer::Name(&found.name),
            }
            .ask(yes)?;
            let call = Call::new(Method::DELETE, format!("{AUTH_SERVERS}/{}", found.id))
                .key(Some(&key(&k)));
            s.api.send(&call).await?;
            if s.out.format == crate::args::Output::Name {
                return print_out(&format!("{}\n", found.id));
            }
            eprintln!(
                "Auth server {} ({}) is deleted",
                found.name, found.environment
            );
            Ok(())
        }
        AuthServerCommand::Credential(c) => credential(s, c).await,
    }
}

async fn credential(s: &Session, command: CredentialCommand) -> Result<(), CliError> {
    match command {
        CredentialCommand::Add {
            server,
            environment,
            username,
            secret: from,
            key: k,
        } => {
            let found = resolve::auth_server(&s.api, &server, environment.as_deref()).await?;
            let body = match (&found.config, username) {
                (AuthServerConfigView::Basic { .. }, Some(username)) => {
                    let password = secret::read(&secret::From::of(&from), "password")?;
                    json!({"username": username, "password": password})
                }
                (AuthServerConfigView::Basic { .. }, None) => {
                    return Err(CliError::usage(
                        "a basic auth server's credential needs --username",
                    ));
                }
                (AuthServerConfigView::Token { .. }, None) => {
                    json!({"token": secret::read(&secret::From::of(&from), "token")?})
                }
                (AuthServerConfigView::Token { .. }, Some(_)) => {
                    return Err(CliError::usage(
                        "a token auth server's credential is a token: leave out --username",
                    ));
                }
                (AuthServerConfigView::Oidc { .. }, _) => {
                    return Err(CliError::usage(
                        "an oidc auth server has no credentials of its own: its users sign in at the issuer",
                    ));
                }
            };
            let call = Call::new(
                Method::POST,
                format!("{AUTH_SERVERS}/{}/credentials", found.id),
            )
            .body(body)
            .key(Some(&key(&k)));
            let raw = s.api.send(&call).await?.json()?;
            let mut table = Table::new(&["ID", "USER OR TOKEN"]);
            table.row(vec![super::field(&raw, "id"), credential_label(&raw)]);
            s.out.show(&View {
                names: vec![super::field(&raw, "id")],
                raw,
                table,
            })
        }
        CredentialCommand::Remove {
            server,
            credential,
            environment,
            yes,
            key: k,
        } => {
            let found = resolve::auth_server(&s.api, &server, environment.as_deref()).await?;
            Question {
                action: format!(
                    "remove credential {credential} from auth server {}",
                    found.name
                ),
                consequence: "Requests that present it are refused at the gateway from now on.",
                answer: Answer::Yes,
            }
            .ask(yes)?;
            let call = Call::new(
                Method::DELETE,
                format!(
                    "{AUTH_SERVERS}/{}/credentials/{}",
                    found.id,
                    crate::resolve::segment("credential", &credential)?
                ),
            )
            .key(Some(&key(&k)));
            s.api.send(&call).await?;
            eprintln!(
                "Credential {credential} removed from auth server {}",
                found.name
            );
            Ok(())
        }
    }
}

/// The `config` of a create body for `kind`, its secret read as the flags say.
fn create_config(
    kind: &str,
    username: Option<String>,
    realm: Option<String>,
    oidc: &OidcFlags,
    from: &SecretFlags,
) -> Result<Value, CliError> {
    let from = secret::From::of(from);
    match kind {
        "token" => Ok(json!({"tokens": [secret::read(&from, "token")?]})),
        "basic" => {
            let username = username.ok_or_else(|| {
                CliError::usage("a basic auth server needs --username (its first user)")
            })?;
            let password = secret::read(&from, "password")?;
            let mut config = json!({"credentials": [{"username": username, "password": password}]});
            if let Some(realm) = realm {
                config["realm"] = json!(realm);
            }
            Ok(config)
        }
        "oidc" => {
            let missing: Vec<&str> = [
                ("--issuer-url", &oidc.issuer_url),
                ("--client-id", &oidc.client_id),
                ("--authorized-domain", &oidc.authorized_domain),
                ("--redirect-path", &oidc.redirect_path),
            ]
            .into_iter()
            .filter(|(_, v)| v.is_none())
            .map(|(flag, _)| flag)
            .collect();
            if !missing.is_empty() {
                return Err(CliError::usage(format!(
                    "an oidc auth server needs {}",
                    missing.join(", ")
                )));
            }
            let mut config = oidc_fields(oidc);
            config.insert(
                "client_secret".into(),
                json!(secret::read(&from, "client secret")?),
            );
            Ok(Value::Object(config))
        }
        other => Err(CliError::usage(format!(
            "--type must be token, basic or oidc, not {other:?}"
        ))),
    }
}

/// The OIDC settings given as flags.
fn oidc_fields(oidc: &OidcFlags) -> Map<String, Value> {
    [
        ("issuer_url", &oidc.issuer_url),
        ("client_id", &oidc.client_id),
        ("authorized_domain", &oidc.authorized_domain),
        ("redirect_path", &oidc.redirect_path),
        ("username_claim", &oidc.username_claim),
        ("email_claim", &oidc.email_claim),
        ("role_claim", &oidc.role_claim),
        ("group_claim", &oidc.group_claim),
    ]
    .into_iter()
    .filter_map(|(name, v)| v.as_ref().map(|v| (name.to_owned(), json!(v))))
    .collect()
}

fn credential_count(config: &AuthServerConfigView) -> String {
    match config {
        AuthServerConfigView::Basic { credentials, .. } => counted(credentials.len(), "user"),
        AuthServerConfigView::Token { tokens } => counted(tokens.len(), "token"),
        AuthServerConfigView::Oidc { issuer_url, .. } => issuer_url.clone(),
    }
}

fn counted(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

fn credential_label(v: &Value) -> String {
    v["username"]
        .as_str()
        .or(v["hint"].as_str())
        .unwrap_or("-")
        .to_owned()
}

/// One auth server: its settings, then its credentials.
fn show(s: &Session, raw: Value) -> Result<(), CliError> {
    let a: AuthServerView = serde_json::from_value(raw.clone()).map_err(|e| {
        CliError::Network(format!(
            "the API's auth server does not have the expected shape: {e}"
        ))
    })?;
    if s.out.is_data() {
        return s.out.show(&View {
            raw,
            names: vec![a.id.to_string()],
            table: Table::default(),
        });
    }
    let mut pairs = vec![
        ("Name:", a.name.clone()),
        ("ID:", a.id.to_string()),
        ("Organization:", a.organization_slug.clone()),
        ("Environment:", a.environment.clone()),
        ("Type:", cell(&json!(a.kind))),
    ];
    let mut credentials = Table::new(&["CREDENTIAL ID", "USER OR TOKEN"]);
    match &a.config {
        AuthServerConfigView::Oidc {
            issuer_url,
            client_id,
            authorized_domain,
            redirect_path,
            ..
        } => {
            pairs.push(("Issuer:", issuer_url.clone()));
            pairs.push(("Client id:", client_id.clone()));
            pairs.push(("Client secret:", "set".into()));
            pairs.push(("Authorized domain:", authorized_domain.clone()));
            pairs.push(("Redirect path:", redirect_path.clone()));
        }
        AuthServerConfigView::Basic {
            realm,
            credentials: list,
        } => {
            pairs.push(("Realm:", realm.clone()));
            for c in list {
                credentials.row(credential_row(c));
            }
        }
        AuthServerConfigView::Token { tokens } => {
            for c in tokens {
                credentials.row(credential_row(c));
            }
        }
    }
    pairs.push(("Created:", stamp(&a.created_at)));
    let mut text = s.out.details(&pairs);
    if !credentials.rows.is_empty() {
        text.push('\n');
        text.push_str(&s.out.render(&credentials));
    }
    print_out(&text)
}

fn credential_row(c: &CredentialView) -> Vec<String> {
    match c {
        CredentialView::Basic { id, username } => vec![id.to_string(), username.clone()],
        CredentialView::Token { id, hint } => vec![id.to_string(), hint.clone()],
    }
}

#[cfg(test)]
mod tests {
    use wire::request::auth_server::{AuthServerPatch, CreateAuthServerRequest, CredentialRequest};

    use super::*;

    fn env_secret(var: &str) -> SecretFlags {
        SecretFlags {
            secret_stdin: false,
            secret_from_env: Some(var.into()),
        }
    }

    fn oidc() -> OidcFlags {
        OidcFlags {
            issuer_url: Some("https://login.example.com".into()),
            client_id: Some("gw".into()),
            authorized_domain: Some("app.example.com".into()),
            redirect_path: Some("/oauth2/callback".into()),
            username_claim: None,
            email_claim: None,
            role_claim: None,
            group_claim: Some("groups".into()),
        }
    }

    /// Every create body the CLI writes is one the server's request type reads, as the type it says.
    #[test]
    fn each_type_of_create_body_reads_as_the_servers_request() {
        // PATH is set in every environment the tests run in; its value stands in for a secret.
        let from = env_secret("PATH");
        let none = OidcFlags {
            issuer_url: None,
            client_id: None,
            authorized_domain: None,
            redirect_path: None,
            ..oidc()
        };
        for (kind, username, flags) in [
            ("token", None, &none),
            ("basic", Some("alice"), &none),
            ("oidc", None, &oidc()),
        ] {
            let config = create_config(kind, username.map(str::to_owned), None, flags, &from)
                .unwrap_or_else(|e| panic!("{kind}: {e}"));
            let body = json!({"organization": "acme", "name": "gw", "environment": "production", "type": kind, "config": config});
            let read: CreateAuthServerRequest =
                serde_json::from_value(body).unwrap_or_else(|e| panic!("{kind}: {e}"));
            let draft = domain::input::auth_server::CreateAuthServerRequest::from(read);
            assert!(
                !matches!(
                    draft.config,
                    Some(domain::input::auth_server::CreateConfig::Unreadable(_))
                ),
                "{kind}: the config is not read as its type"
            );
        }
    }

    #[test]
    fn an_oidc_server_without_its_settings_names_the_missing_flags() {
        let partial = OidcFlags {
            client_id: None,
            redirect_path: None,
            ..oidc()
        };
        let e = create_config("oidc", None, None, &partial, &env_secret("PATH")).err();
        assert_eq!(
            e.map(|e| e.to_string()),
            Some("an oidc auth server needs --client-id, --redirect-path".into())
        );
    }

    #[test]
    fn patch_and_credential_bodies_read_as_the_servers_requests() {
        let mut config = oidc_fields(&oidc());
        config.insert("client_secret".into(), json!("a-new-secret"));
        let patch = json!({"name": "sso", "config": config});
        assert!(serde_json::from_value::<AuthServerPatch>(patch).is_ok());
        for body in [
            json!({"username": "bob", "password": "bobs-long-password"}),
            json!({"token": "0123456789abcdef0123"}),
        ] {
            assert!(
                serde_json::from_value::<CredentialRequest>(body.clone()).is_ok(),
                "{body}"
            );
        }
    }
}
