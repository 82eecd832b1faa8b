//! Outgoing webhooks (`[[notify]]` in hub.toml, `docs/notify.md`): the notifier follows the
//! hub's event bus, decides which events a person must hear of ([`decide`], pure), and hands
//! each webhook its messages through its own queue and task ([`deliver`]). Nothing here waits
//! on a receiver where the hub would feel it: the bus is only read, and a queue that is full
//! drops (and counts) rather than blocks.
//!
//! What it needs of the hub it gets as narrow handles: the [`EventSink`], the metrics, and a
//! [`Directory`] telling what is known of an event's agent (its label, team, question, last
//! screen lines).

pub mod answer_link;
pub mod decide;
pub mod deliver;
pub mod directory;
pub mod format;
pub mod message;

use std::sync::{Arc, RwLock};

use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::notify::{NotifyConfig, NotifyEvent};
use crate::event_bus::EventSink;
use crate::protocol::HubEvent;
use crate::protocol::{WebhookStatus, WebhookTest};
use answer_link::{AnswerLink, AnswerLinks};
use decide::{Facts, History, Sent};
use deliver::{Carrier, Try, Webhook};
use message::{AgentRef, Message};

/// How many non-blank screen lines a message carries.
pub const LAST_LINES: usize = 10;
/// How long a `blocked` message waits for its question to show on the screen, when the
/// agent's own signal (a hook) said `blocked` before its screen did.
pub const QUESTION_WAIT: std::time::Duration = std::time::Duration::from_millis(1500);
/// How often the screen is looked at meanwhile.
const QUESTION_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// What the hub knows of an event's agent, looked up when the notifier handles the event.
pub trait Directory: Send + Sync {
    /// The label, team, question (while blocked), last screen lines (redacted) and last input
    /// of the session and agent named.
    fn facts(&self, session_id: Option<&str>, agent_id: Option<&str>) -> Facts;
}

/// The last `n` non-blank lines of a screen's text, right-trimmed.
pub fn last_lines(text: &str, n: usize) -> Vec<String> {
    let lines: Vec<String> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .map(String::from)
        .collect();
    lines[lines.len().saturating_sub(n)..].to_vec()
}

/// The handles the notifier works with.
pub struct Handles {
    pub events: EventSink,
    pub metrics: crate::metrics::Metrics,
    pub directory: Arc<dyn Directory>,
    /// Signs the answer links of questions (`notify_actions = true`); `None`: no links.
    pub answer_links: Option<Arc<AnswerLinks>>,
}

/// The notifier component (cheap to share: `Arc`).
pub struct Notifier {
    hooks: Vec<Arc<Webhook>>,
    queues: std::sync::Mutex<Vec<mpsc::Receiver<Message>>>,
    /// Where links point (`public_url`, else the address the API listens on).
    dashboard: RwLock<String>,
    carrier: Carrier,
    directory: Arc<dyn Directory>,
    answer_links: Option<Arc<AnswerLinks>>,
}

impl Notifier {
    /// A notifier for `webhooks`; nothing is delivered until [`Notifier::start`].
    pub fn new(webhooks: &[NotifyConfig], dashboard: String, handles: Handles) -> Self {
        let (hooks, queues) = webhooks
            .iter()
            .enumerate()
            .map(|(n, config)| {
                let (hook, rx) = Webhook::new(n, config.clone());
                (Arc::new(hook), rx)
            })
            .unzip();
        Notifier {
            hooks,
            queues: std::sync::Mutex::new(queues),
            dashboard: RwLock::new(dashboard),
            carrier: Carrier {
                client: reqwest::Client::new(),
                events: handles.events,
                metrics: handles.metrics,
            },
            directory: handles.directory,
            answer_links: handles.answer_links,
        }
    }

    /// Links point at `dashboard` from now on (the address the API got, when there is no
    /// `public_url`).
    pub fn set_dashboard(&self, dashboard: String) {
        *self.dashboard.write().unwrap_or_else(|e| e.into_inner()) = dashboard;
    }

