//! The web console: an organization's clusters (and, next, the gateway's auth servers) as HTML
//! pages rendered on the server.
//!
//! Every page and form calls the same use cases the API calls (`domain::service::Services`),
//! as the same caller, so the role checks are the use cases' own: the console hides a control a
//! member may not use, and a forced request still gets the use case's refusal. None of it calls
//! the API over HTTP. Every read and every form works without JavaScript; htmx, shipped inside
//! the binary, only makes pages live (a cluster's phase follows its state long-poll).
//!
//! Security: the session is a sealed cookie re-checked on every request through the identity
//! port, every form carries a CSRF token (the sign-in form a double-submitted nonce), POSTs from
//! another site are refused, and every answer carries a strict Content-Security-Policy.
//! `docs/console.md` has the details.

mod assets;
mod error;
mod pages;
mod security;
mod session;

use std::sync::Arc;

use actix_web::middleware::{Compress, from_fn};
use actix_web::web::{self, ServiceConfig};
use domain::service::Services;

pub use session::DemoUser;

/// Where the console lives.
pub const PREFIX: &str = "/console";

/// What every console handler shares.
#[derive(Clone)]
pub struct ConsoleState {
    inner: Arc<Inner>,
}

struct Inner {
    services: Services,
    /// Development mode only: the demo users the sign-in page offers.
    demo_users: Vec<DemoUser>,
}

impl ConsoleState {
    pub fn new(services: Services, demo_users: Vec<DemoUser>) -> Self {
        ConsoleState {
            inner: Arc::new(Inner {
                services,
                demo_users,
            }),
        }
    }

    fn services(&self) -> &Services {
        &self.inner.services
    }

    fn demo_users(&self) -> &[DemoUser] {
        &self.inner.demo_users
    }
}

/// Registers the console under [`PREFIX`].
pub fn configure(state: ConsoleState) -> impl FnOnce(&mut ServiceConfig) {
    move |cfg: &mut ServiceConfig| {
        cfg.service(
            web::scope(PREFIX)
                .app_data(web::Data::new(state))
                .app_data(
                    web::FormConfig::default()
                        .limit(64 * 1024)
                        .error_handler(|e, _| error::ConsoleError::BadForm(e.to_string()).into()),
                )
                .app_data(
                    web::QueryConfig::default()
                        .error_handler(|e, _| error::ConsoleError::BadForm(e.to_string()).into()),
                )
                .wrap(from_fn(security::headers))
                .route("", web::get().to(pages::home))
                .route("/", web::get().to(pages::home))
                // Compressed, the assets only: a page carries a CSRF token and text the caller
                // chose, and compressing both together is what BREACH reads secrets through.
                .service(
                    web::resource("/assets/{version}/{file}")
                        .wrap(Compress::default())
                        .route(web::get().to(assets::serve)),
                )
                .route("/sign-in", web::get().to(pages::sign_in::form))
                .route("/sign-in", web::post().to(pages::sign_in::submit))
                .route("/sign-out", web::post().to(pages::sign_in::sign_out))
                .route("/clusters", web::get().to(pages::clusters::list))
                .route("/clusters/new", web::get().to(pages::create::form))
                .route("/clusters/new", web::post().to(pages::create::submit))
                .route("/clusters/{id}", web::get().to(pages::cluster::overview))
                .route(
                    "/clusters/{id}/row",
                    web::get().to(pages::clusters::live_row),
                )
                .route(
                    "/clusters/{id}/live/{tab}",
                    web::get().to(pages::live::follow),
                )
                .route(
                    "/clusters/{id}/node-pools",
                    web::get().to(pages::pools::pools_tab),
                )
                .route(
                    "/clusters/{id}/node-pools",
                    web::post().to(pages::pools::add_pool),
                )
                .route(
                    "/clusters/{id}/node-pools/{pool}/scale",
                    web::post().to(pages::pools::scale_pool),
                )
                .route(
                    "/clusters/{id}/node-pools/{pool}/taints",
                    web::post().to(pages::pools::taints_pool),
                )
                .route(
                    "/clusters/{id}/node-pools/{pool}/delete",
                    web::post().to(pages::pools::delete_pool),
                )
                .route(
                    "/clusters/{id}/nodes",
                    web::get().to(pages::pools::nodes_tab),
                )
                .route(
                    "/clusters/{id}/nodes/{node}/delete",
                    web::post().to(pages::pools::delete_node),
                )
                .route(
                    "/clusters/{id}/networking",
                    web::get().to(pages::networking::tab),
                )
                .route(
                    "/clusters/{id}/elastic-ips",
                    web::post().to(pages::networking::allocate),
                )
                .route(
                    "/clusters/{id}/elastic-ips/{eip}/release",
                    web::post().to(pages::networking::release),
                )
                .route(
                    "/clusters/{id}/control-plane-firewall",
                    web::post().to(pages::networking::control_plane_firewall),
                )
                .route(
                    "/clusters/{id}/kubeconfig",
                    web::get().to(pages::cluster::kubeconfig),
                )
                .route(
                    "/clusters/{id}/delete",
                    web::post().to(pages::cluster::delete),
                )
                .route("/clusters/{id}/edit", web::post().to(pages::cluster::edit))
                .route(
                    "/clusters/{id}/exposure",
                    web::post().to(pages::cluster::exposure),
                )
                .route(
                    "/clusters/{id}/upgrade",
                    web::post().to(pages::upgrade::upgrade),
                )
                .route(
                    "/clusters/{id}/maintenance",
                    web::post().to(pages::upgrade::maintenance),
                )
                .route("/approvals", web::get().to(pages::approvals::list))
                .route("/approvals/{id}", web::get().to(pages::approvals::detail))
                .route(
                    "/approvals/{id}/approve",
                    web::post().to(pages::approvals::approve),
                )
                .route(
                    "/approvals/{id}/decline",
                    web::post().to(pages::approvals::decline),
                )
                .route("/auth-servers", web::get().to(pages::auth_servers::list))
                .route(
                    "/auth-servers/new",
                    web::get().to(pages::auth_servers::new_form),
                )
                .route(
                    "/auth-servers/new",
                    web::post().to(pages::auth_servers::create),
                )
                .route(
                    "/auth-servers/{id}",
                    web::get().to(pages::auth_servers::detail),
                )
                .route(
                    "/auth-servers/{id}/edit",
                    web::post().to(pages::auth_servers::edit),
                )
                .route(
                    "/auth-servers/{id}/delete",
                    web::post().to(pages::auth_servers::delete),
                )
                .route(
                    "/auth-servers/{id}/credentials",
                    web::post().to(pages::auth_servers::add_credential),
                )
                .route(
                    "/auth-servers/{id}/credentials/{credential}/remove",
                    web::post().to(pages::auth_servers::remove_credential),
                )
                .default_service(web::to(pages::not_found)),
        );
    }
}
