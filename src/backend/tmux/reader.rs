//! The control client's reader, as a small state machine: pane output into the pipeline,
//! tmux's replies to the writer's acks, and the pane's end. Where the pane's bytes go is
//! [`PaneBytes`] (held until the seed's reply, pushed from `%output`, or the pipe's to
//! deliver); how far the pane has got towards its end is [`PaneEnd`]. A dead pane
//! (remain-on-exit) is kept until the session is removed, so output tmux has not flushed yet
//! is not thrown away with it; the exit is recorded after a short drain.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use futures_util::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::acks::{settle_reply, Ack, PendingAcks, Settled};
use super::control::{ControlMessage, ControlParser};
use super::pane::{pane_exit, pane_is_dead, query_dead_pane, DEAD_SUBSCRIPTION};
use super::{TmuxError, TmuxPlace};
use crate::output::{ExitInfo, Output};

/// While a pane is dead but its exit status not yet known, how often to ask tmux again.
const DEAD_STATUS_POLL: Duration = Duration::from_millis(100);
/// How many times to ask before recording the exit without a code.
const DEAD_STATUS_ASKS: u32 = 20;
/// After a pane is reported dead, how long output tmux still holds for it may arrive.
const DEAD_PANE_DRAIN: Duration = Duration::from_millis(250);

/// Where the pane's bytes go.
enum PaneBytes {
    /// Until the seed's reply: `%output` now is in the seed already, held only in case the
    /// seed fails.
    Seeding { held: Vec<u8> },
    /// From `%output`, into the pipeline.
    Live,
    /// From `pipe-pane` on, the pipe carries them and its reader records the end of the output
    /// once it has them all (this reader tells it the exit).
    Piped,
}

/// How far the pane has got towards its end.
enum PaneEnd {
    Running,
    /// Dead, its exit status not known yet: ask tmux again at `at`.
    StatusPending {
        at: Instant,
        asked: u32,
    },
    /// Exited: output tmux still holds may arrive until `until`, then the exit is recorded.
    Draining {
        exit: ExitInfo,
        until: Instant,
    },
    /// The exit is recorded (without a code when tmux never said one).
    Recorded {
        exit: Option<ExitInfo>,
    },
}

impl PaneEnd {
    /// The exit, once known.
    fn exit(&self) -> Option<&ExitInfo> {
        match self {
            PaneEnd::Draining { exit, .. } | PaneEnd::Recorded { exit: Some(exit) } => Some(exit),
            _ => None,
        }
    }

    /// When this state times out on its own.
    fn deadline(&self) -> Option<Instant> {
        match self {
            PaneEnd::StatusPending { at, .. } => Some(*at),
            PaneEnd::Draining { until, .. } => Some(*until),
            _ => None,
        }
    }
}

/// The reader of one control client.
pub(super) struct ControlReader {
    pub server: TmuxPlace,
    /// The tmux session's name (for the log).
    pub name: String,
    pub pane_id: String,
    pub output: Arc<Output>,
    /// The writer's batches waiting for tmux's replies.
    pub pending: PendingAcks,
    /// Told once tmux has answered the attach.
    pub attached: Option<oneshot::Sender<()>>,
    /// Tells the pipe's reader the exit (see [`PaneBytes::Piped`]).
    pub exit_tx: tokio::sync::watch::Sender<Option<ExitInfo>>,
    /// Set by the writer when the hub itself detaches the client.
    pub detached: Arc<AtomicBool>,
    bytes: PaneBytes,
    end: PaneEnd,
}

impl ControlReader {
    /// A reader; with `seed`, the pane's past comes from the seed batch (an adopted pane).
    pub fn new(
        server: TmuxPlace,
        (name, pane_id): (String, String),
        output: Arc<Output>,
        pending: PendingAcks,
        attached: oneshot::Sender<()>,
        (exit_tx, detached): (
            tokio::sync::watch::Sender<Option<ExitInfo>>,
            Arc<AtomicBool>,
        ),
        seed: bool,
    ) -> Self {
        ControlReader {
            server,
            name,
            pane_id,
            output,
            pending,
            attached: Some(attached),
            exit_tx,
            detached,
            bytes: match seed {
                true => PaneBytes::Seeding { held: Vec::new() },
                false => PaneBytes::Live,
            },
            end: PaneEnd::Running,
        }
    }

    /// Reads `stdout` until the client ends (`ended` resolves once it has), then records the
    /// end of the session and fails the acks still waiting.
    pub async fn run(
        mut self,
        mut stdout: Pin<Box<dyn AsyncRead + Send>>,
        ended: BoxFuture<'static, ()>,
    ) {
        let mut parser = ControlParser::new();
        let mut buf = crate::backend::read_buf::ReadBuf::new(64 * 1024);
        loop {
            let deadline = self.end.deadline();
            let timer = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let n = tokio::select! {
                read = stdout.read(buf.space()) => match read {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                },
                _ = timer => {
                    self.on_deadline().await;
                    continue;
                }
            };
            // One push per read, not per `%output` line (~1.4 KB each): fewer locks, sends and
            // WebSocket frames under load.
            let mut batch: Vec<u8> = Vec::new();
            for message in parser.feed(buf.filled(n)) {
                self.on_message(message, &mut batch);
            }
            self.output.push(&batch);
        }
        ended.await;
        self.on_client_gone().await;
    }

    fn piped(&self) -> bool {
        matches!(self.bytes, PaneBytes::Piped)
    }

    /// Records the end of the output: through the pipe's reader when the pipe carries it.
    fn record(&self, exit: ExitInfo) {
        if self.piped() {
            self.exit_tx.send_replace(Some(exit));
        } else {
            self.output.finish(exit);
        }
    }

