//! Agent state and policy endpoints: `GET /v1/pty/sessions/{id}/state`,
//! `GET /v1/agents/{id}/state` (`?explain=true` adds the rule and the matched lines),
//! `GET /v1/policies`, `GET /v1/policies/check` and `POST /v1/policies/reload`.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::Json;

use super::error::{ApiJson, ApiQuery, ApiResult};
use crate::agent_state::question;
use crate::agent_state::wait::Wanted;
use crate::agent_state::{State as AgentState, StateReport};
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::{
    hook_name_ok, AgentStateReply, CheckQuery, EventKind, HookReply, HookRequest, HubEvent,
    PolicyCheckReply, PolicyEntry, PolicyListReply, PolicyReloadReply, SessionStateReply,
    StateQuery, StateView, MCP_READY_EVENT,
};
use crate::session::Session;

/// Default and largest `timeout_ms` of a state wait.
const WAIT_DEFAULT_TIMEOUT_MS: u64 = 30_000;
pub(super) const WAIT_MAX_TIMEOUT_MS: u64 = 600_000;

/// The wait a state query asks for, checked: what to wait for and for how long.
fn wait_of(q: &StateQuery) -> Result<Option<(Wanted, Duration)>, HubError> {
    let Some(list) = &q.wait else {
        if q.timeout_ms.is_some() {
            return Err(HubError::bad_request(
                "timeout_ms needs wait=STATE[,STATE...]",
            ));
        }
        return Ok(None);
    };
    let wanted = Wanted::parse(list).map_err(|e| HubError::bad_request(e.to_string()))?;
    let timeout_ms = q.timeout_ms.unwrap_or(WAIT_DEFAULT_TIMEOUT_MS);
    if timeout_ms > WAIT_MAX_TIMEOUT_MS {
        return Err(HubError::bad_request(format!(
            "timeout_ms must be 0-{WAIT_MAX_TIMEOUT_MS}"
        )));
    }
    Ok(Some((wanted, Duration::from_millis(timeout_ms))))
}

/// A session's state; with `explain`, the rule, its evidence and the profile: which one, why
/// (the session's `cli_type`), and the CLI versions it was checked against. A blocked agent's
/// question and its choices always come along.
pub(super) fn state_view(
    hub: &Hub,
    session: &Session,
    report: StateReport,
    explain: bool,
) -> StateView {
    let profile_reason = explain.then(|| {
        let cli_type = session.owner().cli_type;
        let profiles = &hub.policy().loaded().profiles;
        profiles.resolve(cli_type.as_deref()).reason
    });
    let (question, choices) = match report.state {
        AgentState::Blocked => {
            let (q, c) = blocked_question(hub, session, &report.evidence).unwrap_or_default();
            (Some(q), Some(c))
        }
        _ => (None, None),
    };
    StateView {
        question,
        choices,
        state: report.state,
        since: Some(report.since),
        stuck: report.stuck,
        profile: Some(report.profile),
        last_activity_at: Some(report.last_activity_at),
        idle_for_ms: Some(report.idle_for_ms),
        until: report.until,
        rule: explain.then_some(report.rule),
        evidence: explain.then_some(report.evidence),
        source: explain.then_some(report.source),
        profile_reason,
        profile_checked_with: explain.then_some(report.profile_checked_with),
        reached: None,
    }
}

/// A blocked session's question and choices, read from its redacted screen (else from the
/// lines its rule matched, `evidence`).
pub(super) fn blocked_question(
    hub: &Hub,
    session: &Session,
    evidence: &[String],
) -> Option<(String, Vec<question::Choice>)> {
    let screen = session.with_screen(|s| s.text());
    question::asked_on(&screen, evidence, |l| hub.redactor().redact_str(l))
}

pub async fn session_state(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StateQuery>,
) -> ApiResult<Json<SessionStateReply>> {
    let session = hub.get(&id)?;
    let state = match wait_of(&q)? {
        None => state_view(&hub, &session, session.state_report(), q.explain),
        Some((wanted, timeout)) => {
            let (report, reached) = session.wait_state(&wanted, timeout).await;
            StateView {
                reached: Some(reached),
                ..state_view(&hub, &session, report, q.explain)
            }
        }
    };
    Ok(Json(SessionStateReply {
        ok: true,
        session_id: id,
        state,
    }))
}

pub async fn agent_state(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StateQuery>,
) -> ApiResult<Json<AgentStateReply>> {
    let wait = wait_of(&q)?;
    let mut info = hub.agents().info(&id)?;
    let mut reached = None;
    if let Some((wanted, timeout)) = &wait {
        let (last, r) = wait_agent_state(&hub, &id, wanted, *timeout).await?;
        info = last;
        reached = Some(r);
    }
    let session = live_session(&hub, &info);
    let state = match &session {
        Some(s) => state_view(&hub, s, s.state_report(), q.explain),
        None => StateView {
            state: AgentState::Exited,
            since: None,
            stuck: false,
            profile: None,
            last_activity_at: None,
            idle_for_ms: None,
            until: None,
            rule: q.explain.then(|| "agent:not_running".into()),
            evidence: q
                .explain
                .then(|| vec![format!("agent status: {}", info.status)]),
            source: q.explain.then(|| "agent:not_running".into()),
            profile_reason: None,
            profile_checked_with: None,
            reached: None,
            question: None,
            choices: None,
        },
    };
    let state = StateView { reached, ..state };
    Ok(Json(AgentStateReply {
        ok: true,
        agent_id: id,
        status: info.status,
        session_id: session.map(|s| s.id().to_string()),
        state,
    }))
}

