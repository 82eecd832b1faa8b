//! Pushing each remote agent's workspace when a turn ends: its state going idle (from its own
//! hook or its screen) is the turn's end, and what it committed then reaches its branch in the
//! user's repository without waiting for a stop. A push runs at a time per agent, a stop's
//! among them ([`Agents::push_workspace`]); a failure is logged and the next turn's end tries
//! again. After the push, the agent's work summary is computed again from its branch (`work`).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::Agents;
use crate::agent_state::State;
use crate::event_bus::EventSink;
use crate::protocol::EventKind;

/// Whether the event is the end of a turn of agent `agent`: its state became idle.
pub fn turn_ended(kind: &EventKind) -> Option<&str> {
    match kind {
        EventKind::SessionStateChanged {
            agent_id: Some(agent),
            state: State::Idle,
            previous,
            ..
        } if *previous != State::Idle => Some(agent),
        _ => None,
    }
}

/// Follows the event bus and pushes a remote agent's workspace at the end of each turn, until
/// `closing`.
pub fn start(
    agents: Arc<Agents>,
    events: &EventSink,
    tracker: &TaskTracker,
    closing: CancellationToken,
) {
    if !agents.defs().any(|d| d.clones_workspace()) {
        return;
    }
    let pushes = tracker.clone();
    events.follow(tracker, closing, move |event| {
        let Some(agent) = turn_ended(&event.kind) else {
            return;
        };
        if !agents.def(agent).is_ok_and(|d| d.clones_workspace()) {
            return;
        }
        let (agents, agent) = (agents.clone(), agent.to_string());
        pushes.spawn(async move {
            let _ = agents.push_workspace(&agent, "its turn ended").await;
            agents.refresh_work_logged(&agent, "its turn ended").await;
        });
    });
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Agent `agent`'s session changed from `previous` to `state`.
    pub(in crate::agents) fn changed(
        agent: Option<&str>,
        state: State,
        previous: State,
    ) -> EventKind {
        EventKind::SessionStateChanged {
            session_id: "s".into(),
            agent_id: agent.map(String::from),
            state,
            previous,
            since: chrono::Utc::now(),
            rule: "r".into(),
            until: None,
        }
    }

    #[test]
    fn a_turn_ends_when_an_agent_becomes_idle() {
        use State::*;
        let table = [
            (changed(Some("w1"), Idle, Working), Some("w1")),
            (changed(Some("w1"), Idle, Blocked), Some("w1")),
            (changed(Some("w1"), Idle, Unknown), Some("w1")),
            (changed(Some("w1"), Working, Idle), None),
            (changed(Some("w1"), Blocked, Working), None),
            (changed(None, Idle, Working), None),
        ];
        for (event, want) in table {
            assert_eq!(turn_ended(&event), want, "{event:?}");
        }
    }
}
