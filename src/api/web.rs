//! The web dashboard: `/` and the files under `/web/`, embedded in the binary at compile time
//! (the front end is plain ES modules in `web/` with its vendored xterm.js, no build step), and
//! `GET /v1/whoami`, which tells the page what the signed-in token may do.
//!
//! The files are static and hold no data, so they are served without a token (the page signs
//! in with one and keeps it in the tab's session storage); every API call and WebSocket of the
//! page is authorised as usual. Replies carry a strict Content-Security-Policy: scripts and
//! styles only from this origin, nothing inline, no framing. xterm.js styles its terminals with
//! `<style>` elements it creates, so the page's CSP allows styles carrying a per-response nonce
//! and the page gives that nonce to the elements xterm.js creates (`web/csp.js`).
//!
//! The page is installable (a web app manifest and icons under `/web/`) and registers a
//! service worker, served at `/sw.js` so that its scope is the whole origin. The worker keeps
//! the page's files for when the hub cannot be reached and never caches an API reply.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use rand::Rng;

use crate::actor::Actor;
use crate::error::HubError;

/// One embedded file: its name under `/web/`, content type and bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/web/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

static ASSETS: &[Asset] = &[
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("csp.js", JS),
    asset!("fleet.js", JS),
    asset!("terminal.js", JS),
    asset!("panels.js", JS),
    asset!("review.js", JS),
    asset!("merge.js", JS),
    asset!("util.js", JS),
    asset!("app.css", CSS),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("icon-192.png", "image/png"),
    asset!("icon-512.png", "image/png"),
    asset!("manifest.webmanifest", "application/manifest+json"),
    asset!("vendor/xterm.mjs", JS),
    asset!("vendor/xterm.css", CSS),
    asset!("vendor/addon-fit.mjs", JS),
    asset!("vendor/addon-search.mjs", JS),
    asset!("vendor/addon-web-links.mjs", JS),
];

const INDEX_HTML: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/web/index.html"));
const SERVICE_WORKER: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/web/sw.js"));

/// The Content-Security-Policy of every dashboard reply; `nonce` admits xterm.js's `<style>`
/// elements. `connect-src 'self'` covers the page's WebSockets (same origin, ws: and wss:).
pub fn content_security_policy(nonce: &str) -> String {
    format!(
        "default-src 'none'; script-src 'self'; style-src 'self' 'nonce-{nonce}'; \
         img-src 'self' data:; font-src 'self'; connect-src 'self'; worker-src 'self'; \
         manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    )
}

pub(super) fn with_security_headers(mut response: Response, nonce: &str) -> Response {
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&content_security_policy(nonce)) {
        h.insert(header::CONTENT_SECURITY_POLICY, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Assets change with the binary: always revalidate (they are small and local).
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /`: the page, with a fresh nonce in its CSP and in its `csp-nonce` meta tag.
pub async fn index() -> Response {
    let nonce = format!("{:032x}", rand::rng().random::<u128>());
    let html = INDEX_HTML.replace("{{nonce}}", &nonce);
    let response = ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    with_security_headers(response, &nonce)
}

/// `GET /web/{*path}`: an embedded file.
pub async fn asset(Path(path): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == path) {
        Some(a) => with_security_headers(
            ([(header::CONTENT_TYPE, a.content_type)], a.bytes).into_response(),
            "none",
        ),
        None => (
            StatusCode::NOT_FOUND,
            super::error::ApiError(HubError::RouteNotFound {
                method: "GET".into(),
                path: format!("/web/{path}"),
            }),
        )
            .into_response(),
    }
}

/// `GET /favicon.ico`: browsers ask for it before the page sets its own icon.
pub async fn favicon() -> Response {
    asset(Path("favicon.svg".into())).await
}

/// `GET /sw.js`: the service worker (`web/sw.js`), at the root so that it may control `/`.
pub async fn service_worker() -> Response {
    with_security_headers(
        ([(header::CONTENT_TYPE, JS)], SERVICE_WORKER).into_response(),
        "none",
    )
}

/// `GET /v1/whoami`: the caller's token name and role, and whether the hub asks for tokens.
pub async fn whoami(
    axum::extract::State(hub): axum::extract::State<crate::hub::Hub>,
    Extension(actor): Extension<Actor>,
) -> Json<crate::protocol::WhoamiReply> {
    Json(crate::protocol::WhoamiReply {
        ok: true,
        role: actor.role(),
        token_name: actor.token_name,
        auth_required: !hub.access().anonymous_allowed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_page_file_is_embedded() {
        // Each module the page imports must be in the table (a missing one is a 404 in the
        // browser): every `from "./x.js"` in the embedded scripts names an asset.
        for a in ASSETS.iter().filter(|a| a.content_type == JS) {
            let text = std::str::from_utf8(a.bytes).unwrap();
            for import in text.split("from \"./").skip(1) {
                let name = import.split('"').next().unwrap();
                let base = a.name.rsplit_once('/').map_or("", |(dir, _)| dir);
                let full = if base.is_empty() {
                    name.to_string()
                } else {
                    format!("{base}/{name}")
                };
                assert!(
                    ASSETS.iter().any(|x| x.name == full),
                    "{} imports {full}, which is not embedded",
                    a.name
                );
            }
        }
    }

    #[test]
    fn the_service_worker_keeps_only_embedded_files() {
        // Each file of the worker's shell list is `/` or an embedded asset (a missing one
        // would fail the worker's install).
        let list = SERVICE_WORKER.split("const SHELL = [").nth(1).unwrap();
        let list = list.split("];").next().unwrap();
        let files: Vec<&str> = list.split('"').skip(1).step_by(2).collect();
        assert!(files.len() > 10, "{files:?}");
        for f in files {
            let ok = f == "/"
                || f.strip_prefix("/web/")
                    .is_some_and(|n| ASSETS.iter().any(|a| a.name == n));
            assert!(ok, "the service worker keeps {f}, which is not served");
        }
        assert!(
            !SERVICE_WORKER.contains("\"/v1"),
            "the worker names no API path"
        );
    }

    #[test]
    fn the_policy_allows_nothing_inline() {
        let csp = content_security_policy("abc");
        assert!(csp.contains("script-src 'self';"), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
        assert!(csp.contains("'nonce-abc'"), "{csp}");
        assert!(INDEX_HTML.contains("{{nonce}}"));
        assert!(!INDEX_HTML.contains("<script>"), "no inline script");
        assert!(!INDEX_HTML.contains("style="), "no inline style");
    }
}
