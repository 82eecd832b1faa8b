//! Owner routing endpoints: resolve, send_line_to_agent and update-ownership.

use axum::extract::State;
use axum::Json;

use super::error::{ApiJson, ApiResult};
use crate::error::HubError;
use crate::hub::Hub;
use crate::owner_routing::RouteKeys;
use crate::protocol::{
    ResolveReply, SendResult, SendToAgentReply, SendToAgentRequest, SessionReply,
    UpdateOwnershipRequest,
};

pub async fn resolve_route(
    State(hub): State<Hub>,
    axum::Extension(actor): axum::Extension<crate::actor::Actor>,
    ApiJson(keys): ApiJson<RouteKeys>,
) -> ApiResult<Json<ResolveReply>> {
    let mut candidates = hub.list();
    candidates.retain(|s| super::scope::visible(&hub, &actor, s));
    let session = crate::owner_routing::resolve_session(&candidates, &keys)?;
    Ok(Json(ResolveReply {
        ok: true,
        session_id: session.id().to_string(),
        session: session.info(),
    }))
}

/// Delivers a prompt to the agent the keys name, starting a stopped agent first when its
/// policy says so (see [`crate::policy::start_on_message`]); the reply says `started`.
pub async fn send_line_to_agent(
    State(hub): State<Hub>,
    axum::Extension(actor): axum::Extension<crate::actor::Actor>,
    ApiJson(req): ApiJson<SendToAgentRequest>,
) -> ApiResult<Json<SendToAgentReply>> {
    let keys = RouteKeys {
        agent_id: req.agent_id,
        owner_session_id: req.owner_session_id,
        label: req.label,
    };
    let opts = crate::delivery::Options {
        force: req.force,
        ..Default::default()
    };
    let sent = hub
        .policy_runner()
        .send_to_agent(&actor, &keys, &req.data, opts)
        .await?;
    let (session, report) = (sent.session, sent.report);
    let delivery = serde_json::to_value(&report).map_err(|e| HubError::Internal {
        message: e.to_string(),
    })?;
    Ok(Json(SendToAgentReply {
        ok: true,
        started: sent.started,
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

pub async fn update_ownership(
    State(hub): State<Hub>,
    ApiJson(req): ApiJson<UpdateOwnershipRequest>,
) -> ApiResult<Json<SessionReply>> {
    crate::owner_routing::check_owner_role(req.owner.owner_role.as_deref())?;
    let session = hub.update_ownership(&req.session_id, req.owner).await?;
    Ok(Json(SessionReply {
        ok: true,
        session: session.info(),
    }))
}
