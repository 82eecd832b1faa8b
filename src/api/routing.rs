//! Owner routing endpoints: resolve, send_line_to_agent and update-ownership.

use axum::extract::State;
use axum::Json;
use serde_json::json;

use super::error::{ApiJson, ApiResult};
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::{
    ResolveReply, SendResult, SendToAgentReply, SendToAgentRequest, SessionReply,
    UpdateOwnershipRequest,
};
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
) -> ApiResult<Json<ResolveReply>> {
    let session = resolve_one(&hub, &keys)?;
    Ok(Json(ResolveReply {
        ok: true,
        session_id: session.id().to_string(),
        session: session.info(),
    }))
}

/// Delivers a prompt to the agent the keys name (see [`crate::delivery`]). When no live
/// session matches and `agent_id` names a stopped container agent whose policy has
/// `start_on_message`, the agent is started (and waited for) first; the reply says
/// `started: true`.
pub async fn send_line_to_agent(
    State(hub): State<Hub>,
    axum::Extension(actor): axum::Extension<super::auth::Actor>,
    ApiJson(req): ApiJson<SendToAgentRequest>,
) -> ApiResult<Json<SendToAgentReply>> {
    hub.check_line(&req.data, actor.role())?;
    let keys = RouteKeys {
        agent_id: req.agent_id,
        owner_session_id: req.owner_session_id,
        label: req.label,
    };
    let mut started = false;
    let session = match resolve_one(&hub, &keys) {
        Err(HubError::RouteNotMatched { .. }) if starts_on_message(&hub, &keys) => {
            let id = keys.agent_id.clone().unwrap_or_default();
            crate::agents::start(&hub, &id).await?;
            // Reported once the start succeeded (a failed start has its own event).
            hub.emit(json!({
                "type": "policy_started",
                "agent_id": id,
                "policy": hub.agents().def(&id).ok().and_then(|d| d.policy.clone()),
                "reason": "start_on_message: a line was sent to the stopped agent",
                "dry_run": false,
            }));
            started = true;
            let session = resolve_one(&hub, &keys)?;
            let within = hub.agents().def(&id).map(|d| d.ready_timeout())?;
            wait_until_idle(&session, within).await;
            session
        }
        other => other?,
    };
    let opts = crate::delivery::Options {
        force: req.force,
        ..Default::default()
    };
    let report = crate::delivery::submit(&session, &req.data, opts).await?;
    let delivery = serde_json::to_value(&report).map_err(|e| HubError::Internal {
        message: e.to_string(),
    })?;
    Ok(Json(SendToAgentReply {
        ok: true,
        started,
        resolved_session_id: session.id().to_string(),
        resolved_session: session.info(),
        receipt: delivery["receipt"].as_str().unwrap_or_default().to_string(),
        send_result: SendResult {
            ok: true,
            bytes_written: report.bytes_written,
            delivery,
        },
    }))
}

/// Waits (at most `within`) until the agent's profile reads it as idle at its prompt, so a
/// freshly started agent is not sent a prompt while it is still starting up.
async fn wait_until_idle(session: &Session, within: std::time::Duration) {
    let deadline = tokio::time::Instant::now() + within;
    let mut progress = session.output().watch_progress();
    while session.state_report().state != crate::agent_state::State::Idle
        && session.output().exit().is_none()
    {
        let step = tokio::time::Instant::now() + std::time::Duration::from_millis(100);
        if tokio::time::Instant::now() >= deadline {
            return;
        }
        let _ = tokio::time::timeout_at(deadline.min(step), progress.changed()).await;
    }
}

/// Whether `keys` name (by agent id) a container agent whose policy starts it on a message.
fn starts_on_message(hub: &Hub, keys: &RouteKeys) -> bool {
    let Some(def) = keys
        .agent_id
        .as_deref()
        .and_then(|a| hub.agents().def(a).ok())
    else {
        return false;
    };
    def.policy
        .as_deref()
        .and_then(|p| hub.policy().policy(p))
        .is_some_and(|p| p.start_on_message && !p.dry_run)
}

pub async fn update_ownership(
    State(hub): State<Hub>,
    ApiJson(req): ApiJson<UpdateOwnershipRequest>,
) -> ApiResult<Json<SessionReply>> {
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
    Ok(Json(SessionReply {
        ok: true,
        session: session.info(),
    }))
}
