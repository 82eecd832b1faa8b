//! REST handlers for `/v1/pty/sessions`: create, list, get, kill, send_line, keys, signal,
//! read, talk and resize.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::{Extension, Json};

use super::error::{ApiJson, ApiQuery, ApiResult};
use crate::actor::{Actor, Role};
use crate::backend::TermSize;
use crate::config::check_size;
use crate::delivery::By;
use crate::error::HubError;
use crate::hub::{CreateSession, Hub};
use crate::protocol::{
    CreateSessionRequest, Encoding, KeysRequest, KillReply, ReadQuery, ReadReply, ResizeReply,
    ResizeRequest, SendLineRequest, SessionCreatedReply, SessionListReply, SessionReply,
    SignalReply, SignalRequest, TalkReply, TalkRequest, TermReadReply, WriteReply,
};

/// Default and largest `max_bytes` for `read`.
const READ_DEFAULT_BYTES: usize = 4096;
pub(super) const READ_MAX_BYTES: usize = 4 << 20;
/// Default and largest long-poll wait for `read` with `since`.
const READ_DEFAULT_TIMEOUT_MS: u64 = 5000;
pub(super) const READ_MAX_TIMEOUT_MS: u64 = 60_000;
/// Largest talk timeout.
pub(super) const TALK_MAX_TIMEOUT_MS: u64 = 3_600_000;

pub async fn list_sessions(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
) -> Json<SessionListReply> {
    let mut live = hub.list();
    live.retain(|s| super::scope::visible(&hub, &actor, s));
    let mut by_source = BTreeMap::new();
    let mut sessions = Vec::with_capacity(live.len());
    for s in &live {
        let mut info = s.info();
        *by_source.entry(info.spec.backend).or_default() += 1;
        info.agent_state = Some(super::policies::state_view(
            &hub,
            s,
            s.state_report(),
            false,
        ));
        sessions.push(info);
    }
    Json(SessionListReply {
        ok: true,
        count: sessions.len(),
        by_source,
        sessions,
    })
}

pub async fn create_session(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    ApiJson(req): ApiJson<CreateSessionRequest>,
) -> ApiResult<Json<SessionCreatedReply>> {
    let session = hub
        .create_session_as(
            &actor,
            CreateSession {
                backend: req.backend,
                shell: req.shell,
                args: req.args,
                cwd: req.cwd.map(Into::into),
                cols: req.cols,
                rows: req.rows,
                env: req.env,
                tmux_session: req.tmux_session,
                owner: req.owner,
                policy: req.policy,
                hub_access: req.hub_access,
            },
        )
        .await?;
    let info = session.info();
    let resolved = hub
        .policy()
        .loaded()
        .profiles
        .resolve(session.owner().cli_type.as_deref());
    Ok(Json(SessionCreatedReply {
        ok: true,
        session_id: info.spec.id,
        profile: resolved.profile.name.clone(),
        warnings: resolved
            .unknown_cli_type
            .map(|_| resolved.reason)
            .into_iter()
            .collect(),
        shell: info.spec.shell,
        cwd: info.spec.cwd,
        cols: info.cols,
        rows: info.rows,
        backend: info.spec.backend,
        tmux_session: info.spec.tmux_session,
        pid: info.pid,
    }))
}

