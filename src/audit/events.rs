//! Recording hub events that are actions of their own: policy actions (`policy_*`, emitted by
//! the policy engine), budgets reaching 80 % and 100 % (`budget_*`), webhook messages given up (`notify_gave_up`), agent lifecycle (`agent_*`) and sessions brought back after a restart
//! (`session_restored`). They are recorded as they are published on the hub's event bus, with
//! the hub as the actor. Session events that follow from a request (created, killed,
//! registered...) are not: the request itself is on record, once.

use tokio::sync::broadcast::error::RecvError;

use super::{new_record, Record};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::event_bus::EventSink;
use crate::protocol::HubEvent;

/// Whether an event of this type is audited.
pub fn audited_event(kind: &str) -> bool {
    kind == "session_restored"
        || kind == "notify_gave_up"
        || ["policy_", "agent_", "budget_"]
            .iter()
            .any(|p| kind.starts_with(p))
}

/// The record for an audited event.
pub fn event_record(event: &HubEvent) -> Option<Record> {
    let kind = event.type_name();
    if !audited_event(kind) {
        return None;
    }
    let mut r = new_record("hub", None, kind);
    r.session_id = event.kind.session_id().map(String::from);
    r.agent_id = event.kind.agent_id().map(String::from);
    r.command = serde_json::to_string(event).ok();
    r.success = Some(!kind.ends_with("_failed") && kind != "notify_gave_up");
    Some(r)
}

/// The audit recorder component: records the audited hub events as they are published.
pub struct Recorder {
    pub events: EventSink,
    pub audit: super::Audit,
}

impl Recorder {
    /// Subscribes now and records until `closing` is cancelled.
    pub fn start(self, tracker: &TaskTracker, closing: CancellationToken) {
        let mut events = self.events.subscribe();
        let audit = self.audit;
        tracker.spawn(async move {
            loop {
                let event = tokio::select! {
                    _ = closing.cancelled() => return,
                    e = events.recv() => e,
                };
                match event {
                    Ok(event) => {
                        if let Some(record) = event_record(&event) {
                            if let Err(e) = audit.record(record).await {
                                tracing::error!("audit: event not recorded: {e}");
                            }
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        tracing::error!("audit: {n} hub events were missed");
                        let mut r = new_record("hub", None, "events_dropped");
                        r.command = Some(format!("{n} hub events were not recorded"));
                        r.success = Some(false);
                        let _ = audit.record(r).await;
                    }
                    Err(RecvError::Closed) => return,
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{
        AgentEvent, EventKind, PolicyAction, PolicyEvent, SessionAdded, SessionBackend,
    };
    use crate::session::Owner;

    fn added(agent: &str) -> SessionAdded {
        SessionAdded {
            session_id: "s".into(),
            backend: SessionBackend::Tmux,
            source: "container".into(),
            agent_id: Some(agent.into()),
            owner: Owner::default(),
        }
    }

    #[test]
    fn policy_agent_and_restore_events_are_recorded_request_echoes_are_not() {
        let agent = |id: &str| AgentEvent {
            agent_id: id.into(),
            detail: String::new(),
        };
        let policy = PolicyEvent {
            agent_id: Some("a".into()),
            session_id: "s".into(),
            policy: "p".into(),
            action: PolicyAction::Restart,
            trigger: None,
            reason: String::new(),
            state: crate::agent_state::State::Idle,
            idle_for_ms: 0,
            dry_run: false,
        };
        let table = [
            (EventKind::PolicyRestarted(policy), Some(("a", true))),
            (EventKind::AgentStartFailed(agent("b")), Some(("b", false))),
            (
                EventKind::TaskLog {
                    task_id: "t".into(),
                    chunk: String::new(),
                    stream: None,
                    dropped_bytes: None,
                },
                None,
            ),
            (
                EventKind::OwnershipChanged {
                    session_id: "s".into(),
                    owner: Owner::default(),
                },
                None,
            ),
            (EventKind::SessionCreated(added("c")), None),
            (EventKind::SessionRestored(added("d")), Some(("d", true))),
        ];
        for (kind, want) in table {
            let event = HubEvent::now(kind);
            let got = event_record(&event);
            assert_eq!(
                got.as_ref().map(|r| (
                    r.agent_id.clone().unwrap_or_default(),
                    r.success == Some(true)
                )),
                want.map(|(a, s)| (a.to_string(), s)),
                "{event:?}"
            );
        }
    }
}
