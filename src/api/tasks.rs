//! REST handlers for `/v1/tasks`: start (PTY or piped), list, get, wait and cancel.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::Json;

use super::error::{ApiJson, ApiQuery, ApiResult};
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::{
    TaskCreatedReply, TaskListReply, TaskReply, TaskRunReply, TaskStartedReply, TaskWaitReply,
    WaitQuery,
};
use crate::tasks::CreateTask;

/// Default and largest wait for `POST /v1/tasks/{id}/wait`.
const WAIT_DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub(super) const WAIT_MAX_TIMEOUT_MS: u64 = 600_000;

pub async fn create_task(
    State(hub): State<Hub>,
    axum::Extension(actor): axum::Extension<crate::actor::Actor>,
    ApiJson(req): ApiJson<CreateTask>,
) -> ApiResult<Json<TaskCreatedReply>> {
    if req.pty {
        let task = hub.tasks().start(&actor, req).await?;
        return Ok(Json(TaskCreatedReply::Started(TaskStartedReply {
            ok: true,
            task_id: task.id.clone(),
            status: "started".into(),
            session_id: task.session_id.clone(),
            task,
        })));
    }
    let run = hub.tasks().run(&actor, req).await?;
    Ok(Json(TaskCreatedReply::Ran(TaskRunReply {
        ok: true,
        task_id: run.task.id.clone(),
        state: run.task.state,
        stdout: run.stdout,
        stderr: run.stderr,
        exit_code: run.task.exit_code,
        duration_ms: run.task.duration_ms,
        truncated: run.truncated,
        task: run.task,
    })))
}

pub async fn list_tasks(State(hub): State<Hub>) -> Json<TaskListReply> {
    let tasks = hub.tasks().list();
    Json(TaskListReply {
        ok: true,
        count: tasks.len(),
        tasks,
    })
}

pub async fn get_task(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<TaskReply>> {
    let task = hub.tasks().info(&id)?;
    Ok(Json(TaskReply { ok: true, task }))
}

pub async fn wait_task(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<WaitQuery>,
) -> ApiResult<Json<TaskWaitReply>> {
    let timeout_ms = q.timeout_ms.unwrap_or(WAIT_DEFAULT_TIMEOUT_MS);
    if timeout_ms > WAIT_MAX_TIMEOUT_MS {
        return Err(
            HubError::bad_request(format!("timeout_ms must be 0-{WAIT_MAX_TIMEOUT_MS}")).into(),
        );
    }
    let (task, finished) = hub
        .tasks()
        .wait(&id, Duration::from_millis(timeout_ms))
        .await?;
    Ok(Json(TaskWaitReply {
        ok: true,
        task,
        finished,
    }))
}

pub async fn cancel_task(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<TaskReply>> {
    let task = hub.tasks().cancel(&id).await?;
    Ok(Json(TaskReply { ok: true, task }))
}
