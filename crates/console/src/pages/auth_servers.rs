//! **Auth servers**, the gateway's dashboard: the organization's auth servers with an
//! environment filter, "Add auth server" with a form per type (OIDC, Basic, Token), a server's
//! page with its configuration, editing, credentials (add, remove) and deletion. Secrets are
//! write-only: a page says a client secret is set, shows a token's hint, and never carries a
//! secret back, not even into a form drawn again after a refusal.

use actix_web::http::StatusCode;
use actix_web::web::{Bytes, Path, Query};
use actix_web::{HttpRequest, HttpResponse};
use api::extract::Id;
use domain::DomainError;
use domain::input::auth_server::{
    AuthServerPatch, BasicConfigPatch, BasicConfigRequest, BasicCredentialRequest, ConfigPatch,
    CreateAuthServerRequest, CreateConfig, CredentialRequest, OidcConfigPatch, OidcConfigRequest,
    TokenConfigRequest, TokenCredentialRequest,
};
use domain::model::auth_server::{
    AuthServerConfigView, AuthServerType, AuthServerView, CredentialView,
};
use domain::model::secret::Secret;
use domain::names::DnsLabel;
use domain::rules;
use maud::{Markup, html};
use serde::Deserialize;

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::pages::clusters::when;
use crate::pages::forms::{Change, Redirect, Submitted, new_key, or_redraw, refusal, settled};
use crate::pages::layout::{self, Nav};
use crate::pages::{Acting, check_form, html_page, see_other, urlencode};
use crate::session::Signed;
use domain::service::Command;

/// Credential rows a new Basic or Token form starts with (empty rows are ignored).
const ROWS: usize = 3;
/// At most this many rows are drawn, whatever a form asks for.
const MAX_ROWS: usize = 100;

fn kind_label(kind: AuthServerType) -> &'static str {
    match kind {
        AuthServerType::Oidc => "OIDC",
        AuthServerType::Basic => "Basic",
        AuthServerType::Token => "Token",
    }
}

fn chrome(
    signed: &Signed,
    acting: &Acting<'_>,
    title: &str,
    status: StatusCode,
    body: Markup,
) -> HttpResponse {
    let here = format!("{PREFIX}/auth-servers");
    let nav = Nav {
        caller: &signed.caller,
        acting,
        csrf: &signed.session.csrf,
        here: &here,
        pending: signed.pending_approvals,
    };
    html_page(status, layout::page(title, Some(&nav), body))
}

#[derive(Deserialize)]
pub struct ListQuery {
    organization: Option<String>,
    environment: Option<String>,
}

pub async fn list(signed: Signed, query: Query<ListQuery>) -> Result<HttpResponse, ConsoleError> {
    let acting = Acting::resolve(&signed.caller, query.organization.as_deref());
    let environment = match query.environment.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(e) => Some(
            DnsLabel::parse(e)
                .map_err(|m| ConsoleError::BadForm(format!("environment: {m}")))?
                .as_str()
                .to_owned(),
        ),
    };
    let servers = signed
        .services
        .list_auth_servers(&signed.caller, &acting.selector, environment.as_deref())
        .await?;
    let org = acting
        .membership
        .map(|m| m.organization.slug.clone())
        .unwrap_or_default();
    let body = html! {
        div.title-row {
            h1 { "Auth servers" }
        }
        p.hint { "The gateway checks requests to your routes against these servers." }
        form.zone method="get" action={ (PREFIX) "/auth-servers" } {
            input type="hidden" name="organization" value=(org);
            label for="environment" { "Environment" }
            input #environment type="text" name="environment" value=(environment.as_deref().unwrap_or(""));
            button.secondary type="submit" { "Filter" }
        }
        @if acting.may_change() {
            p.actions {
                "Add auth server: "
                @for kind in AuthServerType::ALL {
                    a.button href={ (PREFIX) "/auth-servers/new?type=" (kind.as_str()) "&organization=" (urlencode(&org)) } {
                        "Add " (kind_label(kind)) " auth server"
                    }
                    " "
                }
            }
        }
        @if servers.is_empty() {
            p.empty { "No auth servers here yet." }
        } @else {
            table.servers {
                thead { tr {
                    th scope="col" { "Name" } th scope="col" { "Environment" } th scope="col" { "Type" }
                    th scope="col" { "Credentials" } th scope="col" { "Created" }
                } }
                tbody {
                    @for s in &servers {
                        tr {
                            th scope="row" { a href={ (PREFIX) "/auth-servers/" (s.id) } { (s.name) } }
                            td { (s.environment) }
                            td { (kind_label(s.kind)) }
                            td { (credential_summary(&s.config)) }
                            td { (when(s.created_at)) }
                        }
                    }
                }
            }
        }
    };
    Ok(chrome(
        &signed,
        &acting,
        "Auth servers",
        StatusCode::OK,
        body,
    ))
}

