//! Delivery to one webhook: its own bounded queue and task, so a slow or dead receiver delays
//! nobody else. A message is POSTed with a timeout and retried with exponential backoff
//! ([`MAX_ATTEMPTS`] in all); a message given up is counted, kept among the webhook's last
//! [`DEAD_LETTERS_KEPT`] dead letters and published as `notify_gave_up` (which the audit log
//! records).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::format::render;
use super::message::Message;
use crate::config::notify::NotifyConfig;
use crate::event_bus::EventSink;
use crate::protocol::{DeadLetter, EventKind, WebhookStatus};

/// Messages a webhook's queue holds; one more is dropped (and counted).
pub const QUEUE_CAPACITY: usize = 256;
/// Tries of one message, the first included.
pub const MAX_ATTEMPTS: u32 = 5;
/// How long one POST may take.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest wait between two tries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Dead letters kept per webhook (the oldest go first).
pub const DEAD_LETTERS_KEPT: usize = 50;

/// The wait before try `attempt` + 1: `initial_ms` doubled for each try after the first,
/// at most [`MAX_BACKOFF`].
pub fn backoff(initial_ms: u64, attempt: u32) -> Duration {
    let factor = 1u64 << attempt.saturating_sub(1).min(20);
    Duration::from_millis(initial_ms.saturating_mul(factor)).min(MAX_BACKOFF)
}

/// What one try came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Try {
    Sent(u16),
    /// Worth another try: no answer, a timeout, 408, 429 or a 5xx.
    Again(String),
    /// Another try would be refused alike (a 4xx, a redirect).
    Refused(String),
}

/// The verdict on an HTTP status.
pub fn judge(status: u16) -> Try {
    match status {
        200..=299 => Try::Sent(status),
        408 | 429 | 500..=599 => Try::Again(format!("HTTP {status}")),
        _ => Try::Refused(format!("HTTP {status}")),
    }
}

#[derive(Default)]
struct Recent {
    last_sent_at: Option<DateTime<Utc>>,
    last_error: Option<String>,
    last_error_at: Option<DateTime<Utc>>,
    dead_letters: VecDeque<DeadLetter>,
}

/// One webhook: its settings, its queue's sender and what became of its messages.
pub struct Webhook {
    pub index: usize,
    pub name: String,
    pub config: NotifyConfig,
    queue: mpsc::Sender<Message>,
    sent: AtomicU64,
    failed: AtomicU64,
    dead: AtomicU64,
    dropped: AtomicU64,
    recent: Mutex<Recent>,
}

/// What the hub's services a webhook's task uses.
#[derive(Clone)]
pub struct Carrier {
    pub client: reqwest::Client,
    pub events: EventSink,
    pub metrics: crate::metrics::Metrics,
}

impl Webhook {
    /// A webhook and the receiving end of its queue (for [`Webhook::run`]).
    pub fn new(index: usize, config: NotifyConfig) -> (Self, mpsc::Receiver<Message>) {
        let (queue, rx) = mpsc::channel(QUEUE_CAPACITY);
        let hook = Webhook {
            index,
            name: config.display_name(index),
            config,
            queue,
            sent: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            dead: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            recent: Mutex::new(Recent::default()),
        };
        (hook, rx)
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues a message; never waits (a full queue drops it, counted).
    pub fn enqueue(&self, message: Message, metrics: &crate::metrics::Metrics) {
        if self.queue.try_send(message).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            metrics.notify(&self.name, "dropped");
            tracing::warn!(webhook = %self.name, "notify: queue full, message dropped");
        }
    }

    /// Delivers the queued messages one after another until `closing`.
    pub async fn run(
        &self,
        mut queue: mpsc::Receiver<Message>,
        carrier: Carrier,
        closing: CancellationToken,
    ) {
        loop {
            let message = tokio::select! {
                _ = closing.cancelled() => return,
                m = queue.recv() => match m {
                    Some(m) => m,
                    None => return,
                },
            };
            tokio::select! {
                _ = closing.cancelled() => return,
                _ = self.deliver(&message, &carrier) => {}
            }
        }
    }

