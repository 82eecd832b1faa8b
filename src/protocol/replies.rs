//! Reply bodies of the REST API (and the request bodies of the owner-routing and external-session routes).
//! Every success reply carries `ok: true`; every failure is an [`ErrorBody`].

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use crate::screen::TermRead;
use crate::session::{SessionInfo, TalkResult};

pub use crate::session::SessionBackend;

/// `GET /health`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HealthReply {
    pub ok: bool,
    pub version: String,
    pub sessions: usize,
    pub agents: usize,
    pub hub_id: String,
    /// Whether `term_read` may be asked for (`[hub] term_buffer_access`).
    pub term_buffer_access: bool,
    /// The registry file, events log and snapshots: where, when last saved, problems.
    #[schema(value_type = Option<Object>)]
    pub persistence: Option<Value>,
}

/// `GET /v1/whoami`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WhoamiReply {
    pub ok: bool,
    /// The token's name (`anonymous` on a hub without tokens).
    pub token_name: String,
    pub role: crate::actor::Role,
    /// Whether the hub asks for a token (false only with `auth = "none"`).
    pub auth_required: bool,
}

/// `POST /v1/auth/signin`: a one-time code from a sign-in link.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SigninRequest {
    /// The code (32 hex digits) the link holds after `#signin=`.
    #[schema(min_length = 1, max_length = 128)]
    pub code: String,
}

/// `POST /v1/auth/signin`: the owner's token, for the tab's session storage.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SigninReply {
    pub ok: bool,
    pub token: String,
    pub token_name: String,
    pub role: crate::actor::Role,
}

/// `POST /v1/auth/signin-link`: a new one-time sign-in code and the page path that uses it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SigninLinkReply {
    pub ok: bool,
    pub code: String,
    /// The dashboard path holding the code (`/#signin=<code>`): append it to the hub's URL.
    pub path: String,
    /// How long the code can be used.
    pub expires_in_s: u64,
}

/// `POST /v1/auth/rotate`: the owner's token was replaced.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RotateReply {
    pub ok: bool,
    /// Where the new token is (on the hub's machine).
    pub file: String,
}

/// `GET /v1/pty/sessions`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionListReply {
    pub ok: bool,
    pub count: usize,
    /// How many sessions of each backend.
    pub by_source: BTreeMap<SessionBackend, usize>,
    pub sessions: Vec<SessionInfo>,
}

/// `POST /v1/pty/sessions`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionCreatedReply {
    pub ok: bool,
    pub session_id: String,
    /// The agent profile reading the session's screen (chosen by its `cli_type`).
    #[serde(default)]
    pub profile: String,
    /// Things the caller should know: a `cli_type` that names no profile.
    #[serde(default)]
    pub warnings: Vec<String>,
    pub shell: String,
    pub cwd: String,
    pub cols: u16,
    pub rows: u16,
    pub backend: SessionBackend,
    pub tmux_session: Option<String>,
    pub pid: Option<u32>,
}

/// A reply carrying one session: `GET /v1/pty/sessions/{id}`, update-ownership.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionReply {
    pub ok: bool,
    pub session: SessionInfo,
}

/// `DELETE /v1/pty/sessions/{id}`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KillReply {
    pub ok: bool,
    pub session_id: String,
    pub exit_code: Option<i32>,
    pub exit_reason: Option<String>,
}

/// `send_line`, `keys` and the bridge's `/pty/write`; with `submit`, the delivery receipt.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WriteReply {
    pub ok: bool,
    pub session_id: String,
    pub bytes_written: usize,
    /// With `submit`: `submitted`, `stalled` or `queued` (the agent is `limited` and its policy
    /// waits it out: delivered once the limit is over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<String>,
    /// With `submit`: how the prompt was delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub delivery: Option<Value>,
}

/// `POST .../signal`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SignalReply {
    pub ok: bool,
    pub session_id: String,
    pub signal: String,
}

