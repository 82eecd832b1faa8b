//! The hub's error type. Every failure a client can see has a stable machine code
//! (`error_code` in the JSON body) and an HTTP status; `api::error` turns it into a response once.

use thiserror::Error;

/// A failure of a hub operation, with the stable code clients match on.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum HubError {
    /// No session has this id (it never existed, or it was killed and removed).
    #[error("no session with id '{id}'")]
    SessionNotFound { id: String },
    /// The terminal program could not be started.
    #[error("could not start the session: {reason}")]
    SpawnFailed { reason: String },
    /// The working directory a request names cannot be used (empty, missing, not a directory);
    /// nothing was started.
    #[error("{message}")]
    InvalidCwd { message: String },
    /// The program a request names cannot be started (not found on the `PATH`, a directory, not
    /// executable); nothing was started.
    #[error("{message}")]
    InvalidProgram { message: String },
    /// The operation did not finish in time; `output` holds what was seen so far.
    #[error("timed out after {timeout_ms} ms")]
    Timeout { timeout_ms: u64, output: String },
    /// The session's program has exited, so it takes no more input.
    #[error("the session's process has exited ({})", exit_code_text(exit_code.map(i64::from)))]
    ProcessExited {
        exit_code: Option<i32>,
        output: String,
    },
    /// Writing to the terminal failed.
    #[error("could not write to the session: {reason}")]
    WriteFailed { reason: String },
    /// Reading from the session failed.
    #[error("could not read from the session: {reason}")]
    ReadFailed { reason: String },
    /// The request itself is wrong; the message says what to change.
    #[error("{message}")]
    BadRequest { message: String },
    /// The request body is larger than the hub accepts.
    #[error("request body too large (limit {limit_bytes} bytes)")]
    PayloadTooLarge { limit_bytes: usize },
    /// No route matches the request.
    #[error("no such endpoint: {method} {path}")]
    RouteNotFound { method: String, path: String },
    /// The route exists but not with this method.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// No task has this id (it never existed, or it finished and was purged).
    #[error("no task with id '{id}'")]
    TaskNotFound { id: String },
    /// A piped task ran out of time and was killed; `stdout` and `stderr` hold its output.
    #[error("task '{id}' timed out after {timeout_ms} ms and was killed")]
    TaskTimedOut {
        id: String,
        timeout_ms: u64,
        duration_ms: u64,
        stdout: String,
        stderr: String,
    },
    /// No agent has this id.
    #[error("no agent with id '{id}'")]
    AgentNotFound { id: String },
    /// The agent is not running, so it has no terminal to use.
    #[error("agent '{id}' is not running (status {status})")]
    AgentNotRunning { id: String, status: String },
    /// Starting an agent failed; `screen` holds the last screen seen, if any.
    #[error("agent '{id}' failed to start: {reason}")]
    AgentStartFailed {
        id: String,
        reason: String,
        screen: Option<String>,
    },
    /// The Docker engine at `endpoint` cannot be reached.
    #[error("the Docker engine at {endpoint} is unavailable: {reason}")]
    DockerUnavailable { endpoint: String, reason: String },
    /// A Docker operation failed.
    #[error("docker: {message}")]
    Docker { message: String },
    /// No live session matches the routing keys.
    #[error("no live session matches {keys}")]
    RouteNotMatched { keys: String },
    /// More than one live session matches the routing keys; nothing was sent.
    #[error("{} sessions match {keys}; name one (nothing was sent)", matches.len())]
    Ambiguous { keys: String, matches: Vec<String> },
    /// No valid token was presented.
    #[error("{message}")]
    Unauthorized { message: String },
    /// The token's role does not allow this, or the request is refused for another reason.
    #[error("{message}")]
    Forbidden { message: String },
    /// Rendered reads are switched off (`AGENT_HUB_TERM_BUFFER_ACCESS=off`).
    #[error("rendered terminal reads are disabled on this hub (AGENT_HUB_TERM_BUFFER_ACCESS=off)")]
    TermBufferAccessDisabled,
    /// The bridge serving an external session cannot be reached (or answered nonsense).
    #[error("the bridge at {bridge_url} is unavailable: {reason}")]
    BridgeUnavailable { bridge_url: String, reason: String },
    /// The bridge serving an external session refused the operation.
    #[error("the bridge at {bridge_url} answered {status} {remote_code}: {message}")]
    BridgeError {
        bridge_url: String,
        status: u16,
        remote_code: String,
        message: String,
    },
    /// Registering: the bridge refused the credential given (or its absence), so every call
    /// through it would fail.
    #[error(
        "the bridge at {bridge_url} refused {given} ({status}): register with the bridge's own token in bridge_token"
    )]
    BridgeCredentialRefused {
        bridge_url: String,
        status: u16,
        /// "the request without a bridge_token" or "the bridge_token given".
        given: &'static str,
    },
    /// The session's terminal cannot be resized from here (external sessions).
    #[error("session '{id}' cannot be resized through the hub (it is owned by another process)")]
    ResizeUnsupported { id: String },
    /// The session's program is owned by another process, so the hub cannot kill it.
    #[error(
        "session '{id}' is owned by another process; remove it with DELETE /v1/pty/unregister/{id}"
    )]
    KillUnsupported { id: String },
    /// A session with this id is already registered.
    #[error("a session with id '{id}' already exists")]
    SessionExists { id: String },
    /// Unregistering a leader's session needs `force=true`.
    #[error("session '{id}' belongs to a leader; pass force=true to unregister it")]
    LeaderSession { id: String },
    /// Only external sessions can be unregistered.
    #[error(
        "session '{id}' is the hub's own ({backend}); stop it with DELETE /v1/pty/sessions/{id}"
    )]
    UnregisterUnsupported { id: String, backend: String },
    /// No loaded policy has this name.
    #[error("no policy named '{name}'")]
    PolicyNotFound { name: String },
    /// A policy or profile file is invalid; the message names file, line and key.
    #[error("{message}")]
    PolicyInvalid { message: String },
    /// The agent is asking a question (permission, yes/no): a prompt would answer it by
    /// accident, so nothing was sent. `force: true` sends anyway.
    #[error("the agent is blocked on a question; nothing was sent (use force to send anyway)")]
    AgentBlocked { evidence: Vec<String> },
    /// The command guard refused the input; nothing was written.
    #[error("input blocked by the command guard (pattern '{pattern}'); nothing was written")]
    CommandBlocked { pattern: String },
    /// The audit log cannot be written, so the operation was refused (`audit.fail_open=false`).
    #[error("the audit log cannot be written ({reason}); the operation was refused")]
    AuditUnavailable { reason: String },
    /// No audit record has this id.
    #[error("no audit record with id {id}")]
    AuditRecordNotFound { id: i64 },
    /// Something inside the hub failed; the message says what.
    #[error("internal error: {message}")]
    Internal { message: String },
    /// The agent's budget (or its team's) is spent: deliveries, and with `budget_action =
    /// "stop"` starts, are refused until it renews or a person raises or lifts it. `budget` is
    /// the budget's view (`BudgetView`).
    #[error("{message}")]
    BudgetExhausted {
        message: String,
        budget: Box<serde_json::Value>,
    },
    /// No agent is in this team and hub.toml has no `[teams.NAME]` for it.
    #[error("no team '{team}' (no agent is in it and hub.toml has no [teams.{team}])")]
    TeamNotFound { team: String },
    /// The agent or team has no budget in force (to lift).
    #[error("{whose} has no budget in force; set one with PUT .../budget")]
    NoBudget { whose: String },
    /// `notify test` with no `[[notify]]` in hub.toml.
    #[error("hub.toml has no [[notify]] webhook to test")]
    NoWebhooks,
    /// An answer link that does not answer; `code` is its refusal's (`ANSWER_LINK_INVALID`,
    /// `ANSWER_LINK_EXPIRED`, `ANSWER_LINK_USED`, `QUESTION_GONE`).
    #[error("{message}")]
    AnswerLink { code: &'static str, message: String },
    /// The agent must be stopped first.
    #[error("agent '{id}' is running; stop it first")]
    AgentRunning { id: String },
    /// A workspace operation failed; `code` is the workspace's own (`WORKSPACE_DIRTY`, ...).
    #[error("{message}")]
    Workspace {
        code: &'static str,
        message: String,
        /// The uncommitted files, for `WORKSPACE_DIRTY` and `BASE_DIRTY`.
        files: Vec<String>,
    },
    /// A merge (or an update of an agent's branch) conflicts; nothing was changed.
    #[error("{message}")]
    MergeConflict {
        message: String,
        /// `[{path, hunks}]`: each conflicting file and its conflicted regions.
        conflicts: serde_json::Value,
        /// The receipt of the prompt that asked the agent to resolve them (`to_agent`).
        delivered: Option<String>,
    },
}

