//! The one output pipeline every session has, whatever its backend: the scrollback ring,
//! last-output time, end-of-stream state, and fan-out to live subscribers. Backends call
//! [`Output::push`] from their reader and [`Output::finish`] when the program ends; nothing else
//! in the hub touches raw output.
//!
//! Fan-out uses a `broadcast` channel, so the reader never waits for a subscriber: a subscriber
//! that falls behind gets `Lagged` and resynchronises from the ring (see [`Output::subscribe_from`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use tokio::sync::{broadcast, watch};

use crate::scrollback::{Chunk, Scrollback};

/// How many chunks a live subscriber may fall behind before it must resynchronise from the
/// ring; bytes the ring no longer holds by then are reported to it as dropped (the ring is
/// usually smaller than this slack, so a resync usually loses some). tokio allocates every
/// slot up front, so this is also a fixed cost per session: 512 slots is ~37 kB (1024 was
/// ~74 kB) and about 2 MiB of slack at PTY read sizes, enough for a WebSocket viewer to keep
/// up with `cat` of 100 MB on two busy cores (128 slots was not).
const SUBSCRIBER_CHANNEL_CHUNKS: usize = 512;

/// How a session's program ended.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ExitInfo {
    pub exit_code: Option<i32>,
    /// Human-readable cause ("exited", "killed by signal 9", "tmux session closed", ...).
    pub reason: String,
    pub exited_at: DateTime<Utc>,
}

/// What live subscribers receive.
#[derive(Debug, Clone)]
pub enum OutputEvent {
    /// Output bytes starting at absolute offset `offset`.
    Data { offset: u64, bytes: Bytes },
    /// The program ended; no more data follows.
    Exited(ExitInfo),
}

/// A subscription: the retained bytes from the requested offset, then live events that
/// continue exactly where `backlog` ends (no gap, no duplicate).
pub struct Subscription {
    pub backlog: Chunk,
    pub live: broadcast::Receiver<OutputEvent>,
    /// Set when the program had already ended at subscription time.
    pub exited: Option<ExitInfo>,
}

struct State {
    ring: Scrollback,
    last_output_at: Option<DateTime<Utc>>,
    exit: Option<ExitInfo>,
}

/// A session's output pipeline.
pub struct Output {
    state: Mutex<State>,
    events: broadcast::Sender<OutputEvent>,
    /// Latest end offset, for long-poll readers and the screen follower.
    progress: watch::Sender<u64>,
    /// The metrics counter of ingested bytes, once the session is registered.
    ingested: std::sync::OnceLock<prometheus_client::metrics::counter::Counter>,
    /// How many chunks were pushed: the unit of the per-chunk work downstream (wake-ups,
    /// fan-out, screen catch-up).
    chunks: AtomicU64,
}

impl Output {
    /// A pipeline retaining `scrollback_bytes` of history.
    pub fn new(scrollback_bytes: usize) -> Self {
        let (events, _) = broadcast::channel(SUBSCRIBER_CHANNEL_CHUNKS);
        let (progress, _) = watch::channel(0);
        Output {
            state: Mutex::new(State {
                ring: Scrollback::new(scrollback_bytes),
                last_output_at: None,
                exit: None,
            }),
            events,
            progress,
            ingested: std::sync::OnceLock::new(),
            chunks: AtomicU64::new(0),
        }
    }

