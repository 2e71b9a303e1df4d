//! `auth login|status|logout` and `context list|use|delete`: the config file's contexts. A
//! token is read without echo or from stdin, checked against the API, saved with mode 0600,
//! and never printed back.

use std::time::Duration;

use crate::args::{AuthCommand, ContextCommand, Global};
use crate::client::{Api, Call};
use crate::config::{Context, DEFAULT_CONTEXT, TokenSource};
use crate::confirm::{Answer, Question};
use crate::error::CliError;
use crate::output::{Table, View, print_out};
use crate::secret;
use crate::session::{load_config, printer, settings};

pub async fn auth(command: AuthCommand, global: &Global) -> Result<(), CliError> {
    match command {
        AuthCommand::Login { token_stdin, name } => login(global, token_stdin, name).await,
        AuthCommand::Status => status(global).await,
        AuthCommand::Logout => logout(global),
    }
}

/// What the API says of a token: accepted (with the organization it was checked in) or not.
async fn check(
    url: &str,
    token: &str,
    organization: Option<&str>,
    global: &Global,
) -> Result<(), CliError> {
    let api = Api::new(
        url,
        token,
        organization,
        global.verbose,
        Duration::from_secs(global.request_timeout.max(1)),
    )?;
    // Authentication comes before the organization is resolved: a 400 for a missing
    // organization still means the token was accepted.
    match api
        .send(&Call::get("/v1/public/clusters").query("size", 1))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.code() == Some("organization_required") => Ok(()),
        Err(e) => Err(e),
    }
}

async fn login(global: &Global, token_stdin: bool, name: Option<String>) -> Result<(), CliError> {
    let (path, mut file) = load_config()?;
    let name = name
        .or_else(|| global.context.clone())
        .or_else(|| file.current_context.clone())
        .unwrap_or_else(|| DEFAULT_CONTEXT.to_owned());
    let old = file.contexts.get(&name).cloned().unwrap_or_default();
    let url = global
        .url
        .clone()
        .filter(|u| !u.is_empty())
        .or_else(|| Some(old.url.clone()).filter(|u| !u.is_empty()))
        .ok_or_else(|| CliError::usage("no URL for this context: pass --url https://…"))?;
    let organization = global.organization.clone().or(old.organization.clone());
    warn_if_cleartext(&url);
    let from = if token_stdin {
        secret::From::Stdin
    } else {
        secret::From::Prompt
    };
    let token = secret::read_or(
        &from,
        "token",
        "--token-stdin (echo \"$TOKEN\" | kubesvc auth login --token-stdin)",
    )?
    .trim()
    .to_owned();
    check(&url, &token, organization.as_deref(), global)
        .await
        .map_err(|e| match e {
            e if e.is_status(401) => {
                CliError::NotLoggedIn("the API refused this token (401): nothing was saved".into())
            }
            e => e,
        })?;
    file.contexts.insert(
        name.clone(),
        Context {
            url: url.clone(),
            organization: organization.clone(),
            token: Some(token),
        },
    );
    file.current_context = Some(name.clone());
    file.save(&path)?;
    let org = organization
        .map(|o| format!(", organization {o}"))
        .unwrap_or_default();
    eprintln!(
        "Logged in to {url}{org}; saved as context {name:?} (current) in {}",
        path.display()
    );
    Ok(())
}

/// A token sent over plain HTTP to another machine can be read on the way: said, not
/// refused (a development server on a private network is a fair use).
fn warn_if_cleartext(url: &str) {
    let Ok(parsed) = reqwest::Url::parse(url) else {
        return;
    };
    let loopback = match parsed.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if parsed.scheme() == "http" && !loopback {
        eprintln!("warning: {url} is plain HTTP: the token travels unencrypted on every request");
    }
}

