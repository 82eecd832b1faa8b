//! A typed client for the hub's REST and WebSocket API, used by the CLI (and usable by tests and
//! other programs). It knows *how* to talk to the hub, not what to print.

use serde::Serialize;
use serde_json::{json, Value};

use crate::protocol::{CreateSessionRequest, ReadQuery, ReadReply};

/// An error reply from the hub, or a failure to reach it.
#[derive(Debug, thiserror::Error)]
#[error("{error_code}: {message}")]
pub struct ClientError {
    /// The hub's machine code (`PTY_SESSION_NOT_FOUND`, ...), or `HUB_UNREACHABLE`.
    pub error_code: String,
    pub message: String,
    /// The hub's whole JSON error body (for `--json` output).
    pub body: Value,
}

impl ClientError {
    fn unreachable(base: &str, e: impl std::fmt::Display) -> Self {
        let message = format!("cannot reach the hub at {base}: {e} (is `agent-hub serve` running? set --hub or AGENT_HUB_URL)");
        ClientError {
            body: json!({"ok": false, "error_code": "HUB_UNREACHABLE", "message": message}),
            error_code: "HUB_UNREACHABLE".into(),
            message,
        }
    }
}

/// Client for one hub.
#[derive(Clone)]
pub struct HubClient {
    base: String,
    http: reqwest::Client,
    token: Option<String>,
}

/// What stays as is in a path segment or query value: RFC 3986's unreserved characters.
const COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// A path segment or query value, percent-encoded (UTF-8).
pub fn encode(component: &str) -> String {
    percent_encoding::utf8_percent_encode(component, COMPONENT).to_string()
}

impl HubClient {
    /// A client for the hub at `base` (e.g. `http://127.0.0.1:8100`).
    pub fn new(base: &str) -> Self {
        HubClient {
            base: base.trim_end_matches('/').to_string(),
            http: reqwest::Client::new(),
            token: None,
        }
    }

