//! Agent state and policy endpoints: `GET /v1/pty/sessions/{id}/state`,
//! `GET /v1/agents/{id}/state` (`?explain=true` adds the rule and the matched lines; with
//! `?wait=idle,blocked&timeout_ms=N` a long-poll that answers the moment the state is one of
//! those, or at the timeout, with `reached`), `GET /v1/policies`, `GET /v1/policies/check` and
//! `POST /v1/policies/reload`.

use std::time::Duration;

use axum::extract::{Path, State};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiQuery, ApiResult};
use crate::agent_state::wait::Wanted;
use crate::agent_state::StateReport;
use crate::error::HubError;
use crate::hub::Hub;
use crate::session::Session;

/// Default and largest `timeout_ms` of a state wait.
const WAIT_DEFAULT_TIMEOUT_MS: u64 = 30_000;
const WAIT_MAX_TIMEOUT_MS: u64 = 600_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateQuery {
    #[serde(default)]
    explain: bool,
    /// States to wait for, comma-separated (`idle,blocked`; `stuck` too).
    wait: Option<String>,
    timeout_ms: Option<u64>,
}

impl StateQuery {
    /// The wait asked for, checked: what to wait for and for how long.
    fn wait(&self) -> Result<Option<(Wanted, Duration)>, HubError> {
        let Some(list) = &self.wait else {
            if self.timeout_ms.is_some() {
                return Err(HubError::bad_request(
                    "timeout_ms needs wait=STATE[,STATE...]",
                ));
            }
            return Ok(None);
        };
        let wanted = Wanted::parse(list).map_err(HubError::bad_request)?;
        let timeout_ms = self.timeout_ms.unwrap_or(WAIT_DEFAULT_TIMEOUT_MS);
        if timeout_ms > WAIT_MAX_TIMEOUT_MS {
            return Err(HubError::bad_request(format!(
                "timeout_ms must be 0-{WAIT_MAX_TIMEOUT_MS}"
            )));
        }
        Ok(Some((wanted, Duration::from_millis(timeout_ms))))
    }
}

/// The state as JSON; with `explain`, the rule, its evidence and the profile: which one, why
/// (the session's `cli_type`), and the CLI versions it was checked against.
fn state_json(hub: &Hub, session: &Session, report: StateReport, explain: bool) -> Value {
    let mut v = json!({
        "state": report.state,
        "since": report.since,
        "stuck": report.stuck,
        "profile": report.profile,
        "last_activity_at": report.last_activity_at,
        "idle_for_ms": report.idle_for_ms,
    });
    if explain {
        let cli_type = session.owner().cli_type;
        let resolved = hub.policy().loaded().profiles.resolve(cli_type.as_deref());
        v["rule"] = json!(report.rule);
        v["evidence"] = json!(report.evidence);
        v["profile_reason"] = json!(resolved.reason);
        v["profile_checked_with"] = json!(report.profile_checked_with);
    }
    v
}

pub async fn session_state(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StateQuery>,
) -> ApiResult<Json<Value>> {
    let session = hub.get(&id)?;
    let mut v = match q.wait()? {
        None => state_json(&hub, &session, session.state_report(), q.explain),
        Some((wanted, timeout)) => {
            let (report, reached) = session.wait_state(&wanted, timeout).await;
            let mut v = state_json(&hub, &session, report, q.explain);
            v["reached"] = json!(reached);
            v
        }
    };
    v["ok"] = json!(true);
    v["session_id"] = json!(id);
    Ok(Json(v))
}

pub async fn agent_state(
    State(hub): State<Hub>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StateQuery>,
) -> ApiResult<Json<Value>> {
    let wait = q.wait()?;
    let mut info = crate::agents::info(&hub, &id)?;
    let mut reached = None;
    if let Some((wanted, timeout)) = &wait {
        let (last, r) = wait_agent_state(&hub, &id, wanted, *timeout).await?;
        info = last;
        reached = Some(r);
    }
    let session = live_session(&hub, &info);
    let mut v = match &session {
        Some(s) => state_json(&hub, s, s.state_report(), q.explain),
        None => {
            let mut v = json!({ "state": "exited", "since": null, "stuck": false });
            if q.explain {
                v["rule"] = json!("agent:not_running");
                v["evidence"] = json!([format!("agent status: {}", info.status)]);
            }
            v
        }
    };
    if let Some(reached) = reached {
        v["reached"] = json!(reached);
    }
    v["ok"] = json!(true);
    v["agent_id"] = json!(id);
    v["status"] = json!(info.status);
    v["session_id"] = json!(session.map(|s| s.id().to_string()));
    Ok(Json(v))
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
        let info = crate::agents::info(hub, id)?;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match live_session(hub, &info) {
            Some(session) => {
                let (report, reached) = session.wait_state(wanted, left).await;
                if reached || left.is_zero() || report.state != crate::agent_state::State::Exited {
                    return Ok((crate::agents::info(hub, id)?, reached));
                }
            }
            None if wanted.wants(crate::agent_state::State::Exited) => return Ok((info, true)),
            None if left.is_zero() => return Ok((info, false)),
            None => {
                let started = async {
                    loop {
                        match events.recv().await {
                            Ok(e) if e["type"] == "agent_started" && e["agentId"] == id => return,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                                std::future::pending::<()>().await
                            }
                            _ => {}
                        }
                    }
                };
                if tokio::time::timeout_at(deadline, started).await.is_err() {
                    return Ok((crate::agents::info(hub, id)?, false));
                }
            }
        }
    }
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