async fn status(global: &Global) -> Result<(), CliError> {
    let (path, file) = load_config()?;
    let s = settings(global, &file)?;
    let source = match &s.token {
        Some((_, TokenSource::Environment)) => "set (from KUBESVC_TOKEN)",
        Some((_, TokenSource::Context)) => "set (from the config file)",
        None => "not set",
    };
    let mut lines = vec![
        ("Config:", path.display().to_string()),
        ("Context:", s.context.clone().unwrap_or_else(|| "-".into())),
        ("URL:", s.url.clone().unwrap_or_else(|| "-".into())),
        (
            "Organization:",
            s.organization
                .clone()
                .unwrap_or_else(|| "- (your preferred one)".into()),
        ),
        ("Token:", source.to_owned()),
    ];
    let outcome = match (&s.url, &s.token) {
        (Some(url), Some((token, _))) => check(url, token, s.organization.as_deref(), global).await,
        _ => Err(CliError::NotLoggedIn(
            "not logged in: run `kubesvc auth login --url URL`, or set KUBESVC_URL and KUBESVC_TOKEN".into(),
        )),
    };
    let verdict = match &outcome {
        Ok(()) => "accepted".to_owned(),
        Err(e) if e.is_status(401) => "refused (401): log in again".to_owned(),
        Err(e) => format!("not checked: {e}"),
    };
    lines.push(("API:", verdict));
    print_out(&printer(global).details(&lines))?;
    match outcome {
        Err(e) if e.is_status(401) => Err(CliError::NotLoggedIn("the token was refused".into())),
        other => other,
    }
}

fn logout(global: &Global) -> Result<(), CliError> {
    let (path, mut file) = load_config()?;
    let name = global
        .context
        .clone()
        .or_else(|| file.current_context.clone())
        .ok_or_else(|| CliError::usage("no current context to log out of"))?;
    let ctx = file
        .contexts
        .get_mut(&name)
        .ok_or_else(|| CliError::usage(format!("no context named {name:?}")))?;
    let had = ctx.token.take().is_some();
    file.save(&path)?;
    if had {
        eprintln!(
            "Logged out of context {name:?}: its token is deleted from {}",
            path.display()
        );
    } else {
        eprintln!("Context {name:?} had no token");
    }
    if std::env::var_os("KUBESVC_TOKEN").is_some() {
        eprintln!("Note: KUBESVC_TOKEN is still set in this environment and is still used");
    }
    Ok(())
}

pub fn context(command: ContextCommand, global: &Global) -> Result<(), CliError> {
    let (path, mut file) = load_config()?;
    match command {
        ContextCommand::List => {
            let mut table = Table::new(&["CURRENT", "NAME", "URL", "ORGANIZATION", "TOKEN"]);
            for (name, ctx) in &file.contexts {
                let current = file.current_context.as_deref() == Some(name.as_str());
                table.row(vec![
                    if current { "*".into() } else { String::new() },
                    name.clone(),
                    ctx.url.clone(),
                    ctx.organization.clone().unwrap_or_else(|| "-".into()),
                    if ctx.token.is_some() {
                        "set".into()
                    } else {
                        "-".into()
                    },
                ]);
            }
            // Never the tokens themselves, in any format.
            let raw = serde_json::json!({
                "current_context": file.current_context,
                "contexts": file.contexts.iter().map(|(name, c)| serde_json::json!({
                    "name": name, "url": c.url, "organization": c.organization, "token_set": c.token.is_some(),
                })).collect::<Vec<_>>(),
            });
            printer(global).show(&View {
                raw,
                names: file.contexts.keys().cloned().collect(),
                table,
            })
        }
        ContextCommand::Use { name } => {
            if !file.contexts.contains_key(&name) {
                return Err(CliError::usage(format!(
                    "no context named {name:?} (kubesvc context list shows them; kubesvc auth login --name {name} makes it)"
                )));
            }
            file.current_context = Some(name.clone());
            file.save(&path)?;
            eprintln!("Switched to context {name:?}");
            Ok(())
        }
        ContextCommand::Delete { name, yes } => {
            if !file.contexts.contains_key(&name) {
                return Err(CliError::usage(format!("no context named {name:?}")));
            }
            Question {
                action: format!("delete context {name}"),
                consequence: "Its URL, organization and saved token are forgotten on this \
                              machine (nothing changes on the server).",
                answer: Answer::Yes,
            }
            .ask(yes)?;
            file.contexts.remove(&name);
            if file.current_context.as_deref() == Some(name.as_str()) {
                file.current_context = None;
            }
            file.save(&path)?;
            eprintln!("Deleted context {name:?}");
            Ok(())
        }
    }
}
