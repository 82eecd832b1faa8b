//! A typed client for the hub's REST and WebSocket API, used by the CLI (and usable by tests and
//! other programs). It knows *how* to talk to the hub, not what to print.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::external::RegisterRequest;
use crate::protocol::{
    AgentListReply, AgentReply, AgentStartReply, AuditPageReply, BridgeListReply, CreateTask,
    PolicyCheckReply, PolicyListReply, PolicyReloadReply, RegisterReply, TaskCreatedReply,
    TaskListReply, TaskReply, TaskWaitReply, UnregisterReply,
};
use crate::protocol::{
    CreateSessionRequest, ErrorBody, HealthReply, KeysRequest, KillReply, ReadQuery, ReadReply,
    ResizeReply, ResizeRequest, ResolveReply, SendLineRequest, SendToAgentReply,
    SendToAgentRequest, SessionCreatedReply, SessionListReply, SessionReply, SignalReply,
    SignalRequest, TalkReply, TalkRequest, TermReadReply, WriteReply,
};
use crate::routing::RouteKeys;

/// An error reply from the hub, or a failure to reach it.
#[derive(Debug, thiserror::Error)]
#[error("{error_code}: {message}")]
pub struct ClientError {
    /// The hub's machine code (`PTY_SESSION_NOT_FOUND`, ...), or `HUB_UNREACHABLE`.
    pub error_code: String,
    pub message: String,
    /// The hub's whole error body (for `--json` output).
    pub body: ErrorBody,
}

impl From<ErrorBody> for ClientError {
    fn from(body: ErrorBody) -> Self {
        ClientError {
            error_code: body.error_code.clone(),
            message: body.message.clone(),
            body,
        }
    }
}

impl ClientError {
    /// An error the client itself found (not a hub reply).
    pub fn new(error_code: &str, message: String) -> Self {
        ErrorBody::new(error_code, message).into()
    }

    fn unreachable(base: &str, e: impl std::fmt::Display) -> Self {
        Self::new("HUB_UNREACHABLE", format!("cannot reach the hub at {base}: {e} (is `agent-hub serve` running? set --hub or AGENT_HUB_URL)"))
    }
}

/// The byte stream under a WebSocket: TCP or a unix socket.
pub trait WsIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> WsIo for T {}

/// A WebSocket to the hub.
pub type WsStream = tokio_tungstenite::WebSocketStream<Box<dyn WsIo>>;

/// Client for one hub.
#[derive(Clone)]
pub struct HubClient {
    base: String,
    http: reqwest::Client,
    token: Option<String>,
    /// The hub's unix socket, for a `unix://` hub URL.
    unix: Option<std::path::PathBuf>,
    /// Where the token came from or was looked for, added to a refusal (`UNAUTHORIZED`).
    credential_source: Option<String>,
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
    /// A client for the hub at `base`: `http://127.0.0.1:8100`, or `unix:///path/api.sock` for
    /// the hub's unix socket (what container agents get as `AGENT_HUB_URL`).
    pub fn new(base: &str) -> Self {
        let base = base.trim_end_matches('/');
        let unix = base.strip_prefix("unix://").map(std::path::PathBuf::from);
        let http = match &unix {
            Some(path) => reqwest::Client::builder()
                .unix_socket(path.clone())
                .build()
                .unwrap_or_default(),
            None => reqwest::Client::new(),
        };
        HubClient {
            // Over a unix socket the URL's host is only the `Host` header: loopback.
            base: match unix {
                Some(_) => "http://localhost".to_string(),
                None => base.to_string(),
            },
            http,
            token: None,
            unix,
            credential_source: None,
        }
    }

