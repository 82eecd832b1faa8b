//! `GET /v1/previews`: one WebSocket carrying the last few lines of every session's screen the
//! caller may see, for the dashboard's fleet view (one socket for the whole fleet, not one a
//! session). At most every [`PREVIEW_INTERVAL`] it sends one `previews` frame holding only the
//! sessions whose output moved since the last frame: a session is rendered again only when its
//! output's end offset changed, so a quiet fleet costs a list walk per tick. The lines come from
//! the emulator `term_read` reads, and are redacted as `term_read`'s reply is (each line on its
//! own).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use axum::extract::ws::{Message, Utf8Bytes, WebSocket};
use axum::extract::State;
use axum::response::Response;
use axum::Extension;
use futures_util::{SinkExt, StreamExt};

use super::error::{ApiQuery, ApiResult, ApiWebSocket};
use crate::actor::Actor;
use crate::error::HubError;
use crate::hub::Hub;
use crate::protocol::{PreviewFrame, PreviewsQuery};
use crate::screen::{ReadMode, TermReadRequest};

/// How often changed previews are sent, at most.
pub const PREVIEW_INTERVAL: Duration = Duration::from_millis(250);
/// Lines a preview holds unless the query asks otherwise, and the most it may ask for.
pub const PREVIEW_DEFAULT_LINES: usize = 3;
pub const PREVIEW_MAX_LINES: usize = 20;
/// Rows read from the bottom of the screen to find the last non-blank lines (blank rows
/// between the content and the cursor are skipped).
const PREVIEW_SCAN_ROWS: usize = 40;

pub async fn previews(
    State(hub): State<Hub>,
    Extension(actor): Extension<Actor>,
    ApiQuery(q): ApiQuery<PreviewsQuery>,
    ApiWebSocket(ws): ApiWebSocket,
) -> ApiResult<Response> {
    if !hub.config().term_buffer_access {
        return Err(HubError::TermBufferAccessDisabled.into());
    }
    let lines = q.lines.unwrap_or(PREVIEW_DEFAULT_LINES);
    if !(1..=PREVIEW_MAX_LINES).contains(&lines) {
        return Err(HubError::bad_request(format!("lines must be 1-{PREVIEW_MAX_LINES}")).into());
    }
    Ok(ws
        .protocols(["agent-hub"])
        .on_upgrade(move |socket| run(socket, hub, actor, lines)))
}

/// What was last sent for a session: the output offset it was rendered at and its lines.
struct Sent {
    end_offset: u64,
    lines: Vec<String>,
}

async fn run(socket: WebSocket, hub: Hub, actor: Actor, lines: usize) {
    let (mut tx, mut rx) = socket.split();
    let closing = hub.closing();
    let mut sent: HashMap<String, Sent> = HashMap::new();
    let mut tick = tokio::time::interval(PREVIEW_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = closing.cancelled() => {
                let _ = tx.send(Message::Close(None)).await;
                return;
            }
            incoming = rx.next() => match incoming {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => return,
                Some(Ok(_)) => continue,
            },
            _ = tick.tick() => {}
        }
        let frame = changes(&hub, &actor, &mut sent, lines);
        let PreviewFrame::Previews { previews, removed } = &frame;
        if previews.is_empty() && removed.is_empty() {
            continue;
        }
        let json = serde_json::to_string(&frame).unwrap_or_else(|_| "{}".into());
        if tx.send(Message::Text(Utf8Bytes::from(json))).await.is_err() {
            return;
        }
    }
}

/// The previews that changed since `sent` (which is brought up to date), and the sessions that
/// are gone.
fn changes(
    hub: &Hub,
    actor: &Actor,
    sent: &mut HashMap<String, Sent>,
    lines: usize,
) -> PreviewFrame {
    let mut previews = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for session in hub.list() {
        if !super::scope::visible(hub, actor, &session) {
            continue;
        }
        let id = session.id().to_string();
        let end_offset = session.output().end_offset();
        seen.insert(id.clone());
        if sent.get(&id).is_some_and(|s| s.end_offset == end_offset) {
            continue;
        }
        let read = session.term_read(&TermReadRequest {
            mode: ReadMode::Tail,
            max_lines: Some(PREVIEW_SCAN_ROWS.max(lines)),
            merge_wrapped: Some(true),
            ..TermReadRequest::default()
        });
        let redactor = hub.redactor();
        let shown: Vec<String> = last_lines(&read.lines, lines)
            .iter()
            .map(|l| redactor.redact_str(l))
            .collect();
        let changed = sent.get(&id).is_none_or(|s| s.lines != shown);
        if changed {
            previews.insert(id.clone(), shown.clone());
        }
        sent.insert(
            id,
            Sent {
                end_offset,
                lines: shown,
            },
        );
    }
    let mut removed: Vec<String> = sent
        .keys()
        .filter(|id| !seen.contains(*id))
        .cloned()
        .collect();
    removed.sort();
    for id in &removed {
        sent.remove(id);
    }
    PreviewFrame::Previews { previews, removed }
}

/// The last `n` lines of `lines` that are not blank, oldest first, trailing blanks trimmed.
fn last_lines(lines: &[String], n: usize) -> Vec<String> {
    let mut out: Vec<String> = lines
        .iter()
        .rev()
        .map(|l| l.trim_end())
        .filter(|l| !l.is_empty())
        .take(n)
        .map(String::from)
        .collect();
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::last_lines;

    #[test]
    fn previews_are_the_last_non_blank_lines() {
        let v = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for (lines, n, want) in [
            (v(&["a", "b", "c", "d"]), 3, v(&["b", "c", "d"])),
            (v(&["a", "", "b  ", " ", "c", ""]), 3, v(&["a", "b", "c"])),
            (v(&["a", "b"]), 3, v(&["a", "b"])),
            (v(&["", "  "]), 3, v(&[])),
            (v(&["x", "y"]), 1, v(&["y"])),
            (v(&["  indented  "]), 2, v(&["  indented"])),
        ] {
            assert_eq!(last_lines(&lines, n), want, "{lines:?} {n}");
        }
    }
}