fn credential_summary(config: &AuthServerConfigView) -> String {
    match config {
        AuthServerConfigView::Oidc { issuer_url, .. } => issuer_url.clone(),
        AuthServerConfigView::Basic { credentials, .. } => format!("{} users", credentials.len()),
        AuthServerConfigView::Token { tokens } => format!("{} tokens", tokens.len()),
    }
}

#[derive(Deserialize)]
pub struct NewQuery {
    organization: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
}

fn kind_of(text: &str) -> Option<AuthServerType> {
    AuthServerType::ALL.into_iter().find(|k| k.as_str() == text)
}

/// The create form of one type.
pub async fn new_form(
    signed: Signed,
    query: Query<NewQuery>,
) -> Result<HttpResponse, ConsoleError> {
    let kind = query
        .kind
        .as_deref()
        .and_then(kind_of)
        .ok_or_else(|| ConsoleError::BadForm("type must be oidc, basic or token".into()))?;
    let acting = Acting::resolve(&signed.caller, query.organization.as_deref());
    let org = acting
        .membership
        .map(|m| m.organization.slug.clone())
        .unwrap_or_default();
    let form = Submitted::read(
        format!("organization={}&type={}", urlencode(&org), kind.as_str()).as_bytes(),
    )?;
    Ok(draw_new(&signed, &form, kind, ROWS, None, StatusCode::OK))
}

/// A text field of the create or edit form, with its domain error beside it.
fn field(name: &str, label: &str, value: &str, kind: &str, error: Option<&String>) -> Markup {
    let error_id = format!("{}-error", name.replace('.', "-"));
    html! {
        label for=(name) { (label) }
        input id=(name) name=(name) type=(kind) value=(value) autocomplete="off"
            aria-invalid=[error.map(|_| "true")] aria-describedby=[error.map(|_| error_id.as_str())];
        @if let Some(m) = error { p.field-error id=(error_id) { (m) } }
    }
}

/// A Basic user's password field, with the password rule beside it so a person reads the rule
/// before the server refuses what they typed.
fn password_field(name: &str, error: Option<&String>) -> Markup {
    let hint_id = format!("{}-hint", name.replace('.', "-"));
    let error_id = format!("{}-error", name.replace('.', "-"));
    let described = match error {
        Some(_) => format!("{hint_id} {error_id}"),
        None => hint_id.clone(),
    };
    html! {
        label for=(name) { "Password" }
        input id=(name) name=(name) type="password" value="" autocomplete="new-password"
            minlength=(rules::MIN_PASSWORD_LEN) aria-describedby=(described)
            aria-invalid=[error.map(|_| "true")];
        small.hint id=(hint_id) { "The password: " (rules::PASSWORD_RULE) "." }
        @if let Some(m) = error { p.field-error id=(error_id) { (m) } }
    }
}

fn errors_of(problem: Option<&DomainError>) -> Vec<(String, String)> {
    match problem {
        Some(DomainError::Validation(v)) => v
            .errors()
            .iter()
            .map(|e| (e.field.clone(), e.message.clone()))
            .collect(),
        _ => Vec::new(),
    }
}

