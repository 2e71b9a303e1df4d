//! Signing in with an account access token (in development, as a demo user), and out.

use actix_web::http::StatusCode;
use actix_web::web::{Data, Form, Query};
use actix_web::{HttpRequest, HttpResponse};
use domain::DomainError;
use domain::model::secret::Secret;
use maud::{Markup, html};
use serde::Deserialize;

use crate::error::ConsoleError;
use crate::pages::{check_form, html_page, layout, see_other};
use crate::security::{same_secret, sent_by_another_site};
use crate::session::{self, Signed, random_token};
use crate::{ConsoleState, PREFIX};

/// The longest page path a sign-in comes back to.
const BACK_MAX: usize = 512;

/// The page a person asked for before the console sent them to sign in, to come back to once
/// signed in: a GET of a whole page (not a live fragment) that [`back_to`] accepts, and not the
/// page a sign-in lands on anyway.
pub fn back_from(req: &HttpRequest) -> Option<String> {
    if req.method() != actix_web::http::Method::GET || req.headers().contains_key("hx-request") {
        return None;
    }
    let asked = req.uri().path_and_query()?.as_str();
    back_to(asked)
        .filter(|p| *p != format!("{PREFIX}/clusters"))
        .map(str::to_owned)
}

/// `candidate` when it is a page of this console: a path (never a URL of another origin, a
/// scheme, a `//host` or `\\host` a browser would read as one, or a `..` that climbs out),
/// of plain URL characters, and not the sign-in itself.
pub fn back_to(candidate: &str) -> Option<&str> {
    let (path, _) = candidate.split_once('?').unwrap_or((candidate, ""));
    let plain = candidate.len() <= BACK_MAX
        && candidate
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~/?=&%+,;:@!$*()".contains(&b));
    let inside = path.starts_with(&format!("{PREFIX}/"))
        && !path.contains("//")
        && !path.split('/').any(|s| s == "." || s == "..")
        && !path.to_ascii_lowercase().contains("%2e")
        && !path.to_ascii_lowercase().contains("%2f")
        && !path.to_ascii_lowercase().contains("%5c");
    let not_sign_in =
        ![format!("{PREFIX}/sign-in"), format!("{PREFIX}/sign-out")].contains(&path.to_owned());
    (plain && inside && not_sign_in).then_some(candidate)
}

#[derive(Deserialize)]
pub struct Next {
    #[serde(default)]
    next: Option<String>,
}

/// The sign-in page, with a fresh nonce in a cookie and in the form; `?next=` the console page
/// to come back to.
pub async fn form(state: Data<ConsoleState>, req: HttpRequest, query: Query<Next>) -> HttpResponse {
    let next = query.next.as_deref().and_then(back_to);
    answer(&state, &req, StatusCode::OK, None, next)
}

fn answer(
    state: &ConsoleState,
    req: &HttpRequest,
    status: StatusCode,
    problem: Option<&str>,
    next: Option<&str>,
) -> HttpResponse {
    let nonce = random_token();
    let mut res = html_page(status, page(state, &nonce, problem, next));
    // A cookie that cannot be added is only a failed sign-in later, which the page explains.
    let _ = res.add_cookie(&session::sign_in_cookie(req, &nonce));
    res
}

