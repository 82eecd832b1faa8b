//! `GET /v1/pty/sessions/{id}/stream`: a WebSocket carrying a session's output as binary frames
//! and taking input and resizes back. With `since`, the retained output from that offset comes
//! first; without it, a repaint of the current screen. Live output follows with no gap or
//! duplicate. Sending and receiving run as two tasks that end together; a viewer that stops
//! reading falls behind on its own (and is told what it lost), never slowing the session.

use std::sync::Arc;

use axum::extract::ws::{Message, Utf8Bytes, WebSocket};
use axum::extract::{Path, State};
use axum::response::Response;
use axum::Extension;
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};

use super::error::{ApiQuery, ApiResult, ApiWebSocket};
use crate::actor::{Actor, Role};
use crate::backend::TermSize;
use crate::config::check_size;
use crate::error::{HubError, HubResult};
use crate::hub::Hub;
use crate::output::{CursorItem, OutputCursor};
use crate::protocol::{ClientFrame, ServerFrame, StreamQuery};
use crate::redact::stream::StreamRedactor;
use crate::redact::{output_before, Redactor};
use crate::session::write::{Typed, TypedLine};
use crate::session::Session;

/// Error replies waiting to be sent before the receiver stops reading input frames.
const ERROR_QUEUE_FRAMES: usize = 32;
/// Largest output frame built by joining chunks that are already waiting.
const COALESCE_MAX_BYTES: usize = 64 * 1024;
/// Largest WebSocket message a client may send.
const MAX_CLIENT_MESSAGE_BYTES: usize = 1 << 20;

pub async fn stream(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StreamQuery>,
    ApiWebSocket(ws): ApiWebSocket,
) -> ApiResult<Response> {
    if q.raw && actor.role() != Role::Admin {
        return Err(HubError::Forbidden {
            message: "raw (unredacted) output needs an admin token".into(),
        }
        .into());
    }
    let session = hub.get(&id)?;
    let meter = hub.metrics().stream(&session.spec().source);
    let redactor = (!q.raw).then(|| hub.redactor().clone());
    let input = InputGuard {
        hub: hub.clone(),
        actor,
        line: TypedLine::default(),
    };
    Ok(ws
        // Clients offer `agent-hub` next to their `agent-hub.bearer.<token>`: the server
        // answers with the former, so the token is never echoed back.
        .protocols(["agent-hub"])
        .max_message_size(MAX_CLIENT_MESSAGE_BYTES)
        .on_upgrade(move |socket| {
            run(
                socket,
                session,
                q.since,
                redactor,
                input,
                hub.closing(),
                meter,
            )
        }))
}

fn text(frame: &ServerFrame) -> Message {
    let json = serde_json::to_string(frame).unwrap_or_else(|_| "{}".into());
    Message::Text(Utf8Bytes::from(json))
}

