//! Coalescing a task's output into `task_log` events.

use super::*;

/// Coalesces a task's output into `task_log` events: one event per [`LOG_FLUSH_INTERVAL`] or
/// [`LOG_FLUSH_BYTES`], never splitting a UTF-8 character (invalid bytes become U+FFFD).
pub(super) struct LogPump {
    events: EventSink,
    task_id: String,
    /// `stdout` / `stderr` for piped tasks.
    stream: Option<&'static str>,
    pending: Vec<u8>,
    dropped_bytes: u64,
    /// When the pending bytes are due.
    pub(super) flush_at: Option<Instant>,
    /// Redaction across chunks: each event's text is redacted with the output before it as
    /// context, so a secret cut between two events is still caught in the second.
    redact: crate::redact::stream::StreamRedactor,
}

impl LogPump {
    pub(super) fn new(handles: &Handles, task_id: String, stream: Option<&'static str>) -> Self {
        LogPump {
            redact: crate::redact::stream::StreamRedactor::new(handles.host.redactor.clone(), b""),
            events: handles.events.clone(),
            task_id,
            stream,
            pending: Vec::new(),
            dropped_bytes: 0,
            flush_at: None,
        }
    }

    pub(super) fn push(&mut self, bytes: &[u8], dropped_bytes: u64) {
        self.pending.extend_from_slice(bytes);
        self.dropped_bytes += dropped_bytes;
        if self.flush_at.is_none() {
            self.flush_at = Some(Instant::now() + LOG_FLUSH_INTERVAL);
        }
        if self.pending.len() >= LOG_FLUSH_BYTES {
            self.flush(false);
        }
    }

    /// Publishes what is pending; unless `all`, a character cut at the end waits for the rest.
    pub(super) fn flush(&mut self, all: bool) {
        let keep = if all {
            self.pending.len()
        } else {
            crate::session::input::complete_utf8_len(&self.pending)
        };
        if keep > 0 || self.dropped_bytes > 0 {
            let rest = self.pending.split_off(keep);
            let mut redacted = self.redact.push(&self.pending);
            redacted.extend(self.redact.flush());
            let chunk = String::from_utf8_lossy(&redacted).into_owned();
            self.pending = rest;
            let dropped = std::mem::take(&mut self.dropped_bytes);
            self.events.emit(EventKind::TaskLog {
                task_id: self.task_id.clone(),
                chunk,
                stream: self.stream.map(String::from),
                dropped_bytes: (dropped > 0).then_some(dropped),
            });
        }
        self.flush_at = (!self.pending.is_empty()).then(|| Instant::now() + LOG_FLUSH_INTERVAL);
    }
}
