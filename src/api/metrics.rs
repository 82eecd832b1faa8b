//! The metrics of the API layer: `GET /metrics`, and the middleware that times every request
//! by route template and counts input operations and error codes.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::hub::Hub;

/// The error code of an error reply, left in the response's extensions by
/// [`super::error::ApiError`] so this layer need not parse bodies.
#[derive(Debug, Clone, Copy)]
pub struct ErrorCode(pub &'static str);

/// `GET /metrics`.
pub async fn scrape(State(hub): State<Hub>) -> Response {
    let text = tokio::task::spawn_blocking(move || {
        let statuses: Vec<String> = hub
            .agents()
            .list()
            .iter()
            .map(|a| a.status.to_string())
            .collect();
        hub.metrics()
            .render(&hub.list(), &statuses, &hub.ledger().totals())
    })
    .await
    .unwrap_or_default();
    (
        [(
            CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// The input operation a route template is, if it is one.
pub fn input_kind(method: &str, route: &str) -> Option<&'static str> {
    if method != "POST" {
        return None;
    }
    Some(match route {
        "/v1/pty/sessions/{id}/send_line" => "send_line",
        "/v1/pty/sessions/{id}/keys" => "keys",
        "/v1/pty/sessions/{id}/talk" => "talk",
        "/v1/pty/sessions/{id}/signal" => "signal",
        "/v1/pty/send_line_to_agent" => "send_line_to_agent",
        "/pty/write" => "bridge_write",
        "/pty/talk" => "bridge_talk",
        _ => return None,
    })
}

/// Times every request; counts input operations by outcome and error replies by code.
pub async fn track(State(hub): State<Hub>, req: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_string();
    let method = req.method().to_string();
    let response = next.run(req).await;
    let code = response.extensions().get::<ErrorCode>().map(|c| c.0);
    let metrics = hub.metrics();
    if let Some(kind) = input_kind(&method, &route) {
        metrics.input_op(kind, code.unwrap_or("ok"));
    }
    metrics.api_request(
        &method,
        &route,
        response.status().as_u16(),
        code,
        started.elapsed(),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::input_kind;

    #[test]
    fn input_routes_are_named() {
        assert_eq!(
            input_kind("POST", "/v1/pty/sessions/{id}/send_line"),
            Some("send_line")
        );
        assert_eq!(input_kind("POST", "/pty/write"), Some("bridge_write"));
        assert_eq!(input_kind("GET", "/v1/pty/sessions/{id}/read"), None);
        assert_eq!(input_kind("POST", "/v1/pty/sessions"), None);
    }
}