fn draw_new(
    signed: &Signed,
    form: &Submitted,
    kind: AuthServerType,
    rows: usize,
    problem: Option<&DomainError>,
    status: StatusCode,
) -> HttpResponse {
    let acting = Acting::resolve(&signed.caller, Some(form.get("organization")));
    let errors = errors_of(problem);
    let err = |f: &str| errors.iter().find(|(p, _)| p == f).map(|(_, m)| m.clone());
    let rows = rows.clamp(1, MAX_ROWS);
    let body = html! {
        nav.crumbs aria-label="Breadcrumb" {
            a href={ (PREFIX) "/auth-servers" (acting.query()) } { "Auth servers" } " / "
            span aria-current="page" { "Add " (kind_label(kind)) " auth server" }
        }
        h1 { "Add " (kind_label(kind)) " auth server" }
        @if let Some(e) = problem {
            div.notice.error role="alert" {
                p { "The auth server was not created: " (refusal(e)) }
                @if kind != AuthServerType::Oidc || errors.iter().any(|(f, _)| f.contains("secret")) {
                    p { "Secrets are never sent back to the page: type them again." }
                }
            }
        }
        form.create method="post" action={ (PREFIX) "/auth-servers/new" } novalidate {
            input type="hidden" name="csrf" value=(signed.session.csrf);
            input type="hidden" name="key" value=(new_key());
            input type="hidden" name="organization" value=(form.get("organization"));
            input type="hidden" name="type" value=(kind.as_str());
            input type="hidden" name="rows" value=(rows);
            (field("name", "Name", form.get("name"), "text", err("name").as_ref()))
            (field("environment", "Environment", form.get("environment"), "text", err("environment").as_ref()))
            @match kind {
                AuthServerType::Oidc => {
                    (field("issuer_url", "Issuer URL", form.get("issuer_url"), "url", err("config.issuer_url").as_ref()))
                    (field("redirect_path", "Redirect path", form.get("redirect_path"), "text", err("config.redirect_path").as_ref()))
                    (field("client_id", "Client ID", form.get("client_id"), "text", err("config.client_id").as_ref()))
                    (field("client_secret", "Client secret", "", "password", err("config.client_secret").as_ref()))
                    (field("authorized_domain", "Authorized domain", form.get("authorized_domain"), "text", err("config.authorized_domain").as_ref()))
                    details {
                        summary { "Advanced" }
                        (field("username_claim", "Username claim", form.get("username_claim"), "text", err("config.username_claim").as_ref()))
                        (field("email_claim", "Email claim", form.get("email_claim"), "text", err("config.email_claim").as_ref()))
                        (field("role_claim", "Role claim", form.get("role_claim"), "text", err("config.role_claim").as_ref()))
                        (field("group_claim", "Group claim", form.get("group_claim"), "text", err("config.group_claim").as_ref()))
                    }
                }
                AuthServerType::Basic => {
                    (field("realm", "Realm (optional)", form.get("realm"), "text", err("config.realm").as_ref()))
                    @for i in 0..rows {
                        fieldset.pool {
                            legend { "User " (i + 1) }
                            (field(&format!("username.{i}"), "Username", form.get(&format!("username.{i}")), "text",
                                err(&format!("config.credentials[{i}].username")).as_ref()))
                            (password_field(&format!("password.{i}"),
                                err(&format!("config.credentials[{i}].password")).as_ref()))
                        }
                    }
                    @if let Some(m) = err("config.credentials") { p.field-error { (m) } }
                    button.secondary type="submit" name="add_row" value="1" { "Add another" }
                }
                AuthServerType::Token => {
                    @for i in 0..rows {
                        (field(&format!("token.{i}"), &format!("Token {}", i + 1), "", "password",
                            err(&format!("config.tokens[{i}]")).as_ref()))
                    }
                    @if let Some(m) = err("config.tokens") { p.field-error { (m) } }
                    button.secondary type="submit" name="add_row" value="1" { "Add another" }
                }
            }
            p { button type="submit" { "Add auth server" } }
        }
    };
    chrome(signed, &acting, "Add auth server", status, body)
}

