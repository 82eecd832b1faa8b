//! Agent state and policy endpoints: `GET /v1/pty/sessions/{id}/state`,
//! `GET /v1/agents/{id}/state` (`?explain=true` adds the rule and the matched lines),
//! `GET /v1/policies`, `GET /v1/policies/check` and `POST /v1/policies/reload`.

use axum::extract::{Path, State};
use axum::Json;

use super::error::{ApiQuery, ApiResult};
use crate::agent_state::State as AgentState;
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::{
    AgentStateReply, CheckQuery, PolicyCheckReply, PolicyEntry, PolicyListReply, PolicyReloadReply,
    SessionStateReply, StateQuery, StateView,
};
use crate::session::Session;

/// A session's state; with `explain`, the rule, its evidence and the profile: which one, why
/// (the session's `cli_type`), and the CLI versions it was checked against.
fn state_view(hub: &Hub, session: &Session, explain: bool) -> StateView {
    let report = session.state_report();
    let profile_reason = explain.then(|| {
        let cli_type = session.owner().cli_type;
        let profiles = &hub.policy().loaded().profiles;
        profiles.resolve(cli_type.as_deref()).reason
    });
    StateView {
        state: report.state,
        since: Some(report.since),
        stuck: report.stuck,
        profile: Some(report.profile),
        last_activity_at: Some(report.last_activity_at),
        idle_for_ms: Some(report.idle_for_ms),
        rule: explain.then_some(report.rule),
        evidence: explain.then_some(report.evidence),
        profile_reason,
        profile_checked_with: explain.then_some(report.profile_checked_with),
    }
}

pub async fn session_state(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StateQuery>,
) -> ApiResult<Json<SessionStateReply>> {
    let session = hub.get(&id)?;
    Ok(Json(SessionStateReply {
        ok: true,
        session_id: id,
        state: state_view(&hub, &session, q.explain),
    }))
}

pub async fn agent_state(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StateQuery>,
) -> ApiResult<Json<AgentStateReply>> {
    let info = crate::agents::info(&hub, &id)?;
    let session = info
        .session_id
        .as_deref()
        .and_then(|s| hub.get(s).ok())
        .filter(|s| s.output().exit().is_none());
    let state = match &session {
        Some(s) => state_view(&hub, s, q.explain),
        None => StateView {
            state: AgentState::Exited,
            since: None,
            stuck: false,
            profile: None,
            last_activity_at: None,
            idle_for_ms: None,
            rule: q.explain.then(|| "agent:not_running".into()),
            evidence: q
                .explain
                .then(|| vec![format!("agent status: {}", info.status)]),
            profile_reason: None,
            profile_checked_with: None,
        },
    };
    Ok(Json(AgentStateReply {
        ok: true,
        agent_id: id,
        status: info.status,
        session_id: session.map(|s| s.id().to_string()),
        state,
    }))
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
    let checks = crate::policy::runner::check(&hub, q.agent.as_deref());
    Ok(Json(PolicyCheckReply {
        ok: true,
        count: checks.len(),
        checks,
    }))
}

pub async fn reload(State(hub): State<Hub>) -> ApiResult<Json<PolicyReloadReply>> {
    let loaded = crate::policy::runner::reload(&hub)?;
    Ok(Json(PolicyReloadReply {
        ok: true,
        policies: loaded.policies.keys().cloned().collect(),
        profiles: loaded.profiles.names(),
    }))
}
