//! REST handlers for `/v1/tasks`: start (PTY or piped), list, get, wait and cancel.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiJson, ApiQuery, ApiResult};
use crate::error::HubError;
use crate::hub::Hub;
use crate::tasks::{self, CreateTask};

/// Default and largest wait for `POST /v1/tasks/{id}/wait`.
const WAIT_DEFAULT_TIMEOUT_MS: u64 = 30_000;
const WAIT_MAX_TIMEOUT_MS: u64 = 600_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WaitQuery {
    timeout_ms: Option<u64>,
}

pub async fn create_task(
    State(hub): State<Hub>,
    axum::Extension(actor): axum::Extension<crate::actor::Actor>,
    ApiJson(req): ApiJson<CreateTask>,
) -> ApiResult<Json<Value>> {
    if req.pty {
        let task = tasks::start(&hub, &actor, req).await?;
        return Ok(Json(json!({
            "ok": true,
            "taskId": task.id,
            "status": "started",
            "sessionId": task.session_id,
            "task": task,
        })));
    }
    let run = tasks::run(&hub, &actor, req).await?;
    Ok(Json(json!({
        "ok": true,
        "taskId": run.task.id,
        "state": run.task.state,
        "stdout": run.stdout,
        "stderr": run.stderr,
        "exitCode": run.task.exit_code,
        "durationMs": run.task.duration_ms,
        "truncated": run.truncated,
        "task": run.task,
    })))
}

pub async fn list_tasks(State(hub): State<Hub>) -> Json<Value> {
    let tasks = tasks::list(&hub);
    Json(json!({ "ok": true, "count": tasks.len(), "tasks": tasks }))
}

pub async fn get_task(State(hub): State<Hub>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(json!({ "ok": true, "task": tasks::info(&hub, &id)? })))
}

pub async fn wait_task(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<WaitQuery>,
) -> ApiResult<Json<Value>> {
    let timeout_ms = q.timeout_ms.unwrap_or(WAIT_DEFAULT_TIMEOUT_MS);
    if timeout_ms > WAIT_MAX_TIMEOUT_MS {
        return Err(
            HubError::bad_request(format!("timeout_ms must be 0-{WAIT_MAX_TIMEOUT_MS}")).into(),
        );
    }
    let (task, finished) = tasks::wait(&hub, &id, Duration::from_millis(timeout_ms)).await?;
    Ok(Json(
        json!({ "ok": true, "task": task, "finished": finished }),
    ))
}

pub async fn cancel_task(State(hub): State<Hub>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(
        json!({ "ok": true, "task": tasks::cancel(&hub, &id).await? }),
    ))
}
