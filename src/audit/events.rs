//! Recording hub events that are actions of their own: policy actions (`policy_*`, emitted by
//! the policy engine), agent lifecycle (`agent_*`) and sessions brought back after a restart
//! (`session_restored`). They are recorded as they are published on the hub's event bus, with
//! the hub as the actor. Session events that follow from a request (created, killed,
//! registered...) are not: the request itself is on record, once.

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use super::{new_record, Record};
use crate::hub::Hub;

/// Whether an event of this type is audited.
pub fn audited_event(kind: &str) -> bool {
    kind == "session_restored" || ["policy_", "agent_"].iter().any(|p| kind.starts_with(p))
}

/// The record for an audited event.
pub fn event_record(event: &Value) -> Option<Record> {
    let kind = event.get("type")?.as_str()?;
    if !audited_event(kind) {
        return None;
    }
    let text = |keys: &[&str]| {
        keys.iter()
            .find_map(|k| event.get(*k).and_then(Value::as_str))
            .map(String::from)
    };
    let mut r = new_record("hub", None, kind);
    r.session_id = text(&["sessionId", "session_id"]);
    r.agent_id = text(&["agentId", "agent_id"]);
    r.command = Some(event.to_string());
    r.success = Some(!kind.ends_with("_failed"));
    r.error_code = text(&["error_code", "errorCode"]);
    Some(r)
}

/// Subscribes to the hub's events and records the audited ones until the hub closes.
pub fn spawn_recorder(hub: &Hub) {
    let mut events = hub.subscribe_events();
    let audit = hub.audit().clone();
    let closing = hub.closing();
    hub.spawn(async move {
        loop {
            let event = tokio::select! {
                _ = closing.cancelled() => return,
                e = events.recv() => e,
            };
            match event {
                Ok(event) => {
                    if let Some(record) = event_record(&event) {
                        if let Err(e) = audit.record(record).await {
                            tracing::error!("audit: event not recorded: {}", e.0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn policy_agent_and_restore_events_are_recorded_request_echoes_are_not() {
        let table = [
            (
                json!({"type": "policy_restart", "agentId": "a"}),
                Some(("a", true)),
            ),
            (
                json!({"type": "agent_start_failed", "agentId": "b"}),
                Some(("b", false)),
            ),
            (json!({"type": "task_log", "taskId": "t"}), None),
            (json!({"type": "ownership_changed"}), None),
            (json!({"type": "session_created", "agentId": "c"}), None),
            (
                json!({"type": "session_restored", "agentId": "d"}),
                Some(("d", true)),
            ),
            (json!({"no": "type"}), None),
        ];
        for (event, want) in table {
            let got = event_record(&event);
            assert_eq!(
                got.as_ref().map(|r| (
                    r.agent_id.clone().unwrap_or_default(),
                    r.success == Some(true)
                )),
                want.map(|(a, s)| (a.to_string(), s)),
                "{event}"
            );
        }
    }
}