/// The rows a Basic or Token form holds: what it says, within bounds.
fn rows_of(form: &Submitted) -> usize {
    form.get("rows")
        .parse::<usize>()
        .unwrap_or(ROWS)
        .clamp(1, MAX_ROWS)
}

fn create_draft(form: &Submitted, kind: AuthServerType, rows: usize) -> CreateAuthServerRequest {
    let config = match kind {
        AuthServerType::Oidc => CreateConfig::Oidc(OidcConfigRequest {
            issuer_url: form.get("issuer_url").trim().to_owned(),
            redirect_path: form.get("redirect_path").trim().to_owned(),
            client_id: form.get("client_id").trim().to_owned(),
            client_secret: Secret::new(form.get("client_secret")),
            authorized_domain: form.get("authorized_domain").trim().to_owned(),
            username_claim: form.text("username_claim"),
            email_claim: form.text("email_claim"),
            role_claim: form.text("role_claim"),
            group_claim: form.text("group_claim"),
        }),
        // Rows left empty are not credentials.
        AuthServerType::Basic => CreateConfig::Basic(BasicConfigRequest {
            realm: form.text("realm"),
            credentials: (0..rows)
                .filter_map(|i| {
                    let username = form.get(&format!("username.{i}")).trim().to_owned();
                    let password = form.get(&format!("password.{i}")).to_owned();
                    (!username.is_empty() || !password.is_empty()).then(|| BasicCredentialRequest {
                        username,
                        password: Secret::new(password),
                    })
                })
                .collect(),
        }),
        AuthServerType::Token => CreateConfig::Token(TokenConfigRequest {
            tokens: (0..rows)
                .map(|i| form.get(&format!("token.{i}")).trim().to_owned())
                .filter(|t| !t.is_empty())
                .map(Secret::new)
                .collect(),
        }),
    };
    CreateAuthServerRequest {
        organization: form.text("organization"),
        name: form.text("name"),
        environment: form.text("environment"),
        kind: Some(kind),
        config: Some(config),
    }
}

pub async fn create(
    req: HttpRequest,
    signed: Signed,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let form = Submitted::read(&body)?;
    check_form(&req, &signed.session, form.get("csrf"))?;
    let kind = kind_of(form.get("type"))
        .ok_or_else(|| ConsoleError::BadForm("type must be oidc, basic or token".into()))?;
    let rows = rows_of(&form);
    if form.checked("add_row") {
        return Ok(draw_new(
            &signed,
            &form,
            kind,
            rows + 1,
            None,
            StatusCode::OK,
        ));
    }
    let draft = create_draft(&form, kind, rows);
    // The first answer is recorded as the new server's page, where a replay goes too.
    let redirect = Redirect(|v: &domain::service::Scheduled<AuthServerView>| {
        format!("{PREFIX}/auth-servers/{}", v.id)
    });
    let outcome = async {
        let request = form.keyed(&format!("{PREFIX}/auth-servers/new"), &redirect)?;
        Ok::<_, ConsoleError>(
            signed
                .services
                .create_auth_server(Command::keyed(&signed.caller, Some(request)), draft)
                .await?,
        )
    }
    .await;
    match outcome {
        Ok(domain::service::Answer::Fresh(made)) => {
            let id = made.id;
            let mut response = settled(domain::service::Answer::Fresh(made), &redirect)?;
            response
                .add_cookie(&crate::session::flash_cookie(&req, id))
                .map_err(|e| ConsoleError::Internal(format!("flash cookie: {e}")))?;
            Ok(response)
        }
        Ok(answer) => settled(answer, &redirect),
        Err(ConsoleError::Domain(e)) if !matches!(e, DomainError::Internal(_)) => {
            let status = api::problem::status_of(&e);
            Ok(draw_new(&signed, &form, kind, rows, Some(&e), status))
        }
        Err(e) => Err(e),
    }
}