pub async fn get_session(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<SessionReply>> {
    let session = hub.get(&id)?.info();
    Ok(Json(SessionReply { ok: true, session }))
}

pub async fn kill_session(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<KillReply>> {
    let exit = hub.kill(&id).await?;
    Ok(Json(KillReply {
        ok: true,
        session_id: id,
        exit_code: exit.as_ref().and_then(|e| e.exit_code),
        exit_reason: exit.map(|e| e.reason),
    }))
}

/// The reply to a write of `n` bytes.
pub(super) fn written(session_id: String, n: usize) -> WriteReply {
    WriteReply {
        ok: true,
        session_id,
        bytes_written: n,
        receipt: None,
        delivery: None,
    }
}

pub async fn send_line(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SendLineRequest>,
) -> ApiResult<Json<WriteReply>> {
    let session = hub.get(&id)?;
    let runner = hub.policy_runner();
    runner.check_delivery_budget(&session)?;
    if req.submit {
        let opts = crate::delivery::Options {
            force: req.force,
            ..Default::default()
        };
        let queued = runner.queue_if_limited(&session, &actor, &req.data, opts);
        let report = match queued {
            Some(report) => report,
            None => crate::delivery::submit(&session, By::Caller(&actor), &req.data, opts).await?,
        };
        let delivery = serde_json::to_value(&report).map_err(|e| HubError::Internal {
            message: e.to_string(),
        })?;
        return Ok(Json(WriteReply {
            receipt: delivery["receipt"].as_str().map(String::from),
            delivery: Some(delivery),
            ..written(id, report.bytes_written)
        }));
    }
    let n = session.send_line(&actor, &req.data).await?;
    Ok(Json(written(id, n)))
}

pub async fn send_keys(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<KeysRequest>,
) -> ApiResult<Json<WriteReply>> {
    if req.keys.is_empty() {
        return Err(HubError::bad_request("keys must name at least one key").into());
    }
    let session = hub.get(&id)?;
    let baseline = session.screen_fingerprint();
    // Keys that spell a line (text, then Enter) pass the guard like send_line.
    let n = session.send_keys(&actor, &req.keys).await?;
    if !req.receipt {
        return Ok(Json(written(id, n)));
    }
    let receipt = crate::delivery::keys_receipt(&session, baseline).await;
    Ok(Json(WriteReply {
        receipt: serde_json::to_value(receipt)
            .ok()
            .and_then(|v| v.as_str().map(String::from)),
        ..written(id, n)
    }))
}

pub async fn signal(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<SignalRequest>,
) -> ApiResult<Json<SignalReply>> {
    hub.get(&id)?.signal(&req.signal).await?;
    Ok(Json(SignalReply {
        ok: true,
        session_id: id,
        signal: req.signal,
    }))
}

pub async fn resize(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<ResizeRequest>,
) -> ApiResult<Json<ResizeReply>> {
    check_size(req.cols, req.rows).map_err(|e| HubError::bad_request(e.to_string()))?;
    let size = TermSize {
        cols: req.cols,
        rows: req.rows,
    };
    hub.get(&id)?.resize(size).await?;
    Ok(Json(ResizeReply {
        ok: true,
        session_id: id,
        cols: req.cols,
        rows: req.rows,
    }))
}

/// Runs a talk request on `session` (the REST route and the bridge's): the timeout defaults
/// to the hub's and must be 1 ms to [`TALK_MAX_TIMEOUT_MS`].
pub(super) async fn run_talk(
    hub: &Hub,
    actor: &Actor,
    session: &crate::session::Session,
    (command, sentinel): (&str, Option<&str>),
    timeout_ms: Option<u64>,
) -> ApiResult<crate::session::TalkResult> {
    let timeout_ms = timeout_ms.unwrap_or(hub.config().talk_timeout_ms);
    if timeout_ms == 0 || timeout_ms > TALK_MAX_TIMEOUT_MS {
        return Err(
            HubError::bad_request(format!("timeout_ms must be 1-{TALK_MAX_TIMEOUT_MS}")).into(),
        );
    }
    let timeout = Duration::from_millis(timeout_ms);
    Ok(session.talk(actor, command, sentinel, timeout).await?)
}

pub async fn talk(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<TalkRequest>,
) -> ApiResult<Json<TalkReply>> {
    let command = (req.command.as_str(), req.sentinel.as_deref());
    let session = hub.get(&id)?;
    hub.policy_runner().check_delivery_budget(&session)?;
    let result = run_talk(&hub, &actor, &session, command, req.timeout_ms).await?;
    Ok(Json(TalkReply {
        ok: true,
        session_id: None,
        result,
    }))
}

pub async fn term_read(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<crate::screen::TermReadRequest>,
) -> ApiResult<Json<TermReadReply>> {
    if !hub.config().term_buffer_access {
        return Err(HubError::TermBufferAccessDisabled.into());
    }
    let session = hub.get(&id)?;
    let read = session.rendered(&req).await?;
    Ok(Json(TermReadReply {
        ok: true,
        session_id: id,
        read,
    }))
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
    crate::protocol::check_offset("since", q.since)?;
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
