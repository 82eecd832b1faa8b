//! Wire types of the container agent, task and audit-traffic routes (`/v1/agents`,
//! `/v1/tasks`, `/v1/pty-traffic`): the objects themselves (an agent, a task, an audit record,
//! the traffic filter) live here, in the core, and the modules that keep them use them.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

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

/// `POST /v1/agents/{id}/start` and `.../restart`. The client reads the stop reply (an
/// [`AgentReply`]) as this type too: there the start fields are absent (default).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentStartReply {
    pub ok: bool,
    pub agent: AgentInfo,
    #[serde(default)]
    pub already_running: bool,
    /// The start removed the agent's stopped container and made it again, because its
    /// definition (image, command, env, mounts, ...) changed since the container was made, its
    /// image was rebuilt under the same name, or the container did not record its definition
    /// (made by an older hub). Its home and workspace are kept.
    #[serde(default)]
    pub recreated: bool,
    /// What changed, when `recreated`: parts of the container's definition (`image`, `command`,
    /// `env`, `workdir`, `mounts`, `labels`, `other`), and `image (rebuilt)` when its image's
    /// name names another image than the one it was made from; empty when the old container
    /// did not record its definition.
    #[serde(default)]
    pub changed: Vec<String>,
    /// `started`, `already running`, or `started; container made again: <why>`.
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
    #[param(maximum = 600_000)]
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

/// Where an agent is in its life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum AgentStatus {
    #[default]
    Stopped,
    Starting,
    Running,
    /// Its container was running when its engine stopped answering; it is re-attached when
    /// the engine answers again.
    Unreachable,
    Stopping,
    Exited,
    Failed,
}

/// What clients see of an agent.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentInfo {
    pub id: String,
    pub status: AgentStatus,
    pub image: String,
    /// The engine it is on; empty for an agent with `docker_hosts` not placed yet.
    pub docker_host: String,
    /// The engines it may be placed on (its definition's or its team's `docker_hosts`); empty
    /// when its definition names one engine.
    #[serde(default)]
    pub docker_hosts: Vec<String>,
    pub container_id: Option<String>,
    pub session_id: Option<String>,
    pub pty_attached: bool,
    pub started_at: Option<DateTime<Utc>>,
    pub last_activity_at: Option<DateTime<Utc>>,
    pub owner_agent_id: Option<String>,
    pub owner_role: Option<String>,
    pub label: Option<String>,
    pub cli_type: Option<String>,
    pub policy: Option<String>,
    pub exit_code: Option<i64>,
    pub error: Option<String>,
    /// Whether the agent's next start resumes its conversation.
    #[serde(default)]
    pub resumes: bool,
    /// Why it does or does not (`found .claude/projects/-workspace/<id>.jsonl`).
    #[serde(default)]
    pub resume_reason: String,
    /// The agent's home on the hub's machine (kept across stops and removed containers).
    #[serde(default)]
    pub home: Option<String>,
    /// The agent's git checkout, when its definition names a `workspace`.
    #[serde(default)]
    pub workspace: Option<WorkspaceInfo>,
    /// Its work against its base (commits ahead and behind, files changed, whether its branch
    /// merges cleanly), as of its last turn's end, start or stop, or a client's
    /// `GET /v1/agents/{id}/work`; null when it has no workspace or none was computed yet.
    #[serde(default)]
    pub work: Option<crate::workspace::WorkSummary>,
    /// The agent runs in a container made otherwise than a start would make it now: its
    /// definition changed in `hub.toml` since (the hub read it again when it restarted), its
    /// image was rebuilt under the same name, or the container records no definition (made by
    /// an older hub). A running container is kept as it is: `restart` applies the definition
    /// (it makes the container again, keeping the home and workspace). Only while `running`.
    #[serde(default)]
    pub outdated: bool,
    /// What differs, when `outdated`: parts of the container's definition (`image`,
    /// `command`, `env`, `workdir`, `mounts`, `labels`, `other`) and `image (rebuilt)`; empty
    /// when the container records no definition.
    #[serde(default)]
    pub changed: Vec<String>,
}

/// An agent's git checkout of its own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceInfo {
    /// The user's repository.
    pub repo: String,
    /// What the branch started from and changes are shown against.
    pub base: String,
    /// The agent's branch (`agent/<id>`).
    pub branch: String,
    /// The checkout on the hub's machine.
    pub path: String,
    /// Whether the checkout exists (it is made at the agent's start).
    pub exists: bool,
}

/// `GET /v1/agents/{id}/changes` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ChangesQuery {
    /// Include the full diffs.
    #[serde(default)]
    pub full: bool,
}

/// `POST /v1/agents/{id}/start` and `.../restart` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StartQuery {
    /// Start a new conversation instead of resuming the last one.
    #[serde(default)]
    pub fresh: bool,
}

/// `DELETE /v1/agents/{id}/workspace` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WorkspaceRemoveQuery {
    /// Remove it even with uncommitted changes (they are lost; commits stay on the branch).
    #[serde(default)]
    pub force: bool,
}

/// `GET /v1/agents/{id}/changes`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentChangesReply {
    pub ok: bool,
    pub agent_id: String,
    pub changes: crate::workspace::Changes,
}