/// `POST .../resize`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ResizeReply {
    pub ok: bool,
    pub session_id: String,
    pub cols: u16,
    pub rows: u16,
}

/// `POST .../talk` and the bridge's `/pty/talk`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TalkReply {
    pub ok: bool,
    /// Given by the bridge's `/pty/talk`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(flatten)]
    pub result: TalkResult,
}

/// `POST .../term_read` and the bridge's `/pty/buffer`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct TermReadReply {
    pub ok: bool,
    pub session_id: String,
    #[serde(flatten)]
    pub read: TermRead,
}

/// `POST /v1/pty/resolve`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ResolveReply {
    pub ok: bool,
    pub session_id: String,
    pub session: SessionInfo,
}

/// `POST /v1/pty/send_line_to_agent`: a prompt for the one session the keys name.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendToAgentRequest {
    pub data: String,
    /// Send even when the agent is blocked on a question.
    #[serde(default)]
    pub force: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// The `send_result` of [`SendToAgentReply`].
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SendResult {
    pub ok: bool,
    pub bytes_written: usize,
    #[schema(value_type = Object)]
    pub delivery: Value,
}

/// `POST /v1/pty/send_line_to_agent`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SendToAgentReply {
    pub ok: bool,
    /// The agent was stopped and its policy started it for this message.
    pub started: bool,
    pub resolved_session_id: String,
    pub resolved_session: SessionInfo,
    /// `submitted`, `stalled` or `queued` (delivered once the agent's limit is over).
    pub receipt: String,
    pub send_result: SendResult,
}

/// `POST /v1/pty/update-ownership`: the session's whole owner identity is replaced.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct UpdateOwnershipRequest {
    pub session_id: String,
    #[serde(flatten)]
    pub owner: crate::session::Owner,
    #[serde(flatten, skip_serializing)]
    #[schema(ignore)]
    pub no_other_fields: super::NoOtherFields,
}

/// `POST /v1/pty/register`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RegisterReply {
    pub ok: bool,
    pub session_id: String,
    /// `false` when the session was registered already (the registration was updated).
    pub created: bool,
    pub session: SessionInfo,
}

/// `DELETE /v1/pty/unregister/{id}` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ForceQuery {
    /// Unregister even a session that is still alive.
    #[serde(default)]
    pub force: bool,
}

/// `DELETE /v1/pty/unregister/{id}`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct UnregisterReply {
    pub ok: bool,
    pub session_id: String,
    pub session: SessionInfo,
}

/// `POST /v1/pty/heartbeat/{id}`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatReply {
    pub ok: bool,
    pub session_id: String,
    pub last_heartbeat_at: Option<DateTime<Utc>>,
}

/// `POST /v1/pty/heartbeat`: the sessions named, else those of `owner_agent_id`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    pub session_ids: Option<Vec<String>>,
    pub owner_agent_id: Option<String>,
}

/// `POST /v1/pty/heartbeat`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatManyReply {
    pub ok: bool,
    pub acknowledged: Vec<String>,
    pub unknown: Vec<String>,
}

/// `DELETE /v1/pty/reset`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ResetReply {
    pub ok: bool,
    pub unregistered: Vec<String>,
    pub forgotten_exited: Vec<String>,
}

/// One session in the bridge's `GET /pty/list`: its info, and its id as `session_id`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BridgeSession {
    pub session_id: String,
    #[serde(flatten)]
    pub info: SessionInfo,
}

/// The bridge's `GET /pty/list`: the sessions this hub owns (external ones are not lent on).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BridgeListReply {
    pub ok: bool,
    pub count: usize,
    pub sessions: Vec<BridgeSession>,
}

/// A reply whose body is an object the hub describes elsewhere (agents, tasks, policies,
/// audit records): `ok: true` and that object's fields.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ObjectReply {
    pub ok: bool,
    #[serde(flatten)]
    #[schema(value_type = Object)]
    pub fields: Map<String, Value>,
}
