//! The one HTTP client for the hub's API, wherever it is served: by this hub (the CLI, tests,
//! agents in containers), or by another process that lends its terminals through the bridge
//! routes (`backend::external`). It knows how to reach the API (TCP or a unix socket, the
//! bearer token, time limits) and turns every failure into one [`ClientError`]; what a reply
//! means is for the typed clients above it (`client::HubClient`, `backend::external::client`).

use std::path::Path;
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::json::ErrorBody;

/// The WebSocket subprotocol that carries a bearer token (`agent-hub.bearer.<token>`), since a
/// browser cannot set headers on a WebSocket.
pub const WS_TOKEN_PROTOCOL: &str = "agent-hub.bearer.";

/// An error reply from the API, or a failure to get one.
#[derive(Debug, thiserror::Error)]
#[error("{error_code}: {message}")]
pub struct ClientError {
    /// The API's machine code (`PTY_SESSION_NOT_FOUND`, ...); `HUB_UNREACHABLE` when no reply
    /// came, `BAD_REPLY` when the reply could not be read.
    pub error_code: String,
    pub message: String,
    /// The whole error body (for `--json` output).
    pub body: ErrorBody,
    /// The HTTP status of the error reply; `None` when there was no usable reply.
    pub status: Option<u16>,
    /// Without a usable reply, what failed (the connection's or the reply's fault), without
    /// the advice `message` adds for people.
    pub cause: String,
}

impl From<ErrorBody> for ClientError {
    fn from(body: ErrorBody) -> Self {
        ClientError {
            error_code: body.error_code.clone(),
            message: body.message.clone(),
            body,
            status: None,
            cause: String::new(),
        }
    }
}

impl ClientError {
    /// An error the client itself found (not an API reply).
    pub fn new(error_code: &str, message: String) -> Self {
        ErrorBody::new(error_code, message).into()
    }

    fn unreachable(base: &str, cause: String) -> Self {
        ClientError {
            cause: cause.clone(),
            ..Self::new(
                "HUB_UNREACHABLE",
                format!(
                    "cannot reach the hub at {base}: {cause} (is `agent-hub serve` running? set \
                     --hub or AGENT_HUB_URL)"
                ),
            )
        }
    }

    fn bad_reply(base: &str, cause: String) -> Self {
        ClientError {
            cause: cause.clone(),
            ..Self::new("BAD_REPLY", format!("{cause} from the hub at {base}"))
        }
    }

    fn replied(status: u16, body: ErrorBody) -> Self {
        ClientError {
            status: Some(status),
            ..body.into()
        }
    }
}

/// A WebSocket to the API that could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum WsError {
    /// The URL is not a WebSocket URL.
    #[error(transparent)]
    Url(tokio_tungstenite::tungstenite::Error),
    #[error("the token is not a valid header value")]
    BadToken(#[source] tokio_tungstenite::tungstenite::http::header::InvalidHeaderValue),
    /// No connection to `to` (`HOST:PORT` or the unix socket's path).
    #[error("cannot connect to {to}: {source}")]
    Connect {
        to: String,
        #[source]
        source: std::io::Error,
    },
    /// The API refused the upgrade (401); `credential_source` says where the token came from
    /// or was looked for.
    #[error(
        "the hub refused the connection: {source}{}",
        in_parens(credential_source)
    )]
    Refused {
        credential_source: Option<String>,
        #[source]
        source: tokio_tungstenite::tungstenite::Error,
    },
    /// The WebSocket handshake failed otherwise.
    #[error(transparent)]
    Handshake(tokio_tungstenite::tungstenite::Error),
}

/// ` (TEXT)`, or nothing.
fn in_parens(text: &Option<String>) -> String {
    text.as_ref().map(|t| format!(" ({t})")).unwrap_or_default()
}

/// The byte stream under a WebSocket: TCP or a unix socket.
pub trait WsIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> WsIo for T {}

/// A WebSocket to the hub.
pub type WsStream = tokio_tungstenite::WebSocketStream<Box<dyn WsIo>>;

