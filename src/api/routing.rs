//! Owner routing endpoints: resolve, send_line_to_agent and update-ownership.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiJson, ApiResult};
use crate::error::HubError;
use crate::hub::Hub;
use crate::routing::{resolve, Resolution, RouteKeys};
use crate::session::{Owner, Session};

/// Resolves `keys` to exactly one live session, or the error that says why not.
fn resolve_one(hub: &Hub, keys: &RouteKeys) -> Result<std::sync::Arc<Session>, HubError> {
    if keys.is_empty() {
        return Err(HubError::bad_request(
            "give at least one of agent_id, owner_session_id, label",
        ));
    }
    let describe = || serde_json::to_string(keys).unwrap_or_default();
    let infos: Vec<_> = hub.list().iter().map(|s| s.info()).collect();
    match resolve(keys, &infos) {
        Resolution::One(id) => hub.get(&id),
        Resolution::None => Err(HubError::RouteNotMatched { keys: describe() }),
        Resolution::Ambiguous(matches) => Err(HubError::Ambiguous {
            keys: describe(),
            matches,
        }),
    }
}

pub async fn resolve_route(
    State(hub): State<Hub>,
    ApiJson(keys): ApiJson<RouteKeys>,
) -> ApiResult<Json<Value>> {
    let session = resolve_one(&hub, &keys)?;
    Ok(Json(
        json!({ "ok": true, "session_id": session.id(), "session": session.info() }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendToAgent {
    data: String,
    #[serde(flatten)]
    keys: RouteKeys,
}

pub async fn send_line_to_agent(
    State(hub): State<Hub>,
    axum::Extension(actor): axum::Extension<super::auth::Actor>,
    ApiJson(req): ApiJson<SendToAgent>,
) -> ApiResult<Json<Value>> {
    let session = resolve_one(&hub, &req.keys)?;
    hub.check_input(&req.data, actor.role())?;
    let bytes_written = session.send_line(&req.data).await?;
    Ok(Json(json!({
        "ok": true,
        "resolved_session_id": session.id(),
        "resolved_session": session.info(),
        "send_result": { "ok": true, "bytes_written": bytes_written },
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateOwnership {
    session_id: String,
    owner_agent_id: Option<String>,
    owner_session_id: Option<String>,
    owner_role: Option<String>,
    label: Option<String>,
    cli_type: Option<String>,
}

pub async fn update_ownership(
    State(hub): State<Hub>,
    ApiJson(req): ApiJson<UpdateOwnership>,
) -> ApiResult<Json<Value>> {
    if let Some(role) = &req.owner_role {
        if role != "leader" && role != "worker" {
            return Err(HubError::bad_request("owner_role must be leader or worker").into());
        }
    }
    let session = hub.get(&req.session_id)?;
    session.update_owner(Owner {
        owner_agent_id: req.owner_agent_id,
        owner_session_id: req.owner_session_id,
        owner_role: req.owner_role,
        label: req.label,
        cli_type: req.cli_type,
    });
    hub.emit(json!({ "type": "ownership_changed", "sessionId": req.session_id, "owner": session.owner() }));
    Ok(Json(json!({ "ok": true, "session": session.info() })))
}
