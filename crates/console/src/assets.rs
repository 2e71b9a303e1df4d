//! The console's static files, inside the binary. Each is served under a path that carries a
//! hash of its content, so it can be cached for a year: a new build with a changed file has a
//! new path, and an old path answers 404 rather than a file it does not name.

use std::sync::OnceLock;

use actix_web::http::header;
use actix_web::web::Path;
use actix_web::{HttpRequest, HttpResponse};
use sha2::{Digest, Sha256};

use crate::PREFIX;

struct Asset {
    name: &'static str,
    media_type: &'static str,
    bytes: &'static [u8],
}

const FILES: &[Asset] = &[
    Asset {
        name: "htmx.min.js",
        media_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("../assets/htmx-2.0.4.min.js"),
    },
    Asset {
        name: "console.css",
        media_type: "text/css; charset=utf-8",
        bytes: include_bytes!("../assets/console.css"),
    },
];

/// The first 16 hex digits of the file's SHA-256.
fn content_hash(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn hashes() -> &'static [String] {
    static HASHES: OnceLock<Vec<String>> = OnceLock::new();
    HASHES.get_or_init(|| FILES.iter().map(|f| content_hash(f.bytes)).collect())
}

/// The path a page links a file by.
pub fn url(name: &str) -> String {
    let hash = FILES
        .iter()
        .zip(hashes())
        .find(|(f, _)| f.name == name)
        .map(|(_, h)| h.as_str())
        .unwrap_or("missing");
    format!("{PREFIX}/assets/{hash}/{name}")
}

pub async fn serve(req: HttpRequest, path: Path<(String, String)>) -> HttpResponse {
    let (version, name) = path.into_inner();
    let found = FILES
        .iter()
        .zip(hashes())
        .find(|(f, h)| f.name == name && **h == version);
    match found {
        Some((file, hash)) => {
            let etag = format!("\"{hash}\"");
            let cached = req
                .headers()
                .get(header::IF_NONE_MATCH)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
            let mut answer = if cached {
                HttpResponse::NotModified()
            } else {
                HttpResponse::Ok()
            };
            answer
                .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
                .insert_header((header::ETAG, etag));
            if cached {
                answer.finish()
            } else {
                answer
                    .insert_header((header::CONTENT_TYPE, file.media_type))
                    .body(file.bytes)
            }
        }
        None => HttpResponse::NotFound()
            .insert_header((header::CACHE_CONTROL, "no-store"))
            .finish(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_is_linked_by_its_content_hash() {
        let css = url("console.css");
        assert!(css.starts_with("/console/assets/"), "{css}");
        assert!(css.ends_with("/console.css"));
        assert_eq!(css.split('/').nth(3).map(str::len), Some(16));
        assert_ne!(url("htmx.min.js").split('/').nth(3), css.split('/').nth(3));
    }
}
