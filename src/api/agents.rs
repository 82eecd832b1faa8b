//! REST handlers for `/v1/agents`: list, get, start, stop, restart.

use axum::extract::{Path, State};
use axum::Json;

use super::error::ApiResult;
use crate::agents;
use crate::hub::Hub;
use crate::protocol::{AgentListReply, AgentReply, AgentStartReply};

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
) -> ApiResult<Json<AgentStartReply>> {
    let (agent, already_running) = hub.agents().start(&id).await?;
    let message = if already_running {
        "already running"
    } else {
        "started"
    };
    Ok(Json(AgentStartReply {
        ok: true,
        agent,
        already_running,
        message: message.into(),
    }))
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
) -> ApiResult<Json<AgentReply>> {
    Ok(reply(hub.agents().restart(&id).await?))
}