/// A client for one API.
#[derive(Clone)]
pub struct HttpClient {
    base: String,
    http: reqwest::Client,
    token: Option<String>,
    /// The API's unix socket, for a `unix://` URL.
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

/// The reqwest client: over the unix socket at `unix` if given, connecting within
/// `connect_timeout` if given.
fn reqwest_client(
    unix: Option<&std::path::Path>,
    connect_timeout: Option<Duration>,
) -> reqwest::Client {
    let mut builder = reqwest::Client::builder();
    if let Some(path) = unix {
        builder = with_unix_socket(builder, path);
    }
    if let Some(timeout) = connect_timeout {
        builder = builder.connect_timeout(timeout);
    }
    builder.build().unwrap_or_default()
}

#[cfg(unix)]
fn with_unix_socket(builder: reqwest::ClientBuilder, path: &Path) -> reqwest::ClientBuilder {
    builder.unix_socket(path)
}

/// No unix socket on Windows: [`HttpClient::send`] refuses a `unix://` address first.
#[cfg(windows)]
fn with_unix_socket(builder: reqwest::ClientBuilder, _path: &Path) -> reqwest::ClientBuilder {
    builder
}

#[cfg(unix)]
async fn connect_unix(path: &Path) -> std::io::Result<Box<dyn WsIo>> {
    let stream = tokio::net::UnixStream::connect(path).await?;
    Ok(Box::new(stream))
}

#[cfg(windows)]
async fn connect_unix(_path: &Path) -> std::io::Result<Box<dyn WsIo>> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        NO_UNIX_SOCKETS,
    ))
}

/// Why a `unix://` address cannot be reached here.
const NO_UNIX_SOCKETS: &str =
    "a hub has no unix socket on Windows: name its http:// address (--hub or AGENT_HUB_URL)";

impl HttpClient {
    /// A client for the API at `base`: `http://127.0.0.1:8100`, or `unix:///path/api.sock` for
    /// the hub's unix socket; connecting may take as long as the system allows, or
    /// `connect_timeout` if given.
    pub fn new(base: &str, connect_timeout: Option<Duration>) -> Self {
        let base = base.trim_end_matches('/');
        let unix = base.strip_prefix("unix://").map(std::path::PathBuf::from);
        HttpClient {
            http: reqwest_client(unix.as_deref(), connect_timeout),
            // Over a unix socket the URL's host is only the `Host` header: loopback.
            base: match unix {
                Some(_) => "http://localhost".to_string(),
                None => base.to_string(),
            },
            token: None,
            unix,
            credential_source: None,
        }
    }

    /// The same client, presenting `token` (if any); `source` says where it came from or where
    /// it was looked for, and is added to a refusal.
    pub fn with_credential(self, token: Option<String>, source: String) -> Self {
        HttpClient {
            credential_source: Some(source),
            ..self.with_token(token)
        }
    }

    /// The same client, sending `token` as `Authorization: Bearer` (and as the WebSocket
    /// subprotocol [`WS_TOKEN_PROTOCOL`]).
    pub fn with_token(mut self, token: Option<String>) -> Self {
        self.token = token.filter(|t| !t.is_empty());
        self
    }

    /// The API's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    fn explain_refusal(&self, message: String) -> String {
        match &self.credential_source {
            Some(source) => format!("{message} ({source})"),
            None => message,
        }
    }

    /// One request, without a time limit of its own (see [`HttpClient::call_within`]).
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T, ClientError> {
        self.send(method, path, body, None).await
    }

    /// One request that must be answered within `timeout`. A reply with an error status or
    /// `ok: false` becomes a [`ClientError`] with the API's code; a reply that is not a `T`, a
    /// `BAD_REPLY`; no reply, `HUB_UNREACHABLE`.
    pub async fn call_within<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
        timeout: Duration,
    ) -> Result<T, ClientError> {
        self.send(method, path, body, Some(timeout)).await
    }

    async fn send<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
        timeout: Option<Duration>,
    ) -> Result<T, ClientError> {
        if self.unix.is_some() && !cfg!(unix) {
            return Err(ClientError::unreachable(&self.base, NO_UNIX_SOCKETS.into()));
        }
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(timeout) = timeout {
            req = req.timeout(timeout);
        }
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(body);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| ClientError::unreachable(&self.base, describe(&e)))?;
        let status = resp.status();
        let value: Value = resp.json().await.map_err(|e| {
            ClientError::bad_reply(&self.base, format!("unreadable reply: {}", describe(&e)))
        })?;
        if status.is_success() && value["ok"] != Value::Bool(false) {
            return serde_json::from_value(value)
                .map_err(|e| ClientError::bad_reply(&self.base, format!("unexpected reply: {e}")));
        }
        let mut body = error_body(value, status);
        if body.error_code == "UNAUTHORIZED" {
            body.message = self.explain_refusal(body.message);
        }
        Err(ClientError::replied(status.as_u16(), body))
    }

    /// A WebSocket request for `url` carrying the token, if any.
    pub fn ws_request(
        &self,
        url: &str,
    ) -> Result<tokio_tungstenite::tungstenite::handshake::client::Request, WsError> {
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req = url.into_client_request().map_err(WsError::Url)?;
        if let Some(token) = &self.token {
            let protocols = format!("agent-hub, {WS_TOKEN_PROTOCOL}{token}");
            req.headers_mut().insert(
                "sec-websocket-protocol",
                protocols.parse().map_err(WsError::BadToken)?,
            );
        }
        Ok(req)
    }

    /// Opens a WebSocket (`ws_request`'s request) over TCP or the unix socket.
    pub async fn ws_connect(&self, url: &str) -> Result<WsStream, WsError> {
        let request = self.ws_request(url)?;
        let (connected, to) = match &self.unix {
            Some(path) => (connect_unix(path).await, path.display().to_string()),
            None => {
                let uri = request.uri();
                let host = uri.host().unwrap_or("127.0.0.1");
                let port = uri.port_u16().unwrap_or(80);
                (
                    tokio::net::TcpStream::connect((host, port))
                        .await
                        .map(|s| Box::new(s) as Box<dyn WsIo>),
                    format!("{host}:{port}"),
                )
            }
        };
        let io = connected.map_err(|source| WsError::Connect { to, source })?;
        tokio_tungstenite::client_async(request, io)
            .await
            .map(|(ws, _)| ws)
            .map_err(|e| match &e {
                tokio_tungstenite::tungstenite::Error::Http(resp) if resp.status() == 401 => {
                    WsError::Refused {
                        credential_source: self.credential_source.clone(),
                        source: e,
                    }
                }
                _ => WsError::Handshake(e),
            })
    }
}