    /// The pane has exited: drain what tmux still holds (the pipe's reader waits for its own
    /// quiet moment, so a piped pane needs no drain here).
    fn exited(&mut self, exit: ExitInfo) {
        let drain = match self.piped() {
            true => Duration::ZERO,
            false => DEAD_PANE_DRAIN,
        };
        self.end = PaneEnd::Draining {
            exit,
            until: Instant::now() + drain,
        };
    }

    /// The state's own deadline passed: the drain is over, or tmux is asked again.
    async fn on_deadline(&mut self) {
        match std::mem::replace(&mut self.end, PaneEnd::Running) {
            PaneEnd::Draining { exit, .. } => {
                self.record(exit.clone());
                self.end = PaneEnd::Recorded { exit: Some(exit) };
            }
            PaneEnd::StatusPending { asked, .. } => {
                match query_dead_pane(&self.server, &self.pane_id)
                    .await
                    .ok()
                    .flatten()
                {
                    Some(exit) => self.exited(exit),
                    None if asked < DEAD_STATUS_ASKS => {
                        self.end = PaneEnd::StatusPending {
                            at: Instant::now() + DEAD_STATUS_POLL,
                            asked: asked + 1,
                        };
                    }
                    // The status never came: record the exit without a code.
                    None => {
                        self.record(ExitInfo {
                            exit_code: None,
                            reason: "exited".into(),
                            exited_at: Utc::now(),
                        });
                        self.end = PaneEnd::Recorded { exit: None };
                    }
                }
            }
            other => self.end = other,
        }
    }

    /// One message of the control client.
    fn on_message(&mut self, message: ControlMessage, batch: &mut Vec<u8>) {
        if !matches!(message, ControlMessage::Output { .. }) {
            tracing::debug!(session = %self.name, ?message, "tmux control message");
        }
        match message {
            ControlMessage::Output { pane_id, data } if pane_id == self.pane_id => {
                match &mut self.bytes {
                    PaneBytes::Seeding { held } => held.extend_from_slice(&data),
                    PaneBytes::Live => batch.extend_from_slice(&data),
                    PaneBytes::Piped => {}
                }
            }
            // Replies to our own stdin commands, in order (not the attach's, nor hooks').
            ControlMessage::Reply {
                from_stdin: true,
                success,
                lines,
                ..
            } => {
                if let Some(done) = settle_reply(&self.pending, success, lines) {
                    self.on_settled(done.settled, done.ack, done.result, batch);
                }
            }
            // The attach command's own reply: the client is ready for commands.
            ControlMessage::Reply {
                from_stdin: false, ..
            } => {
                if let Some(tx) = self.attached.take() {
                    let _ = tx.send(());
                }
            }
            ControlMessage::SubscriptionChanged { name, value }
                if name == DEAD_SUBSCRIPTION && self.end.exit().is_none() =>
            {
                self.on_pane_state(&value);
            }
            _ => {}
        }
    }

    /// A batch tmux has answered in full.
    fn on_settled(
        &mut self,
        settled: Settled,
        ack: Ack,
        result: Result<(), TmuxError>,
        batch: &mut Vec<u8>,
    ) {
        match settled {
            Settled::Nothing => {
                let _ = ack.send(result);
            }
            Settled::Piped => {
                // What the pane printed before the reply goes in before the pipe's reader,
                // which the ack starts, can push anything. With nobody left to start it (the
                // wait timed out), the bytes stay on `%output`.
                self.output.push(&std::mem::take(batch));
                if ack.send(result).is_ok() {
                    self.bytes = PaneBytes::Piped;
                }
            }
            Settled::Seed(seed) => {
                let held = match std::mem::replace(&mut self.bytes, PaneBytes::Live) {
                    PaneBytes::Seeding { held } => held,
                    other => {
                        self.bytes = other;
                        Vec::new()
                    }
                };
                self.output.push(&seed.unwrap_or(held));
                let _ = ack.send(result);
            }
        }
    }

    /// The subscription reported the pane's state: exited (with its status), dead with no
    /// status yet (ask again), or alive.
    fn on_pane_state(&mut self, value: &str) {
        if let Some(exit) = pane_exit(value, &self.pane_id) {
            self.exited(exit);
        } else if pane_is_dead(value, &self.pane_id)
            && !matches!(self.end, PaneEnd::StatusPending { .. })
        {
            self.end = PaneEnd::StatusPending {
                at: Instant::now() + DEAD_STATUS_POLL,
                asked: 0,
            };
        }
    }

    /// The client is gone: the exit (asked of tmux if the subscription never said it, else
    /// "tmux session closed"), and every waiting ack fails.
    async fn on_client_gone(self) {
        let mut exit = self.end.exit().cloned();
        // The client may have gone before the subscription reported a dead pane; not when
        // the hub detached it (a stop: tmux would be asked in a container on its way out,
        // an exec for each of a fleet's stops, and the pane is alive anyway).
        if exit.is_none() && !self.detached.load(Ordering::SeqCst) {
            exit = query_dead_pane(&self.server, &self.pane_id)
                .await
                .ok()
                .flatten();
        }
        if let Ok(mut p) = self.pending.lock() {
            for waiting in p.drain(..) {
                let _ = waiting.ack.send(Err(TmuxError::SessionEnded));
            }
        }
        self.record(exit.unwrap_or_else(|| ExitInfo {
            exit_code: None,
            reason: "tmux session closed".into(),
            exited_at: Utc::now(),
        }));
    }
}