/// The server's page; the first one after its create says it was added.
pub async fn detail(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
) -> Result<HttpResponse, ConsoleError> {
    let server = signed
        .services
        .get_auth_server(&signed.caller, id.0)
        .await?;
    let just_added = crate::session::flash_for(&req, server.id);
    let added = just_added.then(|| {
        format!(
            "Auth server {} was added to environment {}: gateway routes that name it check \
             requests against it from now on.",
            server.name, server.environment
        )
    });
    let mut page = draw_detail_with(&signed, &server, StatusCode::OK, None, added.as_deref());
    if just_added {
        page.add_cookie(&crate::session::ended_flash(&req))
            .map_err(|e| ConsoleError::Internal(format!("flash cookie: {e}")))?;
    }
    Ok(page)
}

fn draw_detail(
    signed: &Signed,
    s: &AuthServerView,
    status: StatusCode,
    problem: Option<&str>,
) -> HttpResponse {
    draw_detail_with(signed, s, status, problem, None)
}

/// The server's page, with a refusal (`problem`) or news of what just happened (`news`).
fn draw_detail_with(
    signed: &Signed,
    s: &AuthServerView,
    status: StatusCode,
    problem: Option<&str>,
    news: Option<&str>,
) -> HttpResponse {
    let acting = Acting::resolve(&signed.caller, Some(&s.organization_slug));
    let may_change = acting.may_change();
    let csrf = &signed.session.csrf;
    let base = format!("{PREFIX}/auth-servers/{}", s.id);
    let body = html! {
        nav.crumbs aria-label="Breadcrumb" {
            a href={ (PREFIX) "/auth-servers" (acting.query()) } { "Auth servers" } " / "
            span aria-current="page" { (s.name) }
        }
        div.title-row { h1 { (s.name) } span.badge.muted { (kind_label(s.kind)) } }
        @if let Some(problem) = problem { p.notice.error role="alert" { (problem) } }
        @if let Some(news) = news { p.notice.ok role="status" { (news) } }
        dl.facts {
            dt { "Environment" } dd { (s.environment) }
            dt { "Type" } dd { (kind_label(s.kind)) }
            @match &s.config {
                AuthServerConfigView::Oidc { issuer_url, redirect_path, client_id, client_secret_set, authorized_domain, username_claim, email_claim, role_claim, group_claim } => {
                    dt { "Issuer URL" } dd { (issuer_url) }
                    dt { "Redirect path" } dd { (redirect_path) }
                    dt { "Client ID" } dd { (client_id) }
                    dt { "Client secret" } dd { @if *client_secret_set { "set (write-only)" } @else { "not set" } }
                    dt { "Authorized domain" } dd { (authorized_domain) }
                    dt { "Claims" } dd {
                        "username " (username_claim.as_deref().unwrap_or("—")) ", email " (email_claim.as_deref().unwrap_or("—"))
                        ", role " (role_claim.as_deref().unwrap_or("—")) ", group " (group_claim.as_deref().unwrap_or("—"))
                    }
                }
                AuthServerConfigView::Basic { realm, .. } => { dt { "Realm" } dd { (realm) } }
                AuthServerConfigView::Token { .. } => {}
            }
            dt { "Created" } dd { (when(s.created_at)) }
        }
        @match &s.config {
            AuthServerConfigView::Basic { credentials, .. } => { (credentials_table(&base, credentials, may_change, csrf)) }
            AuthServerConfigView::Token { tokens } => { (credentials_table(&base, tokens, may_change, csrf)) }
            AuthServerConfigView::Oidc { .. } => {}
        }
        @if may_change {
            @if s.kind != AuthServerType::Oidc {
                section.card aria-labelledby="add-credential" {
                    h3 #add-credential { @if s.kind == AuthServerType::Basic { "Add a user" } @else { "Add a token" } }
                    form method="post" action={ (base) "/credentials" } {
                        input type="hidden" name="csrf" value=(csrf);
                        input type="hidden" name="key" value=(new_key());
                        @if s.kind == AuthServerType::Basic {
                            (field("new-username", "Username", "", "text", None))
                            (password_field("new-password", None))
                        } @else {
                            (field("new-token", "Token", "", "password", None))
                        }
                        button type="submit" { "Add credential" }
                    }
                }
            }
            (edit_form(s, &base, csrf))
            section.danger aria-labelledby="delete-title" {
                h2 #delete-title { "Delete auth server" }
                form method="post" action={ (base) "/delete" } {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="key" value=(new_key());
                    label for="confirm" { "Type the auth server's name, " strong { (s.name) } ", to delete it" }
                    input #confirm type="text" name="confirm" autocomplete="off" required;
                    button.destructive type="submit" { "Delete auth server" }
                }
            }
        }
    };
    chrome(signed, &acting, &s.name, status, body)
}