    /// The same client, sending `token` as `Authorization: Bearer` (and as the WebSocket
    /// subprotocol `agent-hub.bearer.<token>`).
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token.filter(|t| !t.is_empty());
        self
    }

    /// A WebSocket request for `url` carrying the token, if any.
    pub fn ws_request(
        &self,
        url: &str,
    ) -> Result<tokio_tungstenite::tungstenite::handshake::client::Request, String> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req = url.into_client_request().map_err(|e| e.to_string())?;
        if let Some(token) = &self.token {
            let protocols = format!("agent-hub, {}{token}", crate::api::auth::WS_TOKEN_PROTOCOL);
            req.headers_mut().insert(
                "sec-websocket-protocol",
                protocols
                    .parse()
                    .map_err(|_| "the token is not a valid header value".to_string())?,
            );
        }
        Ok(req)
    }

    /// The hub's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// One request; a non-2xx reply becomes a [`ClientError`] with the hub's code.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<Value, ClientError> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| ClientError::unreachable(&self.base, e))?;
        let status = resp.status();
        let value: Value = resp
            .json()
            .await
            .map_err(|e| ClientError::unreachable(&self.base, e))?;
        if status.is_success() {
            return Ok(value);
        }
        Err(ClientError {
            error_code: value["error_code"]
                .as_str()
                .unwrap_or("HTTP_ERROR")
                .to_string(),
            message: value["message"]
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| format!("HTTP {status}")),
            body: value,
        })
    }

    async fn get(&self, path: &str) -> Result<Value, ClientError> {
        self.call(reqwest::Method::GET, path, None::<&Value>).await
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value, ClientError> {
        self.call(reqwest::Method::POST, path, Some(&body)).await
    }

    /// `GET /v1/policies/check[?agent=ID]`: what each policy would do now.
    pub async fn policy_check(&self, agent: Option<&str>) -> Result<Value, ClientError> {
        let query = agent
            .map(|a| format!("?agent={}", encode(a)))
            .unwrap_or_default();
        self.get(&format!("/v1/policies/check{query}")).await
    }

    /// `GET /v1/policies`.
    pub async fn policies(&self) -> Result<Value, ClientError> {
        self.get("/v1/policies").await
    }

    /// `POST /v1/policies/reload`.
    pub async fn policies_reload(&self) -> Result<Value, ClientError> {
        self.post("/v1/policies/reload", serde_json::json!({}))
            .await
    }

    fn session_path(id: &str, op: &str) -> String {
        format!("/v1/pty/sessions/{}{op}", encode(id))
    }

    pub async fn health(&self) -> Result<Value, ClientError> {
        self.get("/health").await
    }

    pub async fn list(&self) -> Result<Value, ClientError> {
        self.get("/v1/pty/sessions").await
    }

    pub async fn create(&self, req: &CreateSessionRequest) -> Result<Value, ClientError> {
        self.call(reqwest::Method::POST, "/v1/pty/sessions", Some(req))
            .await
    }

    pub async fn session(&self, id: &str) -> Result<Value, ClientError> {
        self.get(&Self::session_path(id, "")).await
    }

    pub async fn kill(&self, id: &str) -> Result<Value, ClientError> {
        self.call(
            reqwest::Method::DELETE,
            &Self::session_path(id, ""),
            None::<&Value>,
        )
        .await
    }

    pub async fn send_line(&self, id: &str, data: &str) -> Result<Value, ClientError> {
        self.post(
            &Self::session_path(id, "/send_line"),
            json!({ "data": data }),
        )
        .await
    }

    /// `send_line` with `submit: true`: delivered as a prompt, answered with a receipt.
    pub async fn submit_line(
        &self,
        id: &str,
        data: &str,
        force: bool,
    ) -> Result<Value, ClientError> {
        self.post(
            &Self::session_path(id, "/send_line"),
            json!({ "data": data, "submit": true, "force": force }),
        )
        .await
    }

    pub async fn keys(&self, id: &str, keys: &[String]) -> Result<Value, ClientError> {
        self.post(&Self::session_path(id, "/keys"), json!({ "keys": keys }))
            .await
    }

    pub async fn signal(&self, id: &str, signal: &str) -> Result<Value, ClientError> {
        self.post(
            &Self::session_path(id, "/signal"),
            json!({ "signal": signal }),
        )
        .await
    }

    pub async fn resize(&self, id: &str, cols: u16, rows: u16) -> Result<Value, ClientError> {
        self.post(
            &Self::session_path(id, "/resize"),
            json!({ "cols": cols, "rows": rows }),
        )
        .await
    }

    pub async fn talk(
        &self,
        id: &str,
        command: &str,
        timeout_ms: Option<u64>,
    ) -> Result<Value, ClientError> {
        self.post(
            &Self::session_path(id, "/talk"),
            json!({ "command": command, "timeout_ms": timeout_ms }),
        )
        .await
    }

    pub async fn term_read(
        &self,
        id: &str,
        req: &crate::screen::TermReadRequest,
    ) -> Result<Value, ClientError> {
        self.call(
            reqwest::Method::POST,
            &Self::session_path(id, "/term_read"),
            Some(req),
        )
        .await
    }

    pub async fn read(&self, id: &str, q: &ReadQuery) -> Result<ReadReply, ClientError> {
        let mut params = Vec::new();
        if let Some(v) = q.max_bytes {
            params.push(format!("max_bytes={v}"));
        }
        if let Some(v) = q.since {
            params.push(format!("since={v}"));
        }
        if let Some(v) = q.timeout_ms {
            params.push(format!("timeout_ms={v}"));
        }
        if q.encoding == crate::protocol::Encoding::Base64 {
            params.push("encoding=base64".into());
        }
        if q.raw {
            params.push("raw=true".into());
        }
        let path = format!("{}?{}", Self::session_path(id, "/read"), params.join("&"));
        let value = self.get(&path).await?;
        serde_json::from_value(value.clone()).map_err(|e| ClientError {
            error_code: "BAD_REPLY".into(),
            message: format!("unexpected reply from the hub: {e}"),
            body: value,
        })
    }

    pub async fn agents(&self) -> Result<Value, ClientError> {
        self.get("/v1/agents").await
    }

    pub async fn agent(&self, id: &str) -> Result<Value, ClientError> {
        self.get(&format!("/v1/agents/{}", encode(id))).await
    }

    /// `op` is `start`, `stop` or `restart`.
    pub async fn agent_op(&self, id: &str, op: &str) -> Result<Value, ClientError> {
        self.post(&format!("/v1/agents/{}/{op}", encode(id)), json!({}))
            .await
    }

    /// Starts a task. A PTY task answers at once (`taskId`, `sessionId`); a piped one
    /// (`pty: false`) when it ends (`stdout`, `stderr`, `exitCode`).
    pub async fn create_task(&self, req: &crate::tasks::CreateTask) -> Result<Value, ClientError> {
        self.call(reqwest::Method::POST, "/v1/tasks", Some(req))
            .await
    }

    pub async fn tasks(&self) -> Result<Value, ClientError> {
        self.get("/v1/tasks").await
    }

    pub async fn task(&self, id: &str) -> Result<Value, ClientError> {
        self.get(&format!("/v1/tasks/{}", encode(id))).await
    }

    /// Waits up to `timeout_ms` for a task to end: `{task, finished}`.
    pub async fn wait_task(&self, id: &str, timeout_ms: u64) -> Result<Value, ClientError> {
        self.post(
            &format!("/v1/tasks/{}/wait?timeout_ms={timeout_ms}", encode(id)),
            json!({}),
        )
        .await
    }

    /// Cancels a task (kills all its processes): `{task}`.
    pub async fn cancel_task(&self, id: &str) -> Result<Value, ClientError> {
        self.call(
            reqwest::Method::DELETE,
            &format!("/v1/tasks/{}", encode(id)),
            None::<&Value>,
        )
        .await
    }

    /// A page of audit records (`GET /v1/pty-traffic/events`); `filters` are name/value pairs.
    pub async fn audit_events(&self, filters: &[(&str, String)]) -> Result<Value, ClientError> {
        let query: Vec<String> = filters
            .iter()
            .map(|(k, v)| format!("{k}={}", encode(v)))
            .collect();
        self.get(&format!("/v1/pty-traffic/events?{}", query.join("&")))
            .await
    }

    /// The WebSocket URL of the live audit stream.
    pub fn audit_stream_url(&self) -> String {
        format!("{}/v1/pty-traffic/stream", self.ws_base())
    }

    /// The WebSocket URL of the hub's event stream.
    pub fn events_url(&self) -> String {
        format!("{}/v1/events", self.ws_base())
    }

    /// The base URL with a WebSocket scheme.
    fn ws_base(&self) -> String {
        if let Some(rest) = self.base.strip_prefix("https://") {
            format!("wss://{rest}")
        } else if let Some(rest) = self.base.strip_prefix("http://") {
            format!("ws://{rest}")
        } else {
            self.base.clone()
        }
    }

    /// The session a user means by `target`: a session id, an agent id (its current session)
    /// or a session label (which must match exactly one session).
    pub async fn resolve_target(&self, target: &str) -> Result<String, ClientError> {
        if self.session(target).await.is_ok() {
            return Ok(target.to_string());
        }
        if let Ok(v) = self.agent(target).await {
            return match v["agent"]["session_id"].as_str() {
                Some(sid) if v["agent"]["pty_attached"] == true => Ok(sid.to_string()),
                _ => Err(ClientError {
                    error_code: "AGENT_NOT_RUNNING".into(),
                    message: format!(
                        "agent '{target}' is {}; start it with `agent-hub start {target}`",
                        v["agent"]["status"].as_str().unwrap_or("not running")
                    ),
                    body: v,
                }),
            };
        }
        let list = self.list().await?;
        let matches: Vec<String> = list["sessions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|s| s["label"].as_str() == Some(target))
            .filter_map(|s| s["id"].as_str().map(String::from))
            .collect();
        match matches.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(ClientError {
                error_code: "NOT_FOUND".into(),
                message: format!("no session, agent or label '{target}'"),
                body: json!({"ok": false, "error_code": "NOT_FOUND"}),
            }),
            many => Err(ClientError {
                error_code: "AMBIGUOUS".into(),
                message: format!(
                    "label '{target}' matches {} sessions: {}",
                    many.len(),
                    many.join(", ")
                ),
                body: json!({"ok": false, "error_code": "AMBIGUOUS", "matches": many}),
            }),
        }
    }

    /// `POST /v1/pty/resolve` with the given keys.
    pub async fn resolve(&self, keys: &crate::routing::RouteKeys) -> Result<Value, ClientError> {
        self.call(reqwest::Method::POST, "/v1/pty/resolve", Some(keys))
            .await
    }

    /// `POST /v1/pty/send_line_to_agent`.
    pub async fn send_line_to_agent(
        &self,
        keys: &crate::routing::RouteKeys,
        data: &str,
        force: bool,
    ) -> Result<Value, ClientError> {
        let mut body = serde_json::to_value(keys).unwrap_or_default();
        body["data"] = json!(data);
        body["force"] = json!(force);
        if let Some(obj) = body.as_object_mut() {
            obj.retain(|_, v| !v.is_null());
        }
        self.post("/v1/pty/send_line_to_agent", body).await
    }

    /// The WebSocket URL of a session's stream.
    pub fn stream_url(&self, id: &str, since: Option<u64>) -> String {
        let since = since.map(|s| format!("?since={s}")).unwrap_or_default();
        format!(
            "{}{}{since}",
            self.ws_base(),
            Self::session_path(id, "/stream")
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn components_are_percent_encoded() {
        assert_eq!(super::encode("abc-_.~09"), "abc-_.~09");
        assert_eq!(super::encode("a b/c?d&e=f#"), "a%20b%2Fc%3Fd%26e%3Df%23");
        assert_eq!(super::encode("it's \"q\""), "it%27s%20%22q%22");
        assert_eq!(super::encode("naïve ✓"), "na%C3%AFve%20%E2%9C%93");
    }
}
