//! `POST /v1/agents/{id}/review`: review notes on an agent's branch, delivered to the agent as
//! one prompt (composed by [`crate::workspace::review`]) through the normal path: the command
//! guard, the audit record of the route, a receipt; queued while the agent works.

use axum::extract::{Path, State};
use axum::Json;

use super::error::{ApiJson, ApiResult};
use crate::error::HubError;
use crate::hub::Hub;
use crate::owner_routing::RouteKeys;
use crate::protocol::{ReviewReply, ReviewRequest};
use crate::workspace::review::{self, ReviewedDiffs};

pub async fn review_agent(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    axum::Extension(actor): axum::Extension<crate::actor::Actor>,
    ApiJson(req): ApiJson<ReviewRequest>,
) -> ApiResult<Json<ReviewReply>> {
    review::check_notes(&req.notes).map_err(|e| HubError::bad_request(e.to_string()))?;
    let ws = hub.agents().workspace_of(&id)?;
    // An agent never started has no checkout yet, so nothing changed (a start on the message
    // makes it).
    let changes = match hub.agents().changes(&id, true).await {
        Err(HubError::Workspace {
            code: "WORKSPACE_MISSING",
            ..
        }) => None,
        other => other?.diff,
    };
    let (committed, uncommitted) = changes
        .as_ref()
        .map_or(("", ""), |d| (d.committed.as_str(), d.uncommitted.as_str()));
    let prompt = review::compose(
        &ReviewedDiffs {
            branch: &ws.branch,
            base: &ws.base,
            committed,
            uncommitted,
        },
        &req.notes,
    );
    let keys = RouteKeys {
        agent_id: Some(id.clone()),
        ..RouteKeys::default()
    };
    let opts = crate::delivery::Options {
        force: req.force,
        queue_while_working: true,
        ..Default::default()
    };
    let sent = hub
        .policy_runner()
        .send_to_agent(&actor, &keys, &prompt, opts)
        .await?;
    let delivery = serde_json::to_value(&sent.report).map_err(|e| HubError::Internal {
        message: e.to_string(),
    })?;
    Ok(Json(ReviewReply {
        ok: true,
        agent_id: id,
        branch: ws.branch,
        notes: req.notes.len(),
        prompt,
        started: sent.started,
        receipt: delivery["receipt"].as_str().unwrap_or_default().to_string(),
        resolved_session_id: sent.session.id().to_string(),
        delivery,
    }))
}
