//! The bridge API ([`crate::backend::external::bridge`]) served for the hub's own sessions, so another hub (or any
//! client of the bridge API) can register and steer them. External sessions are not offered
//! again: a bridge lends only what it owns, so two hubs registering each other cannot loop.

use std::time::Duration;

use crate::protocol::{BridgeListReply, BridgeSession, TalkReply, TermReadReply, WriteReply};
use axum::extract::State;
use axum::Extension;
use axum::Json;

use super::error::{ApiJson, ApiResult};
use crate::actor::Actor;
use crate::backend::external::bridge::{
    BufferRequest, ReadReply, ReadRequest, TalkRequest, WriteRequest,
};
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::{base64_decode, base64_encode, Encoding};

/// Default and largest `max_bytes` of one `/pty/read`.
const READ_DEFAULT_BYTES: usize = 64 << 10;
pub(super) const READ_MAX_BYTES: usize = 4 << 20;
/// Largest `/pty/read` wait.
pub(super) const READ_MAX_WAIT_MS: u64 = 60_000;

fn own_session(hub: &Hub, id: &str) -> Result<std::sync::Arc<crate::session::Session>, HubError> {
    let session = hub.get(id)?;
    if !session.capabilities().owned {
        // Not ours to lend (see the module doc).
        return Err(HubError::SessionNotFound { id: id.into() });
    }
    Ok(session)
}

pub async fn write(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    ApiJson(req): ApiJson<WriteRequest>,
) -> ApiResult<Json<WriteReply>> {
    let bytes = match req.encoding {
        Encoding::Utf8 => req.data.into_bytes(),
        Encoding::Base64 => {
            base64_decode(&req.data).map_err(|e| HubError::bad_request(e.to_string()))?
        }
    };
    let n = bytes.len();
    own_session(&hub, &req.session_id)?
        .send_bytes(&actor, bytes)
        .await?;
    Ok(Json(super::sessions::written(req.session_id, n)))
}

pub async fn read(
    State(hub): State<Hub>,
    ApiJson(req): ApiJson<ReadRequest>,
) -> ApiResult<Json<ReadReply>> {
    let max_bytes = req.max_bytes.unwrap_or(READ_DEFAULT_BYTES);
    if max_bytes == 0 || max_bytes > READ_MAX_BYTES {
        return Err(HubError::bad_request(format!("max_bytes must be 1-{READ_MAX_BYTES}")).into());
    }
    if req.timeout_ms > READ_MAX_WAIT_MS {
        return Err(
            HubError::bad_request(format!("timeout_ms must be 0-{READ_MAX_WAIT_MS}")).into(),
        );
    }
    crate::protocol::check_offset("offset", req.offset)?;
    let session = own_session(&hub, &req.session_id)?;
    let output = session.output();
    let since = req.offset.unwrap_or_else(|| output.end_offset());
    let mut chunk = output
        .read_wait(since, max_bytes, Duration::from_millis(req.timeout_ms))
        .await;
    // Secrets never cross to another hub: no raw reads over the bridge.
    super::redaction::prepare_read(&hub, output, &mut chunk, req.encoding, false);
    let data = match req.encoding {
        Encoding::Base64 => base64_encode(&chunk.bytes),
        Encoding::Utf8 => String::from_utf8_lossy(&chunk.bytes).into_owned(),
    };
    // Ended only once the reader has everything: a client stops reading at `alive: false`.
    let exit = output
        .exit()
        .filter(|_| chunk.end_offset >= output.end_offset());
    Ok(Json(ReadReply {
        ok: true,
        session_id: req.session_id,
        data,
        encoding: req.encoding,
        offset: chunk.start_offset,
        next_offset: chunk.end_offset,
        dropped_bytes: chunk.dropped_bytes,
        alive: exit.is_none(),
        exit_code: exit.as_ref().and_then(|e| e.exit_code),
        exit_reason: exit.map(|e| e.reason),
    }))
}

pub async fn talk(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    ApiJson(req): ApiJson<TalkRequest>,
) -> ApiResult<Json<TalkReply>> {
    let session = own_session(&hub, &req.session_id)?;
    let command = (req.command.as_str(), req.sentinel.as_deref());
    let result = super::sessions::run_talk(&hub, &actor, &session, command, req.timeout_ms).await?;
    Ok(Json(TalkReply {
        ok: true,
        session_id: Some(req.session_id),
        result,
    }))
}

pub async fn buffer(
    State(hub): State<Hub>,
    ApiJson(req): ApiJson<BufferRequest>,
) -> ApiResult<Json<TermReadReply>> {
    if !hub.config().term_buffer_access {
        return Err(HubError::TermBufferAccessDisabled.into());
    }
    let read = own_session(&hub, &req.session_id)?.term_read(&req.read);
    Ok(Json(TermReadReply {
        ok: true,
        session_id: req.session_id,
        read,
    }))
}

pub async fn list(State(hub): State<Hub>) -> Json<BridgeListReply> {
    let sessions: Vec<BridgeSession> = hub
        .list()
        .iter()
        .filter(|s| s.capabilities().owned)
        .map(|s| BridgeSession {
            session_id: s.id().to_string(),
            info: s.info(),
        })
        .collect();
    Json(BridgeListReply {
        ok: true,
        count: sessions.len(),
        sessions,
    })
}