    /// Opens a WebSocket (`ws_request`'s request) over TCP or the hub's unix socket.
    pub async fn ws_connect(&self, url: &str) -> Result<WsStream, String> {
        let request = self.ws_request(url)?;
        let io: Box<dyn WsIo> = match &self.unix {
            Some(path) => Box::new(
                tokio::net::UnixStream::connect(path)
                    .await
                    .map_err(|e| format!("cannot connect to {}: {e}", path.display()))?,
            ),
            None => {
                let uri = request.uri();
                let host = uri.host().unwrap_or("127.0.0.1");
                let port = uri.port_u16().unwrap_or(80);
                Box::new(
                    tokio::net::TcpStream::connect((host, port))
                        .await
                        .map_err(|e| format!("cannot connect to {host}:{port}: {e}"))?,
                )
            }
        };
        tokio_tungstenite::client_async(request, io)
            .await
            .map(|(ws, _)| ws)
            .map_err(|e| match &e {
                tokio_tungstenite::tungstenite::Error::Http(resp) if resp.status() == 401 => {
                    self.explain_refusal(format!("the hub refused the connection: {e}"))
                }
                _ => e.to_string(),
            })
    }

    /// The same client, presenting `token` (if any); `source` says where it came from or where
    /// it was looked for, and is added to the hub's refusal.
    pub fn with_credential(self, token: Option<String>, source: String) -> Self {
        HubClient {
            credential_source: Some(source),
            ..self.with_token(token)
        }
    }

    fn explain_refusal(&self, message: String) -> String {
        match &self.credential_source {
            Some(source) => format!("{message} ({source})"),
            None => message,
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

    /// One request; a non-2xx reply becomes a [`ClientError`] with the hub's code, and a
    /// reply that is not a `T` a `BAD_REPLY` error.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T, ClientError> {
        let req = self.http.request(method, format!("{}{path}", self.base));
        let resp = with_auth_and_body(req, self.token.as_deref(), body)
            .send()
            .await
            .map_err(|e| ClientError::unreachable(&self.base, e))?;
        let status = resp.status();
        let value: Value = resp
            .json()
            .await
            .map_err(|e| ClientError::unreachable(&self.base, e))?;
        if status.is_success() {
            return serde_json::from_value(value).map_err(|e| {
                ClientError::new("BAD_REPLY", format!("unexpected reply from the hub: {e}"))
            });
        }
        let mut body = serde_json::from_value::<ErrorBody>(value)
            .unwrap_or_else(|_| ErrorBody::new("HTTP_ERROR", format!("HTTP {status}")));
        if body.error_code == "UNAUTHORIZED" {
            body.message = self.explain_refusal(body.message);
        }
        Err(body.into())
    }

    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        self.call(reqwest::Method::GET, path, None::<&Value>).await
    }

