//! Owner routing endpoints: resolve, send_line_to_agent and update-ownership.

use axum::extract::State;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiJson, ApiResult};
use crate::hub::Hub;
use crate::policy::start_on_message::send_to_agent;
use crate::routing::RouteKeys;
use crate::session::Owner;

pub async fn resolve_route(
    State(hub): State<Hub>,
    ApiJson(keys): ApiJson<RouteKeys>,
) -> ApiResult<Json<Value>> {
    let session = crate::routing::resolve_session(&hub.list(), &keys)?;
    Ok(Json(
        json!({ "ok": true, "session_id": session.id(), "session": session.info() }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SendToAgent {
    data: String,
    /// Send even when the agent is blocked on a question.
    #[serde(default)]
    force: bool,
    agent_id: Option<String>,
    owner_session_id: Option<String>,
    label: Option<String>,
}

/// Delivers a prompt to the agent the keys name, starting a stopped agent first when its
/// policy says so (see [`crate::policy::start_on_message`]); the reply says `started`.
pub async fn send_line_to_agent(
    State(hub): State<Hub>,
    axum::Extension(actor): axum::Extension<crate::actor::Actor>,
    ApiJson(req): ApiJson<SendToAgent>,
) -> ApiResult<Json<Value>> {
    let keys = RouteKeys {
        agent_id: req.agent_id,
        owner_session_id: req.owner_session_id,
        label: req.label,
    };
    let opts = crate::delivery::Options {
        force: req.force,
        ..Default::default()
    };
    let sent = send_to_agent(&hub, &actor, &keys, &req.data, opts).await?;
    let (session, report) = (sent.session, sent.report);
    Ok(Json(json!({
        "ok": true,
        "started": sent.started,
        "resolved_session_id": session.id(),
        "resolved_session": session.info(),
        "receipt": report.receipt,
        "send_result": { "ok": true, "bytes_written": report.bytes_written, "delivery": report },
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
    conversation_id: Option<String>,
}

pub async fn update_ownership(
    State(hub): State<Hub>,
    ApiJson(req): ApiJson<UpdateOwnership>,
) -> ApiResult<Json<Value>> {
    crate::routing::check_owner_role(req.owner_role.as_deref())?;
    let session = hub.get(&req.session_id)?;
    session.update_owner(Owner {
        owner_agent_id: req.owner_agent_id,
        owner_session_id: req.owner_session_id,
        owner_role: req.owner_role,
        label: req.label,
        cli_type: req.cli_type,
        conversation_id: req.conversation_id,
    });
    hub.emit(json!({ "type": "ownership_changed", "sessionId": req.session_id, "owner": session.owner() }));
    Ok(Json(json!({ "ok": true, "session": session.info() })))
}