impl HubError {
    /// The stable machine code for this error.
    pub fn code(&self) -> &'static str {
        match self {
            HubError::SessionNotFound { .. } => "PTY_SESSION_NOT_FOUND",
            HubError::SpawnFailed { .. } => "PTY_SPAWN_FAILED",
            HubError::InvalidCwd { .. } => "INVALID_CWD",
            HubError::InvalidProgram { .. } => "INVALID_PROGRAM",
            HubError::Timeout { .. } => "PTY_TIMEOUT",
            HubError::ProcessExited { .. } => "PTY_PROCESS_EXITED",
            HubError::WriteFailed { .. } => "PTY_WRITE_FAILED",
            HubError::ReadFailed { .. } => "PTY_READ_FAILED",
            HubError::BadRequest { .. } => "BAD_REQUEST",
            HubError::PayloadTooLarge { .. } => "PAYLOAD_TOO_LARGE",
            HubError::RouteNotFound { .. } => "NOT_FOUND",
            HubError::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            HubError::AgentNotFound { .. } => "AGENT_NOT_FOUND",
            HubError::TaskNotFound { .. } => "TASK_NOT_FOUND",
            HubError::TaskTimedOut { .. } => "PTY_TIMEOUT",
            HubError::AgentNotRunning { .. } => "AGENT_NOT_RUNNING",
            HubError::AgentStartFailed { .. } => "AGENT_START_FAILED",
            HubError::BudgetExhausted { .. } => "BUDGET_EXHAUSTED",
            HubError::TeamNotFound { .. } => "TEAM_NOT_FOUND",
            HubError::NoBudget { .. } => "NO_BUDGET",
            HubError::NoWebhooks => "NO_WEBHOOKS",
            HubError::AnswerLink { code, .. } => code,
            HubError::DockerUnavailable { .. } => "DOCKER_UNAVAILABLE",
            HubError::Docker { .. } => "DOCKER_ERROR",
            HubError::TermBufferAccessDisabled => "TERM_BUFFER_ACCESS_DISABLED",
            HubError::Unauthorized { .. } => "UNAUTHORIZED",
            HubError::RouteNotMatched { .. } => "NOT_FOUND",
            HubError::Ambiguous { .. } => "AMBIGUOUS",
            HubError::Forbidden { .. } => "FORBIDDEN",
            HubError::BridgeUnavailable { .. } => "BRIDGE_UNAVAILABLE",
            HubError::BridgeError { .. } => "BRIDGE_ERROR",
            HubError::BridgeCredentialRefused { .. } => "BRIDGE_UNAUTHORIZED",
            HubError::ResizeUnsupported { .. } => "RESIZE_UNSUPPORTED",
            HubError::KillUnsupported { .. } => "KILL_UNSUPPORTED",
            HubError::SessionExists { .. } => "SESSION_EXISTS",
            HubError::LeaderSession { .. } => "LEADER_SESSION",
            HubError::UnregisterUnsupported { .. } => "UNREGISTER_UNSUPPORTED",
            HubError::PolicyNotFound { .. } => "POLICY_NOT_FOUND",
            HubError::PolicyInvalid { .. } => "POLICY_INVALID",
            HubError::AgentBlocked { .. } => "AGENT_BLOCKED",
            HubError::CommandBlocked { .. } => "PTY_COMMAND_BLOCKED",
            HubError::AuditUnavailable { .. } => "AUDIT_UNAVAILABLE",
            HubError::AuditRecordNotFound { .. } => "NOT_FOUND",
            HubError::Internal { .. } => "INTERNAL",
            HubError::AgentRunning { .. } => "AGENT_RUNNING",
            HubError::Workspace { code, .. } => code,
            HubError::MergeConflict { .. } => "MERGE_CONFLICT",
        }
    }

    /// The HTTP status that goes with the code.
    pub fn http_status(&self) -> u16 {
        match self {
            HubError::SessionNotFound { .. }
            | HubError::RouteNotFound { .. }
            | HubError::AgentNotFound { .. }
            | HubError::TaskNotFound { .. } => 404,
            HubError::AgentNotRunning { .. }
            | HubError::ResizeUnsupported { .. }
            | HubError::KillUnsupported { .. }
            | HubError::SessionExists { .. }
            | HubError::LeaderSession { .. }
            | HubError::UnregisterUnsupported { .. }
            | HubError::AgentBlocked { .. } => 409,
            HubError::BridgeUnavailable { .. } | HubError::BridgeError { .. } => 502,
            HubError::PolicyNotFound { .. } => 404,
            HubError::PolicyInvalid { .. } | HubError::BridgeCredentialRefused { .. } => 400,
            HubError::TermBufferAccessDisabled
            | HubError::Forbidden { .. }
            | HubError::CommandBlocked { .. } => 403,
            HubError::AuditUnavailable { .. } => 503,
            HubError::BudgetExhausted { .. } => 429,
            HubError::TeamNotFound { .. } | HubError::NoBudget { .. } => 404,
            HubError::NoWebhooks => 404,
            HubError::AnswerLink { code, .. } => match *code {
                "ANSWER_LINK_EXPIRED" | "ANSWER_LINK_USED" => 410,
                "QUESTION_GONE" => 409,
                _ => 403,
            },
            HubError::AuditRecordNotFound { .. } => 404,
            HubError::Unauthorized { .. } => 401,
            HubError::RouteNotMatched { .. } => 404,
            HubError::Ambiguous { .. }
            | HubError::AgentRunning { .. }
            | HubError::MergeConflict { .. } => 409,
            HubError::Workspace { code, .. } => match *code {
                "NO_WORKSPACE" | "WORKSPACE_MISSING" => 404,
                "WORKSPACE_NOT_YOURS" | "WORKSPACE_PUSH_REFUSED" => 403,
                "NO_SUCH_REMOTE" | "NO_BRANCH" => 404,
                "PUSH_FAILED" => 502,
                "GIT_FAILED" => 500,
                _ => 409,
            },
            HubError::DockerUnavailable { .. } => 503,
            HubError::AgentStartFailed { .. } | HubError::Docker { .. } => 500,
            HubError::BadRequest { .. }
            | HubError::InvalidCwd { .. }
            | HubError::InvalidProgram { .. } => 400,
            HubError::PayloadTooLarge { .. } => 413,
            HubError::MethodNotAllowed => 405,
            HubError::Timeout { .. } | HubError::TaskTimedOut { .. } => 504,
            HubError::ProcessExited { .. } => 409,
            HubError::SpawnFailed { .. }
            | HubError::WriteFailed { .. }
            | HubError::ReadFailed { .. }
            | HubError::Internal { .. } => 500,
        }
    }

    /// Shorthand for a [`HubError::BadRequest`].
    pub fn bad_request(message: impl Into<String>) -> Self {
        HubError::BadRequest {
            message: message.into(),
        }
    }
}

/// Result of a hub operation.
pub type HubResult<T> = Result<T, HubError>;

/// An exit code in words: `exit code 3`, or `no exit code` when the program ended without one
/// (killed by a signal, or never seen to end).
pub fn exit_code_text(code: Option<i64>) -> String {
    match code {
        Some(code) => format!("exit code {code}"),
        None => "no exit code".to_string(),
    }
}
