//! External sessions' endpoints: register and unregister external sessions, heartbeats, reset.

use axum::extract::{Path, State};
use axum::Json;

use super::error::{ApiJson, ApiQuery, ApiResult};
use crate::error::HubError;
use crate::external_sessions::RegisterRequest;
use crate::hub::Hub;
use crate::protocol::{
    ForceQuery, HeartbeatManyReply, HeartbeatReply, HeartbeatRequest, RegisterReply, ResetReply,
    UnregisterReply,
};

pub async fn register(
    State(hub): State<Hub>,
    ApiJson(req): ApiJson<RegisterRequest>,
) -> ApiResult<Json<RegisterReply>> {
    if !crate::protocol::schema::bridge_url_ok(&req.bridge_url) {
        return Err(HubError::bad_request(format!(
            "bridge_url '{}' is not allowed: use http:// or https://, a host name or IPv4 address, an optional port and path",
            req.bridge_url
        ))
        .into());
    }
    let (session, created) = hub.register_external(req, true).await?;
    Ok(Json(RegisterReply {
        ok: true,
        session_id: session.id().to_string(),
        created,
        session: session.info(),
    }))
}

pub async fn unregister(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<ForceQuery>,
) -> ApiResult<Json<UnregisterReply>> {
    let session = hub.unregister(&id, q.force).await?;
    Ok(Json(UnregisterReply {
        ok: true,
        session_id: id,
        session: session.info(),
    }))
}

pub async fn heartbeat_one(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<HeartbeatReply>> {
    let session = hub.get(&id)?;
    session.heartbeat();
    Ok(Json(HeartbeatReply {
        ok: true,
        session_id: id,
        last_heartbeat_at: session.info().last_heartbeat_at,
    }))
}

pub async fn heartbeat_many(
    State(hub): State<Hub>,
    ApiJson(req): ApiJson<HeartbeatRequest>,
) -> ApiResult<Json<HeartbeatManyReply>> {
    let ids: Vec<String> = match (req.session_ids, req.owner_agent_id) {
        (Some(ids), _) => ids,
        (None, Some(agent)) => hub
            .list()
            .iter()
            .filter(|s| s.owner().owner_agent_id.as_deref() == Some(agent.as_str()))
            .map(|s| s.id().to_string())
            .collect(),
        (None, None) => {
            return Err(
                crate::error::HubError::bad_request("give session_ids or owner_agent_id").into(),
            )
        }
    };
    let (mut acknowledged, mut unknown) = (Vec::new(), Vec::new());
    for id in ids {
        match hub.get(&id) {
            Ok(s) => {
                s.heartbeat();
                acknowledged.push(id);
            }
            Err(_) => unknown.push(id),
        }
    }
    Ok(Json(HeartbeatManyReply {
        ok: true,
        acknowledged,
        unknown,
    }))
}

pub async fn reset(State(hub): State<Hub>) -> Json<ResetReply> {
    let report = hub.reset().await;
    Json(ResetReply {
        ok: true,
        unregistered: report.unregistered,
        forgotten_exited: report.forgotten_exited,
    })
}
