//! The sending side of a viewer's WebSocket: the first paint (a hello frame, then the
//! retained output from `since` or a repaint of the screen), then live output with no gap or
//! duplicate, redacted as a stream, joined into larger frames when chunks are already
//! waiting, with a resync frame where a slow viewer lost bytes; error replies to its input;
//! the exit frame.

use std::sync::Arc;

use axum::extract::ws::{Message, Utf8Bytes, WebSocket};
use bytes::Bytes;
use futures_util::stream::SplitSink;
use futures_util::SinkExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::metrics::StreamMeter;
use crate::output::{CursorItem, ExitInfo, OutputCursor};
use crate::protocol::ServerFrame;
use crate::redact::stream::StreamRedactor;
use crate::redact::{output_before, Redactor};
use crate::session::{Session, ViewerGuard};

/// Largest output frame built by joining chunks that are already waiting.
const COALESCE_MAX_BYTES: usize = 64 * 1024;

/// What one viewer asked for: where its output starts (`None`: the screen), whether it is
/// redacted, and the metrics it counts in.
pub(super) struct Viewer {
    pub since: Option<u64>,
    pub redactor: Option<Arc<Redactor>>,
    pub meter: StreamMeter,
}

/// What one turn of the send loop does next.
enum Step {
    Send(Message),
    Skip,
    End,
}

pub(super) struct OutputSender {
    tx: SplitSink<WebSocket, Message>,
    cursor: OutputCursor,
    redact: Option<StreamRedactor>,
    meter: StreamMeter,
    /// A screen-mode viewer is interactive: its terminal answers terminal queries.
    _viewer: Option<ViewerGuard>,
}

impl OutputSender {
    /// Sends the hello frame and the first paint; `None` when the socket is already gone.
    pub async fn open(
        mut tx: SplitSink<WebSocket, Message>,
        session: &Arc<Session>,
        viewer: Viewer,
    ) -> Option<Self> {
        let info = session.info();
        let (paint, cursor, guard) = match viewer.since {
            Some(since) => (
                None,
                OutputCursor::new(session.output().clone(), since),
                None,
            ),
            None => {
                let guard = session.viewer();
                let (paint, offset) = session.with_screen(|s| (s.repaint(), s.fed_to()));
                let cursor = OutputCursor::new(session.output().clone(), offset);
                (Some(paint), cursor, Some(guard))
            }
        };
        let hello = ServerFrame::Hello {
            session_id: info.spec.id.clone(),
            offset: viewer
                .since
                .map_or(cursor.next_offset(), |s| s.min(cursor.next_offset())),
            mode: if viewer.since.is_some() {
                "replay"
            } else {
                "screen"
            }
            .into(),
            cols: info.cols,
            rows: info.rows,
        };
        tx.send(text(&hello)).await.ok()?;
        if let Some(mut paint) = paint {
            if let Some(r) = &viewer.redactor {
                paint = r.redact_bytes(&paint);
            }
            tx.send(Message::Binary(Bytes::from(paint))).await.ok()?;
        }
        let before = output_before(session.output(), cursor.next_offset());
        Some(OutputSender {
            tx,
            redact: viewer.redactor.map(|r| StreamRedactor::new(r, &before)),
            cursor,
            meter: viewer.meter,
            _viewer: guard,
        })
    }

