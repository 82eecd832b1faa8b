//! One `#[utoipa::path]` declaration per operation of the router (WebSocket routes as GET
//! operations answering 101). The functions only carry the declarations: nothing calls them.

#![allow(dead_code)]

use crate::backend::external::bridge::{
    BufferRequest, ReadReply as BridgeReadReply, ReadRequest, TalkRequest as BridgeTalkRequest,
    WriteRequest,
};
use crate::external_sessions::RegisterRequest;
use crate::owner_routing::RouteKeys;
use crate::protocol::*;
use crate::screen::TermReadRequest;

/// The headers of a WebSocket handshake (RFC 6455) as the hub checks them: a request without
/// them is refused (400) before anything else happens. A browser's `WebSocket` and any
/// WebSocket client library send them.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Header)]
pub(super) struct WebSocketHandshake {
    /// Holds the token `upgrade` (any case), e.g. `Upgrade` or `keep-alive, Upgrade`.
    #[param(rename = "Connection", pattern = "[Uu][Pp][Gg][Rr][Aa][Dd][Ee]")]
    connection: String,
    /// `websocket` (any case).
    #[param(rename = "Upgrade", pattern = "^[Ww][Ee][Bb][Ss][Oo][Cc][Kk][Ee][Tt]$")]
    upgrade: String,
    /// `13`.
    #[param(rename = "Sec-WebSocket-Version", pattern = "^13$")]
    version: String,
    /// The client's nonce: 16 random bytes, base64 (the hub answers with its digest).
    #[param(rename = "Sec-WebSocket-Key")]
    key: String,
}

#[utoipa::path(
    get,
    path = "/health",
    operation_id = "health",
    security(()),
    summary = "Liveness, version and counts (no token needed).",
    responses((status = 200, body = HealthReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn health() {}

#[utoipa::path(
    get,
    path = "/openapi.json",
    operation_id = "openapi",
    summary = "This document.",
    responses((status = 200, body = Object), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn openapi() {}

#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    summary = "Prometheus metrics in the OpenMetrics text format (observer).",
    responses(
        (status = 200, body = String, content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8"),
        (status = "default", body = ErrorBody, description = "Failed")
    )
)]
pub(super) fn metrics() {}

#[utoipa::path(
    get,
    path = "/",
    operation_id = "dashboard_index",
    security(()),
    summary = "The web dashboard's page (no token: static, no data; it signs in itself).",
    responses((status = 200, body = String, content_type = "text/html; charset=utf-8"))
)]
pub(super) fn dashboard_index() {}

#[utoipa::path(
    get,
    path = "/web/{path}",
    operation_id = "dashboard_asset",
    security(()),
    summary = "A file of the web dashboard (scripts, styles, vendored xterm.js); no token.",
    params(("path" = String, Path, description = "The file, e.g. app.js")),
    responses(
        (status = 200, description = "The file", content(
            (String = "text/javascript; charset=utf-8"),
            (String = "text/css; charset=utf-8"),
            (String = "image/svg+xml"),
            (String = "image/png"),
            (String = "application/manifest+json")
        )),
        (status = "default", body = ErrorBody, description = "Failed (NOT_FOUND: no such file)")
    )
)]
pub(super) fn dashboard_asset() {}

#[utoipa::path(
    get,
    path = "/favicon.ico",
    operation_id = "dashboard_favicon",
    security(()),
    summary = "The dashboard's icon; no token.",
    responses((status = 200, body = String, content_type = "image/svg+xml"))
)]
pub(super) fn dashboard_favicon() {}

#[utoipa::path(
    get,
    path = "/sw.js",
    operation_id = "dashboard_service_worker",
    security(()),
    summary = "The dashboard's service worker (it caches the page's files, never API data); no token.",
    responses((status = 200, body = String, content_type = "text/javascript; charset=utf-8"))
)]
pub(super) fn dashboard_service_worker() {}

#[utoipa::path(
    get,
    path = "/v1/whoami",
    operation_id = "whoami",
    summary = "The caller's token name and role, and whether the hub asks for tokens.",
    responses(
        (status = 200, body = WhoamiReply),
        (status = "default", body = ErrorBody, description = "Failed")
    )
)]
pub(super) fn whoami() {}

