//! The console's pages, one module per page or group of pages, and what they share: which
//! organization a page is about, and the check every form submission passes.

pub mod approvals;
pub mod auth_servers;
pub mod cluster;
pub mod clusters;
pub mod create;
pub mod forms;
pub mod layout;
pub mod live;
pub mod networking;
pub mod pools;
pub mod sign_in;
pub mod upgrade;

use actix_web::http::header;
use actix_web::{HttpRequest, HttpResponse};
use domain::access::OrgSelector;
use domain::model::identity::{Caller, Membership, Role};
use domain::names::OrgRef;
use maud::html;

use crate::PREFIX;
use crate::error::ConsoleError;
use crate::security::{same_secret, sent_by_another_site};
use crate::session::Session;

/// `/console`: the clusters.
pub async fn home() -> HttpResponse {
    see_other(&format!("{PREFIX}/clusters"))
}

/// A path under `/console` that is no page.
pub async fn not_found() -> HttpResponse {
    let body = layout::page(
        "Not found",
        None,
        html! {
            section.notice role="alert" {
                h1 { "Not found" }
                p { "There is no such page in the console." }
                p { a href={ (PREFIX) "/clusters" } { "Go to the clusters" } }
            }
        },
    );
    HttpResponse::NotFound()
        .content_type("text/html; charset=utf-8")
        .body(body.into_string())
}

pub fn see_other(location: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, location.to_owned()))
        .finish()
}

pub fn html_page(status: actix_web::http::StatusCode, markup: maud::Markup) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .body(markup.into_string())
}

/// The organization a page is about, resolved as the API resolves a collection read (the
/// `organization` query parameter, else the caller's preferred organization); the use case
/// checks it, this only decides what the page shows.
pub struct Acting<'a> {
    pub selector: OrgSelector,
    pub membership: Option<&'a Membership>,
}

impl<'a> Acting<'a> {
    pub fn resolve(caller: &'a Caller, organization: Option<&str>) -> Self {
        let selector = OrgSelector::first_named([organization]);
        let membership = match &selector {
            OrgSelector::Named(v) => caller.membership_by_ref(&OrgRef::classify(v)),
            OrgSelector::Preferred => caller
                .preferred_organization
                .and_then(|id| caller.membership(&id)),
        };
        Acting {
            selector,
            membership,
        }
    }

    /// Whether the page offers changes: the caller is super_admin there.
    pub fn may_change(&self) -> bool {
        self.membership.is_some_and(|m| m.role.can_write())
    }

    /// `?organization=slug` for links that keep to this organization.
    pub fn query(&self) -> String {
        match &self.selector {
            OrgSelector::Named(v) => format!("?organization={}", urlencode(v)),
            OrgSelector::Preferred => String::new(),
        }
    }
}

pub fn role_name(role: Role) -> &'static str {
    match role {
        Role::Member => "member",
        Role::ProjectAdmin => "project_admin",
        Role::SuperAdmin => "super_admin",
        Role::Unknown => "no role",
    }
}

/// Percent-encodes a query value (organization slugs and ids need none, but a hostile value
/// must not break out of its parameter).
pub fn urlencode(v: &str) -> String {
    v.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The check every form submission of a session passes: sent by the console's own page, with
/// the session's CSRF token.
pub fn check_form(req: &HttpRequest, session: &Session, csrf: &str) -> Result<(), ConsoleError> {
    if sent_by_another_site(req) || !same_secret(csrf, &session.csrf) {
        return Err(ConsoleError::Forged);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_cannot_break_out_of_their_parameter() {
        assert_eq!(urlencode("acme"), "acme");
        assert_eq!(urlencode("a&b=c d"), "a%26b%3Dc%20d");
    }
}
