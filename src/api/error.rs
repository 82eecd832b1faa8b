//! Turning [`HubError`] into HTTP responses, once: `{ok:false, error_code, message, ...}` with
//! the error's status. Also JSON, query and WebSocket-handshake extractors whose rejections use
//! the same shape, so a malformed request never gets a plain-text answer.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::HubError;
use crate::protocol::ErrorBody;

/// A [`HubError`] on its way out as a response.
#[derive(Debug)]
pub struct ApiError(pub HubError);

impl From<HubError> for ApiError {
    fn from(e: HubError) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let e = self.0;
        let status =
            StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut body = ErrorBody::new(e.code(), e.to_string());
        let d = &mut body.details;
        match &e {
            HubError::Timeout { output, timeout_ms } => {
                d.insert("output".into(), json!(output));
                d.insert("timeout_ms".into(), json!(timeout_ms));
            }
            HubError::ProcessExited { exit_code, output } => {
                d.insert("exit_code".into(), json!(exit_code));
                d.insert("output".into(), json!(output));
            }
            HubError::TaskTimedOut {
                id,
                duration_ms,
                stdout,
                stderr,
                ..
            } => {
                d.insert("taskId".into(), json!(id));
                d.insert("state".into(), json!("timeout"));
                d.insert("exitCode".into(), json!(null));
                d.insert("durationMs".into(), json!(duration_ms));
                d.insert("stdout".into(), json!(stdout));
                d.insert("stderr".into(), json!(stderr));
                d.insert("output".into(), json!(format!("{stdout}{stderr}")));
            }
            HubError::AgentStartFailed { screen, .. } => {
                d.insert("screen".into(), json!(screen));
            }
            HubError::Ambiguous { matches, .. } => {
                d.insert("matches".into(), json!(matches));
            }
            HubError::Workspace { files, .. } if !files.is_empty() => {
                d.insert("files".into(), json!(files));
            }
            HubError::MergeConflict {
                conflicts,
                delivered,
                ..
            } => {
                d.insert("conflicts".into(), conflicts.clone());
                if let Some(receipt) = delivered {
                    d.insert("delivered".into(), json!(receipt));
                }
            }
            HubError::AgentBlocked { evidence } => {
                d.insert("receipt".into(), json!("blocked"));
                d.insert("evidence".into(), json!(evidence));
            }
            HubError::DockerUnavailable { endpoint, .. } => {
                d.insert("endpoint".into(), json!(endpoint));
            }
            HubError::BridgeUnavailable { bridge_url, .. } => {
                d.insert("bridge_url".into(), json!(bridge_url));
            }
            HubError::BridgeCredentialRefused {
                bridge_url, status, ..
            } => {
                d.insert("bridge_url".into(), json!(bridge_url));
                d.insert("remote_status".into(), json!(status));
            }
            HubError::BridgeError {
                bridge_url,
                status,
                remote_code,
                ..
            } => {
                d.insert("bridge_url".into(), json!(bridge_url));
                d.insert("remote_status".into(), json!(status));
                d.insert("remote_error_code".into(), json!(remote_code));
            }
            HubError::CommandBlocked { pattern } => {
                d.insert("pattern".into(), json!(pattern));
            }
            HubError::BudgetExhausted { budget, .. } => {
                d.insert("budget".into(), (**budget).clone());
            }
            _ => {}
        }
        if status.is_server_error() {
            tracing::warn!(code = e.code(), "{e}");
        }
        let mut response = (status, axum::Json(body)).into_response();
        if matches!(e, HubError::PayloadTooLarge { .. }) {
            // The rest of the body was never read, so this connection cannot carry another
            // request: say so, or a client that pools connections writes its next request
            // into a closed socket.
            response.headers_mut().insert(
                axum::http::header::CONNECTION,
                axum::http::HeaderValue::from_static("close"),
            );
        }
        if let HubError::BudgetExhausted { budget, .. } = &e {
            // When the budget renews, for clients that wait out a 429 by its Retry-After.
            let renews = budget["standing"]["renews_at"].as_str();
            let renews = renews.and_then(|t| t.parse::<chrono::DateTime<chrono::Utc>>().ok());
            if let Some(after) = renews.map(|t| (t - chrono::Utc::now()).num_seconds().max(0)) {
                if let Ok(v) = axum::http::HeaderValue::from_str(&after.to_string()) {
                    response
                        .headers_mut()
                        .insert(axum::http::header::RETRY_AFTER, v);
                }
            }
        }
        let code = crate::api::metrics::ErrorCode(e.code());
        response.extensions_mut().insert(code);
        response
    }
}

/// Result type for handlers.
pub type ApiResult<T> = Result<T, ApiError>;

/// A JSON body whose rejections are [`HubError::BadRequest`] / [`HubError::PayloadTooLarge`].
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let limit = req.extensions().get::<crate::api::BodyLimit>().map(|l| l.0);
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(ApiJson(v)),
            Err(rejection) => Err(ApiError(json_rejection(rejection, limit))),
        }
    }
}

fn json_rejection(rejection: JsonRejection, limit: Option<usize>) -> HubError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return HubError::PayloadTooLarge {
            limit_bytes: limit.unwrap_or_default(),
        };
    }
    let message = match &rejection {
        JsonRejection::MissingJsonContentType(_) => {
            "expected a JSON body with 'Content-Type: application/json'".to_string()
        }
        JsonRejection::JsonSyntaxError(e) => format!("malformed JSON: {}", source_text(e)),
        JsonRejection::JsonDataError(e) => format!("invalid request: {}", source_text(e)),
        other => other.body_text(),
    };
    HubError::bad_request(message)
}

fn source_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text = s.to_string();
        source = s.source();
    }
    text
}

/// Query parameters whose rejections are [`HubError::BadRequest`].
pub struct ApiQuery<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(ApiQuery(v)),
            Err(rejection) => Err(ApiError(query_rejection(rejection))),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> HubError {
    HubError::bad_request(format!("invalid query string: {}", source_text(&rejection)))
}

/// A WebSocket handshake whose rejections (a plain GET, a wrong `Upgrade` or
/// `Sec-WebSocket-Version`, no `Sec-WebSocket-Key`) are [`HubError::BadRequest`].
pub struct ApiWebSocket(pub WebSocketUpgrade);

impl<S: Send + Sync> FromRequestParts<S> for ApiWebSocket {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match WebSocketUpgrade::from_request_parts(parts, state).await {
            Ok(ws) => Ok(ApiWebSocket(ws)),
            Err(rejection) => Err(ApiError(HubError::bad_request(format!(
                "not a WebSocket handshake: {}",
                rejection.body_text()
            )))),
        }
    }
}