#[utoipa::path(
    post,
    path = "/v1/auth/signin",
    operation_id = "signin",
    security(()),
    summary = "Exchange a sign-in link's one-time code for the owner's token; no token. A code works once, for 15 minutes.",
    request_body = SigninRequest,
    responses(
        (status = 200, body = SigninReply),
        (status = "default", body = ErrorBody, description = "Failed (UNAUTHORIZED: unknown, used or expired code)")
    )
)]
pub(super) fn signin() {}

#[utoipa::path(
    post,
    path = "/v1/auth/signin-link",
    operation_id = "signin_link",
    summary = "A new one-time sign-in code for the dashboard (admin).",
    responses(
        (status = 200, body = SigninLinkReply),
        (status = "default", body = ErrorBody, description = "Failed")
    )
)]
pub(super) fn signin_link() {}

#[utoipa::path(
    post,
    path = "/v1/auth/rotate",
    operation_id = "rotate_owner_token",
    summary = "Replace the owner's admin token in the data dir (admin); the old one is refused at once.",
    responses(
        (status = 200, body = RotateReply),
        (status = "default", body = ErrorBody, description = "Failed")
    )
)]
pub(super) fn rotate_owner_token() {}

#[utoipa::path(
    get,
    path = "/v1/pty/sessions",
    operation_id = "list_sessions",
    summary = "List sessions.",
    responses((status = 200, body = SessionListReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn list_sessions() {}

#[utoipa::path(
    post,
    path = "/v1/pty/sessions",
    operation_id = "create_session",
    summary = "Start a session (host PTY or tmux).",
    request_body = CreateSessionRequest,
    responses(
        (status = 200, body = SessionCreatedReply),
        (status = 400, body = ErrorBody, description = "Refused, nothing started: INVALID_CWD (`cwd` is empty, does not exist, is not a directory or cannot be entered), INVALID_PROGRAM (`shell` is not found on the session's PATH, is a directory or is not executable), BAD_REQUEST (any other field)"),
        (status = "default", body = ErrorBody, description = "Failed (PTY_SPAWN_FAILED: the hub could not start what it was given)")
    )
)]
pub(super) fn create_session() {}

#[utoipa::path(
    get,
    path = "/v1/pty/sessions/{id}",
    operation_id = "get_session",
    summary = "One session.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    responses((status = 200, body = SessionReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn get_session() {}

#[utoipa::path(
    delete,
    path = "/v1/pty/sessions/{id}",
    operation_id = "kill_session",
    summary = "Kill a session: hang-up, then SIGKILL after a grace period.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    responses((status = 200, body = KillReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn kill_session() {}

