//! REST handlers for `/v1/pty/sessions`: create, list, get, kill, send_line, keys, signal,
//! read, talk and resize.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::{Extension, Json};
use serde_json::{json, Value};

use super::auth::{Actor, Role};
use super::error::{ApiJson, ApiQuery, ApiResult};
use crate::backend::TermSize;
use crate::config::check_size;
use crate::error::HubError;
use crate::hub::{CreateSession, Hub};
use crate::protocol::{
    CreateSessionRequest, Encoding, KeysRequest, ReadQuery, ReadReply, ResizeRequest,
    SendLineRequest, SignalRequest, TalkRequest,
};
use crate::session::Owner;

/// Default and largest `max_bytes` for `read`.
const READ_DEFAULT_BYTES: usize = 4096;
const READ_MAX_BYTES: usize = 4 << 20;
/// Default and largest long-poll wait for `read` with `since`.
const READ_DEFAULT_TIMEOUT_MS: u64 = 5000;
const READ_MAX_TIMEOUT_MS: u64 = 60_000;
/// Largest talk timeout.
const TALK_MAX_TIMEOUT_MS: u64 = 3_600_000;

pub async fn list_sessions(State(hub): State<Hub>) -> Json<Value> {
    let live = hub.list();
    let mut by_source: BTreeMap<&str, usize> = BTreeMap::new();
    let mut sessions = Vec::with_capacity(live.len());
    for s in &live {
        let info = s.info();
        *by_source.entry(info.spec.backend).or_default() += 1;
        let mut v = json!(info);
        // Each session's agent state too (what `GET .../state` says), so a fleet view needs one
        // request, not one per session.
        v["agent_state"] = super::policies::state_json(s.state_report(), false);
        sessions.push(v);
    }
    Json(
        json!({ "ok": true, "count": sessions.len(), "by_source": by_source, "sessions": sessions }),
    )
}

