//! The hub's event bus: lifecycle events for `/v1/events`, the audit recorder, persistence and
//! `wait_state`. Components publish through an [`EventSink`] (a narrow handle: they need not
//! know the hub). Every event is redacted before it is published, since its texts (task output,
//! reasons, labels) leave the hub.

use std::sync::Arc;

use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::protocol::{EventKind, HubEvent};
use crate::redact::Redactor;

/// How many events a slow subscriber may fall behind before it is told it missed some.
const CAPACITY: usize = 4096;

/// Publishes hub events (cheap to clone).
#[derive(Clone)]
pub struct EventSink {
    sender: broadcast::Sender<HubEvent>,
    redactor: Arc<Redactor>,
}

impl EventSink {
    /// A bus whose events pass through `redactor`.
    pub fn new(redactor: Arc<Redactor>) -> Self {
        EventSink {
            sender: broadcast::channel(CAPACITY).0,
            redactor,
        }
    }

    /// Publishes an event, stamped now. Never blocks: a subscriber that falls behind misses
    /// events and is told so.
    pub fn emit(&self, kind: EventKind) {
        let _ = self.sender.send(self.redacted(HubEvent::now(kind)));
    }

    fn redacted(&self, event: HubEvent) -> HubEvent {
        let Ok(mut value) = serde_json::to_value(&event) else {
            return event;
        };
        self.redactor.redact_json(&mut value);
        serde_json::from_value(value).unwrap_or(event)
    }

    /// Every event published from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<HubEvent> {
        self.sender.subscribe()
    }

    /// Calls `on_event` with every event published from now on, in order, on a task of
    /// `tracker`, until `closing` (events missed by falling behind are skipped): a component's
    /// follower of the bus.
    pub fn follow(
        &self,
        tracker: &TaskTracker,
        closing: CancellationToken,
        mut on_event: impl FnMut(HubEvent) + Send + 'static,
    ) {
        let mut events = self.subscribe();
        tracker.spawn(async move {
            loop {
                let event = tokio::select! {
                    _ = closing.cancelled() => return,
                    e = events.recv() => e,
                };
                match event {
                    Ok(event) => on_event(event),
                    Err(RecvError::Lagged(_)) => continue,
                    Err(RecvError::Closed) => return,
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::AgentEvent;

    #[test]
    fn published_events_are_redacted() {
        let redactor = Arc::new(Redactor::new());
        redactor.add_literals(["hunter2-secret-value"]);
        let sink = EventSink::new(redactor);
        let mut rx = sink.subscribe();
        sink.emit(EventKind::AgentStartFailed(AgentEvent {
            agent_id: "a".into(),
            detail: "login with hunter2-secret-value failed".into(),
        }));
        let got = serde_json::to_string(&rx.try_recv().unwrap()).unwrap();
        assert!(!got.contains("hunter2-secret-value"), "{got}");
        assert!(got.contains("agent_start_failed"), "{got}");
    }
}
