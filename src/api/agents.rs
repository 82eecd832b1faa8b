//! REST handlers for `/v1/agents`: list, get, start, stop, restart, and the agent's workspace
//! (its changes, its work summary, removing its checkout).

use axum::extract::{Path, State};
use axum::Json;

use super::error::{ApiQuery, ApiResult};
use crate::agents;
use crate::hub::Hub;
use crate::protocol::{
    AgentChangesReply, AgentListReply, AgentReply, AgentStartReply, AgentWorkReply, ChangesQuery,
    StartQuery, WorkspaceRemoveQuery, WorkspaceRemoveReply,
};

pub async fn list_agents(
    State(hub): State<Hub>,
    axum::Extension(actor): axum::Extension<crate::actor::Actor>,
) -> Json<AgentListReply> {
    let mut agents = hub.agents().list();
    agents.retain(|a| super::scope::agent_visible(&hub, &actor, &a.id));
    Json(AgentListReply {
        ok: true,
        count: agents.len(),
        agents,
    })
}

fn reply(agent: agents::AgentInfo) -> Json<AgentReply> {
    Json(AgentReply { ok: true, agent })
}

pub async fn get_agent(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<AgentReply>> {
    Ok(reply(hub.agents().info(&id)?))
}

pub async fn start_agent(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StartQuery>,
) -> ApiResult<Json<AgentStartReply>> {
    hub.policy_runner().check_start_budget(&id)?;
    Ok(start_reply(hub.agents().start(&id, q.fresh).await?))
}

/// A start's (or a restart's) reply: what it did.
fn start_reply(started: agents::Started) -> Json<AgentStartReply> {
    let message = match (&started.recreated, started.already_running) {
        (_, true) => "already running".to_string(),
        (Some(change), false) => format!("started; container made again: {change}"),
        (None, false) => "started".to_string(),
    };
    Json(AgentStartReply {
        ok: true,
        agent: started.info,
        already_running: started.already_running,
        recreated: started.recreated.is_some(),
        changed: started.recreated.map(|c| c.parts()).unwrap_or_default(),
        message,
    })
}

pub async fn stop_agent(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<AgentReply>> {
    Ok(reply(hub.agents().stop(&id).await?))
}

pub async fn restart_agent(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StartQuery>,
) -> ApiResult<Json<AgentStartReply>> {
    hub.policy_runner().check_start_budget(&id)?;
    Ok(start_reply(hub.agents().restart(&id, q.fresh).await?))
}

pub async fn agent_changes(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<ChangesQuery>,
) -> ApiResult<Json<AgentChangesReply>> {
    let changes = hub.agents().changes(&id, q.full).await?;
    Ok(Json(AgentChangesReply {
        ok: true,
        agent_id: id,
        changes,
    }))
}

/// `GET /v1/agents/{id}/work`: the agent's work summary computed now (and kept: the agents'
/// list shows it from then on).
pub async fn agent_work(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<AgentWorkReply>> {
    let work = hub.agents().refresh_work(&id).await?;
    Ok(Json(AgentWorkReply {
        ok: true,
        agent_id: id,
        work,
    }))
}

pub async fn remove_workspace(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<WorkspaceRemoveQuery>,
) -> ApiResult<Json<WorkspaceRemoveReply>> {
    let removed = hub.agents().remove_workspace(&id, q.force).await?;
    Ok(Json(WorkspaceRemoveReply {
        ok: true,
        agent_id: id,
        path: removed.path,
        branch: removed.branch,
    }))
}

/// `GET /v1/engines`: each engine the definitions name, as Docker describes it.
pub async fn engines(State(hub): State<Hub>) -> Json<crate::protocol::EnginesReply> {
    Json(crate::protocol::EnginesReply {
        ok: true,
        engines: hub.agents().engines().await,
    })
}
