//! `GET /v1/pty/sessions/{id}/stream`: a WebSocket carrying a session's output as binary frames
//! and taking input and resizes back. With `since`, the retained output from that offset comes
//! first; without it, a repaint of the current screen. Live output follows with no gap or
//! duplicate. Sending (`send`) and receiving (`input`) run as two tasks that end together; a
//! viewer that stops reading falls behind on its own (and is told what it lost), never slowing
//! the session.

mod input;
mod send;

use axum::extract::{Path, State};
use axum::response::Response;
use axum::Extension;
use futures_util::StreamExt;

use super::error::{ApiQuery, ApiResult, ApiWebSocket};
use crate::actor::{Actor, Role};
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::{ServerFrame, StreamQuery};
use crate::session::write::TypedLine;
use input::InputGuard;
use send::{OutputSender, Viewer};

/// Error replies waiting to be sent before the receiver stops reading input frames.
const ERROR_QUEUE_FRAMES: usize = 32;
/// Largest WebSocket message a client may send.
const MAX_CLIENT_MESSAGE_BYTES: usize = 1 << 20;

pub async fn stream(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    ApiQuery(q): ApiQuery<StreamQuery>,
    ApiWebSocket(ws): ApiWebSocket,
) -> ApiResult<Response> {
    if q.raw && actor.role() != Role::Admin {
        return Err(HubError::Forbidden {
            message: "raw (unredacted) output needs an admin token".into(),
        }
        .into());
    }
    crate::protocol::check_offset("since", q.since)?;
    let session = hub.get(&id)?;
    let viewer = Viewer {
        since: q.since,
        redactor: (!q.raw).then(|| hub.redactor().clone()),
        meter: hub.metrics().stream(&session.spec().source),
    };
    let input = InputGuard {
        hub: hub.clone(),
        actor,
        line: TypedLine::default(),
    };
    let closing = hub.closing();
    Ok(ws
        // Clients offer `agent-hub` next to their `agent-hub.bearer.<token>`: the server
        // answers with the former, so the token is never echoed back.
        .protocols(["agent-hub"])
        .max_message_size(MAX_CLIENT_MESSAGE_BYTES)
        .on_upgrade(move |socket| async move {
            let (tx, rx) = socket.split();
            let Some(sender) = OutputSender::open(tx, &session, viewer).await else {
                return;
            };
            let (errors_tx, errors) = tokio::sync::mpsc::channel::<ServerFrame>(ERROR_QUEUE_FRAMES);
            let receiver = input::spawn_receiver(rx, input, session, errors_tx);
            sender.run(receiver, errors, closing).await;
        }))
}