fn credentials_table(base: &str, creds: &[CredentialView], may_change: bool, csrf: &str) -> Markup {
    html! {
        h2 { "Credentials" }
        @if creds.is_empty() { p.empty { "None." } }
        ul.credentials {
            @for c in creds {
                @let (id, text) = match c {
                    CredentialView::Basic { id, username } => (id, format!("user {username}")),
                    CredentialView::Token { id, hint } => (id, format!("token {hint}")),
                };
                li {
                    span { (text) }
                    @if may_change && creds.len() > 1 {
                        form.inline-form method="post" action={ (base) "/credentials/" (id) "/remove" } {
                            input type="hidden" name="csrf" value=(csrf);
                            input type="hidden" name="key" value=(new_key());
                            button.destructive type="submit" { "Remove " (text) }
                        }
                    }
                }
            }
        }
    }
}

fn edit_form(s: &AuthServerView, base: &str, csrf: &str) -> Markup {
    html! {
        section.card aria-labelledby="edit-title" {
            h3 #edit-title { "Edit" }
            form method="post" action={ (base) "/edit" } {
                input type="hidden" name="csrf" value=(csrf);
                (field("edit-name", "Name", &s.name, "text", None))
                (field("edit-environment", "Environment", &s.environment, "text", None))
                @match &s.config {
                    AuthServerConfigView::Oidc { issuer_url, redirect_path, client_id, authorized_domain, username_claim, email_claim, role_claim, group_claim, .. } => {
                        (field("edit-issuer_url", "Issuer URL", issuer_url, "url", None))
                        (field("edit-redirect_path", "Redirect path", redirect_path, "text", None))
                        (field("edit-client_id", "Client ID", client_id, "text", None))
                        (field("edit-client_secret", "New client secret (leave empty to keep it)", "", "password", None))
                        (field("edit-authorized_domain", "Authorized domain", authorized_domain, "text", None))
                        details {
                            summary { "Advanced: claims (empty stops sending one)" }
                            (field("edit-username_claim", "Username claim", username_claim.as_deref().unwrap_or(""), "text", None))
                            (field("edit-email_claim", "Email claim", email_claim.as_deref().unwrap_or(""), "text", None))
                            (field("edit-role_claim", "Role claim", role_claim.as_deref().unwrap_or(""), "text", None))
                            (field("edit-group_claim", "Group claim", group_claim.as_deref().unwrap_or(""), "text", None))
                        }
                    }
                    AuthServerConfigView::Basic { realm, .. } => {
                        (field("edit-realm", "Realm", realm, "text", None))
                    }
                    AuthServerConfigView::Token { .. } => {}
                }
                button type="submit" { "Save changes" }
            }
        }
    }
}

/// A server's page after a change: where the change sent the browser, or the page with the
/// refusal's words.
async fn after(
    signed: &Signed,
    id: uuid::Uuid,
    done: Result<HttpResponse, DomainError>,
) -> Result<HttpResponse, ConsoleError> {
    or_redraw(done, async |status, words| {
        let server = signed.services.get_auth_server(&signed.caller, id).await?;
        Ok(draw_detail(signed, &server, status, Some(&words)))
    })
    .await
}

