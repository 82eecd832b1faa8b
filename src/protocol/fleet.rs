//! Wire types of the container agent, task and audit-traffic routes (`/v1/agents`,
//! `/v1/tasks`, `/v1/pty-traffic`). The objects themselves (an agent, a task, an audit record)
//! are defined next to the code that keeps them and re-exported here.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

pub use crate::agents::{AgentInfo, AgentStatus};
pub use crate::audit::store::{Filter as TrafficFilter, Record as AuditRecord};
pub use crate::tasks::{CreateTask, TaskInfo, TaskState};

/// `GET /v1/agents`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentListReply {
    pub ok: bool,
    pub count: usize,
    pub agents: Vec<AgentInfo>,
}

/// `GET /v1/agents/{id}`, `.../stop` and `.../restart`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentReply {
    pub ok: bool,
    pub agent: AgentInfo,
}

/// `POST /v1/agents/{id}/start`. The client reads the stop and restart replies (an
/// [`AgentReply`]) as this type too: there the two start fields are absent (default).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentStartReply {
    pub ok: bool,
    pub agent: AgentInfo,
    #[serde(default)]
    pub already_running: bool,
    /// `started` or `already running`.
    #[serde(default)]
    pub message: String,
}

/// `POST /v1/tasks` with `pty: true`: the task runs on in a PTY session.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskStartedReply {
    pub ok: bool,
    pub task_id: String,
    /// Always `started`.
    pub status: String,
    pub session_id: Option<String>,
    pub task: TaskInfo,
}

/// `POST /v1/tasks` with `pty: false`: the task ran to its end with pipes.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskRunReply {
    pub ok: bool,
    pub task_id: String,
    pub state: TaskState,
    pub stdout: String,
    pub stderr: String,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    /// The output was longer than the hub keeps.
    pub truncated: bool,
    pub task: TaskInfo,
}

/// `POST /v1/tasks`: started in a PTY, or run to its end.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum TaskCreatedReply {
    Started(TaskStartedReply),
    Ran(TaskRunReply),
}

/// `GET /v1/tasks`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskListReply {
    pub ok: bool,
    pub count: usize,
    pub tasks: Vec<TaskInfo>,
}

/// `GET /v1/tasks/{id}` and `DELETE /v1/tasks/{id}`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskReply {
    pub ok: bool,
    pub task: TaskInfo,
}

/// `POST /v1/tasks/{id}/wait` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// How long to wait (default 30000, at most 600000).
    pub timeout_ms: Option<u64>,
}

/// `POST /v1/tasks/{id}/wait`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TaskWaitReply {
    pub ok: bool,
    pub task: TaskInfo,
    /// `false` when the wait timed out with the task still running.
    pub finished: bool,
}

/// `GET /v1/pty-traffic/events` and `/blocked`: a page of audit records.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditPageReply {
    pub ok: bool,
    /// Records matching the filters, all pages.
    pub total: i64,
    pub limit: u32,
    pub offset: u32,
    pub count: usize,
    /// The last id of this page (pass as `after_id` for the next one).
    pub next_cursor: Option<i64>,
    pub events: Vec<AuditRecord>,
}

/// `GET /v1/pty-traffic/events/{id}`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditEventReply {
    pub ok: bool,
    pub event: AuditRecord,
}

/// `GET /v1/pty-traffic/sessions`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditSessionsReply {
    pub ok: bool,
    pub count: usize,
    /// Per-session aggregates.
    #[schema(value_type = Vec<Object>)]
    pub sessions: Vec<Value>,
}

/// `GET /v1/pty-traffic/sessions/{id}`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AuditSessionReply {
    pub ok: bool,
    #[schema(value_type = Object)]
    pub session: Value,
}

/// `POST /v1/pty-traffic/storage/cleanup`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CleanupReply {
    pub ok: bool,
    /// Records deleted.
    pub deleted: usize,
}

/// A text frame of `GET /v1/pty-traffic/stream`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TrafficFrame {
    /// A record as it was written.
    AuditEvent { event: Box<AuditRecord> },
    /// This viewer fell behind and `count` records were not sent.
    EventsDropped { count: u64 },
}
