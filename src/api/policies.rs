//! Agent state and policy endpoints: `GET /v1/pty/sessions/{id}/state`,
//! `GET /v1/agents/{id}/state` (`?explain=true` adds the rule and the matched lines),
//! `GET /v1/policies`, `GET /v1/policies/check` and `POST /v1/policies/reload`.

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiQuery, ApiResult};
use crate::agent_state::{question, State as AgentState, StateReport};
use crate::error::HubError;
use crate::hub::Hub;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateQuery {
    #[serde(default)]
    explain: bool,
}

/// A state report as the API shows it; a blocked agent's question and choices always come along.
pub(super) fn state_json(report: StateReport, explain: bool) -> Value {
    let mut v = json!({
        "state": report.state,
        "since": report.since,
        "stuck": report.stuck,
        "profile": report.profile,
        "last_activity_at": report.last_activity_at,
        "idle_for_ms": report.idle_for_ms,
    });
    if report.state == AgentState::Blocked {
        v["question"] = json!(question::question(&report.evidence));
        v["choices"] = json!(question::choices(&report.evidence));
    }
    if explain {
        v["rule"] = json!(report.rule);
        v["evidence"] = json!(report.evidence);
    }
    v
}

pub async fn session_state(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StateQuery>,
) -> ApiResult<Json<Value>> {
    let report = hub.get(&id)?.state_report();
    let mut v = state_json(report, q.explain);
    v["ok"] = json!(true);
    v["session_id"] = json!(id);
    Ok(Json(v))
}

pub async fn agent_state(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StateQuery>,
) -> ApiResult<Json<Value>> {
    let info = crate::agents::info(&hub, &id)?;
    let session = info
        .session_id
        .as_deref()
        .and_then(|s| hub.get(s).ok())
        .filter(|s| s.output().exit().is_none());
    let mut v = match &session {
        Some(s) => state_json(s.state_report(), q.explain),
        None => {
            let mut v = json!({ "state": "exited", "since": null, "stuck": false });
            if q.explain {
                v["rule"] = json!("agent:not_running");
                v["evidence"] = json!([format!("agent status: {}", info.status)]);
            }
            v
        }
    };
    v["ok"] = json!(true);
    v["agent_id"] = json!(id);
    v["status"] = json!(info.status);
    v["session_id"] = json!(session.map(|s| s.id().to_string()));
    Ok(Json(v))
}

pub async fn list_policies(State(hub): State<Hub>) -> Json<Value> {
    let loaded = hub.policy().loaded();
    let sessions = hub.list();
    let policies: Vec<Value> = loaded
        .policies
        .values()
        .map(|p| {
            let agents: Vec<&str> = hub
                .agents()
                .defs()
                .filter(|d| d.policy.as_deref() == Some(p.name.as_str()))
                .map(|d| d.id.as_str())
                .collect();
            let host_sessions: Vec<&str> = sessions
                .iter()
                .filter(|s| s.spec().agent_id.is_none())
                .filter(|s| s.spec().policy.as_deref() == Some(p.name.as_str()))
                .map(|s| s.id())
                .collect();
            json!({ "name": p.name, "settings": p, "agents": agents, "sessions": host_sessions })
        })
        .collect();
    Json(json!({
        "ok": true,
        "dir": loaded.dir,
        "policies": policies,
        "profiles": loaded.profiles.names(),
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckQuery {
    agent: Option<String>,
}

pub async fn check(
    State(hub): State<Hub>,
    ApiQuery(q): ApiQuery<CheckQuery>,
) -> ApiResult<Json<Value>> {
    if let Some(a) = &q.agent {
        let known = hub.agents().def(a).is_ok() || hub.get(a).is_ok();
        if !known {
            return Err(HubError::AgentNotFound { id: a.clone() }.into());
        }
    }
    let rows = crate::policy::runner::check(&hub, q.agent.as_deref());
    Ok(Json(
        json!({ "ok": true, "count": rows.len(), "checks": rows }),
    ))
}

pub async fn reload(State(hub): State<Hub>) -> ApiResult<Json<Value>> {
    let loaded = crate::policy::runner::reload(&hub)?;
    Ok(Json(json!({
        "ok": true,
        "policies": loaded.policies.keys().collect::<Vec<_>>(),
        "profiles": loaded.profiles.names(),
    })))
}
