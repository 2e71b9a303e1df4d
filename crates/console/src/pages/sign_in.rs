//! Signing in with an account access token (in development, as a demo user), and out.

use actix_web::http::StatusCode;
use actix_web::web::{Data, Form};
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

/// The sign-in page, with a fresh nonce in a cookie and in the form.
pub async fn form(state: Data<ConsoleState>, req: HttpRequest) -> HttpResponse {
    answer(&state, &req, StatusCode::OK, None)
}

fn answer(
    state: &ConsoleState,
    req: &HttpRequest,
    status: StatusCode,
    problem: Option<&str>,
) -> HttpResponse {
    let nonce = random_token();
    let mut res = html_page(status, page(state, &nonce, problem));
    // A cookie that cannot be added is only a failed sign-in later, which the page explains.
    let _ = res.add_cookie(&session::sign_in_cookie(req, &nonce));
    res
}

fn page(state: &ConsoleState, nonce: &str, problem: Option<&str>) -> Markup {
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
}

pub async fn submit(
    state: Data<ConsoleState>,
    req: HttpRequest,
    form: Form<SignIn>,
) -> Result<HttpResponse, ConsoleError> {
    let form = form.into_inner();
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
        ));
    };
    match state.services().authenticate(&token).await {
        Ok(_) => {
            let now = state.services().ports().clock.now();
            let mut res = see_other(&format!("{PREFIX}/clusters"));
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