#[utoipa::path(
    post,
    path = "/v1/pty/sessions/{id}/send_line",
    operation_id = "send_line",
    summary = "Type a line and press Enter (with submit: deliver a prompt, with a receipt).",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    request_body = SendLineRequest,
    responses((status = 200, body = WriteReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn send_line() {}

#[utoipa::path(
    post,
    path = "/v1/pty/sessions/{id}/keys",
    operation_id = "send_keys",
    summary = "Press named keys (with receipt: and wait for the screen to answer).",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    request_body = KeysRequest,
    responses((status = 200, body = WriteReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn send_keys() {}

#[utoipa::path(
    post,
    path = "/v1/pty/sessions/{id}/signal",
    operation_id = "signal",
    summary = "Send a signal.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    request_body = SignalRequest,
    responses((status = 200, body = SignalReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn signal() {}

#[utoipa::path(
    get,
    path = "/v1/pty/sessions/{id}/read",
    operation_id = "read",
    summary = "Raw output from an offset (long-polls with since).",
    params(("id" = String, Path, description = "Session, agent, task or record id"), ReadQuery),
    responses((status = 200, body = ReadReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn read() {}

#[utoipa::path(
    post,
    path = "/v1/pty/sessions/{id}/talk",
    operation_id = "talk",
    summary = "Run a shell command and wait for its exit code.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    request_body = TalkRequest,
    responses(
        (status = 200, body = TalkReply),
        (status = 504, body = ErrorBody, description = "PTY_TIMEOUT: the command did not end within `timeout_ms`; `output` holds what it printed so far"),
        (status = "default", body = ErrorBody, description = "Failed")
    )
)]
pub(super) fn talk() {}

#[utoipa::path(
    post,
    path = "/v1/pty/sessions/{id}/resize",
    operation_id = "resize",
    summary = "Resize the terminal.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    request_body = ResizeRequest,
    responses((status = 200, body = ResizeReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn resize() {}

#[utoipa::path(
    post,
    path = "/v1/pty/sessions/{id}/term_read",
    operation_id = "term_read",
    summary = "The rendered screen: tail, viewport, or delta since a marker.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    request_body = TermReadRequest,
    responses((status = 200, body = TermReadReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn term_read() {}

#[utoipa::path(
    get,
    path = "/v1/pty/sessions/{id}/stream",
    operation_id = "stream",
    summary = "WebSocket: live output (binary frames) and ServerFrame/ClientFrame text frames.",
    params(("id" = String, Path, description = "Session, agent, task or record id"), StreamQuery, WebSocketHandshake),
    responses(
        (status = 101, description = "WebSocket upgrade (subprotocol `agent-hub`); then frames, no HTTP body"),
        (status = "default", body = ErrorBody, description = "Refused (BAD_REQUEST: not a WebSocket handshake)")
    )
)]
pub(super) fn stream() {}

#[utoipa::path(
    get,
    path = "/v1/pty/sessions/{id}/state",
    operation_id = "session_state",
    summary = "The agent state of a session (?explain=true adds the rule).",
    params(("id" = String, Path, description = "Session, agent, task or record id"), ("query" = Option<StateQuery>, Query, style = Form, explode, description = "The query parameters (`explain`, `wait`, `timeout_ms`; `timeout_ms` only with `wait`)")),
    responses((status = 200, body = SessionStateReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn session_state() {}

#[utoipa::path(
    post,
    path = "/v1/pty/sessions/{id}/hook",
    operation_id = "session_hook",
    summary = "An event from the agent's own hook (`agent-hub hook EVENT [DETAIL]`): the state its profile gives it, at once; the screen stays the cross-check.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    request_body = HookRequest,
    responses((status = 200, body = HookReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn session_hook() {}

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/hook",
    operation_id = "agent_hook",
    summary = "An event from a running container agent's own hook, as for a session.",
    params(("id" = String, Path, description = "Agent id")),
    request_body = HookRequest,
    responses((status = 200, body = HookReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn agent_hook() {}

#[utoipa::path(
    get,
    path = "/v1/agents/{id}/state",
    operation_id = "agent_state",
    summary = "The agent state of a container agent.",
    params(("id" = String, Path, description = "Session, agent, task or record id"), ("query" = Option<StateQuery>, Query, style = Form, explode, description = "The query parameters (`explain`, `wait`, `timeout_ms`; `timeout_ms` only with `wait`)")),
    responses((status = 200, body = AgentStateReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn agent_state() {}

#[utoipa::path(
    get,
    path = "/v1/policies",
    operation_id = "list_policies",
    summary = "Loaded policies and profiles.",
    responses((status = 200, body = PolicyListReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn list_policies() {}

#[utoipa::path(
    get,
    path = "/v1/policies/check",
    operation_id = "check_policies",
    summary = "Dry run: what each policy would do now, and why.",
    params(CheckQuery),
    responses((status = 200, body = PolicyCheckReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn check_policies() {}

#[utoipa::path(
    post,
    path = "/v1/policies/reload",
    operation_id = "reload_policies",
    summary = "Reload policies and profiles from disk.",
    responses((status = 200, body = PolicyReloadReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn reload_policies() {}

#[utoipa::path(
    post,
    path = "/v1/pty/resolve",
    operation_id = "resolve",
    summary = "The one live session an agent id, owner session id or label names.",
    request_body = RouteKeys,
    responses((status = 200, body = ResolveReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn resolve() {}

#[utoipa::path(
    post,
    path = "/v1/pty/send_line_to_agent",
    operation_id = "send_line_to_agent",
    summary = "Deliver a prompt to the one session the keys name.",
    request_body = SendToAgentRequest,
    responses((status = 200, body = SendToAgentReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn send_line_to_agent() {}

#[utoipa::path(
    post,
    path = "/v1/pty/update-ownership",
    operation_id = "update_ownership",
    summary = "Set a session's owner identity.",
    request_body = UpdateOwnershipRequest,
    responses((status = 200, body = SessionReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn update_ownership() {}

#[utoipa::path(
    post,
    path = "/v1/pty/register",
    operation_id = "register",
    summary = "Register a terminal owned by another process (through its bridge).",
    request_body = RegisterRequest,
    responses((status = 200, body = RegisterReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn register() {}

#[utoipa::path(
    delete,
    path = "/v1/pty/unregister/{id}",
    operation_id = "unregister",
    summary = "Remove a registered external session.",
    params(("id" = String, Path, description = "Session, agent, task or record id"), ForceQuery),
    responses((status = 200, body = UnregisterReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn unregister() {}

#[utoipa::path(
    post,
    path = "/v1/pty/heartbeat",
    operation_id = "heartbeat_many",
    summary = "Heartbeats for the sessions named, or an owner's.",
    request_body = HeartbeatRequest,
    responses((status = 200, body = HeartbeatManyReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn heartbeat_many() {}

#[utoipa::path(
    post,
    path = "/v1/pty/heartbeat/{id}",
    operation_id = "heartbeat_one",
    summary = "Heartbeat for one session.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    responses((status = 200, body = HeartbeatReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn heartbeat_one() {}

#[utoipa::path(
    delete,
    path = "/v1/pty/reset",
    operation_id = "reset",
    summary = "Unregister every external session and forget exited ones.",
    responses((status = 200, body = ResetReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn reset() {}

#[utoipa::path(
    post,
    path = "/pty/write",
    operation_id = "bridge_write",
    summary = "Bridge API: write bytes to one of this hub's sessions.",
    request_body = WriteRequest,
    responses((status = 200, body = WriteReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn bridge_write() {}

#[utoipa::path(
    post,
    path = "/pty/read",
    operation_id = "bridge_read",
    summary = "Bridge API: read output from an offset.",
    request_body = ReadRequest,
    responses((status = 200, body = BridgeReadReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn bridge_read() {}

#[utoipa::path(
    post,
    path = "/pty/talk",
    operation_id = "bridge_talk",
    summary = "Bridge API: talk.",
    request_body = BridgeTalkRequest,
    responses(
        (status = 200, body = TalkReply),
        (status = 504, body = ErrorBody, description = "PTY_TIMEOUT: the command did not end within `timeout_ms`; `output` holds what it printed so far"),
        (status = "default", body = ErrorBody, description = "Failed")
    )
)]
pub(super) fn bridge_talk() {}

#[utoipa::path(
    post,
    path = "/pty/buffer",
    operation_id = "bridge_buffer",
    summary = "Bridge API: a rendered read.",
    request_body = BufferRequest,
    responses((status = 200, body = TermReadReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn bridge_buffer() {}

#[utoipa::path(
    get,
    path = "/pty/list",
    operation_id = "bridge_list",
    summary = "Bridge API: the sessions this hub lends.",
    responses((status = 200, body = BridgeListReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn bridge_list() {}

#[utoipa::path(
    get,
    path = "/v1/agents",
    operation_id = "list_agents",
    summary = "Container agents and their status.",
    responses((status = 200, body = AgentListReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn list_agents() {}

#[utoipa::path(
    get,
    path = "/v1/agents/{id}",
    operation_id = "get_agent",
    summary = "One container agent.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    responses((status = 200, body = AgentReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn get_agent() {}

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/start",
    operation_id = "start_agent",
    summary = "Start a container agent and wait until it is ready (resuming its conversation unless `fresh`).",
    params(("id" = String, Path, description = "Session, agent, task or record id"), StartQuery),
    responses((status = 200, body = AgentStartReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn start_agent() {}

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/stop",
    operation_id = "stop_agent",
    summary = "Stop a container agent.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    responses((status = 200, body = AgentReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn stop_agent() {}

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/restart",
    operation_id = "restart_agent",
    summary = "Restart a container agent (resuming its conversation unless `fresh`).",
    params(("id" = String, Path, description = "Session, agent, task or record id"), StartQuery),
    responses((status = 200, body = AgentStartReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn restart_agent() {}

#[utoipa::path(
    get,
    path = "/v1/agents/{id}/changes",
    operation_id = "agent_changes",
    summary = "What the agent changed in its workspace against its base: committed and uncommitted files apart, the full diffs with `full`.",
    params(("id" = String, Path, description = "Session, agent, task or record id"), ChangesQuery),
    responses((status = 200, body = AgentChangesReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn agent_changes() {}

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/review",
    operation_id = "review_agent",
    summary = "Send review notes to the agent as one prompt: each note with its file, its line and the hunk of the agent's diff (committed, else uncommitted) that holds that line. Delivered like send_line_to_agent (guard, audit as agent_review, receipt); queued while the agent is working and typed once it is idle (receipt `queued`). A file the branch did not change is allowed (the prompt says so). Errors: BAD_REQUEST (no notes, more than 50, a blank note, a line without file), NO_WORKSPACE.",
    params(("id" = String, Path, description = "Agent id")),
    request_body = ReviewRequest,
    responses((status = 200, body = ReviewReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn review_agent() {}

#[utoipa::path(
    get,
    path = "/v1/agents/{id}/work",
    operation_id = "agent_work",
    summary = "The agent's work summary computed now: commits ahead of and behind its base, files changed, whether its branch merges cleanly (and the conflicting files). Kept, so `GET /v1/agents` shows it from then on; `work_changed` is published when it changed.",
    params(("id" = String, Path, description = "Agent id")),
    responses((status = 200, body = AgentWorkReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn agent_work() {}

#[utoipa::path(
    get,
    path = "/v1/agents/{id}/git/info/refs",
    operation_id = "git_info_refs",
    summary = "git smart HTTP: the refs of the agent's workspace in view (its branch and its base). The agent's own credential (fetch and push), or a person's token (fetch); another agent's is refused with WORKSPACE_NOT_YOURS (audited).",
    params(("id" = String, Path, description = "Agent id"), ("service" = GitService, Query, description = "Which of git's services")),
    responses(
        (status = 200, body = Vec<u8>, content_type = "application/x-git-upload-pack-advertisement"),
        (status = "default", body = ErrorBody, description = "Failed")
    )
)]
pub(super) fn git_info_refs() {}

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/git/git-upload-pack",
    operation_id = "git_upload_pack",
    summary = "git smart HTTP: a fetch or clone of the agent's workspace (its branch and base only).",
    params(("id" = String, Path, description = "Agent id")),
    request_body(content = Vec<u8>, content_type = "application/x-git-upload-pack-request"),
    responses(
        (status = 200, body = Vec<u8>, content_type = "application/x-git-upload-pack-result"),
        (status = "default", body = ErrorBody, description = "Failed")
    )
)]
pub(super) fn git_upload_pack() {}

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/git/git-receive-pack",
    operation_id = "git_receive_pack",
    summary = "git smart HTTP: a push to the agent's branch, with its own credential only. A push of another ref or a deletion is refused in git's report (`[remote rejected]`), a force push by git; each push and each refusal is audited (`git_push`).",
    params(("id" = String, Path, description = "Agent id")),
    request_body(content = Vec<u8>, content_type = "application/x-git-receive-pack-request"),
    responses(
        (status = 200, body = Vec<u8>, content_type = "application/x-git-receive-pack-result"),
        (status = "default", body = ErrorBody, description = "Failed")
    )
)]
pub(super) fn git_receive_pack() {}

#[utoipa::path(
    get,
    path = "/v1/agents/{id}/usage",
    operation_id = "agent_usage",
    summary = "What the agent's model calls used (tokens by kind and model) and cost, read from its CLI's own records, for a period (all time by default); `usage` is null, with a `reason`, when the hub cannot read its CLI's records.",
    params(("id" = String, Path, description = "Agent id (a removed agent's figures stay), or a host session's id"), UsageQuery),
    responses((status = 200, body = AgentUsageReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn agent_usage() {}

#[utoipa::path(
    get,
    path = "/v1/usage",
    operation_id = "usage",
    summary = "What every agent the caller may see spent in a period, with each team's and the fleet's totals; `team` picks one team.",
    params(FleetUsageQuery),
    responses((status = 200, body = UsageReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn usage() {}

#[utoipa::path(
    get,
    path = "/v1/notify",
    operation_id = "notify_status",
    summary = "The outgoing webhooks (`[[notify]]`) and what became of their messages: sent, tries failed, given up (with the last dead letters), dropped. URLs and header values are secrets and never shown.",
    responses((status = 200, body = NotifyReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn notify_status() {}

#[utoipa::path(
    post,
    path = "/v1/notify/test",
    operation_id = "notify_test",
    summary = "Send a test message to every webhook at once (one try each) and report each one's answer (admin; audited). `NO_WEBHOOKS` when hub.toml has none.",
    responses((status = 200, body = NotifyTestReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn notify_test() {}

#[utoipa::path(
    get,
    path = "/answer/{session}/{token}",
    operation_id = "answer_link",
    security(()),
    summary = "What an answer link of a webhook message (`notify_actions = true`) would answer; no token, the link's signed token is the credential. A browser (`Accept: text/html`) gets a page with a button that POSTs; nothing is answered by a GET. Refused with ANSWER_LINK_INVALID (403: altered, another session's, or from before a restart), ANSWER_LINK_EXPIRED (410: older than 15 minutes), ANSWER_LINK_USED (410) or QUESTION_GONE (409: the question is no longer on the screen).",
    params(
        ("session" = String, Path, description = "The session asked"),
        ("token" = String, Path, description = "The link's signed token")
    ),
    responses(
        (status = 200, description = "What the link answers", content(
            (AnswerLinkView = "application/json"),
            (String = "text/html; charset=utf-8")
        )),
        (status = "default", body = ErrorBody, description = "Refused")
    )
)]
pub(super) fn answer_link_page() {}

#[utoipa::path(
    post,
    path = "/answer/{session}/{token}",
    operation_id = "answer",
    security(()),
    summary = "Answer the question with the link's choice, once (audited as `answer_link`); no token, the link's signed token is the credential. The keys go to the session like any other (guard, traffic log, receipt). Refused as `GET` says; a refused answer sends nothing.",
    params(
        ("session" = String, Path, description = "The session asked"),
        ("token" = String, Path, description = "The link's signed token")
    ),
    responses(
        (status = 200, description = "Answered", content(
            (AnswerReply = "application/json"),
            (String = "text/html; charset=utf-8")
        )),
        (status = "default", body = ErrorBody, description = "Refused")
    )
)]
pub(super) fn answer() {}

#[utoipa::path(
    get,
    path = "/v1/budgets",
    operation_id = "budgets",
    summary = "Every budget in force the caller may see (each agent's policy's, each team's from hub.toml, or one set at run time), with what was spent in its period, when it renews, and whether it refuses deliveries now.",
    responses((status = 200, body = BudgetsReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn budgets() {}

#[utoipa::path(
    get,
    path = "/v1/agents/{id}/budget",
    operation_id = "agent_budget",
    summary = "The agent's own budget in force and where it stands (`budget` is null when it has none).",
    params(("id" = String, Path, description = "Agent id")),
    responses((status = 200, body = BudgetReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn agent_budget() {}

#[utoipa::path(
    put,
    path = "/v1/agents/{id}/budget",
    operation_id = "set_agent_budget",
    summary = "Set the agent's budget at run time, in place of its policy's, until reset (admin; audited). Its 80 % and 100 % events are sent afresh.",
    params(("id" = String, Path, description = "Agent id")),
    request_body = Budget,
    responses((status = 200, body = BudgetReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn set_agent_budget() {}

#[utoipa::path(
    delete,
    path = "/v1/agents/{id}/budget",
    operation_id = "reset_agent_budget",
    summary = "Drop the run-time changes to the agent's budget (a set budget, a lift): its policy's budget is in force again (admin; audited).",
    params(("id" = String, Path, description = "Agent id")),
    responses((status = 200, body = BudgetReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn reset_agent_budget() {}

#[utoipa::path(
    post,
    path = "/v1/agents/{id}/budget/lift",
    operation_id = "lift_agent_budget",
    summary = "Lift the agent's exhausted budget until it renews (a `total` budget: until reset): nothing is refused meanwhile (admin; audited). `NO_BUDGET` when it has none.",
    params(("id" = String, Path, description = "Agent id")),
    responses((status = 200, body = BudgetReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn lift_agent_budget() {}

#[utoipa::path(
    get,
    path = "/v1/teams/{team}/budget",
    operation_id = "team_budget",
    summary = "The team's budget in force (all its agents' spending together) and where it stands.",
    params(("team" = String, Path, description = "Team name")),
    responses((status = 200, body = BudgetReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn team_budget() {}

#[utoipa::path(
    put,
    path = "/v1/teams/{team}/budget",
    operation_id = "set_team_budget",
    summary = "Set the team's budget at run time, in place of hub.toml's, until reset (admin; audited).",
    params(("team" = String, Path, description = "Team name")),
    request_body = Budget,
    responses((status = 200, body = BudgetReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn set_team_budget() {}

#[utoipa::path(
    delete,
    path = "/v1/teams/{team}/budget",
    operation_id = "reset_team_budget",
    summary = "Drop the run-time changes to the team's budget (admin; audited).",
    params(("team" = String, Path, description = "Team name")),
    responses((status = 200, body = BudgetReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn reset_team_budget() {}

#[utoipa::path(
    post,
    path = "/v1/teams/{team}/budget/lift",
    operation_id = "lift_team_budget",
    summary = "Lift the team's exhausted budget until it renews (admin; audited).",
    params(("team" = String, Path, description = "Team name")),
    responses((status = 200, body = BudgetReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn lift_team_budget() {}

#[utoipa::path(
    delete,
    path = "/v1/agents/{id}/workspace",
    operation_id = "remove_workspace",
    summary = "Delete the agent's checkout and keep its branch (refused while it runs, or with uncommitted changes unless `force`).",
    params(("id" = String, Path, description = "Session, agent, task or record id"), WorkspaceRemoveQuery),
    responses((status = 200, body = WorkspaceRemoveReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn remove_workspace() {}

#[utoipa::path(
    get,
    path = "/v1/tasks",
    operation_id = "list_tasks",
    summary = "Tasks.",
    responses((status = 200, body = TaskListReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn list_tasks() {}

#[utoipa::path(
    post,
    path = "/v1/tasks",
    operation_id = "create_task",
    summary = "Run a command as a task (in a PTY, or piped and answered when it ends).",
    request_body = CreateTask,
    responses(
        (status = 200, body = TaskCreatedReply),
        (status = 400, body = ErrorBody, description = "Refused, nothing started: INVALID_CWD (`cwd` is empty, does not exist, is not a directory or cannot be entered), INVALID_PROGRAM (`sh` is not found on the PATH `env` gives), BAD_REQUEST (any other field)"),
        (status = "default", body = ErrorBody, description = "Failed (PTY_SPAWN_FAILED: the hub could not start what it was given)")
    )
)]
pub(super) fn create_task() {}

#[utoipa::path(
    get,
    path = "/v1/tasks/{id}",
    operation_id = "get_task",
    summary = "One task.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    responses((status = 200, body = TaskReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn get_task() {}

#[utoipa::path(
    delete,
    path = "/v1/tasks/{id}",
    operation_id = "cancel_task",
    summary = "Cancel a task (kills all its processes).",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    responses((status = 200, body = TaskReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn cancel_task() {}

#[utoipa::path(
    post,
    path = "/v1/tasks/{id}/wait",
    operation_id = "wait_task",
    summary = "Wait for a task to end.",
    params(WaitQuery, ("id" = String, Path, description = "Session, agent, task or record id")),
    responses((status = 200, body = TaskWaitReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn wait_task() {}

#[utoipa::path(
    get,
    path = "/v1/events",
    operation_id = "events",
    summary = "WebSocket: the hub's event stream, one `HubEvent` (see components) a text frame.",
    params(WebSocketHandshake),
    responses(
        (status = 101, description = "WebSocket upgrade (subprotocol `agent-hub`); then text frames, no HTTP body"),
        (status = "default", body = ErrorBody, description = "Refused (BAD_REQUEST: not a WebSocket handshake)")
    )
)]
pub(super) fn events() {}

#[utoipa::path(
    get,
    path = "/v1/previews",
    operation_id = "previews",
    summary = "WebSocket: the last lines of every visible session's screen, one `PreviewFrame` (see components) a text frame, at most every 250 ms and only for sessions whose output moved.",
    params(PreviewsQuery, WebSocketHandshake),
    responses(
        (status = 101, description = "WebSocket upgrade (subprotocol `agent-hub`); then text frames, no HTTP body"),
        (status = "default", body = ErrorBody, description = "Refused (BAD_REQUEST: not a WebSocket handshake, or `lines` out of range; TERM_BUFFER_ACCESS_DISABLED)")
    )
)]
pub(super) fn previews() {}

#[utoipa::path(
    get,
    path = "/v1/pty-traffic/events",
    operation_id = "traffic_events",
    summary = "A page of audit records (filters and pagination).",
    params(TrafficFilter),
    responses((status = 200, body = AuditPageReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn traffic_events() {}

#[utoipa::path(
    get,
    path = "/v1/pty-traffic/events/{id}",
    operation_id = "traffic_event",
    summary = "One audit record.",
    params(("id" = i64, Path, description = "The record's id")),
    responses((status = 200, body = AuditEventReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn traffic_event() {}

#[utoipa::path(
    get,
    path = "/v1/pty-traffic/sessions",
    operation_id = "traffic_sessions",
    summary = "Per-session audit aggregates.",
    responses((status = 200, body = AuditSessionsReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn traffic_sessions() {}

#[utoipa::path(
    get,
    path = "/v1/pty-traffic/sessions/{id}",
    operation_id = "traffic_session",
    summary = "One session's audit aggregate.",
    params(("id" = String, Path, description = "Session, agent, task or record id")),
    responses((status = 200, body = AuditSessionReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn traffic_session() {}

#[utoipa::path(
    get,
    path = "/v1/pty-traffic/stats",
    operation_id = "traffic_stats",
    summary = "Audit log statistics.",
    responses((status = 200, body = ObjectReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn traffic_stats() {}

#[utoipa::path(
    get,
    path = "/v1/pty-traffic/blocked",
    operation_id = "traffic_blocked",
    summary = "Inputs the guard refused.",
    params(TrafficFilter),
    responses((status = 200, body = AuditPageReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn traffic_blocked() {}

#[utoipa::path(
    get,
    path = "/v1/pty-traffic/health",
    operation_id = "traffic_health",
    summary = "The audit store's health.",
    responses((status = 200, body = ObjectReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn traffic_health() {}

#[utoipa::path(
    post,
    path = "/v1/pty-traffic/storage/cleanup",
    operation_id = "traffic_cleanup",
    summary = "Prune old audit records (admin).",
    responses((status = 200, body = CleanupReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn traffic_cleanup() {}

#[utoipa::path(
    get,
    path = "/v1/pty-traffic/stream",
    operation_id = "traffic_stream",
    summary = "WebSocket: audit records as they are written.",
    params(WebSocketHandshake),
    responses(
        (status = 101, description = "WebSocket upgrade (subprotocol `agent-hub`); then text frames, no HTTP body"),
        (status = "default", body = ErrorBody, description = "Refused (BAD_REQUEST: not a WebSocket handshake)")
    )
)]
pub(super) fn traffic_stream() {}

#[utoipa::path(
    get,
    path = "/v1/engines",
    operation_id = "engines",
    summary = "Each Docker engine the agents' definitions name, as Docker describes it: reachable or why not, its version, CPUs, memory (total, and left: less what each running container uses or its limit reserves), running containers, the agents defined on it and this hub's containers there with their memory and CPU. Every engine is asked at once; one that does not answer within 8 s is listed unreachable.",
    responses((status = 200, body = EnginesReply), (status = "default", body = ErrorBody, description = "Failed"))
)]
pub(super) fn engines() {}

/// git's smart HTTP services (`?service=` of `info/refs`).
#[derive(serde::Serialize, utoipa::ToSchema)]
#[allow(dead_code)]
pub(super) enum GitService {
    #[serde(rename = "git-upload-pack")]
    UploadPack,
    #[serde(rename = "git-receive-pack")]
    ReceivePack,
}