    /// Counts every byte ingested into `counter`, those already pushed included.
    pub fn count_into(&self, counter: prometheus_client::metrics::counter::Counter) {
        let st = self.lock();
        if self.ingested.set(counter.clone()).is_ok() {
            counter.inc_by(st.ring.end_offset());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the ring inconsistent in a way that
        // matters more than losing the session's output entirely, so keep serving.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Appends program output. Called only by the session's single reader.
    pub fn push(&self, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = {
            let mut st = self.lock();
            let offset = st.ring.end_offset();
            st.ring.append(data);
            if let Some(c) = self.ingested.get() {
                c.inc_by(data.len() as u64);
            }
            st.last_output_at = Some(Utc::now());
            self.chunks.fetch_add(1, Ordering::Relaxed);
            // Sent under the lock so a concurrent subscribe_from sees each byte exactly once.
            let _ = self.events.send(OutputEvent::Data {
                offset,
                bytes: Bytes::copy_from_slice(data),
            });
            st.ring.end_offset()
        };
        self.progress.send_replace(end);
    }

    /// Records that the program ended. Later calls are ignored (the first cause wins).
    pub fn finish(&self, exit: ExitInfo) {
        let mut st = self.lock();
        if st.exit.is_some() {
            return;
        }
        st.exit = Some(exit.clone());
        let _ = self.events.send(OutputEvent::Exited(exit));
        drop(st);
        self.progress.send_modify(|_| {});
    }

    /// How the program ended, if it has.
    pub fn exit(&self) -> Option<ExitInfo> {
        self.lock().exit.clone()
    }

    /// Absolute offset just past the newest byte.
    pub fn end_offset(&self) -> u64 {
        self.lock().ring.end_offset()
    }

    /// How many non-empty chunks were pushed so far.
    pub fn chunks(&self) -> u64 {
        self.chunks.load(Ordering::Relaxed)
    }

    /// When the program last produced output.
    pub fn last_output_at(&self) -> Option<DateTime<Utc>> {
        self.lock().last_output_at
    }

    /// Non-destructive read: from `since` if given, else the most recent `max_bytes`.
    pub fn read(&self, since: Option<u64>, max_bytes: usize) -> Chunk {
        let st = self.lock();
        match since {
            Some(since) => st.ring.read_since(since, max_bytes),
            None => st.ring.read_tail(max_bytes),
        }
    }

    /// Like [`Output::read`] with `since`, but waits up to `timeout` for output past `since`
    /// when there is none yet (long poll). Returns early when the program ends.
    pub async fn read_wait(&self, since: u64, max_bytes: usize, timeout: Duration) -> Chunk {
        let mut progress = self.progress.subscribe();
        let wait = async {
            loop {
                if *progress.borrow_and_update() > since || self.exit().is_some() {
                    return;
                }
                if progress.changed().await.is_err() {
                    return;
                }
            }
        };
        let _ = tokio::time::timeout(timeout, wait).await;
        self.read(Some(since), max_bytes)
    }

    /// Waits up to `within` for the program's end to be recorded; returns it if it was.
    pub async fn wait_exit(&self, within: Duration) -> Option<ExitInfo> {
        let mut progress = self.progress.subscribe();
        let _ = tokio::time::timeout(within, async {
            while self.exit().is_none() {
                if progress.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        self.exit()
    }

    /// A receiver that changes whenever output arrives or the program ends.
    pub fn watch_progress(&self) -> watch::Receiver<u64> {
        self.progress.subscribe()
    }

    /// Subscribes from absolute offset `since`: retained bytes from there, then live events.
    pub fn subscribe_from(&self, since: u64) -> Subscription {
        let st = self.lock();
        Subscription {
            backlog: st.ring.read_since(since, usize::MAX),
            live: self.events.subscribe(),
            exited: st.exit.clone(),
        }
    }
}

/// What an [`OutputCursor`] yields.
#[derive(Debug, Clone)]
pub enum CursorItem {
    /// The next bytes of the stream; `dropped_bytes` were evicted before the cursor saw them.
    Data { bytes: Bytes, dropped_bytes: u64 },
    /// The program ended.
    Exited(ExitInfo),
}

/// Reads a session's output in order from an absolute offset, first the retained backlog and
/// then live, with no gap or duplicate. A reader that falls behind the live channel continues
/// from the ring and is told how many bytes it lost; it never slows the session down.
pub struct OutputCursor {
    output: std::sync::Arc<Output>,
    next_offset: u64,
    pending: Option<CursorItem>,
    live: broadcast::Receiver<OutputEvent>,
    exited: Option<ExitInfo>,
}

impl OutputCursor {
    /// A cursor starting at absolute offset `since`.
    pub fn new(output: std::sync::Arc<Output>, since: u64) -> Self {
        let sub = output.subscribe_from(since);
        let next_offset = sub.backlog.end_offset;
        let pending = (!sub.backlog.bytes.is_empty() || sub.backlog.dropped_bytes > 0).then(|| {
            CursorItem::Data {
                bytes: Bytes::from(sub.backlog.bytes),
                dropped_bytes: sub.backlog.dropped_bytes,
            }
        });
        OutputCursor {
            output,
            next_offset,
            pending,
            live: sub.live,
            exited: sub.exited,
        }
    }

    /// Absolute offset of the next byte this cursor will yield.
    pub fn next_offset(&self) -> u64 {
        self.next_offset
    }

    /// The next data item if one is ready now (no waiting) and nothing was lost before it;
    /// anything else stays queued for [`OutputCursor::next`].
    pub fn next_ready_data(&mut self) -> Option<Bytes> {
        use futures_util::FutureExt;
        match self.next().now_or_never()?? {
            CursorItem::Data {
                bytes,
                dropped_bytes: 0,
            } => Some(bytes),
            other => {
                self.pending = Some(other);
                None
            }
        }
    }

    /// The next item; `None` after [`CursorItem::Exited`] has been yielded.
    ///
    /// # Cancel safety
    /// Cancel-safe: an item is only consumed when it is returned.
    pub async fn next(&mut self) -> Option<CursorItem> {
        if let Some(item) = self.pending.take() {
            return Some(item);
        }
        if let Some(exit) = self.exited.take() {
            self.next_offset = u64::MAX;
            return Some(CursorItem::Exited(exit));
        }
        if self.next_offset == u64::MAX {
            return None;
        }
        loop {
            match self.live.recv().await {
                Ok(OutputEvent::Data { offset, bytes }) => {
                    let end = offset + bytes.len() as u64;
                    if end <= self.next_offset {
                        continue;
                    }
                    let skip = self.next_offset.saturating_sub(offset) as usize;
                    let dropped_bytes = offset.saturating_sub(self.next_offset);
                    self.next_offset = end;
                    return Some(CursorItem::Data {
                        bytes: bytes.slice(skip..),
                        dropped_bytes,
                    });
                }
                Ok(OutputEvent::Exited(exit)) => {
                    self.next_offset = u64::MAX;
                    return Some(CursorItem::Exited(exit));
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    let fresh = OutputCursor::new(self.output.clone(), self.next_offset);
                    *self = fresh;
                    if let Some(item) = self.pending.take() {
                        return Some(item);
                    }
                }
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exit(code: i32) -> ExitInfo {
        ExitInfo {
            exit_code: Some(code),
            reason: "exited".into(),
            exited_at: Utc::now(),
        }
    }

    #[tokio::test]
    async fn subscription_continues_exactly_where_backlog_ends() {
        let out = Output::new(1024);
        out.push(b"before ");
        let mut sub = out.subscribe_from(0);
        out.push(b"after");
        assert_eq!(sub.backlog.bytes, b"before ");
        match sub.live.recv().await.unwrap() {
            OutputEvent::Data { offset, bytes } => {
                assert_eq!(offset, sub.backlog.end_offset);
                assert_eq!(&bytes[..], b"after");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[tokio::test]
    async fn read_wait_returns_when_output_arrives_and_on_timeout() {
        let out = std::sync::Arc::new(Output::new(1024));
        out.push(b"abc");
        let o2 = out.clone();
        let waiter =
            tokio::spawn(async move { o2.read_wait(3, 100, Duration::from_secs(10)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        out.push(b"def");
        let chunk = waiter.await.unwrap();
        assert_eq!(chunk.bytes, b"def");
        assert_eq!(chunk.start_offset, 3);

        let started = std::time::Instant::now();
        let chunk = out.read_wait(6, 100, Duration::from_millis(50)).await;
        assert!(chunk.bytes.is_empty());
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[tokio::test]
    async fn cursor_yields_backlog_then_live_then_exit_and_survives_lag() {
        let out = std::sync::Arc::new(Output::new(64));
        out.push(b"0123");
        let mut cursor = OutputCursor::new(out.clone(), 2);
        let mut seen = Vec::new();
        match cursor.next().await.unwrap() {
            CursorItem::Data {
                bytes,
                dropped_bytes,
            } => {
                assert_eq!(dropped_bytes, 0);
                seen.extend_from_slice(&bytes);
            }
            other => panic!("unexpected {other:?}"),
        }
        // Overflow the live channel so the cursor lags, and the ring so bytes are lost.
        for i in 0..(SUBSCRIBER_CHANNEL_CHUNKS + 10) {
            out.push(&[b'a' + (i % 26) as u8]);
        }
        out.finish(exit(0));
        let mut dropped = 0;
        loop {
            match cursor.next().await {
                Some(CursorItem::Data {
                    bytes,
                    dropped_bytes,
                }) => {
                    dropped += dropped_bytes;
                    seen.extend_from_slice(&bytes);
                }
                Some(CursorItem::Exited(e)) => {
                    assert_eq!(e.exit_code, Some(0));
                    break;
                }
                None => panic!("ended without exit"),
            }
        }
        assert!(cursor.next().await.is_none());
        assert!(cursor.next_ready_data().is_none());
        // Every byte is either seen or counted as dropped, exactly once.
        assert_eq!(seen.len() as u64 + dropped, out.end_offset() - 2);
        let tail = out.read(None, 64).bytes;
        assert!(seen.ends_with(&tail));
    }

    #[tokio::test]
    async fn finish_wakes_waiters_and_first_cause_wins() {
        let out = std::sync::Arc::new(Output::new(1024));
        let o2 = out.clone();
        let waiter =
            tokio::spawn(async move { o2.read_wait(0, 100, Duration::from_secs(10)).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        out.finish(exit(3));
        out.finish(exit(4));
        waiter.await.unwrap();
        assert_eq!(out.exit().unwrap().exit_code, Some(3));
    }
}