/// What WebSocket input passes before it is written. Keystrokes are collected into the line
/// being typed; the frame that ends the line (Enter) is checked by the command guard as that
/// whole line and recorded in the audit log (`ws_input`), so a command typed key by key is
/// guarded and audited like a `send_line`.
struct InputGuard {
    hub: Hub,
    actor: Actor,
    /// What has been typed since the last line end (simple editing applied).
    line: TypedLine,
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

async fn run(
    socket: WebSocket,
    session: Arc<Session>,
    since: Option<u64>,
    redactor: Option<Arc<Redactor>>,
    mut input: InputGuard,
    closing: tokio_util::sync::CancellationToken,
    meter: crate::metrics::StreamMeter,
) {
    let (mut tx, mut rx) = socket.split();
    let info = session.info();
    let mut viewer = None;
    let (first_bytes, mut cursor, mode) = match since {
        Some(since) => (
            None,
            OutputCursor::new(session.output().clone(), since),
            "replay",
        ),
        None => {
            // A screen-mode viewer is interactive: its terminal answers terminal queries.
            viewer = Some(session.viewer());
            let (paint, offset) = session.with_screen(|s| (s.repaint(), s.fed_to()));
            (
                Some(paint),
                OutputCursor::new(session.output().clone(), offset),
                "screen",
            )
        }
    };
    let hello = ServerFrame::Hello {
        session_id: info.spec.id.clone(),
        offset: since.map_or(cursor.next_offset(), |s| s.min(cursor.next_offset())),
        mode: mode.into(),
        cols: info.cols,
        rows: info.rows,
    };
    if tx.send(text(&hello)).await.is_err() {
        return;
    }
    if let Some(mut paint) = first_bytes {
        if let Some(r) = &redactor {
            paint = r.redact_bytes(&paint);
        }
        if tx.send(Message::Binary(Bytes::from(paint))).await.is_err() {
            return;
        }
    }
    let mut redact = redactor
        .map(|r| StreamRedactor::new(r, &output_before(session.output(), cursor.next_offset())));

    let input_session = session.clone();
    // Error replies to refused input frames go to the sending loop through a bounded queue.
    // When it is full (the client sends bad frames faster than it reads its socket), the
    // receiver waits for room before it reads the next frame: the client's own input is held
    // back, memory stays bounded, no error reply is lost, and the session is not slowed.
    let (error_tx, mut error_rx) = tokio::sync::mpsc::channel::<ServerFrame>(ERROR_QUEUE_FRAMES);
    let mut receiver = tokio::spawn(async move {
        while let Some(Ok(message)) = rx.next().await {
            let result = match message {
                Message::Binary(bytes) => {
                    let sent = input.send(&input_session, bytes.to_vec()).await;
                    let outcome = sent.as_ref().err().map_or("ok", HubError::code);
                    input.hub.metrics().input_op("ws_input", outcome);
                    sent
                }
                Message::Text(t) => handle_text(&mut input, &input_session, t.as_str()).await,
                Message::Close(_) => break,
                _ => Ok(()),
            };
            if let Err(e) = result {
                let error = ServerFrame::Error {
                    error_code: e.code().into(),
                    message: e.to_string(),
                };
                if error_tx.send(error).await.is_err() {
                    break;
                }
            }
        }
    });

    loop {
        let flush_at = redact.as_ref().and_then(StreamRedactor::flush_deadline);
        let message = tokio::select! {
            _ = &mut receiver => break,
            _ = sleep_until(flush_at), if flush_at.is_some() => {
                let held = redact.as_mut().map(StreamRedactor::flush).unwrap_or_default();
                if held.is_empty() {
                    continue;
                }
                Message::Binary(Bytes::from(held))
            }
            _ = closing.cancelled() => {
                let _ = tx.send(Message::Close(None)).await;
                break;
            }
            Some(frame) = error_rx.recv() => text(&frame),
            item = cursor.next() => match item {
                Some(CursorItem::Data { mut bytes, dropped_bytes }) => {
                    // Join chunks that are already waiting into one frame (up to 64 KiB).
                    if dropped_bytes == 0 {
                        let mut joined: Option<Vec<u8>> = None;
                        while joined.as_ref().map_or(bytes.len(), Vec::len) < COALESCE_MAX_BYTES {
                            let Some(more) = cursor.next_ready_data() else { break };
                            joined.get_or_insert_with(|| bytes.to_vec()).extend_from_slice(&more);
                        }
                        if let Some(joined) = joined {
                            bytes = Bytes::from(joined);
                        }
                    }
                    if dropped_bytes > 0 {
                        meter.resync(dropped_bytes);
                        // What was held belongs before the gap; the gap ends its context.
                        if let Some(r) = redact.as_mut() {
                            let held = r.flush();
                            if !held.is_empty() && tx.send(Message::Binary(Bytes::from(held))).await.is_err() {
                                break;
                            }
                            *r = StreamRedactor::new(session_redactor(r), b"");
                        }
                        let resync = ServerFrame::Resync {
                            dropped_bytes,
                            offset: cursor.next_offset() - bytes.len() as u64,
                        };
                        if tx.send(text(&resync)).await.is_err() {
                            break;
                        }
                    }
                    if let Some(r) = redact.as_mut() {
                        bytes = Bytes::from(r.push(&bytes));
                        if bytes.is_empty() {
                            continue;
                        }
                    }
                    meter.sent(bytes.len());
                    Message::Binary(bytes)
                }
                Some(CursorItem::Exited(exit)) => {
                    if let Some(held) = redact.as_mut().map(StreamRedactor::flush) {
                        if !held.is_empty() {
                            let _ = tx.send(Message::Binary(Bytes::from(held))).await;
                        }
                    }
                    let _ = tx
                        .send(text(&ServerFrame::Exit { exit_code: exit.exit_code, reason: exit.reason }))
                        .await;
                    let _ = tx.send(Message::Close(None)).await;
                    break;
                }
                None => break,
            },
        };
        if tx.send(message).await.is_err() {
            break;
        }
    }
    receiver.abort();
    drop(viewer);
}

fn session_redactor(r: &StreamRedactor) -> Arc<Redactor> {
    r.redactor().clone()
}

async fn sleep_until(at: Option<std::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
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