    fn dashboard(&self) -> String {
        self.dashboard
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Starts each webhook's task and the one following the bus, until `closing` (a second
    /// start does nothing: the queues are taken once).
    pub fn start(self: &Arc<Self>, tracker: &TaskTracker, closing: CancellationToken) {
        let queues = std::mem::take(&mut *self.queues.lock().unwrap_or_else(|e| e.into_inner()));
        if queues.is_empty() {
            return;
        }
        for (hook, queue) in self.hooks.iter().cloned().zip(queues) {
            let carrier = self.carrier.clone();
            let closing = closing.clone();
            tracker.spawn(async move { hook.run(queue, carrier, closing).await });
        }
        let events = self.carrier.events.subscribe();
        let me = self.clone();
        let tasks = tracker.clone();
        tracker.spawn(async move { me.follow(events, tasks, closing).await });
    }

    async fn follow(
        self: Arc<Self>,
        mut events: tokio::sync::broadcast::Receiver<HubEvent>,
        tracker: TaskTracker,
        closing: CancellationToken,
    ) {
        let mut history = History::default();
        let mut sent: Vec<Sent> = self.hooks.iter().map(|_| Sent::new()).collect();
        loop {
            let event = tokio::select! {
                _ = closing.cancelled() => return,
                e = events.recv() => e,
            };
            match event {
                Ok(event) => self.handle(&event, &mut history, &mut sent, &tracker),
                Err(RecvError::Lagged(n)) => {
                    tracing::warn!("notify: {n} hub events were missed");
                }
                Err(RecvError::Closed) => return,
            }
        }
    }

    fn handle(
        self: &Arc<Self>,
        event: &HubEvent,
        history: &mut History,
        sent: &mut [Sent],
        tracker: &TaskTracker,
    ) {
        // Every event goes to `decide` (its history follows every state change); only those
        // that may make a message are looked up.
        let facts = match decide::needs_facts(event) {
            true => self
                .directory
                .facts(event.kind.session_id(), event.kind.agent_id()),
            false => Facts::default(),
        };
        let Some(message) = decide::decide(event, &facts, history, &self.dashboard()) else {
            return;
        };
        let hooks: Vec<Arc<Webhook>> = self
            .hooks
            .iter()
            .zip(sent.iter_mut())
            .filter_map(|(hook, sent)| {
                decide::admit(&hook.config, &message, sent, event.at).then(|| hook.clone())
            })
            .collect();
        if hooks.is_empty() {
            return;
        }
        if !decide::awaits_question(&message) {
            return self.enqueue(&hooks, message);
        }
        // Waits off the bus's loop: the events behind this one are not held up.
        let me = self.clone();
        tracker.spawn(async move {
            let message = me.with_question(message).await;
            me.enqueue(&hooks, message);
        });
    }

    fn enqueue(&self, hooks: &[Arc<Webhook>], mut message: Message) {
        message.answers = self.answer_links_of(&message);
        for hook in hooks {
            hook.enqueue(message.clone(), &self.carrier.metrics);
        }
    }

    /// A question's answer links, when the hub makes them and the message asks one with
    /// choices.
    fn answer_links_of(&self, message: &Message) -> Vec<AnswerLink> {
        let (Some(links), NotifyEvent::Blocked) = (&self.answer_links, message.event) else {
            return Vec::new();
        };
        let (Some(session), Some(since), Some(question)) = (
            message.agent.session_id.as_deref(),
            message.since,
            message.question.as_deref(),
        ) else {
            return Vec::new();
        };
        let base = self.dashboard();
        let now = chrono::Utc::now();
        links.links(&base, session, since, question, &message.choices, now)
    }

    /// `message` with the question its agent's screen shows within [`QUESTION_WAIT`] (as it
    /// was, if none shows).
    async fn with_question(&self, mut message: Message) -> Message {
        let deadline = tokio::time::Instant::now() + QUESTION_WAIT;
        while tokio::time::Instant::now() < deadline {
            tokio::time::sleep(QUESTION_POLL).await;
            let facts = self
                .directory
                .facts(message.agent.session_id.as_deref(), None);
            if let Some((question, choices)) = facts.question {
                message.question = Some(question);
                message.choices = choices;
                message.last_lines = facts.last_lines;
                break;
            }
        }
        message
    }

    /// The answer links' signer (`notify_actions = true`), which also checks them.
    pub fn answer_links(&self) -> Option<&Arc<AnswerLinks>> {
        self.answer_links.as_ref()
    }

    /// What became of each webhook's messages.
    pub fn status(&self) -> Vec<WebhookStatus> {
        self.hooks.iter().map(|h| h.status()).collect()
    }

    /// Sends a test message to every webhook at once, one try each, and reports each answer.
    pub async fn test(&self) -> Vec<WebhookTest> {
        let message = self.test_message();
        let tries = self.hooks.iter().map(|hook| {
            let message = message.clone();
            let client = self.carrier.client.clone();
            async move {
                let outcome = hook.post(&message, &client).await;
                test_result(hook, outcome)
            }
        });
        futures_util::future::join_all(tries).await
    }

    fn test_message(&self) -> Message {
        let dashboard = self.dashboard();
        Message {
            event: NotifyEvent::Test,
            agent: AgentRef {
                id: "agent-hub".into(),
                ..AgentRef::default()
            },
            what: "test message: this webhook is reached".into(),
            at: chrono::Utc::now(),
            since: None,
            for_ms: None,
            question: None,
            choices: Vec::new(),
            last_lines: Vec::new(),
            detail: None,
            link: message::link(&dashboard, None, None),
            answers: Vec::new(),
        }
    }
}

fn test_result(hook: &Webhook, outcome: Try) -> WebhookTest {
    let status_of = |reason: &str| {
        reason
            .strip_prefix("HTTP ")
            .and_then(|s| s.parse::<u16>().ok())
    };
    let (ok, status, error) = match outcome {
        Try::Sent(status) => (true, Some(status), None),
        Try::Again(reason) | Try::Refused(reason) => (false, status_of(&reason), Some(reason)),
    };
    WebhookTest {
        index: hook.index,
        name: hook.name.clone(),
        ok,
        status,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_lines_are_the_non_blank_ones_at_the_end() {
        let text = "a\n\nb  \n   \nc\n\n\n";
        assert_eq!(last_lines(text, 2), ["b", "c"]);
        assert_eq!(last_lines(text, 10), ["a", "b", "c"]);
        assert!(last_lines("", 3).is_empty());
    }
}