    async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &(impl Serialize + ?Sized),
    ) -> Result<T, ClientError> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// `GET /v1/policies/check[?agent=ID]`: what each policy would do now.
    pub async fn policy_check(&self, agent: Option<&str>) -> Result<PolicyCheckReply, ClientError> {
        let query = agent
            .map(|a| format!("?agent={}", encode(a)))
            .unwrap_or_default();
        self.get(&format!("/v1/policies/check{query}")).await
    }

    /// `POST /v1/auth/rotate`: replace the owner's token.
    pub async fn rotate_owner_token(&self) -> Result<crate::protocol::RotateReply, ClientError> {
        self.post("/v1/auth/rotate", &serde_json::json!({})).await
    }

    /// `POST /v1/auth/signin-link`: a new one-time sign-in code for the dashboard.
    pub async fn signin_link(&self) -> Result<crate::protocol::SigninLinkReply, ClientError> {
        self.post("/v1/auth/signin-link", &serde_json::json!({}))
            .await
    }

    /// `GET /v1/policies`.
    pub async fn policies(&self) -> Result<PolicyListReply, ClientError> {
        self.get("/v1/policies").await
    }

    /// `POST /v1/policies/reload`.
    pub async fn policies_reload(&self) -> Result<PolicyReloadReply, ClientError> {
        self.post("/v1/policies/reload", &serde_json::json!({}))
            .await
    }

    fn session_path(id: &str, op: &str) -> String {
        format!("/v1/pty/sessions/{}{op}", encode(id))
    }

    pub async fn health(&self) -> Result<HealthReply, ClientError> {
        self.get("/health").await
    }

    pub async fn list(&self) -> Result<SessionListReply, ClientError> {
        self.get("/v1/pty/sessions").await
    }

    pub async fn create(
        &self,
        req: &CreateSessionRequest,
    ) -> Result<SessionCreatedReply, ClientError> {
        self.post("/v1/pty/sessions", req).await
    }

    pub async fn session(&self, id: &str) -> Result<SessionReply, ClientError> {
        self.get(&Self::session_path(id, "")).await
    }

    pub async fn kill(&self, id: &str) -> Result<KillReply, ClientError> {
        self.call(
            reqwest::Method::DELETE,
            &Self::session_path(id, ""),
            None::<&Value>,
        )
        .await
    }

    pub async fn send_line(&self, id: &str, data: &str) -> Result<WriteReply, ClientError> {
        let req = SendLineRequest {
            data: data.into(),
            submit: false,
            force: false,
        };
        self.post(&Self::session_path(id, "/send_line"), &req).await
    }

    /// `send_line` with `submit: true`: delivered as a prompt, answered with a receipt.
    pub async fn submit_line(
        &self,
        id: &str,
        data: &str,
        force: bool,
    ) -> Result<WriteReply, ClientError> {
        let req = SendLineRequest {
            data: data.into(),
            submit: true,
            force,
        };
        self.post(&Self::session_path(id, "/send_line"), &req).await
    }

    pub async fn keys(&self, id: &str, keys: &[String]) -> Result<WriteReply, ClientError> {
        let req = KeysRequest {
            keys: keys.to_vec(),
        };
        self.post(&Self::session_path(id, "/keys"), &req).await
    }

    pub async fn signal(&self, id: &str, signal: &str) -> Result<SignalReply, ClientError> {
        let req = SignalRequest {
            signal: signal.into(),
        };
        self.post(&Self::session_path(id, "/signal"), &req).await
    }

    pub async fn resize(&self, id: &str, cols: u16, rows: u16) -> Result<ResizeReply, ClientError> {
        let req = ResizeRequest { cols, rows };
        self.post(&Self::session_path(id, "/resize"), &req).await
    }

    pub async fn talk(
        &self,
        id: &str,
        command: &str,
        timeout_ms: Option<u64>,
    ) -> Result<TalkReply, ClientError> {
        let req = TalkRequest {
            command: command.into(),
            sentinel: None,
            timeout_ms,
        };
        self.post(&Self::session_path(id, "/talk"), &req).await
    }

    pub async fn term_read(
        &self,
        id: &str,
        req: &crate::screen::TermReadRequest,
    ) -> Result<TermReadReply, ClientError> {
        self.post(&Self::session_path(id, "/term_read"), req).await
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
        self.get(&path).await
    }

    pub async fn agents(&self) -> Result<AgentListReply, ClientError> {
        self.get("/v1/agents").await
    }

    pub async fn agent(&self, id: &str) -> Result<AgentReply, ClientError> {
        self.get(&format!("/v1/agents/{}", encode(id))).await
    }

    /// `op` is `start`, `stop` or `restart` (only `start` sets `already_running`).
    pub async fn agent_op(&self, id: &str, op: &str) -> Result<AgentStartReply, ClientError> {
        self.post(
            &format!("/v1/agents/{}/{op}", encode(id)),
            &serde_json::json!({}),
        )
        .await
    }

    /// Starts a task. A PTY task answers at once (`taskId`, `sessionId`); a piped one
    /// (`pty: false`) when it ends (`stdout`, `stderr`, `exitCode`).
    pub async fn create_task(&self, req: &CreateTask) -> Result<TaskCreatedReply, ClientError> {
        self.call(reqwest::Method::POST, "/v1/tasks", Some(req))
            .await
    }

    pub async fn tasks(&self) -> Result<TaskListReply, ClientError> {
        self.get("/v1/tasks").await
    }

    pub async fn task(&self, id: &str) -> Result<TaskReply, ClientError> {
        self.get(&format!("/v1/tasks/{}", encode(id))).await
    }

    /// Waits up to `timeout_ms` for a task to end: `{task, finished}`.
    pub async fn wait_task(&self, id: &str, timeout_ms: u64) -> Result<TaskWaitReply, ClientError> {
        self.post(
            &format!("/v1/tasks/{}/wait?timeout_ms={timeout_ms}", encode(id)),
            &serde_json::json!({}),
        )
        .await
    }

    /// Cancels a task (kills all its processes): `{task}`.
    pub async fn cancel_task(&self, id: &str) -> Result<TaskReply, ClientError> {
        self.call(
            reqwest::Method::DELETE,
            &format!("/v1/tasks/{}", encode(id)),
            None::<&Value>,
        )
        .await
    }

    /// A page of audit records (`GET /v1/pty-traffic/events`); `filters` are name/value pairs.
    pub async fn audit_events(
        &self,
        filters: &[(&str, String)],
    ) -> Result<AuditPageReply, ClientError> {
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

    /// The session a user means by `target`: a session id, a container agent's id (its
    /// current session), or else the one live session whose owner agent id or label is
    /// `target`, by the hub's resolve rules (`AMBIGUOUS` lists the matches; never more than
    /// one). Every CLI command that takes a session resolves it here.
    pub async fn resolve_target(&self, target: &str) -> Result<String, ClientError> {
        match self.session(target).await {
            Ok(_) => return Ok(target.to_string()),
            Err(e) if e.error_code != "PTY_SESSION_NOT_FOUND" => return Err(e),
            Err(_) => {}
        }
        if let Ok(AgentReply { agent, .. }) = self.agent(target).await {
            return match agent.session_id {
                Some(sid) if agent.pty_attached => Ok(sid),
                _ => Err(ClientError::new(
                    "AGENT_NOT_RUNNING",
                    format!(
                        "agent '{target}' is {}; start it with `agent-hub start {target}`",
                        agent.status
                    ),
                )),
            };
        }
        let keys = RouteKeys {
            agent_id: Some(target.into()),
            owner_session_id: None,
            label: Some(target.into()),
        };
        match self.resolve(&keys).await {
            Ok(reply) => Ok(reply.session_id),
            Err(e) if e.error_code == "AMBIGUOUS" => {
                let matches = e.body.matches();
                let mut body = ErrorBody::new(
                    "AMBIGUOUS",
                    format!(
                        "'{target}' matches {} sessions: {}; name one by its id",
                        matches.len(),
                        matches.join(", ")
                    ),
                );
                body.details = e.body.details;
                Err(body.into())
            }
            Err(e) if e.error_code == "NOT_FOUND" => Err(ClientError::new(
                "PTY_SESSION_NOT_FOUND",
                format!("no session, agent or label '{target}'"),
            )),
            Err(e) => Err(e),
        }
    }

    /// The bridge API's `GET /pty/list` (of the hub this client talks to).
    pub async fn bridge_list(&self) -> Result<BridgeListReply, ClientError> {
        self.get("/pty/list").await
    }

    /// `POST /v1/pty/register`
    pub async fn register(&self, req: &RegisterRequest) -> Result<RegisterReply, ClientError> {
        self.post("/v1/pty/register", req).await
    }

    /// `DELETE /v1/pty/unregister/{id}`
    pub async fn unregister(&self, id: &str, force: bool) -> Result<UnregisterReply, ClientError> {
        let query = if force { "?force=true" } else { "" };
        let path = format!("/v1/pty/unregister/{}{query}", encode(id));
        self.call(reqwest::Method::DELETE, &path, None::<&Value>)
            .await
    }

    /// `POST /v1/pty/resolve` with the given keys.
    pub async fn resolve(&self, keys: &RouteKeys) -> Result<ResolveReply, ClientError> {
        self.post("/v1/pty/resolve", keys).await
    }

    /// `POST /v1/pty/send_line_to_agent`.
    pub async fn send_line_to_agent(
        &self,
        keys: &RouteKeys,
        data: &str,
        force: bool,
    ) -> Result<SendToAgentReply, ClientError> {
        let req = SendToAgentRequest {
            data: data.into(),
            force,
            agent_id: keys.agent_id.clone(),
            owner_session_id: keys.owner_session_id.clone(),
            label: keys.label.clone(),
        };
        self.post("/v1/pty/send_line_to_agent", &req).await
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

/// A request with the bearer token and the JSON body, when there are (the hub's client and
/// the bridge client build their requests the same way).
pub(crate) fn with_auth_and_body(
    mut req: reqwest::RequestBuilder,
    token: Option<&str>,
    body: Option<&(impl Serialize + ?Sized)>,
) -> reqwest::RequestBuilder {
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    if let Some(body) = body {
        req = req.json(body);
    }
    req
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
