//! REST handlers of the outgoing webhooks: `GET /v1/notify` (what became of each webhook's
//! messages: sent, failed, given up, its last dead letters) and `POST /v1/notify/test` (a test
//! message to each webhook, and each one's answer). The test is the admin's, audited.

use axum::extract::State;
use axum::Json;

use super::error::ApiResult;
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::{NotifyReply, NotifyTestReply};

pub async fn status(State(hub): State<Hub>) -> Json<NotifyReply> {
    Json(NotifyReply {
        ok: true,
        webhooks: hub.notifier().status(),
    })
}

pub async fn test(State(hub): State<Hub>) -> ApiResult<Json<NotifyTestReply>> {
    let webhooks = hub.notifier().test().await;
    if webhooks.is_empty() {
        return Err(HubError::NoWebhooks.into());
    }
    Ok(Json(NotifyTestReply {
        ok: true,
        delivered: webhooks.iter().all(|w| w.ok),
        webhooks,
    }))
}