/// `GET /v1/agents/{id}/work`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentWorkReply {
    pub ok: bool,
    pub agent_id: String,
    /// Computed now; null while there is nothing to read (a checkout not made yet).
    pub work: Option<crate::workspace::WorkSummary>,
}

/// `DELETE /v1/agents/{id}/workspace`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WorkspaceRemoveReply {
    pub ok: bool,
    pub agent_id: String,
    /// The checkout that was removed.
    pub path: String,
    /// The branch, which is kept.
    pub branch: String,
}

/// `POST /v1/agents/{id}/review`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReviewRequest {
    /// The notes, sent as one prompt (1 to 50).
    #[schema(min_items = 1, max_items = 50)]
    pub notes: Vec<crate::workspace::review::ReviewNote>,
    /// Send even when the agent is blocked on a question.
    #[serde(default)]
    pub force: bool,
}

/// `POST /v1/agents/{id}/review`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReviewReply {
    pub ok: bool,
    pub agent_id: String,
    /// The agent's branch the notes are on.
    pub branch: String,
    /// How many notes went.
    pub notes: usize,
    /// The prompt as the agent gets it.
    pub prompt: String,
    /// The agent was stopped and its policy started it for these notes.
    pub started: bool,
    /// `submitted`, `stalled`, or `queued` (the agent was working or limited: delivered once
    /// it is idle).
    pub receipt: String,
    pub resolved_session_id: String,
    /// What the delivery did (see `send_line_to_agent`).
    #[schema(value_type = Object)]
    pub delivery: Value,
}

/// `POST /v1/tasks`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTask {
    /// A shell command line, run with `sh -c` (not blank, no NUL byte).
    #[schema(schema_with = super::schema::command)]
    pub cmd: String,
    /// Run in a PTY session (default) or with pipes, synchronously.
    #[serde(default = "default_pty")]
    pub pty: bool,
    /// Kill the command after this many seconds (default 300, at most 7 days).
    #[schema(exclusive_minimum = 0, maximum = 604_800)]
    pub timeout_s: Option<f64>,
    /// A name for listing (default: the command).
    #[schema(schema_with = super::schema::task_name)]
    pub name: Option<String>,
    /// Working directory, an existing one (default: the hub's home directory). A relative
    /// path is taken from the hub's working directory.
    #[schema(min_length = 1, pattern = r"^[^\u0000]*$")]
    pub cwd: Option<String>,
    /// Extra environment variables.
    #[serde(default)]
    #[schema(schema_with = super::schema::env_vars)]
    pub env: BTreeMap<String, String>,
}

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TaskState {
    Running,
    /// The command exited with code 0.
    Success,
    /// The command exited with another code, or was killed by something else than the hub.
    Error,
    /// The timeout ran out and the task was killed.
    Timeout,
    /// The task was cancelled (or the hub shut down) and killed.
    Cancelled,
}

/// A task as clients see it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaskInfo {
    pub id: String,
    pub name: String,
    pub state: TaskState,
    /// The `sh` running the command.
    pub pid: Option<u32>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub exit_code: Option<i32>,
    pub duration_ms: Option<u64>,
    /// The PTY session holding the task's output (PTY tasks only).
    pub session_id: Option<String>,
    pub cmd: String,
    pub pty: bool,
}

fn default_pty() -> bool {
    true
}

/// One audit record. `success` is `None` while an operation runs (and stays so if the hub
/// died before it finished: the attempt is on record, its outcome is not).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct AuditRecord {
    #[serde(default)]
    pub id: i64,
    pub ts: String,
    pub ts_ms: i64,
    pub actor: String,
    pub actor_agent_id: Option<String>,
    pub action: String,
    pub method: Option<String>,
    pub path: Option<String>,
    pub session_id: Option<String>,
    pub agent_id: Option<String>,
    pub owner_session_id: Option<String>,
    pub label: Option<String>,
    pub cli_type: Option<String>,
    pub command: Option<String>,
    pub response: Option<String>,
    pub duration_ms: Option<i64>,
    pub status: Option<i64>,
    pub success: Option<bool>,
    pub blocked: bool,
    pub blocked_pattern: Option<String>,
    pub error_code: Option<String>,
}

/// Filters of `GET /v1/pty-traffic/events`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TrafficFilter {
    pub session_id: Option<String>,
    pub agent_id: Option<String>,
    pub action: Option<String>,
    pub actor: Option<String>,
    #[serde(default)]
    pub errors_only: bool,
    #[serde(default)]
    pub blocked_only: bool,
    /// Substring of the command or response.
    pub search: Option<String>,
    /// RFC 3339 time or milliseconds since the epoch.
    #[param(schema_with = super::schema::time_filter)]
    pub since: Option<String>,
    /// RFC 3339 time or milliseconds since the epoch.
    #[param(schema_with = super::schema::time_filter)]
    pub until: Option<String>,
    /// Only records with a larger id (a cursor: pass the last id seen).
    pub after_id: Option<i64>,
    /// Records per page (default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// Records to skip.
    #[param(value_type = Option<u64>, maximum = 4_294_967_295_u64)]
    pub offset: Option<u32>,
}
