//! The interactive API reference at `/docs`: Swagger UI over `/v1/openapi.json`, every asset
//! embedded in the binary (`crates/api/assets`), so the page works with no network beyond this
//! server, and a Content-Security-Policy that keeps it that way: scripts and styles from this
//! origin only, requests ("try it out") to this origin only, no framing.
//!
//! Not part of the API contract, so not in the route table or the OpenAPI document.

use actix_web::http::header::{self, HeaderValue};
use actix_web::web::{Path, ServiceConfig};
use actix_web::{HttpRequest, HttpResponse, web};

pub const SWAGGER_UI_VERSION: &str = "5.35.0";

const BUNDLE: &[u8] = include_bytes!("../../assets/swagger-ui/swagger-ui-bundle.js");
const CSS: &[u8] = include_bytes!("../../assets/swagger-ui/swagger-ui.css");
const INIT: &[u8] = include_bytes!("../../assets/docs.js");
const PAGE: &str = include_str!("../../assets/docs.html");

/// Swagger UI sets style attributes at run time, hence 'unsafe-inline' for styles (never for
/// scripts); its fonts and icons are data: URLs.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
                   img-src 'self' data:; font-src 'self' data:; connect-src 'self'; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub fn configure(cfg: &mut ServiceConfig) {
    for path in ["/docs", "/docs/"] {
        cfg.service(
            web::resource(path)
                .route(web::get().to(page))
                .route(web::head().to(page)),
        );
    }
    cfg.service(
        web::resource("/docs/assets/{version}/{file}")
            .route(web::get().to(asset))
            .route(web::head().to(asset)),
    );
}

fn hardened(mut response: HttpResponse, cache: &'static str) -> HttpResponse {
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, cache),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn page() -> HttpResponse {
    let html = PAGE.replace("@VERSION@", SWAGGER_UI_VERSION);
    hardened(
        HttpResponse::Ok()
            .content_type("text/html; charset=utf-8")
            .body(html),
        "no-cache",
    )
}

/// The assets, under a path naming the Swagger UI version: cached for a year, since a new
/// version gets a new path.
async fn asset(req: HttpRequest, path: Path<(String, String)>) -> HttpResponse {
    let (version, file) = path.into_inner();
    let found = match file.as_str() {
        _ if version != SWAGGER_UI_VERSION => None,
        "swagger-ui-bundle.js" => Some((BUNDLE, "text/javascript; charset=utf-8")),
        "swagger-ui.css" => Some((CSS, "text/css; charset=utf-8")),
        "docs.js" => Some((INIT, "text/javascript; charset=utf-8")),
        _ => None,
    };
    match found {
        Some((bytes, content_type)) => hardened(
            HttpResponse::Ok().content_type(content_type).body(bytes),
            "public, max-age=31536000, immutable",
        ),
        None => hardened(super::not_found(req).await, "no-store"),
    }
}

#[cfg(test)]
mod tests {
    use actix_web::{App, test};

    use super::*;

    #[actix_web::test]
    async fn the_page_and_its_assets_come_from_this_server_under_a_strict_policy() {
        let app = test::init_service(App::new().configure(configure)).await;
        let page =
            test::call_service(&app, test::TestRequest::get().uri("/docs").to_request()).await;
        assert_eq!(page.status(), 200);
        let csp = page.headers().get(header::CONTENT_SECURITY_POLICY).cloned();
        assert!(csp.is_some_and(|v| v.to_str().is_ok_and(|v| v.contains("script-src 'self';"))));
        let html = String::from_utf8(test::read_body(page).await.to_vec()).unwrap_or_default();
        let assets: Vec<&str> = html
            .split(['"', '\''])
            .filter(|s| s.starts_with("/docs/assets/"))
            .collect();
        assert_eq!(assets.len(), 3, "{html}");
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "{html}"
        );
        for uri in assets {
            let r = test::call_service(&app, test::TestRequest::get().uri(uri).to_request()).await;
            assert_eq!(r.status(), 200, "{uri}");
        }
        for uri in [
            "/docs/assets/0.0.1/swagger-ui.css",
            "/docs/assets/5.35.0/..%2F..%2FCargo.toml",
            "/docs/assets/5.35.0/index.html",
        ] {
            let r = test::call_service(&app, test::TestRequest::get().uri(uri).to_request()).await;
            assert_eq!(r.status(), 404, "{uri}");
        }
    }
}
