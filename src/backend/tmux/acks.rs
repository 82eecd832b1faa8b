//! The bookkeeping of the control client's acks: the command batches its writer sent
//! ([`super::client`]), in order, each settled once its reader ([`super::reader`]) has seen
//! tmux's replies to all of it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

use super::{pane, TmuxError};

/// Where a batch's outcome goes.
pub(super) type Ack = oneshot::Sender<Result<(), TmuxError>>;

/// A command batch waiting for tmux's replies.
pub(super) struct Pending {
    /// Replies still expected.
    replies: usize,
    /// The first error among them.
    error: Option<TmuxError>,
    pub ack: Ack,
    purpose: Purpose,
    /// The reply lines of each command, kept for a [`Purpose::Seed`] batch only.
    replies_seen: Vec<Vec<Vec<u8>>>,
}

impl Pending {
    /// A batch of `replies` commands, `ack` settled when tmux has answered them all.
    pub fn new(replies: usize, ack: Ack, purpose: Purpose) -> Self {
        Pending {
            replies,
            error: None,
            ack,
            purpose,
            replies_seen: Vec::new(),
        }
    }
}

/// What a command batch is for, where the reader must do more than settle its ack.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Purpose {
    Plain,
    /// The `pipe-pane` that moves the pane's bytes to the pipe (see [`super::pipe`]).
    OpensPipe,
    /// The pane's screen and history and its cursor (the client's `seed_commands`), taken in
    /// the control client's own stream: output tmux sent before the reply is in it, output after it is
    /// not, so an adopted pane's past is shown without losing or doubling a byte.
    Seed,
}

/// A batch tmux has answered in full: what the reader must do before its ack is sent.
pub(super) struct Done {
    pub settled: Settled,
    pub ack: Ack,
    pub result: Result<(), TmuxError>,
}

/// What a complete batch asks of the reader.
pub(super) enum Settled {
    Nothing,
    /// The pane's bytes come through the pipe from here on.
    Piped,
    /// The pane as it was at this point of the stream, to go into the output (none if tmux
    /// could not say).
    Seed(Option<Vec<u8>>),
}

/// Batches waiting for tmux's replies, in command order.
pub(super) type PendingAcks = Arc<Mutex<VecDeque<Pending>>>;

/// Counts a reply against the oldest batch; the batch once tmux has answered all of it.
pub(super) fn settle_reply(
    pending: &PendingAcks,
    success: bool,
    lines: Vec<Vec<u8>>,
) -> Option<Done> {
    let mut p = pending.lock().ok()?;
    let front = p.front_mut()?;
    if !success && front.error.is_none() {
        let text: Vec<String> = lines
            .iter()
            .map(|l| String::from_utf8_lossy(l).into_owned())
            .collect();
        front.error = Some(TmuxError::Refused {
            message: text.join(" "),
        });
    }
    if front.purpose == Purpose::Seed {
        front.replies_seen.push(lines);
    }
    front.replies = front.replies.saturating_sub(1);
    if front.replies > 0 {
        return None;
    }
    let done = p.pop_front()?;
    let settled = match (done.purpose, &done.error) {
        (Purpose::OpensPipe, None) => Settled::Piped,
        (Purpose::Seed, None) => Settled::Seed(match done.replies_seen.as_slice() {
            [history, cursor] => Some(pane::seed(history, cursor)),
            _ => None,
        }),
        (Purpose::Seed, Some(e)) => {
            tracing::warn!("the pane's past is not shown: {e}");
            Settled::Seed(None)
        }
        _ => Settled::Nothing,
    };
    Some(Done {
        settled,
        ack: done.ack,
        result: done.error.map_or(Ok(()), Err),
    })
}
