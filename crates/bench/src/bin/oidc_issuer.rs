//! `bench-oidc-issuer`: a minimal OpenID provider for the gateway's OIDC-Bearer route of
//! `make bench`. It generates an RS256 key, serves the discovery document and
//! the JWKS on loopback, and writes one access token signed with that key (valid for an hour).
//!
//! `bench-oidc-issuer --bind 127.0.0.1:PORT --audience CLIENT_ID --token-out FILE`
//!
//! The token file is written once the server listens, so its presence means "ready".

use std::time::{SystemTime, UNIX_EPOCH};

use actix_web::{App, HttpResponse, HttpServer, web};
use anyhow::Context;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bench::args::Args;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::traits::PublicKeyParts;
use serde_json::{Value, json};

const KID: &str = "bench-key-1";

#[actix_web::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::from_env()?;
    let bind = args.required("bind")?;
    let audience = args.required("audience")?;
    let token_out = args.required("token-out")?;
    let issuer = format!("http://{bind}");

    let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).context("generating RSA")?;
    let jwks = json!({"keys": [{
        "kty": "RSA", "use": "sig", "alg": "RS256", "kid": KID,
        "n": URL_SAFE_NO_PAD.encode(key.n().to_bytes_be()),
        "e": URL_SAFE_NO_PAD.encode(key.e().to_bytes_be()),
    }]});
    let discovery = json!({
        "issuer": issuer,
        "jwks_uri": format!("{issuer}/jwks"),
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
    });
    let der = key.to_pkcs1_der().context("encoding the RSA key")?;
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let claims = json!({
        "iss": issuer, "aud": audience, "sub": "bench-client", "client_id": audience,
        "iat": now, "exp": now + 3600,
    });
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(KID.to_owned());
    let token = jsonwebtoken::encode(&header, &claims, &EncodingKey::from_rsa_der(der.as_bytes()))?;

    let server = HttpServer::new(move || {
        let (d, j) = (discovery.clone(), jwks.clone());
        App::new()
            .route(
                "/.well-known/openid-configuration",
                web::get().to(move || json_ok(d.clone())),
            )
            .route("/jwks", web::get().to(move || json_ok(j.clone())))
    })
    .workers(1)
    .bind(&bind)
    .with_context(|| format!("binding {bind}"))?
    .run();
    // Written after bind, through a temporary name, so a reader never sees half a token.
    let tmp = format!("{token_out}.tmp");
    std::fs::write(&tmp, &token)?;
    std::fs::rename(&tmp, &token_out)?;
    server.await?;
    Ok(())
}

async fn json_ok(v: Value) -> HttpResponse {
    HttpResponse::Ok().json(v)
}
