//! Calls a bridge (see [`super::bridge`]) with short timeouts, so a bridge that is down makes
//! an operation fail quickly with an error that names it, and never stalls the hub.

use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use super::bridge::{BufferRequest, ReadReply, ReadRequest, TalkRequest, WriteRequest};
use crate::error::{HubError, HubResult};
use crate::http_client::{ClientError, HttpClient};
use crate::json::Encoding;
use crate::screen::{TermRead, TermReadRequest};
use crate::term::TalkResult;

/// How long connecting to a bridge may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a quick call (write, list, health, buffer) may take in all.
const QUICK_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra time a long call (read, talk) gets beyond the wait it asked the bridge for.
const LONG_CALL_SLACK: Duration = Duration::from_secs(5);

/// A bridge: the API client for its base URL and token.
#[derive(Clone)]
pub struct BridgeClient {
    http: HttpClient,
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
        let http = HttpClient::new(base, Some(CONNECT_TIMEOUT)).with_token(token);
        Ok(BridgeClient { http })
    }

    /// The bridge's base URL.
    pub fn url(&self) -> &str {
        self.http.base()
    }

    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&(impl Serialize + ?Sized)>,
        timeout: Duration,
    ) -> HubResult<T> {
        self.http
            .call_within(method, path, body, timeout)
            .await
            .map_err(|e| self.error(e))
    }

    /// The bridge's error, keeping the codes a caller acts on (timeouts and exits carry the
    /// output seen so far); without a usable reply, the bridge is unavailable.
    fn error(&self, e: ClientError) -> HubError {
        let Some(status) = e.status else {
            return HubError::BridgeUnavailable {
                bridge_url: self.url().to_string(),
                reason: e.cause,
            };
        };
        let detail = |key: &str| e.body.details.get(key).cloned().unwrap_or_default();
        let output = detail("output").as_str().unwrap_or("").to_string();
        match e.error_code.as_str() {
            "PTY_TIMEOUT" => HubError::Timeout {
                timeout_ms: detail("timeout_ms").as_u64().unwrap_or(0),
                output,
            },
            "PTY_PROCESS_EXITED" => HubError::ProcessExited {
                exit_code: detail("exit_code").as_i64().map(|c| c as i32),
                output,
            },
            _ => HubError::BridgeError {
                bridge_url: self.url().to_string(),
                status,
                remote_code: e.error_code,
                message: e.message,
            },
        }
    }

    /// `POST /pty/write`: raw bytes, as text when they are UTF-8.
    pub async fn write(&self, session_id: &str, bytes: &[u8]) -> HubResult<()> {
        let (data, encoding) = match std::str::from_utf8(bytes) {
            Ok(text) => (text.to_string(), Encoding::Utf8),
            Err(_) => (crate::json::base64_encode(bytes), Encoding::Base64),
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
