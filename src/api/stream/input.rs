//! A viewer's input: binary frames are keystrokes, text frames input or resizes. Keystrokes
//! are collected into the line being typed; the frame that ends the line (Enter) is checked by
//! the command guard as that whole line and recorded in the audit log (`ws_input`), so a
//! command typed key by key is guarded and audited like a `send_line`. Refused frames get an
//! error frame back through a bounded queue.

use std::sync::Arc;

use axum::extract::ws::{Message, WebSocket};
use futures_util::stream::SplitStream;
use futures_util::StreamExt;
use tokio::sync::mpsc;

use crate::actor::{Actor, Role};
use crate::backend::TermSize;
use crate::config::check_size;
use crate::error::{HubError, HubResult};
use crate::hub::Hub;
use crate::protocol::{ClientFrame, ServerFrame};
use crate::session::write::{Typed, TypedLine};
use crate::session::Session;

/// Reads the viewer's frames until it closes, writing what passes to the session. Error
/// replies go to the sending side through `errors`; when that queue is full (the client sends
/// bad frames faster than it reads its socket), the next frame is read only once there is
/// room: the client's own input is held back, memory stays bounded, no error reply is lost,
/// and the session is not slowed.
pub(super) fn spawn_receiver(
    mut rx: SplitStream<WebSocket>,
    mut input: InputGuard,
    session: Arc<Session>,
    errors: mpsc::Sender<ServerFrame>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(Ok(message)) = rx.next().await {
            let result = match message {
                Message::Binary(bytes) => {
                    let sent = input.send(&session, bytes.to_vec()).await;
                    let outcome = sent.as_ref().err().map_or("ok", HubError::code);
                    input.hub.metrics().input_op("ws_input", outcome);
                    sent
                }
                Message::Text(t) => handle_text(&mut input, &session, t.as_str()).await,
                Message::Close(_) => break,
                _ => Ok(()),
            };
            if let Err(e) = result {
                let error = ServerFrame::Error {
                    error_code: e.code().into(),
                    message: e.to_string(),
                };
                if errors.send(error).await.is_err() {
                    break;
                }
            }
        }
    })
}

/// What WebSocket input passes before it is written. Keystrokes are collected into the line
/// being typed; the frame that ends the line (Enter) is checked by the command guard as that
/// whole line and recorded in the audit log (`ws_input`), so a command typed key by key is
/// guarded and audited like a `send_line`.
pub(super) struct InputGuard {
    pub(super) hub: Hub,
    pub(super) actor: Actor,
    /// What has been typed since the last line end (simple editing applied).
    pub(super) line: TypedLine,
}

/// Input and resize frames need an operator: an observer's viewer is read-only.
fn may_write(actor: &Actor) -> HubResult<()> {
    if actor.role() < Role::Operator {
        return Err(HubError::Forbidden {
            message: "this token is read-only (observer): input and resize frames are refused"
                .into(),
        });
    }
    Ok(())
}

impl InputGuard {
    async fn send(&mut self, session: &Session, bytes: Vec<u8>) -> HubResult<()> {
        may_write(&self.actor)?;
        // The session checks the line a frame ends against the guard (and kills a refused
        // line in the program's line editor); here it is audited.
        let audit = self.hub.audit().clone();
        let checked = match session
            .type_input(&self.actor, &mut self.line, bytes)
            .await?
        {
            Typed::Keys => return Ok(()),
            Typed::Refused { line, error } => {
                if audit.enabled() {
                    let mut record = self.record(session, &line);
                    record.success = Some(false);
                    record.blocked = true;
                    record.blocked_pattern = match &error {
                        HubError::CommandBlocked { pattern } => Some(pattern.clone()),
                        _ => None,
                    };
                    record.error_code = Some(error.code().into());
                    if audit.record(record).await.is_err() {
                        audit.count_unaudited();
                    }
                }
                return Err(error);
            }
            Typed::Line(checked) => checked,
        };
        if !audit.enabled() {
            return session.write_line(checked).await;
        }
        // A WebSocket frame gets no reply to hold back, so the line is written first (Enter is
        // not delayed by the disk) and recorded right after; while the log is known to be
        // down, lines are refused instead (unless fail_open).
        if !audit.healthy() && !audit.fail_open() {
            return Err(HubError::AuditUnavailable {
                reason: "the audit log's last write failed".into(),
            });
        }
        let line = checked.line().to_owned();
        let written = session.write_line(checked).await;
        let mut record = self.record(session, &line);
        if let Err(e) = &written {
            record.success = Some(false);
            record.error_code = Some(e.code().into());
        }
        if audit.record(record).await.is_err() {
            audit.count_unaudited();
        }
        written
    }
}

impl InputGuard {
    /// The audit record of a typed line.
    fn record(&self, session: &Session, line: &str) -> crate::audit::Record {
        self.record_action(session, "ws_input", line)
    }

    /// Resizes the terminal (a viewer's window changed) and records it, like `resize`.
    async fn resize(&self, session: &Session, size: TermSize) -> HubResult<()> {
        let audit = self.hub.audit();
        if audit.enabled() && !audit.healthy() && !audit.fail_open() {
            return Err(HubError::AuditUnavailable {
                reason: "the audit log's last write failed".into(),
            });
        }
        let result = session.resize(size).await;
        if audit.enabled() {
            let text = format!("{{\"cols\":{},\"rows\":{}}}", size.cols, size.rows);
            let mut record = self.record_action(session, "ws_resize", &text);
            if let Err(e) = &result {
                record.success = Some(false);
                record.error_code = Some(e.code().into());
            }
            if audit.record(record).await.is_err() {
                audit.count_unaudited();
            }
        }
        result
    }

    fn record_action(&self, session: &Session, action: &str, line: &str) -> crate::audit::Record {
        let mut record =
            crate::audit::new_record(&self.actor.token_name, self.actor.agent_id.clone(), action);
        let owner = session.owner();
        record.session_id = Some(session.id().to_string());
        record.agent_id = session.spec().agent_id.clone().or(owner.owner_agent_id);
        record.owner_session_id = owner.owner_session_id;
        record.label = owner.label;
        record.cli_type = owner.cli_type;
        record.command = Some(self.hub.redactor().redact_str(line));
        record.success = Some(true);
        record
    }
}

async fn handle_text(input: &mut InputGuard, session: &Session, text: &str) -> HubResult<()> {
    let frame: ClientFrame = serde_json::from_str(text)
        .map_err(|e| crate::error::HubError::bad_request(format!("invalid frame: {e}")))?;
    match frame {
        ClientFrame::Input { data } => input.send(session, data.into_bytes()).await,
        ClientFrame::Resize { cols, rows } => {
            may_write(&input.actor)?;
            check_size(cols, rows)
                .map_err(|e| crate::error::HubError::bad_request(e.to_string()))?;
            input.resize(session, TermSize { cols, rows }).await
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn typed_lines_are_edited() {
        for (typed, line) in [
            (&b"ls -la"[..], "ls -la"),
            (b"lsx\x7f -l", "ls -l"),
            (b"rm -rf /tmp\x15echo hi", "echo hi"),
            (b"a\tb\x1b[A", "a\tb[A"),
            (b"rm -rf /\rxyz", "rm -rf /\nxyz"),
        ] {
            let mut buf = Vec::new();
            crate::guard::edit_line(&mut buf, typed);
            assert_eq!(String::from_utf8_lossy(&buf), line, "{typed:?}");
        }
    }
}