fn page(state: &ConsoleState, nonce: &str, problem: Option<&str>, next: Option<&str>) -> Markup {
    layout::page(
        "Sign in",
        None,
        html! {
            section.sign-in {
                h1 { "Sign in" }
                p { "Paste the access token of your account; the console uses it as the API does, with the same roles." }
                @if let Some(problem) = problem {
                    p.notice.error role="alert" #sign-in-error { (problem) }
                }
                form method="post" action={ (PREFIX) "/sign-in" } {
                    input type="hidden" name="nonce" value=(nonce);
                    @if let Some(next) = next { input type="hidden" name="next" value=(next); }
                    label for="token" { "Access token" }
                    input #token type="password" name="token" autocomplete="off" required
                        aria-describedby=[problem.map(|_| "sign-in-error")];
                    button type="submit" { "Sign in" }
                }
                @if !state.demo_users().is_empty() {
                    section.demo aria-labelledby="demo-title" {
                        h2 #demo-title { "Development mode: sign in as a demo user" }
                        form method="post" action={ (PREFIX) "/sign-in" } {
                            input type="hidden" name="nonce" value=(nonce);
                            @if let Some(next) = next { input type="hidden" name="next" value=(next); }
                            ul {
                                @for (i, user) in state.demo_users().iter().enumerate() {
                                    li { button type="submit" name="demo" value=(i) { (user.label) } }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

#[derive(Deserialize)]
pub struct SignIn {
    nonce: String,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    demo: Option<usize>,
    /// The console page to come back to (checked again: the form is the sender's to change).
    #[serde(default)]
    next: Option<String>,
}

pub async fn submit(
    state: Data<ConsoleState>,
    req: HttpRequest,
    form: Form<SignIn>,
) -> Result<HttpResponse, ConsoleError> {
    let form = form.into_inner();
    let next = form.next.as_deref().and_then(back_to);
    let nonce_holds = session::sign_in_nonce(&req).is_some_and(|n| same_secret(&n, &form.nonce));
    if sent_by_another_site(&req) || !nonce_holds {
        return Err(ConsoleError::Forged);
    }
    let token = match (form.demo, form.token.as_deref().map(str::trim)) {
        (Some(i), _) => state.demo_users().get(i).map(|u| u.token.clone()),
        (None, Some(t)) if !t.is_empty() => Some(Secret::new(t)),
        _ => None,
    };
    let Some(token) = token else {
        return Ok(answer(
            &state,
            &req,
            StatusCode::UNPROCESSABLE_ENTITY,
            Some("Enter an access token."),
            next,
        ));
    };
    match state.services().authenticate(&token).await {
        Ok(_) => {
            let now = state.services().ports().clock.now();
            let landing = format!("{PREFIX}/clusters");
            let mut res = see_other(next.unwrap_or(&landing));
            res.add_cookie(&session::session_cookie(&state, &req, &token, now)?)
                .map_err(|e| ConsoleError::Internal(format!("session cookie: {e}")))?;
            res.add_cookie(&session::ended_sign_in(&req))
                .map_err(|e| ConsoleError::Internal(format!("sign-in cookie: {e}")))?;
            Ok(res)
        }
        Err(DomainError::Unauthorized(_)) => Ok(answer(
            &state,
            &req,
            StatusCode::UNAUTHORIZED,
            Some("The account platform did not accept this token."),
            next,
        )),
        Err(e) => Err(e.into()),
    }
}

#[derive(Deserialize)]
pub struct SignOut {
    csrf: String,
    /// Present when "Sign out everywhere" was pressed.
    #[serde(default)]
    everywhere: Option<String>,
}

/// Ends the session, on the server too: its cookie no longer opens a session wherever it is
/// presented (a copy kept elsewhere included). "Sign out everywhere" ends every console
/// session of the account. The token itself stays valid at the account platform, which owns
/// it.
pub async fn sign_out(
    req: HttpRequest,
    signed: Signed,
    form: Form<SignOut>,
) -> Result<HttpResponse, ConsoleError> {
    check_form(&req, &signed.session, &form.csrf)?;
    let standing = signed.session.standing(&signed.caller);
    if form.everywhere.is_some() {
        signed
            .services
            .sign_out_everywhere(
                &standing.subject,
                chrono::Duration::hours(session::LIFETIME_HOURS),
            )
            .await?;
    } else {
        signed.services.sign_out(&standing).await?;
    }
    let mut res = see_other(&format!("{PREFIX}/sign-in"));
    res.add_cookie(&session::ended_session(&req))
        .map_err(|e| ConsoleError::Internal(format!("session cookie: {e}")))?;
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sign_in_comes_back_only_to_a_page_of_this_console() {
        let id = "0a0c0e00-0000-4000-8000-000000000001";
        let back = format!("/console/approvals/{id}");
        assert_eq!(back_to(&back), Some(back.as_str()));
        assert!(back_to("/console/clusters?organization=acme&page=2").is_some());
        for refused in [
            "https://evil.example/console/clusters",
            "//evil.example/console/",
            "/\\evil.example/",
            "/console//evil.example",
            "/console/../v1/public/clusters",
            "/console/%2e%2e/v1",
            "/console/a%2F%2Fevil",
            "/console/sign-in",
            "/console/sign-out",
            "/console",
            "/v1/public/clusters",
            "/console/x\"><script>",
            "/console/x y",
            "javascript:alert(1)",
            "",
        ] {
            assert_eq!(back_to(refused), None, "{refused}");
        }
        assert_eq!(back_to(&format!("/console/{}", "a".repeat(600))), None);
    }
}
