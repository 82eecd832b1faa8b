//! REST handlers for landing an agent's work: `POST /v1/agents/{id}/merge`, `.../update` and
//! `.../push`. Refused while the agent is working unless `force`; a conflict with `to_agent`
//! is sent to the agent as one prompt through the normal delivery path (guard, audit,
//! receipt) and still answered `MERGE_CONFLICT`, with the receipt as `delivered`.

use axum::extract::{Path, State};
use axum::{Extension, Json};

use super::error::{ApiJson, ApiResult};
use crate::actor::Actor;
use crate::agent_state::State as AgentState;
use crate::agents::land::MergeAsked;
use crate::error::{HubError, HubResult};
use crate::hub::Hub;
use crate::owner_routing::RouteKeys;
use crate::protocol::{
    commit_message_ok, worktree_word, MergeReply, MergeRequest, PushReply, PushRequest,
    UpdateReply, UpdateRequest,
};
use crate::workspace::{conflict_prompt, Conflict};

pub async fn merge(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    Extension(actor): Extension<Actor>,
    ApiJson(req): ApiJson<MergeRequest>,
) -> ApiResult<Json<MergeReply>> {
    if req
        .message
        .as_deref()
        .is_some_and(|m| !commit_message_ok(m))
    {
        return Err(HubError::bad_request("message must not be blank or hold a NUL byte").into());
    }
    if req.dry_run {
        let (ws, preview) = hub.agents().merge_preview(&id, req.mode).await?;
        return Ok(Json(MergeReply {
            ok: true,
            agent_id: id,
            dry_run: true,
            mode: req.mode,
            base: ws.base,
            branch: ws.branch,
            commits: preview.commits,
            files: preview.files,
            clean: Some(preview.lands),
            conflicts: Some(preview.conflicts),
            before: None,
            after: None,
            worktree: None,
            continued_at: None,
        }));
    }
    refuse_working(&hub, &id, req.force)?;
    let asked = MergeAsked {
        mode: req.mode,
        message: req.message,
        continue_from_base: req.continue_from_base,
    };
    let merged = match hub.agents().merge(&id, asked).await {
        Ok(merged) => merged,
        Err(e) => {
            return Err(to_agent_if_asked(&hub, &actor, &id, req.to_agent, e)
                .await
                .into())
        }
    };
    let (ws, landed) = (merged.workspace, merged.landed);
    Ok(Json(MergeReply {
        ok: true,
        agent_id: id,
        dry_run: false,
        mode: req.mode,
        base: ws.base,
        branch: ws.branch,
        commits: landed.commits,
        files: landed.files,
        clean: None,
        conflicts: None,
        before: Some(landed.before),
        after: Some(landed.after),
        worktree: Some(worktree_word(landed.worktree.is_some()).into()),
        continued_at: merged.continued.map(|c| c.after),
    }))
}

pub async fn update(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    Extension(actor): Extension<Actor>,
    ApiJson(req): ApiJson<UpdateRequest>,
) -> ApiResult<Json<UpdateReply>> {
    refuse_working(&hub, &id, req.force)?;
    let (ws, updated) = match hub.agents().update_branch(&id, req.rebase).await {
        Ok(done) => done,
        Err(e) => {
            return Err(to_agent_if_asked(&hub, &actor, &id, req.to_agent, e)
                .await
                .into())
        }
    };
    Ok(Json(UpdateReply {
        ok: true,
        agent_id: id,
        base: ws.base,
        branch: ws.branch,
        updated: updated.before != updated.after,
        worktree: worktree_word(updated.worktree.is_some()).into(),
        before: updated.before,
        after: updated.after,
    }))
}

pub async fn push(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<PushRequest>,
) -> ApiResult<Json<PushReply>> {
    let remote = req.remote.as_deref().unwrap_or("origin");
    let (_, pushed) = hub.agents().push_branch(&id, remote).await?;
    Ok(Json(PushReply {
        ok: true,
        agent_id: id,
        remote: pushed.remote,
        url: pushed.url,
        branch: pushed.branch,
        sha: pushed.sha,
    }))
}

/// `AGENT_WORKING` when the agent's session (the one a prompt to it goes to: its container's,
/// or the live session it owns) reads `working`, unless `force`.
fn refuse_working(hub: &Hub, id: &str, force: bool) -> HubResult<()> {
    hub.agents().def(id)?;
    let keys = agent_keys(id);
    let session = crate::owner_routing::resolve_session(&hub.list(), &keys).ok();
    let live = session.filter(|s| s.output().exit().is_none());
    let working = live.is_some_and(|s| s.state_report().state == AgentState::Working);
    if working && !force {
        return Err(HubError::Workspace {
            code: "AGENT_WORKING",
            message: format!(
                "agent '{id}' is working; wait until it is idle, or pass force to go ahead anyway"
            ),
            files: Vec::new(),
        });
    }
    Ok(())
}

/// A conflict, with `to_agent`, sent to the agent as a prompt; the error to answer.
async fn to_agent_if_asked(
    hub: &Hub,
    actor: &Actor,
    id: &str,
    asked: bool,
    e: HubError,
) -> HubError {
    let HubError::MergeConflict {
        message, conflicts, ..
    } = e
    else {
        return e;
    };
    if !asked {
        return HubError::MergeConflict {
            message,
            conflicts,
            delivered: None,
        };
    }
    let listed: Vec<Conflict> = serde_json::from_value(conflicts.clone()).unwrap_or_default();
    let ws = match hub.agents().workspace_of(id) {
        Ok(ws) => ws,
        Err(e) => return e,
    };
    let text = conflict_prompt(&ws.branch, &ws.base, &listed);
    let opts = crate::delivery::Options::default();
    let sent = hub
        .policy_runner()
        .send_to_agent(actor, &agent_keys(id), &text, opts)
        .await;
    match sent {
        Ok(sent) => {
            let report = serde_json::to_value(&sent.report).unwrap_or_default();
            let receipt = report["receipt"].as_str().unwrap_or("sent").to_string();
            HubError::MergeConflict {
                message: format!("{message}; the conflicts were sent to the agent ({receipt})"),
                conflicts,
                delivered: Some(receipt),
            }
        }
        Err(d) => HubError::MergeConflict {
            message: format!("{message}; sending them to the agent failed: {d}"),
            conflicts,
            delivered: None,
        },
    }
}

/// The routing keys of a prompt to the agent `id`.
fn agent_keys(id: &str) -> RouteKeys {
    RouteKeys {
        agent_id: Some(id.to_string()),
        ..RouteKeys::default()
    }
}
