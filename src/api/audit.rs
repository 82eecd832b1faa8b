//! The layer that records every state-changing request in the audit log, durably, before its
//! reply is sent: the attempt (with the redacted request body) before the handler runs, the
//! outcome (status, error code, blocked pattern, redacted reply, duration) after; an attempt
//! still running after [`SHOWN_AFTER`] shows in the log's queries while it runs. If the
//! attempt cannot be written the request is refused with `AUDIT_UNAVAILABLE` and never runs
//! (unless `audit.fail_open`). New mutating routes are covered without changes here.

use std::time::Instant;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::error::ApiError;
use crate::actor::Actor;
use crate::audit::{new_record, Record};
use crate::error::HubError;
use crate::hub::Hub;

/// The action a request performs, if it is audited: its route's, from the one route table
/// ([`super::routes`]). A request that matches no route changes nothing and is not recorded.
pub fn audited_action(method: &Method, path: &str, query: Option<&str>) -> Option<String> {
    use super::routes::Audit;
    match super::routes::find(method, path)?.audit {
        Audit::No => None,
        Audit::As(action) => Some(action.to_string()),
        Audit::Raw(read) => super::redaction::wants_raw(query).then(|| format!("{read}_raw")),
    }
}

/// The ids a path names: (session_id, agent_id).
fn path_ids(path: &str) -> (Option<String>, Option<String>) {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["v1", "pty", "sessions", id, ..] => (Some((*id).to_string()), None),
        ["v1", "agents", id, ..] => (None, Some((*id).to_string())),
        ["answer", id, ..] => (Some((*id).to_string()), None),
        _ => (None, None),
    }
}

/// Fills session, agent and owner fields from a live session.
fn describe_session(hub: &Hub, record: &mut Record) {
    let Some(id) = &record.session_id else { return };
    if let Ok(session) = hub.get(id) {
        let owner = session.owner();
        record.agent_id = record
            .agent_id
            .clone()
            .or_else(|| session.spec().agent_id.clone())
            .or(owner.owner_agent_id);
        record.owner_session_id = owner.owner_session_id;
        record.label = owner.label;
        record.cli_type = owner.cli_type;
    }
}

/// The one live session a request body's routing keys name, if exactly one.
fn routed_session(hub: &Hub, body: Option<&str>) -> Option<String> {
    let body: Value = serde_json::from_str(body?).ok()?;
    let keys = crate::owner_routing::RouteKeys {
        agent_id: text(&body, &["agent_id"]),
        owner_session_id: text(&body, &["owner_session_id"]),
        label: text(&body, &["label"]),
    };
    if keys.is_empty() {
        return None;
    }
    let infos: Vec<_> = hub.list().iter().map(|s| s.info()).collect();
    match crate::owner_routing::resolve(&keys, &infos) {
        crate::owner_routing::Resolution::One(id) => Some(id),
        _ => None,
    }
}

fn text(value: &Value, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| value.get(*k).and_then(Value::as_str))
        .map(String::from)
}

/// How long an operation runs before its attempt shows in the log's queries (until then it is
/// in the attempts journal only, which costs a keystroke far less than a database write).
pub const SHOWN_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs the operation; one still running after [`SHOWN_AFTER`] gets its attempt shown.
async fn shown_while_running(
    audit: &crate::audit::Audit,
    attempt: &Record,
    run: impl std::future::Future<Output = Response>,
) -> Response {
    tokio::pin!(run);
    tokio::select! {
        response = &mut run => return response,
        () = tokio::time::sleep(SHOWN_AFTER) => {}
    }
    let (response, shown) = tokio::join!(run, audit.show(attempt.clone()));
    if let Err(e) = shown {
        tracing::warn!(
            "audit: attempt {} not shown while it runs: {}",
            attempt.id,
            e
        );
    }
    response
}