    /// Sends until the session ends, the receiver ends (the viewer closed), the socket fails
    /// or the hub closes.
    pub async fn run(
        mut self,
        mut receiver: tokio::task::JoinHandle<()>,
        mut errors: mpsc::Receiver<ServerFrame>,
        closing: CancellationToken,
    ) {
        loop {
            let flush_at = self
                .redact
                .as_ref()
                .and_then(StreamRedactor::flush_deadline);
            let step = tokio::select! {
                _ = &mut receiver => Step::End,
                _ = sleep_until(flush_at), if flush_at.is_some() => self.held_bytes(),
                _ = closing.cancelled() => {
                    let _ = self.tx.send(Message::Close(None)).await;
                    Step::End
                }
                Some(frame) = errors.recv() => Step::Send(text(&frame)),
                item = self.cursor.next() => match item {
                    Some(CursorItem::Data { bytes, dropped_bytes }) => {
                        self.data(bytes, dropped_bytes).await
                    }
                    Some(CursorItem::Exited(exit)) => self.exited(exit).await,
                    None => Step::End,
                },
            };
            match step {
                Step::Send(message) => {
                    if self.tx.send(message).await.is_err() {
                        break;
                    }
                }
                Step::Skip => {}
                Step::End => break,
            }
        }
        receiver.abort();
    }

    /// What the redactor held back (a word that may be the start of a secret), once quiet.
    fn held_bytes(&mut self) -> Step {
        match self.redact.as_mut().map(StreamRedactor::flush) {
            Some(held) if !held.is_empty() => Step::Send(Message::Binary(Bytes::from(held))),
            _ => Step::Skip,
        }
    }

    async fn data(&mut self, bytes: Bytes, dropped_bytes: u64) -> Step {
        let mut bytes = bytes;
        if dropped_bytes == 0 {
            bytes = self.join_waiting(bytes);
        } else if !self.resync(dropped_bytes, bytes.len()).await {
            return Step::End;
        }
        if let Some(r) = self.redact.as_mut() {
            bytes = Bytes::from(r.push(&bytes));
            if bytes.is_empty() {
                return Step::Skip;
            }
        }
        self.meter.sent(bytes.len());
        Step::Send(Message::Binary(bytes))
    }

    /// Joins chunks that are already waiting into one frame (up to 64 KiB).
    fn join_waiting(&mut self, bytes: Bytes) -> Bytes {
        let mut joined: Option<Vec<u8>> = None;
        while joined.as_ref().map_or(bytes.len(), Vec::len) < COALESCE_MAX_BYTES {
            let Some(more) = self.cursor.next_ready_data() else {
                break;
            };
            joined
                .get_or_insert_with(|| bytes.to_vec())
                .extend_from_slice(&more);
        }
        joined.map_or(bytes, Bytes::from)
    }

    /// The viewer fell behind and lost `dropped_bytes` before a chunk of `len` bytes: what the
    /// redactor held belongs before the gap, the gap ends its context, then a resync frame
    /// says where the output goes on. False when the socket failed.
    async fn resync(&mut self, dropped_bytes: u64, len: usize) -> bool {
        self.meter.resync(dropped_bytes);
        if let Some(r) = self.redact.as_mut() {
            let held = r.flush();
            if !held.is_empty()
                && self
                    .tx
                    .send(Message::Binary(Bytes::from(held)))
                    .await
                    .is_err()
            {
                return false;
            }
            *r = StreamRedactor::new(r.redactor().clone(), b"");
        }
        let resync = ServerFrame::Resync {
            dropped_bytes,
            offset: self.cursor.next_offset() - len as u64,
        };
        self.tx.send(text(&resync)).await.is_ok()
    }

    /// The session ended: what was held, the exit frame, then the close.
    async fn exited(&mut self, exit: ExitInfo) -> Step {
        if let Some(held) = self.redact.as_mut().map(StreamRedactor::flush) {
            if !held.is_empty() {
                let _ = self.tx.send(Message::Binary(Bytes::from(held))).await;
            }
        }
        let frame = ServerFrame::Exit {
            exit_code: exit.exit_code,
            reason: exit.reason,
        };
        let _ = self.tx.send(text(&frame)).await;
        let _ = self.tx.send(Message::Close(None)).await;
        Step::End
    }
}

fn text(frame: &ServerFrame) -> Message {
    let json = serde_json::to_string(frame).unwrap_or_else(|_| "{}".into());
    Message::Text(Utf8Bytes::from(json))
}

async fn sleep_until(at: Option<std::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
    }
}
