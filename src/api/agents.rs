//! REST handlers for `/v1/agents`: list, get, start, stop, restart.

use axum::extract::{Path, State};
use axum::Json;
use serde_json::{json, Value};

use super::error::ApiResult;
use crate::agents;
use crate::hub::Hub;

pub async fn list_agents(State(hub): State<Hub>) -> Json<Value> {
    let agents = agents::list(&hub);
    Json(json!({ "ok": true, "count": agents.len(), "agents": agents }))
}

pub async fn get_agent(State(hub): State<Hub>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(
        json!({ "ok": true, "agent": agents::info(&hub, &id)? }),
    ))
}

pub async fn start_agent(State(hub): State<Hub>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let (agent, already_running) = agents::start(&hub, &id).await?;
    Ok(Json(json!({
        "ok": true,
        "agent": agent,
        "already_running": already_running,
        "message": if already_running { "already running" } else { "started" },
    })))
}

pub async fn stop_agent(State(hub): State<Hub>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(
        json!({ "ok": true, "agent": agents::stop(&hub, &id).await? }),
    ))
}

pub async fn restart_agent(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(
        json!({ "ok": true, "agent": agents::restart(&hub, &id).await? }),
    ))
}