/// The error body of a reply, read leniently: another process's bridge may leave out `ok` or
/// `message`, and the fields particular to its code (`output`, `timeout_ms`, ...) are kept.
fn error_body(value: Value, status: reqwest::StatusCode) -> ErrorBody {
    let Value::Object(mut fields) = value else {
        return ErrorBody::new("HTTP_ERROR", format!("HTTP {status}"));
    };
    let mut text = |key: &str| match fields.remove(key) {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    let error_code = text("error_code").unwrap_or_else(|| "HTTP_ERROR".into());
    let message = text("message").unwrap_or_else(|| format!("HTTP {status}"));
    fields.remove("ok");
    ErrorBody {
        details: fields,
        ..ErrorBody::new(error_code, message)
    }
}

/// reqwest's error with its causes, which say what actually failed (refused, timed out...).
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_bodies_are_read_leniently_and_keep_their_details() {
        use serde_json::json;
        let status = reqwest::StatusCode::GATEWAY_TIMEOUT;
        let full = json!({"ok": false, "error_code": "PTY_TIMEOUT", "message": "timed out",
                          "timeout_ms": 50, "output": "so far"});
        let body = super::error_body(full, status);
        assert_eq!(
            (body.error_code.as_str(), body.message.as_str()),
            ("PTY_TIMEOUT", "timed out")
        );
        assert_eq!(body.details.get("timeout_ms"), Some(&json!(50)));
        assert_eq!(body.details.get("output"), Some(&json!("so far")));
        assert!(!body.details.contains_key("ok"));
        // A bridge that sends only its code and details.
        let sparse = super::error_body(
            json!({"error_code": "PTY_PROCESS_EXITED", "exit_code": 3}),
            status,
        );
        assert_eq!(sparse.error_code, "PTY_PROCESS_EXITED");
        assert_eq!(sparse.message, "HTTP 504 Gateway Timeout");
        assert_eq!(sparse.details.get("exit_code"), Some(&json!(3)));
        for odd in [json!("proxy error"), json!({"detail": "x"})] {
            let body = super::error_body(odd, status);
            assert_eq!(
                (body.error_code.as_str(), body.message.as_str()),
                ("HTTP_ERROR", "HTTP 504 Gateway Timeout")
            );
        }
    }

    #[test]
    fn components_are_percent_encoded() {
        assert_eq!(super::encode("abc-_.~09"), "abc-_.~09");
        assert_eq!(super::encode("a b/c?d&e=f#"), "a%20b%2Fc%3Fd%26e%3Df%23");
        assert_eq!(super::encode("it's \"q\""), "it%27s%20%22q%22");
        assert_eq!(super::encode("naïve ✓"), "na%C3%AFve%20%E2%9C%93");
    }
}
