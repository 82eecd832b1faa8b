//! External sessions: terminals owned by another process that serves the bridge API
//! ([`bridge`]). Their output is pulled into the session's pipeline by one long-polling
//! reader, so read, stream, term_read and activity work as for any session; input goes to
//! `/pty/write`; talk and rendered reads are proxied ([`ExternalLink`]); resize is unsupported.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::{Backend, BackendError, Capabilities, TermSize};
use crate::error::{HubError, HubResult};
pub mod bridge;
pub mod client;

use crate::output::{ExitInfo, Output};
use crate::screen::{TermRead, TermReadRequest};
use crate::term::TalkResult;
use crate::term::TermSignal;
pub use client::BridgeClient;

/// How long one `/pty/read` waits on the bridge for new output.
const READ_WAIT: Duration = Duration::from_secs(10);
/// Retry delays after a failed read: doubling from the first to the last.
const RETRY_FIRST: Duration = Duration::from_millis(250);
const RETRY_LAST: Duration = Duration::from_secs(5);

/// What the hub knows about an external session's bridge.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct LinkHealth {
    pub healthy: bool,
    pub last_ok_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
}

/// How to reach an external session, and what was last seen of its bridge.
pub struct ExternalLink {
    pub client: BridgeClient,
    /// The session's id on the bridge.
    pub remote_id: String,
    /// Token presented to the bridge, kept for the registry file (never shown by the API).
    pub token: Option<String>,
    health: Mutex<LinkHealth>,
}

/// The `external` block of a session's info.
#[derive(Debug, Clone, Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct ExternalInfo {
    pub bridge_url: String,
    pub remote_session_id: String,
    #[serde(flatten)]
    pub health: LinkHealth,
}

impl ExternalLink {
    pub fn new(client: BridgeClient, remote_id: String, token: Option<String>) -> Self {
        ExternalLink {
            client,
            remote_id,
            token,
            health: Mutex::new(LinkHealth::default()),
        }
    }

    fn health(&self) -> std::sync::MutexGuard<'_, LinkHealth> {
        self.health.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the outcome of a call to the bridge, and passes it on.
    pub fn note<T>(&self, result: HubResult<T>) -> HubResult<T> {
        let mut h = self.health();
        match &result {
            Ok(_) => {
                h.healthy = true;
                h.last_ok_at = Some(Utc::now());
                h.last_error = None;
            }
            Err(e @ HubError::BridgeUnavailable { .. }) => {
                h.healthy = false;
                h.last_error = Some(e.to_string());
            }
            Err(_) => {}
        }
        result
    }

    /// Asks the bridge's `/health`, recording the answer.
    pub async fn check_health(&self) -> HubResult<()> {
        let result = self.client.health().await.map(|_| ());
        self.note(result)
    }

    /// Makes one call that needs the bridge's credential (`GET /pty/list`; `/health` needs
    /// none): a bridge that refuses it (401, 403) would refuse every later call too.
    pub async fn check_credential(&self) -> HubResult<()> {
        match self.client.list().await {
            Err(HubError::BridgeError {
                bridge_url, status, ..
            }) if status == 401 || status == 403 => Err(HubError::BridgeCredentialRefused {
                bridge_url,
                status,
                given: if self.token.is_some() {
                    "the bridge_token given"
                } else {
                    "the request without a bridge_token"
                },
            }),
            other => self.note(other.map(|_| ())),
        }
    }

    pub fn info(&self) -> ExternalInfo {
        ExternalInfo {
            bridge_url: self.client.url().to_string(),
            remote_session_id: self.remote_id.clone(),
            health: self.health().clone(),
        }
    }

    /// Writes input through the bridge.
    pub async fn write(&self, bytes: &[u8]) -> HubResult<()> {
        let result = self.client.write(&self.remote_id, bytes).await;
        self.note(result)
    }
}

/// The backend of an external session.
pub struct ExternalBackend {
    link: Arc<ExternalLink>,
    pid: Option<u32>,
    stop: CancellationToken,
}

