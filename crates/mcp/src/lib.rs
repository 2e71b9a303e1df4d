//! The assistant's face: the Model Context Protocol endpoint `/mcp` (streamable HTTP), served
//! on the API's listener with the API's authentication, and the protected-resource metadata
//! (RFC 9728) that tells an MCP client where its person signs in.
//!
//! The protocol itself (version negotiation, the 2026-07-28 stateless revision with
//! `server/discover` and input-required results, the 2025-11-25 `initialize` handshake,
//! JSON-RPC framing and headers) is the official SDK's, `rmcp`; this crate carries a request
//! from actix to it and gives it the tools ([`tools`]). One message is answered before it
//! reaches the SDK: a plain stateless call of a read tool (`direct`), which the SDK would
//! serve by standing up a whole service for it; the answer is built from the SDK's types. Every tool acts as the assistant
//! client kind, whatever the token's platform says, so the domain's access policy decides
//! what the assistant may do; a change it asks for runs only once its person approves it.

mod direct;
pub mod http;
pub mod schema;
pub mod tools;

use std::sync::Arc;

use actix_web::web::{self, ServiceConfig};

pub use http::Endpoint;

/// What the endpoint is told by the server's settings.
#[derive(Debug, Clone, Default)]
pub struct Settings {
    /// The server's public address (`https://kubesvc.example.com`), for the URLs it gives
    /// out: the approval pages and the metadata document. Unset: the request's own `Host`,
    /// over plain HTTP (enough for development, not behind a TLS-terminating proxy).
    pub public_url: Option<String>,
    /// The OAuth authorization server(s) where an account token is had (the account
    /// platform), named in the protected-resource metadata.
    pub authorization_servers: Vec<String>,
}

/// Registers `/mcp` and the metadata documents.
pub fn configure(settings: Settings) -> impl FnOnce(&mut ServiceConfig) {
    move |cfg: &mut ServiceConfig| {
        let endpoint = Arc::new(Endpoint::new(settings));
        cfg.app_data(web::Data::from(endpoint))
            .service(web::resource(http::PATH).to(http::serve))
            .service(
                web::resource([http::METADATA_PATH, http::METADATA_PATH_FOR_MCP])
                    .get(http::metadata),
            );
    }
}
