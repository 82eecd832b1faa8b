//! Redacting a byte stream chunk by chunk. A chunk is sent on at once except for a trailing
//! word that could still become a secret (it is, or begins with, a known prefix such as `sk-`
//! or `ghp_`, or the start of a literal secret) and an escape sequence cut off at the end:
//! those are held until the next chunk tells, or until [`FLUSH_AFTER`] passes with nothing new
//! (the caller's timer calls [`StreamRedactor::flush`]). Ordinary typing is never held. Output
//! already sent is kept as context, so a secret whose start went out earlier is still caught.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{trailing_word_start, visible, Redactor, CONTEXT_BYTES};

/// How long a held tail waits for more output before it is sent (redacted if it looks like
/// the start of a secret).
pub const FLUSH_AFTER: Duration = Duration::from_millis(20);
/// Longest trailing word held back; longer ones are sent (and redacted if they match).
const MAX_HOLD_BYTES: usize = 4096;
/// How much text before the trailing word is looked at.
const LOOK_BEHIND_BYTES: usize = 128;

/// One stream's redaction state.
pub struct StreamRedactor {
    redactor: Arc<Redactor>,
    /// Raw output already sent (its last [`CONTEXT_BYTES`]).
    context: Vec<u8>,
    /// Raw output held back.
    pending: Vec<u8>,
    held_since: Option<Instant>,
}

impl StreamRedactor {
    /// A stream whose output follows `before` (raw output the viewer already has, if any).
    pub fn new(redactor: Arc<Redactor>, before: &[u8]) -> Self {
        StreamRedactor {
            redactor,
            context: before[before.len().saturating_sub(CONTEXT_BYTES)..].to_vec(),
            pending: Vec::new(),
            held_since: None,
        }
    }

    /// Takes a chunk; returns the redacted bytes that can be sent now.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let v = visible::project(&self.pending);
        let mut hold = v.incomplete_from.unwrap_or(self.pending.len());
        // Judge the trailing word whole, though it may have begun in output already sent; a
        // little text before it says whether it follows `Bearer` or `key =`.
        let from = trailing_word_start(&v.text).saturating_sub(LOOK_BEHIND_BYTES);
        let mut text = Vec::new();
        if from == 0 {
            let tail = self.context.len().saturating_sub(LOOK_BEHIND_BYTES);
            text.extend_from_slice(&visible::project(&self.context[tail..]).text);
        }
        let sent = text.len();
        text.extend_from_slice(&v.text[from..]);
        let word_start = trailing_word_start(&text);
        let word = &text[word_start..];
        let held = word.len() <= MAX_HOLD_BYTES
            && self.redactor.could_become_secret(&text[..word_start], word);
        if held {
            let start_in_pending = word_start.saturating_sub(sent) + from;
            if start_in_pending < v.text.len() {
                hold = hold.min(v.raw_pos(start_in_pending));
            }
        }
        let out = self.emit(hold, false);
        if self.pending.is_empty() {
            self.held_since = None;
        } else if self.held_since.is_none() {
            self.held_since = Some(Instant::now());
        }
        out
    }

    /// Sends everything held; a held word that looks like a cut-off secret is redacted.
    pub fn flush(&mut self) -> Vec<u8> {
        self.held_since = None;
        self.emit(self.pending.len(), true)
    }

    /// The redactor this stream uses.
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    /// How many raw bytes are held back.
    pub fn held_bytes(&self) -> usize {
        self.pending.len()
    }

    /// When the held tail should be flushed, if anything is held.
    pub fn flush_deadline(&self) -> Option<Instant> {
        self.held_since.map(|t| t + FLUSH_AFTER)
    }

    fn emit(&mut self, upto: usize, at_end: bool) -> Vec<u8> {
        if upto == 0 {
            return Vec::new();
        }
        let out = self
            .redactor
            .redact_window(&self.context, &self.pending[..upto], at_end);
        self.context.extend(self.pending.drain(..upto));
        let excess = self.context.len().saturating_sub(CONTEXT_BYTES);
        self.context.drain(..excess);
        out
    }
}