impl ExternalBackend {
    /// Starts pulling the session's output (from the oldest byte the bridge keeps) into
    /// `output`.
    pub fn start(link: Arc<ExternalLink>, pid: Option<u32>, output: Arc<Output>) -> Self {
        let stop = CancellationToken::new();
        tokio::spawn(pull_output(link.clone(), output, stop.clone()));
        ExternalBackend { link, pid, stop }
    }

    pub fn link(&self) -> &Arc<ExternalLink> {
        &self.link
    }
}

impl Drop for ExternalBackend {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Backend for ExternalBackend {
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, HubResult<()>> {
        Box::pin(async move { self.link.write(&bytes).await })
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            resize: false,
            kill: false,
            owned: false,
        }
    }

    fn talk<'a>(
        &'a self,
        command: &'a str,
        sentinel: Option<&'a str>,
        timeout: Duration,
    ) -> Option<BoxFuture<'a, HubResult<TalkResult>>> {
        let link = &self.link;
        Some(Box::pin(async move {
            let result = link
                .client
                .talk(&link.remote_id, command, sentinel, timeout)
                .await;
            link.note(result)
        }))
    }

    fn term_read<'a>(
        &'a self,
        req: &'a TermReadRequest,
    ) -> Option<BoxFuture<'a, HubResult<TermRead>>> {
        let link = &self.link;
        Some(Box::pin(async move {
            link.note(link.client.buffer(&link.remote_id, req).await)
        }))
    }

    fn resize(&self, _size: TermSize) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Err(BackendError::ExternalResize) })
    }

    fn terminate(&self, _first: TermSignal) -> BoxFuture<'_, Result<(), BackendError>> {
        Box::pin(async { Err(BackendError::ExternalTerminate) })
    }

    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn detach(&self) -> BoxFuture<'_, ()> {
        self.stop.cancel();
        Box::pin(async {})
    }

    fn external(&self) -> Option<&Arc<ExternalLink>> {
        Some(&self.link)
    }
}

/// The one reader of an external session: long-polls `/pty/read` and pushes what arrives, in
/// order, until the program ends, the bridge forgets the session, or the session is removed.
/// A bridge that is down is retried with backoff; output it kept meanwhile still arrives.
async fn pull_output(link: Arc<ExternalLink>, output: Arc<Output>, stop: CancellationToken) {
    let mut offset = 0u64;
    let mut retry = RETRY_FIRST;
    loop {
        let read = tokio::select! {
            _ = stop.cancelled() => return,
            r = link.client.read(&link.remote_id, offset, READ_WAIT) => link.note(r),
        };
        match read {
            Ok(reply) => {
                retry = RETRY_FIRST;
                // A bridge may answer in text whatever was asked for; its `encoding` says.
                let data = match reply.encoding {
                    crate::json::Encoding::Base64 => crate::json::base64_decode(&reply.data),
                    crate::json::Encoding::Utf8 => Ok(reply.data.clone().into_bytes()),
                };
                match data {
                    Ok(bytes) if !bytes.is_empty() => output.push(&bytes),
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(bridge = link.client.url(), "bad /pty/read data: {e}")
                    }
                }
                // A bridge without offsets (next_offset 0) is read as a stream of new output.
                offset = reply.next_offset.max(offset);
                if !reply.alive {
                    output.finish(ExitInfo {
                        exit_code: reply.exit_code,
                        reason: reply
                            .exit_reason
                            .unwrap_or_else(|| "the program ended (reported by the bridge)".into()),
                        exited_at: Utc::now(),
                    });
                    return;
                }
            }
            Err(HubError::BridgeError { remote_code, .. })
                if remote_code == "PTY_SESSION_NOT_FOUND" =>
            {
                output.finish(ExitInfo {
                    exit_code: None,
                    reason: format!(
                        "the bridge at {} no longer has session '{}'",
                        link.client.url(),
                        link.remote_id
                    ),
                    exited_at: Utc::now(),
                });
                return;
            }
            Err(e) => {
                tracing::debug!(bridge = link.client.url(), "read failed: {e}");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(retry) => {}
                }
                retry = (retry * 2).min(RETRY_LAST);
            }
        }
    }
}