/// The agent's session, if its program is running.
fn live_session(
    hub: &Hub,
    info: &crate::agents::AgentInfo,
) -> Option<std::sync::Arc<crate::session::Session>> {
    info.session_id
        .as_deref()
        .and_then(|s| hub.get(s).ok())
        .filter(|s| s.output().exit().is_none())
}

/// Checks a hook request: the event and detail are 1-64 of `A-Z a-z 0-9 _ . -`.
fn check_hook(req: &HookRequest) -> Result<(), HubError> {
    let names = std::iter::once(("event", req.event.as_str()))
        .chain(req.detail.as_deref().map(|d| ("detail", d)));
    for (what, name) in names {
        if !hook_name_ok(name) {
            return Err(HubError::bad_request(format!(
                "{what} must be 1-64 of A-Z a-z 0-9 _ . - (got {name:?})"
            )));
        }
    }
    Ok(())
}

/// The reply to a hook event on `session`: the state its profile gives the event, now adopted.
fn hook_reply(session: &Session, req: &HookRequest) -> HookReply {
    if req.event == MCP_READY_EVENT {
        session.note_mcp_ready();
        return HookReply {
            ok: true,
            session_id: session.id().to_string(),
            state: Some(session.state_report().state),
            source: Some("mcp:ready".into()),
        };
    }
    let noted = session.note_hook(&req.event, req.detail.as_deref());
    HookReply {
        ok: true,
        session_id: session.id().to_string(),
        state: noted.as_ref().map(|(_, state)| *state),
        source: noted.map(|(source, _)| source),
    }
}

/// `POST /v1/pty/sessions/{id}/hook`: an event from the session's agent's own hook.
pub async fn session_hook(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<HookRequest>,
) -> ApiResult<Json<HookReply>> {
    check_hook(&req)?;
    let session = hub.get(&id)?;
    Ok(Json(hook_reply(&session, &req)))
}

/// `POST /v1/agents/{id}/hook`: an event from a running container agent's own hook.
pub async fn agent_hook(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<HookRequest>,
) -> ApiResult<Json<HookReply>> {
    check_hook(&req)?;
    let info = hub.agents().info(&id)?;
    let session = live_session(&hub, &info).ok_or_else(|| HubError::AgentNotRunning {
        id: id.clone(),
        status: info.status.to_string(),
    })?;
    Ok(Json(hook_reply(&session, &req)))
}

/// Waits until a container agent's state is one of `wanted`: on its running session, and
/// while it is not running, on the event bus for its next start (a stopped agent is `exited`).
async fn wait_agent_state(
    hub: &Hub,
    id: &str,
    wanted: &Wanted,
    timeout: Duration,
) -> Result<(crate::agents::AgentInfo, bool), HubError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        // Subscribed before looking, so a start between the look and the wait is not missed.
        let mut events = hub.subscribe_events();
        let info = hub.agents().info(id)?;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match live_session(hub, &info) {
            Some(session) => {
                let (report, reached) = session.wait_state(wanted, left).await;
                if reached || left.is_zero() || report.state != crate::agent_state::State::Exited {
                    return Ok((hub.agents().info(id)?, reached));
                }
            }
            None if wanted.wants(crate::agent_state::State::Exited) => return Ok((info, true)),
            None if left.is_zero() => return Ok((info, false)),
            None => {
                let started = async {
                    loop {
                        match events.recv().await {
                            Ok(HubEvent {
                                kind: EventKind::AgentStarted(a),
                                ..
                            }) if a.agent_id == id => return,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                                std::future::pending::<()>().await
                            }
                            _ => {}
                        }
                    }
                };
                if tokio::time::timeout_at(deadline, started).await.is_err() {
                    return Ok((hub.agents().info(id)?, false));
                }
            }
        }
    }
}

pub async fn list_policies(State(hub): State<Hub>) -> Json<PolicyListReply> {
    let loaded = hub.policy().loaded();
    let sessions = hub.list();
    let policies = loaded
        .policies
        .values()
        .map(|p| {
            let agents = hub
                .agents()
                .defs()
                .filter(|d| d.policy.as_deref() == Some(p.name.as_str()))
                .map(|d| d.id.clone())
                .collect();
            let host_sessions = sessions
                .iter()
                .filter(|s| s.spec().agent_id.is_none())
                .filter(|s| s.spec().policy.as_deref() == Some(p.name.as_str()))
                .map(|s| s.id().to_string())
                .collect();
            PolicyEntry {
                name: p.name.clone(),
                settings: p.clone(),
                agents,
                sessions: host_sessions,
            }
        })
        .collect();
    Json(PolicyListReply {
        ok: true,
        dir: loaded.dir.clone(),
        policies,
        profiles: loaded.profiles.names(),
    })
}

pub async fn check(
    State(hub): State<Hub>,
    ApiQuery(q): ApiQuery<CheckQuery>,
) -> ApiResult<Json<PolicyCheckReply>> {
    if let Some(a) = &q.agent {
        let known = hub.agents().def(a).is_ok() || hub.get(a).is_ok();
        if !known {
            return Err(HubError::AgentNotFound { id: a.clone() }.into());
        }
    }
    let checks = hub.policy_runner().check(q.agent.as_deref());
    Ok(Json(PolicyCheckReply {
        ok: true,
        count: checks.len(),
        checks,
    }))
}

pub async fn reload(State(hub): State<Hub>) -> ApiResult<Json<PolicyReloadReply>> {
    let loaded = hub.policy_runner().reload()?;
    Ok(Json(PolicyReloadReply {
        ok: true,
        policies: loaded.policies.keys().cloned().collect(),
        profiles: loaded.profiles.names(),
    }))
}
