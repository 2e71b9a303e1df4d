//! Why a console request was not answered with its page, and the page that says so instead.

use actix_web::http::StatusCode;
use actix_web::http::header;
use actix_web::{HttpResponse, ResponseError};
use domain::DomainError;
use maud::html;

use crate::PREFIX;
use crate::pages::layout;

#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// No live session: the answer is the sign-in page, which comes back to the page asked
    /// for (a path of the console, checked) once signed in.
    #[error("sign-in needed")]
    SignInNeeded(Option<String>),
    /// A use case refused: shown with the API's status and words.
    #[error("{0}")]
    Domain(#[from] DomainError),
    /// A form or query that does not parse.
    #[error("the form could not be read: {0}")]
    BadForm(String),
    /// A state-changing request without this session's CSRF token, or sent by another site.
    #[error("this form expired or was not sent from the console; reload the page and try again")]
    Forged,
    /// A form sent again with its key after the first submission was refused: the refusal.
    #[error("{0}")]
    Replayed(String),
    /// A fault of ours: logged, never shown.
    #[error("internal error: {0}")]
    Internal(String),
}

impl ConsoleError {
    fn message(&self) -> String {
        match self {
            ConsoleError::Domain(e) => api::problem::detail_of(e),
            ConsoleError::Internal(_) => "Something went wrong on our side. Try again.".into(),
            other => other.to_string(),
        }
    }
}

impl ResponseError for ConsoleError {
    fn status_code(&self) -> StatusCode {
        match self {
            ConsoleError::SignInNeeded(_) => StatusCode::SEE_OTHER,
            ConsoleError::Domain(e) => api::problem::status_of(e),
            ConsoleError::BadForm(_) => StatusCode::BAD_REQUEST,
            ConsoleError::Forged => StatusCode::FORBIDDEN,
            ConsoleError::Replayed(_) => StatusCode::CONFLICT,
            ConsoleError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        if let ConsoleError::SignInNeeded(back) = self {
            let location = match back {
                Some(back) => format!("{PREFIX}/sign-in?next={}", crate::pages::urlencode(back)),
                None => format!("{PREFIX}/sign-in"),
            };
            return HttpResponse::SeeOther()
                .insert_header((header::LOCATION, location))
                .finish();
        }
        if let ConsoleError::Internal(cause) | ConsoleError::Domain(DomainError::Internal(cause)) =
            self
        {
            tracing::error!(cause = %cause, "console: internal error");
        }
        let status = self.status_code();
        let title = status.canonical_reason().unwrap_or("Error");
        let body = layout::page(
            title,
            None,
            html! {
                section.notice.error role="alert" {
                    h1 { (title) }
                    p { (self.message()) }
                    p { a href={ (PREFIX) "/clusters" } { "Back to the clusters" } }
                }
            },
        );
        HttpResponse::build(status)
            .content_type("text/html; charset=utf-8")
            .body(body.into_string())
    }
}