pub async fn record(State(hub): State<Hub>, req: Request, next: Next) -> Response {
    let Some(action) = audited_action(req.method(), req.uri().path(), req.uri().query()) else {
        return next.run(req).await;
    };
    let audit = hub.audit().clone();
    if !audit.enabled() {
        return next.run(req).await;
    }
    let started = Instant::now();
    let actor = req.extensions().get::<Actor>().cloned().unwrap_or_default();
    let (parts, body) = req.into_parts();
    let limit = hub.config().max_body_bytes;
    let Ok(body) = axum::body::to_bytes(body, limit).await else {
        return ApiError(HubError::PayloadTooLarge { limit_bytes: limit }).into_response();
    };
    let mut record = new_record(&actor.token_name, actor.agent_id.clone(), &action);
    record.method = Some(parts.method.to_string());
    record.path = Some(match parts.uri.query() {
        Some(q) => format!("{}?{q}", parts.uri.path()),
        None => parts.uri.path().to_string(),
    });
    (record.session_id, record.agent_id) = path_ids(parts.uri.path());
    describe_session(&hub, &mut record);
    if !body.is_empty() {
        record.command = Some(hub.redactor().redact_str(&String::from_utf8_lossy(&body)));
    }

    let id = match audit.begin(record.clone()).await {
        Ok(id) => Some(id),
        Err(e) if audit.fail_open() => {
            tracing::error!("audit unavailable, {action} goes through unaudited: {}", e);
            audit.count_unaudited();
            None
        }
        Err(e) => {
            let reason = e.to_string();
            return ApiError(HubError::AuditUnavailable { reason }).into_response();
        }
    };

    let run = next.run(Request::from_parts(parts, Body::from(body)));
    let Some(id) = id else { return run.await };
    record.id = id;
    let response = shown_while_running(&audit, &record, run).await;
    let (rparts, rbody) = response.into_parts();
    let is_upgrade = rparts.status == axum::http::StatusCode::SWITCHING_PROTOCOLS;
    let rbytes = if is_upgrade {
        None
    } else {
        axum::body::to_bytes(rbody, usize::MAX).await.ok()
    };
    let reply: Value = rbytes
        .as_ref()
        .and_then(|b| serde_json::from_slice(b).ok())
        .unwrap_or(Value::Null);
    record.status = Some(i64::from(rparts.status.as_u16()));
    record.success = Some(rparts.status.is_success() || is_upgrade);
    record.duration_ms = Some(started.elapsed().as_millis() as i64);
    record.error_code = text(&reply, &["error_code"]);
    record.blocked = record.error_code.as_deref() == Some("PTY_COMMAND_BLOCKED");
    record.blocked_pattern = record.blocked.then(|| text(&reply, &["pattern"])).flatten();
    if record.session_id.is_none() {
        record.session_id = text(&reply, &["session_id", "resolved_session_id"]);
    }
    if record.session_id.is_none() {
        // A routed request that failed (blocked, say): the session its keys name, if one.
        record.session_id = routed_session(&hub, record.command.as_deref());
    }
    describe_session(&hub, &mut record);
    if let Some(b) = &rbytes {
        record.response = Some(hub.redactor().redact_str(&String::from_utf8_lossy(b)));
    }
    if let Err(e) = audit.finish(record).await {
        // The attempt is on record; only its outcome is missing.
        tracing::error!("audit: outcome of record {id} not written: {}", e);
    }
    let body = match rbytes {
        Some(b) => Body::from(b),
        None => Body::empty(),
    };
    Response::from_parts(rparts, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_of_routes() {
        use Method as M;
        let table = [
            (M::POST, "/v1/pty/sessions", None, Some("create")),
            (M::DELETE, "/v1/pty/sessions/x", None, Some("kill")),
            (
                M::POST,
                "/v1/pty/sessions/x/send_line",
                None,
                Some("send_line"),
            ),
            (M::POST, "/v1/pty/sessions/x/keys", None, Some("keys")),
            (M::POST, "/v1/pty/sessions/x/signal", None, Some("signal")),
            (M::POST, "/v1/pty/sessions/x/talk", None, Some("talk")),
            (M::POST, "/v1/pty/sessions/x/resize", None, Some("resize")),
            (M::POST, "/v1/pty/sessions/x/term_read", None, None),
            (M::GET, "/v1/pty/sessions/x/read", None, None),
            (
                M::GET,
                "/v1/pty/sessions/x/read",
                Some("raw=true"),
                Some("read_raw"),
            ),
            (
                M::GET,
                "/v1/pty/sessions/x/stream",
                Some("raw=1"),
                Some("stream_raw"),
            ),
            (M::POST, "/v1/pty/resolve", None, None),
            (
                M::POST,
                "/v1/pty/send_line_to_agent",
                None,
                Some("send_line_to_agent"),
            ),
            (
                M::POST,
                "/v1/pty/update-ownership",
                None,
                Some("update_ownership"),
            ),
            (M::POST, "/v1/pty/register", None, Some("register")),
            (M::DELETE, "/v1/pty/unregister/x", None, Some("unregister")),
            (M::POST, "/v1/pty/heartbeat/x", None, Some("heartbeat")),
            (M::DELETE, "/v1/pty/reset", None, Some("reset")),
            (M::POST, "/v1/agents/a/start", None, Some("agent_start")),
            (M::POST, "/v1/agents/a/stop", None, Some("agent_stop")),
            (M::POST, "/v1/agents/a/restart", None, Some("agent_restart")),
            (M::POST, "/v1/tasks", None, Some("task_create")),
            (M::DELETE, "/v1/tasks/t", None, Some("task_cancel")),
            (M::POST, "/v1/tasks/t/wait", None, None),
            (M::GET, "/v1/pty-traffic/events", None, None),
            (
                M::POST,
                "/v1/pty-traffic/storage/cleanup",
                None,
                Some("audit_cleanup"),
            ),
            (M::GET, "/health", None, None),
            (M::POST, "/pty/write", None, Some("bridge_write")),
            (M::POST, "/pty/talk", None, Some("bridge_talk")),
            (M::POST, "/pty/read", None, None),
            (M::POST, "/pty/buffer", None, None),
            (M::GET, "/pty/list", None, None),
        ];
        for (method, path, query, want) in table {
            assert_eq!(
                audited_action(&method, path, query).as_deref(),
                want,
                "{method} {path} {query:?}"
            );
        }
    }
}