pub async fn create_session(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    ApiJson(req): ApiJson<CreateSessionRequest>,
) -> ApiResult<Json<Value>> {
    // The program and its arguments are a command too (`sh -c 'rm -rf /'`).
    if let Some(shell) = &req.shell {
        let command = std::iter::once(shell.as_str())
            .chain(req.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        hub.check_input(&command, actor.role())?;
    }
    let session = hub
        .create_session(CreateSession {
            backend: req.backend,
            shell: req.shell,
            args: req.args,
            cwd: req.cwd.map(Into::into),
            cols: req.cols,
            rows: req.rows,
            env: req.env,
            tmux_session: req.tmux_session,
            owner: Owner {
                owner_agent_id: req.owner_agent_id,
                owner_session_id: req.owner_session_id,
                owner_role: req.owner_role,
                label: req.label,
                cli_type: req.cli_type,
                conversation_id: req.conversation_id,
            },
            policy: req.policy,
        })
        .await?;
    let info = session.info();
    Ok(Json(json!({
        "ok": true,
        "session_id": info.spec.id,
        "shell": info.spec.shell,
        "cwd": info.spec.cwd,
        "cols": info.cols,
        "rows": info.rows,
        "backend": info.spec.backend,
        "tmux_session": info.spec.tmux_session,
        "pid": info.pid,
    })))
}

pub async fn get_session(State(hub): State<Hub>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let info = hub.get(&id)?.info();
    Ok(Json(json!({ "ok": true, "session": info })))
}

pub async fn kill_session(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let exit = hub.kill(&id).await?;
    Ok(Json(json!({
        "ok": true,
        "session_id": id,
        "exit_code": exit.as_ref().and_then(|e| e.exit_code),
        "exit_reason": exit.map(|e| e.reason),
    })))
}

pub async fn send_line(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SendLineRequest>,
) -> ApiResult<Json<Value>> {
    let session = hub.get(&id)?;
    hub.check_line(&req.data, actor.role())?;
    if req.submit {
        let opts = crate::delivery::Options {
            force: req.force,
            ..Default::default()
        };
        let report = crate::delivery::submit(&session, &req.data, opts).await?;
        return Ok(Json(json!({
            "ok": true,
            "session_id": id,
            "bytes_written": report.bytes_written,
            "receipt": report.receipt,
            "delivery": report,
        })));
    }
    let n = session.send_line(&req.data).await?;
    Ok(Json(
        json!({ "ok": true, "session_id": id, "bytes_written": n }),
    ))
}

pub async fn send_keys(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<KeysRequest>,
) -> ApiResult<Json<Value>> {
    if req.keys.is_empty() {
        return Err(HubError::bad_request("keys must name at least one key").into());
    }
    let session = hub.get(&id)?;
    // Keys that spell a line (text, then Enter) pass the guard like send_line.
    if let Ok(bytes) = crate::session::input::keys_bytes(&req.keys) {
        hub.check_typed(&bytes, actor.role())?;
    }
    let n = session.send_keys(&req.keys).await?;
    Ok(Json(
        json!({ "ok": true, "session_id": id, "bytes_written": n }),
    ))
}

pub async fn signal(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SignalRequest>,
) -> ApiResult<Json<Value>> {
    hub.get(&id)?.signal(&req.signal).await?;
    Ok(Json(
        json!({ "ok": true, "session_id": id, "signal": req.signal }),
    ))
}

pub async fn resize(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<ResizeRequest>,
) -> ApiResult<Json<Value>> {
    check_size(req.cols, req.rows).map_err(HubError::bad_request)?;
    let size = TermSize {
        cols: req.cols,
        rows: req.rows,
    };
    hub.get(&id)?.resize(size).await?;
    Ok(Json(
        json!({ "ok": true, "session_id": id, "cols": req.cols, "rows": req.rows }),
    ))
}

/// Checks a talk timeout given by a client.
pub(super) fn check_talk_timeout(timeout_ms: u64) -> Result<(), HubError> {
    if timeout_ms == 0 || timeout_ms > TALK_MAX_TIMEOUT_MS {
        return Err(HubError::bad_request(format!(
            "timeout_ms must be 1-{TALK_MAX_TIMEOUT_MS}"
        )));
    }
    Ok(())
}

/// A reply body: `value`'s fields plus `ok: true`.
pub(super) fn with_ok(value: impl serde::Serialize) -> Result<Value, HubError> {
    let mut body = serde_json::to_value(value).map_err(|e| HubError::Internal {
        message: e.to_string(),
    })?;
    body["ok"] = json!(true);
    Ok(body)
}

pub async fn talk(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TalkRequest>,
) -> ApiResult<Json<Value>> {
    let timeout_ms = req.timeout_ms.unwrap_or(hub.config().talk_timeout_ms);
    check_talk_timeout(timeout_ms)?;
    let session = hub.get(&id)?;
    hub.check_input(&req.command, actor.role())?;
    let result = session
        .talk(
            &req.command,
            req.sentinel.as_deref(),
            Duration::from_millis(timeout_ms),
        )
        .await?;
    Ok(Json(with_ok(result)?))
}

pub async fn term_read(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<crate::screen::TermReadRequest>,
) -> ApiResult<Json<Value>> {
    if !hub.config().term_buffer_access {
        return Err(HubError::TermBufferAccessDisabled.into());
    }
    let session = hub.get(&id)?;
    let read = match session.external() {
        Some(link) => link.note(link.client.buffer(&link.remote_id, &req).await)?,
        None => session.term_read(&req),
    };
    let mut body = with_ok(read)?;
    body["session_id"] = json!(id);
    Ok(Json(body))
}

pub async fn read(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<ReadQuery>,
) -> ApiResult<Json<ReadReply>> {
    if q.raw && actor.role() != Role::Admin {
        return Err(HubError::Forbidden {
            message: "raw (unredacted) output needs an admin token".into(),
        }
        .into());
    }
    let max_bytes = q.max_bytes.unwrap_or(READ_DEFAULT_BYTES);
    if max_bytes == 0 || max_bytes > READ_MAX_BYTES {
        return Err(HubError::bad_request(format!("max_bytes must be 1-{READ_MAX_BYTES}")).into());
    }
    let timeout_ms = q.timeout_ms.unwrap_or(READ_DEFAULT_TIMEOUT_MS);
    if timeout_ms > READ_MAX_TIMEOUT_MS {
        return Err(
            HubError::bad_request(format!("timeout_ms must be 0-{READ_MAX_TIMEOUT_MS}")).into(),
        );
    }
    let session = hub.get(&id)?;
    let output = session.output();
    let mut chunk = match q.since {
        Some(since) => {
            output
                .read_wait(since, max_bytes, Duration::from_millis(timeout_ms))
                .await
        }
        None => output.read(None, max_bytes),
    };
    super::redaction::prepare_read(&hub, output, &mut chunk, q.encoding, q.raw);
    let text = match q.encoding {
        Encoding::Base64 => crate::protocol::base64_encode(&chunk.bytes),
        Encoding::Utf8 => String::from_utf8_lossy(&chunk.bytes).into_owned(),
    };
    Ok(Json(ReadReply {
        ok: true,
        output: text,
        start_offset: chunk.start_offset,
        end_offset: chunk.end_offset,
        dropped_bytes: chunk.dropped_bytes,
        alive: output.exit().is_none(),
        encoding: q.encoding,
    }))
}
