//! The frame of every page: head, header with the organization switcher and sign-out, main.

use domain::model::identity::Caller;
use maud::{DOCTYPE, Markup, html};

use crate::PREFIX;
use crate::assets;
use crate::pages::{Acting, role_name};

/// htmx may only talk to this origin, evaluates no code and runs no script it receives.
const HTMX_CONFIG: &str = r#"{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,"selfRequestsOnly":true}"#;

/// What the header shows for a signed-in caller.
pub struct Nav<'a> {
    pub caller: &'a Caller,
    pub acting: &'a Acting<'a>,
    /// The session's CSRF token, for the sign-out form.
    pub csrf: &'a str,
    /// The page the organization switcher reloads.
    pub here: &'a str,
    /// How many approvals wait for the person's decision.
    pub pending: usize,
}

pub fn page(title: &str, nav: Option<&Nav<'_>>, main: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="htmx-config" content=(HTMX_CONFIG);
                title { (title) " · kubesvc console" }
                // No icon file: an empty one, so browsers do not ask for /favicon.ico.
                link rel="icon" href="data:,";
                link rel="stylesheet" href=(assets::url("console.css"));
                script src=(assets::url("htmx.min.js")) defer {}
            }
            body {
                a.skip href="#main" { "Skip to the content" }
                header.top {
                    a.brand href={ (PREFIX) "/clusters" } { "kubesvc" }
                    @if let Some(nav) = nav {
                        (header(nav))
                    }
                }
                main #main tabindex="-1" { (main) }
            }
        }
    }
}

fn header(nav: &Nav<'_>) -> Markup {
    let current = nav.acting.membership.map(|m| m.organization.id);
    html! {
        nav aria-label="Console" {
            a href={ (PREFIX) "/clusters" (nav.acting.query()) } { "Clusters" }
            a href={ (PREFIX) "/auth-servers" (nav.acting.query()) } { "Auth servers" }
            a href={ (PREFIX) "/approvals" (nav.acting.query()) } #nav-approvals {
                "Approvals"
                @if nav.pending > 0 {
                    " " span.count { (nav.pending) } span.visually-hidden { " waiting for you" }
                }
            }
        }
        form.switcher method="get" action=(nav.here) {
            label for="organization" { "Organization" }
            select #organization name="organization" {
                @for m in &nav.caller.memberships {
                    option value=(m.organization.slug)
                        selected[current == Some(m.organization.id)] {
                        (m.organization.slug) " (" (role_name(m.role)) ")"
                    }
                }
            }
            button type="submit" { "Switch" }
        }
        form.sign-out method="post" action={ (PREFIX) "/sign-out" } {
            input type="hidden" name="csrf" value=(nav.csrf);
            span.who { (nav.caller.user.email.as_deref().unwrap_or(&nav.caller.user.id)) }
            button type="submit" { "Sign out" }
            button.secondary type="submit" name="everywhere" value="1"
                title="Ends every console session of this account, in every browser" {
                "Sign out everywhere"
            }
        }
    }
}
