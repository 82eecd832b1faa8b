//! Wire types of the policy and agent-state routes: `GET .../state`, `GET /v1/policies`,
//! `GET /v1/policies/check`, `POST /v1/policies/reload`, and the policy action and trigger
//! that policy events and check rows carry.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::AgentStatus;
use crate::agent_state::State;
use crate::config::policy::Policy;

/// The action a policy verdict asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PolicyAction {
    None,
    Warn,
    Stop,
    Restart,
    Notify,
    Interrupt,
    /// The profile's continue line sent once a usage or rate limit is over (`on_limit`).
    Continue,
}

/// What made a policy act (the `trigger` of `policy_*` events).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PolicyTrigger {
    /// `idle_timeout_s` ran out.
    IdleTimeout,
    /// `warn_before_s` before the idle deadline.
    WarnBefore,
    /// `max_lifetime_s` ran out.
    MaxLifetime,
    /// The agent is stuck (`on_stuck`).
    OnStuck,
    /// A usage or rate limit is over (`on_limit = "wait"`).
    OnLimit,
}

/// A row of `GET /v1/policies/check`: what a policy would do now to one session, and why.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CheckRow {
    pub agent_id: Option<String>,
    pub session_id: Option<String>,
    pub policy: String,
    pub dry_run: bool,
    #[schema(value_type = Option<String>)]
    pub state: Option<State>,
    pub stuck: bool,
    pub idle_for_ms: Option<u64>,
    pub would: PolicyAction,
    /// The event type it would be reported as (`policy_warned`, `policy_stopped`, ...).
    pub event: Option<String>,
    pub reason: String,
    pub idle_deadline_in_ms: Option<u64>,
    pub start_on_message: bool,
    /// The agent profile reading the screen, the CLI versions it was checked against, and the
    /// rule and screen lines behind `state`.
    pub profile: Option<String>,
    pub profile_checked_with: Vec<String>,
    pub rule: Option<String>,
    pub evidence: Vec<String>,
}

/// `GET .../state` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StateQuery {
    /// Add the rule and the screen lines it matched.
    #[serde(default)]
    pub explain: bool,
    /// Wait until the state is one of these, comma-separated (`idle,blocked`; `stuck` too),
    /// answering the moment it is (or at `timeout_ms`, with `reached: false`).
    #[schema(schema_with = wait_schema, nullable = false)]
    pub wait: Option<String>,
    /// How long a wait may take: default 30000, at most 600000. Only with `wait`.
    #[schema(maximum = 600_000, nullable = false)]
    pub timeout_ms: Option<u64>,
}

fn wait_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .pattern(Some(super::schema::wait_states()))
        .build()
}

pub use crate::agent_state::StateView;

/// `POST .../hook`: an event from the agent's own hook (`agent-hub hook EVENT [DETAIL]`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HookRequest {
    /// The hook event (`Stop`, `UserPromptSubmit`, `Notification`).
    #[schema(pattern = r"^[A-Za-z0-9_.-]{1,64}$")]
    pub event: String,
    /// What the hook matched (`permission_prompt`, `idle_prompt`).
    #[schema(pattern = r"^[A-Za-z0-9_.-]{1,64}$")]
    pub detail: Option<String>,
}

/// `POST .../hook`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HookReply {
    pub ok: bool,
    pub session_id: String,
    /// The state the session's profile gives the event (it is the state now); `null`: the
    /// profile gives it none, and nothing changed.
    #[schema(value_type = Option<String>, example = "blocked")]
    pub state: Option<State>,
    /// The signal's name, as `explain` shows it (`hook:Notification/permission_prompt`).
    pub source: Option<String>,
}

/// The hook event `agent-hub mcp` sends once its client has listed the tools: the agent's MCP
/// connection to the hub is up (handled by the hub itself, whatever the profile says).
pub const MCP_READY_EVENT: &str = "McpReady";

/// Whether `name` is a hook event or detail the hub takes: 1-64 of `A-Z a-z 0-9 _ . -`.
pub fn hook_name_ok(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// `GET /v1/pty/sessions/{id}/state`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SessionStateReply {
    pub ok: bool,
    pub session_id: String,
    #[serde(flatten)]
    pub state: StateView,
}

/// `GET /v1/agents/{id}/state`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentStateReply {
    pub ok: bool,
    pub agent_id: String,
    pub status: AgentStatus,
    /// The agent's live session, if it runs.
    pub session_id: Option<String>,
    #[serde(flatten)]
    pub state: StateView,
}

/// One policy of `GET /v1/policies`, and who it applies to.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PolicyEntry {
    pub name: String,
    /// The policy as written in its file.
    #[schema(value_type = Object)]
    pub settings: Policy,
    /// Container agents whose definition names it.
    pub agents: Vec<String>,
    /// Host sessions created with it.
    pub sessions: Vec<String>,
}

/// `GET /v1/policies`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PolicyListReply {
    pub ok: bool,
    /// The policies directory, if one is configured.
    #[schema(value_type = Option<String>)]
    pub dir: Option<PathBuf>,
    pub policies: Vec<PolicyEntry>,
    /// The agent-state profiles loaded.
    pub profiles: Vec<String>,
}

/// `GET /v1/policies/check` query.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct CheckQuery {
    /// Only this agent (or session).
    pub agent: Option<String>,
}

/// `GET /v1/policies/check`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PolicyCheckReply {
    pub ok: bool,
    pub count: usize,
    pub checks: Vec<CheckRow>,
}

/// `POST /v1/policies/reload`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PolicyReloadReply {
    pub ok: bool,
    pub policies: Vec<String>,
    pub profiles: Vec<String>,
}