pub async fn edit(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let form = Submitted::read(&body)?;
    check_form(&req, &signed.session, form.get("csrf"))?;
    let done = async {
        let server = signed
            .services
            .get_auth_server(&signed.caller, id.0)
            .await?;
        let config = match server.kind {
            AuthServerType::Oidc => Some(ConfigPatch::oidc(OidcConfigPatch {
                issuer_url: form.text("edit-issuer_url"),
                redirect_path: form.text("edit-redirect_path"),
                client_id: form.text("edit-client_id"),
                client_secret: form.text("edit-client_secret").map(Secret::new),
                authorized_domain: form.text("edit-authorized_domain"),
                // An empty claim field stops that claim being sent (null in the API).
                username_claim: Some(form.text("edit-username_claim")),
                email_claim: Some(form.text("edit-email_claim")),
                role_claim: Some(form.text("edit-role_claim")),
                group_claim: Some(form.text("edit-group_claim")),
            })),
            AuthServerType::Basic => Some(ConfigPatch::basic(BasicConfigPatch {
                realm: Some(form.text("edit-realm")),
            })),
            AuthServerType::Token => None,
        };
        let patch = AuthServerPatch {
            name: form.text("edit-name"),
            environment: form.text("edit-environment"),
            config,
        };
        signed
            .services
            .patch_auth_server(Command::new(&signed.caller), id.0, patch, None)
            .await?;
        Ok::<_, DomainError>(see_other(&format!("{PREFIX}/auth-servers/{}", id.0)))
    }
    .await;
    match done {
        Err(DomainError::Internal(cause)) => Err(DomainError::Internal(cause).into()),
        other => after(&signed, id.0, other).await,
    }
}

pub async fn delete(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let server = signed
        .services
        .get_auth_server(&signed.caller, id.0)
        .await?;
    if change.form.get("confirm").trim() != server.name {
        return Ok(draw_detail(
            &signed,
            &server,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("The name typed does not match the auth server's: nothing was deleted."),
        ));
    }
    let back = format!(
        "{PREFIX}/auth-servers?organization={}",
        urlencode(&server.organization_slug)
    );
    let done = change
        .run(back, async |request| {
            signed
                .services
                .delete_auth_server(Command::keyed(&signed.caller, Some(request)), id.0, None)
                .await
        })
        .await?;
    after(&signed, id.0, done).await
}

pub async fn add_credential(
    req: HttpRequest,
    signed: Signed,
    id: Path<Id>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let form = &change.form;
    let credential = match form.text("new-token") {
        Some(token) => CredentialRequest::Token(TokenCredentialRequest {
            token: Secret::new(token),
        }),
        None => CredentialRequest::Basic(BasicCredentialRequest {
            username: form.get("new-username").trim().to_owned(),
            password: Secret::new(form.get("new-password")),
        }),
    };
    let back = format!("{PREFIX}/auth-servers/{}", id.0);
    let done = change
        .run(back, async |request| {
            signed
                .services
                .add_credential(
                    Command::keyed(&signed.caller, Some(request)),
                    id.0,
                    credential,
                )
                .await
        })
        .await?;
    after(&signed, id.0, done).await
}

pub async fn remove_credential(
    req: HttpRequest,
    signed: Signed,
    path: Path<(Id, Id)>,
    body: Bytes,
) -> Result<HttpResponse, ConsoleError> {
    let change = Change::read(&req, &signed, &body)?;
    let (id, credential) = path.into_inner();
    let back = format!("{PREFIX}/auth-servers/{}", id.0);
    let done = change
        .run(back, async |request| {
            signed
                .services
                .remove_credential(
                    Command::keyed(&signed.caller, Some(request)),
                    id.0,
                    credential.0,
                )
                .await
        })
        .await?;
    after(&signed, id.0, done).await
}
