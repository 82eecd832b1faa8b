//! `/v1/pty-traffic/`: the audit and traffic log. `events` (filters and pagination),
//! `events/{id}`, `sessions` and `sessions/{id}` (per-session aggregates), `stats`, `blocked`,
//! `health`, `POST storage/cleanup`, and a live WebSocket `stream` of records as they are
//! written. Reading needs an operator token; cleanup an admin one.

use axum::extract::{Path, State};
use axum::response::Response;
use axum::Json;
use serde_json::{json, Value};

use super::error::{ApiQuery, ApiResult, ApiWebSocket};
use crate::audit::{AuditError, Filter};
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::{
    AuditEventReply, AuditPageReply, AuditSessionReply, AuditSessionsReply, CleanupReply,
};

fn unavailable(e: AuditError) -> HubError {
    HubError::AuditUnavailable {
        reason: e.to_string(),
    }
}

async fn page(hub: &Hub, filter: Filter) -> ApiResult<Json<AuditPageReply>> {
    if let Some(bad) = [&filter.since, &filter.until]
        .into_iter()
        .flatten()
        .find_map(|t| crate::audit::store::parse_time_ms(t).err())
    {
        return Err(HubError::bad_request(format!("since/until: {bad}")).into());
    }
    if filter
        .limit
        .is_some_and(|l| l == 0 || l > crate::audit::store::MAX_LIMIT)
    {
        return Err(HubError::bad_request(format!(
            "limit must be 1-{}",
            crate::audit::store::MAX_LIMIT
        ))
        .into());
    }
    let limit = filter.limit.unwrap_or(100);
    let offset = filter.offset.unwrap_or(0);
    let (events, total) = hub.audit().query(filter).await.map_err(unavailable)?;
    let next_cursor = events.last().map(|e| e.id);
    Ok(Json(AuditPageReply {
        ok: true,
        total,
        limit,
        offset,
        count: events.len(),
        next_cursor,
        events,
    }))
}

pub async fn events(
    State(hub): State<Hub>,
    ApiQuery(filter): ApiQuery<Filter>,
) -> ApiResult<Json<AuditPageReply>> {
    page(&hub, filter).await
}

pub async fn blocked(
    State(hub): State<Hub>,
    ApiQuery(filter): ApiQuery<Filter>,
) -> ApiResult<Json<AuditPageReply>> {
    page(
        &hub,
        Filter {
            blocked_only: true,
            ..filter
        },
    )
    .await
}

pub async fn event(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<AuditEventReply>> {
    let id: i64 = id
        .parse()
        .map_err(|_| HubError::bad_request(format!("event id '{id}' is not a number")))?;
    let record = hub.audit().get(id).await.map_err(unavailable)?;
    let record = record.ok_or(HubError::AuditRecordNotFound { id })?;
    Ok(Json(AuditEventReply {
        ok: true,
        event: record,
    }))
}

pub async fn sessions(State(hub): State<Hub>) -> ApiResult<Json<AuditSessionsReply>> {
    let sessions = hub.audit().sessions(None).await.map_err(unavailable)?;
    Ok(Json(AuditSessionsReply {
        ok: true,
        count: sessions.len(),
        sessions,
    }))
}

pub async fn session(
    State(hub): State<Hub>,
    Path(id): Path<String>,
) -> ApiResult<Json<AuditSessionReply>> {
    let mut sessions = hub
        .audit()
        .sessions(Some(id.clone()))
        .await
        .map_err(unavailable)?;
    if sessions.is_empty() {
        return Err(HubError::SessionNotFound { id }.into());
    }
    Ok(Json(AuditSessionReply {
        ok: true,
        session: sessions.remove(0),
    }))
}

pub async fn stats(State(hub): State<Hub>) -> ApiResult<Json<Value>> {
    let mut stats = hub.audit().stats().await.map_err(unavailable)?;
    stats["ok"] = json!(true);
    Ok(Json(stats))
}

pub async fn health(State(hub): State<Hub>) -> Json<Value> {
    let mut health = hub.audit().health().await;
    health["ok"] = json!(true);
    Json(health)
}

pub async fn cleanup(State(hub): State<Hub>) -> ApiResult<Json<CleanupReply>> {
    let deleted = hub.audit().cleanup().await.map_err(unavailable)?;
    Ok(Json(CleanupReply { ok: true, deleted }))
}

pub async fn stream(State(hub): State<Hub>, ApiWebSocket(ws): ApiWebSocket) -> Response {
    // Subscribed before the upgrade completes: every record written after connect is sent.
    let records = hub.audit().subscribe();
    let closing = hub.closing();
    ws.protocols(["agent-hub"]).on_upgrade(move |socket| {
        super::events::forward(
            socket,
            records,
            closing,
            |record| json!({ "type": "audit_event", "event": record }),
        )
    })
}
