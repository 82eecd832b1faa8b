//! Calls a bridge (see [`crate::external::bridge`]) with short timeouts, so a bridge that is down makes
//! an operation fail quickly with an error that names it, and never stalls the hub.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::bridge::{BufferRequest, ReadReply, ReadRequest, TalkRequest, WriteRequest};
use crate::error::{HubError, HubResult};
use crate::protocol::Encoding;
use crate::screen::{TermRead, TermReadRequest};
use crate::session::TalkResult;

/// How long connecting to a bridge may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a quick call (write, list, health, buffer) may take in all.
const QUICK_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra time a long call (read, talk) gets beyond the wait it asked the bridge for.
const LONG_CALL_SLACK: Duration = Duration::from_secs(5);

/// A bridge: its base URL and the token to present.
#[derive(Clone)]
pub struct BridgeClient {
    base: String,
    token: Option<String>,
    http: reqwest::Client,
}

impl BridgeClient {
    /// A client for the bridge at `base` (`http://host:port`), presenting `token` if given.
    pub fn new(base: &str, token: Option<String>) -> HubResult<Self> {
        let url = reqwest::Url::parse(base)
            .map_err(|e| HubError::bad_request(format!("bridge_url '{base}' is not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(HubError::bad_request(format!(
                "bridge_url '{base}' must be http:// or https:// with a host"
            )));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| HubError::Internal {
                message: format!("http client: {e}"),
            })?;
        Ok(BridgeClient {
            base: base.trim_end_matches('/').to_string(),
            token,
            http,
        })
    }

    /// The bridge's base URL.
    pub fn url(&self) -> &str {
        &self.base
    }

    fn unavailable(&self, reason: impl std::fmt::Display) -> HubError {
        HubError::BridgeUnavailable {
            bridge_url: self.base.clone(),
            reason: reason.to_string(),
        }
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
        timeout: Duration,
    ) -> HubResult<T> {
        let req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(timeout);
        let resp = crate::client::with_auth_and_body(req, self.token.as_deref(), body)
            .send()
            .await
            .map_err(|e| self.unavailable(describe(&e)))?;
        let status = resp.status().as_u16();
        let value: Value = resp
            .json()
            .await
            .map_err(|e| self.unavailable(format!("unreadable reply: {}", describe(&e))))?;
        if value["ok"] == Value::Bool(false) || status >= 400 {
            return Err(self.remote_error(status, &value));
        }
        serde_json::from_value(value)
            .map_err(|e| self.unavailable(format!("unexpected reply: {e}")))
    }

    /// The bridge's error, keeping the codes a caller acts on (timeouts and exits carry the
    /// output seen so far).
    fn remote_error(&self, status: u16, body: &Value) -> HubError {
        let code = body["error_code"].as_str().unwrap_or("UNKNOWN").to_string();
        let message = body["message"].as_str().unwrap_or("").to_string();
        let output = body["output"].as_str().unwrap_or("").to_string();
        match code.as_str() {
            "PTY_TIMEOUT" => HubError::Timeout {
                timeout_ms: body["timeout_ms"].as_u64().unwrap_or(0),
                output,
            },
            "PTY_PROCESS_EXITED" => HubError::ProcessExited {
                exit_code: body["exit_code"].as_i64().map(|c| c as i32),
                output,
            },
            _ => HubError::BridgeError {
                bridge_url: self.base.clone(),
                status,
                remote_code: code,
                message,
            },
        }
    }

    /// `POST /pty/write`: raw bytes, as text when they are UTF-8.
    pub async fn write(&self, session_id: &str, bytes: &[u8]) -> HubResult<()> {
        let (data, encoding) = match std::str::from_utf8(bytes) {
            Ok(text) => (text.to_string(), Encoding::Utf8),
            Err(_) => (crate::protocol::base64_encode(bytes), Encoding::Base64),
        };
        let req = WriteRequest {
            session_id: session_id.into(),
            data,
            encoding,
        };
        let _: Value = self
            .call(
                reqwest::Method::POST,
                "/pty/write",
                Some(&req),
                QUICK_CALL_TIMEOUT,
            )
            .await?;
        Ok(())
    }

    /// `POST /pty/read` from `offset`, waiting up to `wait` for output.
    pub async fn read(
        &self,
        session_id: &str,
        offset: u64,
        wait: Duration,
    ) -> HubResult<ReadReply> {
        let req = ReadRequest {
            session_id: session_id.into(),
            timeout_ms: wait.as_millis() as u64,
            offset: Some(offset),
            max_bytes: None,
            encoding: Encoding::Base64,
        };
        self.call(
            reqwest::Method::POST,
            "/pty/read",
            Some(&req),
            wait + LONG_CALL_SLACK,
        )
        .await
    }

    /// `POST /pty/talk`.
    pub async fn talk(
        &self,
        session_id: &str,
        command: &str,
        sentinel: Option<&str>,
        timeout: Duration,
    ) -> HubResult<TalkResult> {
        let req = TalkRequest {
            session_id: session_id.into(),
            command: command.into(),
            sentinel: sentinel.map(Into::into),
            timeout_ms: Some(timeout.as_millis() as u64),
        };
        self.call(
            reqwest::Method::POST,
            "/pty/talk",
            Some(&req),
            timeout + LONG_CALL_SLACK,
        )
        .await
    }

    /// `POST /pty/buffer`.
    pub async fn buffer(&self, session_id: &str, read: &TermReadRequest) -> HubResult<TermRead> {
        let req = BufferRequest {
            session_id: session_id.into(),
            read: read.clone(),
            no_other_fields: Default::default(),
        };
        self.call(
            reqwest::Method::POST,
            "/pty/buffer",
            Some(&req),
            QUICK_CALL_TIMEOUT,
        )
        .await
    }

    /// `GET /pty/list`: the bridge's sessions, as it describes them.
    pub async fn list(&self) -> HubResult<Vec<Value>> {
        let value: Value = self
            .call(
                reqwest::Method::GET,
                "/pty/list",
                None::<&Value>,
                QUICK_CALL_TIMEOUT,
            )
            .await?;
        Ok(value["sessions"].as_array().cloned().unwrap_or_default())
    }

    /// `GET /health`.
    pub async fn health(&self) -> HubResult<Value> {
        self.call(
            reqwest::Method::GET,
            "/health",
            None::<&Value>,
            QUICK_CALL_TIMEOUT,
        )
        .await
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