    /// One message, with its retries.
    async fn deliver(&self, message: &Message, carrier: &Carrier) {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let reason = match self.post(message, &carrier.client).await {
                Try::Sent(_) => {
                    self.sent.fetch_add(1, Ordering::Relaxed);
                    self.recent().last_sent_at = Some(Utc::now());
                    carrier.metrics.notify(&self.name, "sent");
                    return;
                }
                Try::Again(reason) if attempt < MAX_ATTEMPTS => {
                    self.note_failure(&reason, carrier);
                    tokio::time::sleep(backoff(self.config.retry_initial_ms, attempt)).await;
                    continue;
                }
                Try::Again(reason) | Try::Refused(reason) => reason,
            };
            self.note_failure(&reason, carrier);
            self.give_up(message, attempt, reason, carrier);
            return;
        }
    }

    fn note_failure(&self, reason: &str, carrier: &Carrier) {
        self.failed.fetch_add(1, Ordering::Relaxed);
        carrier.metrics.notify(&self.name, "failed");
        let mut recent = self.recent();
        recent.last_error = Some(reason.to_string());
        recent.last_error_at = Some(Utc::now());
    }

    fn give_up(&self, message: &Message, attempts: u32, reason: String, carrier: &Carrier) {
        self.dead.fetch_add(1, Ordering::Relaxed);
        carrier.metrics.notify(&self.name, "dead");
        tracing::warn!(webhook = %self.name, "notify: message given up after {attempts} tries: {reason}");
        let letter = DeadLetter {
            at: Utc::now(),
            event: message.event.as_str().to_string(),
            agent_id: message.agent.id.clone(),
            title: message.title(),
            attempts,
            reason: reason.clone(),
        };
        {
            let mut recent = self.recent();
            if recent.dead_letters.len() >= DEAD_LETTERS_KEPT {
                recent.dead_letters.pop_front();
            }
            recent.dead_letters.push_back(letter);
        }
        carrier.events.emit(EventKind::NotifyGaveUp {
            webhook: self.name.clone(),
            event: message.event.as_str().to_string(),
            agent_id: Some(message.agent.id.clone()),
            session_id: message.agent.session_id.clone(),
            attempts,
            reason,
        });
    }

    /// One POST of `message`.
    pub async fn post(&self, message: &Message, client: &reqwest::Client) -> Try {
        let body = render(self.config.format, message);
        let mut request = client
            .post(self.config.url.get_ref())
            .timeout(REQUEST_TIMEOUT)
            .header(reqwest::header::CONTENT_TYPE, body.content_type);
        for (name, value) in &body.headers {
            request = request.header(*name, value);
        }
        for (name, value) in &self.config.headers {
            request = request.header(name, value.get_ref());
        }
        match request.body(body.bytes).send().await {
            Ok(reply) => judge(reply.status().as_u16()),
            Err(e) if e.is_builder() => Try::Refused(error_text(&e)),
            Err(e) => Try::Again(error_text(&e)),
        }
    }

    /// What became of this webhook's messages.
    pub fn status(&self) -> WebhookStatus {
        let recent = self.recent();
        WebhookStatus {
            index: self.index,
            name: self.name.clone(),
            format: format!("{:?}", self.config.format).to_lowercase(),
            events: self
                .config
                .events
                .iter()
                .map(|e| e.as_str().to_string())
                .collect(),
            teams: self.config.teams.clone(),
            min_interval_s: self.config.min_interval_s,
            header_names: self.config.headers.keys().cloned().collect(),
            queued: QUEUE_CAPACITY - self.queue.capacity(),
            sent: self.sent.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            dead: self.dead.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            last_sent_at: recent.last_sent_at,
            last_error: recent.last_error.clone(),
            last_error_at: recent.last_error_at,
            dead_letters: recent.dead_letters.iter().cloned().collect(),
        }
    }
}

/// A reqwest error without the URL (which may hold a secret), with its cause.
fn error_text(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out".to_string()
    } else if e.is_connect() {
        "cannot connect".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = std::error::Error::source(e);
    let mut causes = Vec::new();
    while let Some(s) = source {
        causes.push(s.to_string());
        source = s.source();
    }
    match causes.last() {
        Some(cause) => format!("{kind}: {cause}"),
        None => kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_a_minute() {
        let waits: Vec<u64> = (1..=5)
            .map(|n| backoff(1000, n).as_millis() as u64)
            .collect();
        assert_eq!(waits, [1000, 2000, 4000, 8000, 16000]);
        assert_eq!(backoff(1000, 12), MAX_BACKOFF);
        assert_eq!(backoff(u64::MAX, 40), MAX_BACKOFF);
    }

    #[test]
    fn statuses_are_sent_retried_or_refused() {
        assert_eq!(judge(204), Try::Sent(204));
        for again in [408, 429, 500, 503] {
            assert!(matches!(judge(again), Try::Again(_)), "{again}");
        }
        for refused in [301, 400, 401, 404] {
            assert!(matches!(judge(refused), Try::Refused(_)), "{refused}");
        }
    }
}
