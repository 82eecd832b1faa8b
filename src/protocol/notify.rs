//! Wire types of the outgoing webhooks' routes: `GET /v1/notify` (what became of each
//! webhook's messages) and `POST /v1/notify/test` (each one's answer to a test message). A
//! webhook's URL and header values are secrets: only its name and header names are shown.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A message given up after its retries.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeadLetter {
    pub at: DateTime<Utc>,
    /// What it told of (`blocked`, `turn_finished`, ...).
    pub event: String,
    pub agent_id: String,
    pub title: String,
    pub attempts: u32,
    pub reason: String,
}

/// One webhook and what became of its messages.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookStatus {
    pub index: usize,
    /// Its `name`, else `notify[INDEX] HOST`.
    pub name: String,
    /// `json`, `ntfy` or `slack`.
    pub format: String,
    pub events: Vec<String>,
    pub teams: Vec<String>,
    pub min_interval_s: u64,
    pub header_names: Vec<String>,
    /// Messages waiting in its queue.
    pub queued: usize,
    pub sent: u64,
    /// Tries that failed (each retried or given up).
    pub failed: u64,
    /// Messages given up after their retries.
    pub dead: u64,
    /// Messages dropped because its queue was full.
    pub dropped: u64,
    pub last_sent_at: Option<DateTime<Utc>>,
    pub last_error: Option<String>,
    pub last_error_at: Option<DateTime<Utc>>,
    /// The last messages given up, newest last.
    pub dead_letters: Vec<DeadLetter>,
}

impl WebhookStatus {
    /// Whether its last try failed (no message sent since the last error).
    pub fn failing(&self) -> bool {
        match (self.last_error_at, self.last_sent_at) {
            (Some(error), Some(sent)) => error > sent,
            (Some(_), None) => true,
            _ => false,
        }
    }
}

/// `GET /v1/notify`
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NotifyReply {
    pub ok: bool,
    pub webhooks: Vec<WebhookStatus>,
}

/// One webhook's answer to a test message.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WebhookTest {
    pub index: usize,
    pub name: String,
    /// It answered 2xx.
    pub ok: bool,
    /// The HTTP status it answered with, if it answered.
    pub status: Option<u16>,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// `POST /v1/notify/test`: each webhook's answer; `delivered` when every one took it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NotifyTestReply {
    pub ok: bool,
    pub delivered: bool,
    pub webhooks: Vec<WebhookTest>,
}

/// `GET /answer/{session}/{token}` asked for JSON: what the link would answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AnswerLinkView {
    pub ok: bool,
    pub session_id: String,
    /// The question's words, as the screen shows them now.
    pub question: String,
    /// The choice's label, and the keys that give it.
    pub answer: String,
    pub keys: Vec<String>,
    pub expires_at: Option<DateTime<Utc>>,
}

/// `POST /answer/{session}/{token}`: the answer was sent; `receipt` is `submitted` when the
/// screen changed within a few seconds, else `stalled`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AnswerReply {
    pub ok: bool,
    pub session_id: String,
    pub answer: String,
    pub keys: Vec<String>,
    pub receipt: String,
}
