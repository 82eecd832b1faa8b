//! `GET /v1/events`: a WebSocket carrying every event of the hub's bus (task, agent and session
//! lifecycle events) as JSON text frames, in order. A subscriber that falls behind is told how
//! many events it missed (`{type:"events_dropped", count}`) and continues with the next ones;
//! the socket closes when the hub shuts down.

use axum::extract::ws::{Message, Utf8Bytes, WebSocket};
use axum::extract::State;
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::error::ApiWebSocket;
use crate::hub::Hub;
use crate::protocol::HubEvent;

pub async fn events(State(hub): State<Hub>, ApiWebSocket(ws): ApiWebSocket) -> Response {
    // Subscribed before the upgrade completes: every event after the client's connect returns
    // is delivered.
    let events = hub.subscribe_events();
    let closing = hub.closing();
    ws.protocols(["agent-hub"]).on_upgrade(move |socket| {
        forward(socket, events, closing, |event: HubEvent| {
            serde_json::to_value(event).unwrap_or(Value::Null)
        })
    })
}

fn text(value: &Value) -> Message {
    Message::Text(Utf8Bytes::from(value.to_string()))
}

/// Sends every value of a broadcast channel (shaped by `frame`) as a text frame until the
/// client leaves or the hub closes; a lag becomes `{type:"events_dropped", count}`.
pub(crate) async fn forward<T: Clone>(
    socket: WebSocket,
    mut events: broadcast::Receiver<T>,
    closing: CancellationToken,
    frame: fn(T) -> Value,
) {
    let (mut tx, mut rx) = socket.split();
    loop {
        let message = tokio::select! {
            _ = closing.cancelled() => {
                let _ = tx.send(Message::Close(None)).await;
                break;
            }
            incoming = rx.next() => match incoming {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => continue,
            },
            event = events.recv() => match event {
                Ok(event) => text(&frame(event)),
                Err(broadcast::error::RecvError::Lagged(count)) => {
                    text(&json!({ "type": "events_dropped", "count": count }))
                }
                Err(broadcast::error::RecvError::Closed) => break,
            },
        };
        if tx.send(message).await.is_err() {
            break;
        }
    }
}
