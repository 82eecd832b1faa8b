//! Each agent's work at a glance ([`crate::workspace::summary`]: commits ahead and behind its
//! base, files changed, whether its branch merges cleanly), computed off the async threads
//! when a turn ends, when the agent starts, stops, exits or is re-attached, once for every
//! checkout at the hub's start, and when a client asks (`GET /v1/agents/{id}/work`). It is
//! kept in the agent's runtime between, so listing the fleet runs no git; a summary that
//! changed is published as `work_changed`.
//!
//! A workspace on another engine is read from its branch in the user's repository, after the
//! push at its turn's end (`workspace_push` computes it then).

use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::workspace::{blocking, branch, checkout};
use super::workspace_push::turn_ended;
use super::Agents;
use crate::error::HubResult;
use crate::event_bus::EventSink;
use crate::protocol::{EventKind, WorkspaceInfo};
use crate::workspace::{self, Work, WorkSummary, WorkspaceError};

/// Why an event asks for an agent's work to be computed again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refresh {
    /// Its state became idle.
    TurnEnded,
    /// It started, stopped, exited or was re-attached.
    Lifecycle,
}

/// The agent whose work the event asks to compute again, and why (pure).
pub fn refresh_for(kind: &EventKind) -> Option<(&str, Refresh)> {
    if let Some(agent) = turn_ended(kind) {
        return Some((agent, Refresh::TurnEnded));
    }
    match kind {
        EventKind::AgentStarted(a)
        | EventKind::AgentStopped(a)
        | EventKind::AgentExited(a)
        | EventKind::AgentAttached(a) => Some((a.agent_id.as_str(), Refresh::Lifecycle)),
        _ => None,
    }
}

impl Agents {
    /// Computes the agent's work now and keeps it: `None` while there is nothing to read (its
    /// checkout, or for a workspace on another engine its branch, is not made yet). `NO_WORKSPACE` for an agent without a workspace.
    pub async fn refresh_work(&self, id: &str) -> HubResult<Option<WorkSummary>> {
        let lock = self.work_lock(id)?;
        let _one = lock.lock().await;
        self.compute_work(id).await
    }

    /// [`Agents::refresh_work`] for the hub's own triggers: a failure is logged.
    pub async fn refresh_work_logged(&self, id: &str, why: &str) {
        if let Err(e) = self.refresh_work(id).await {
            tracing::info!(agent = id, "its work summary was not computed ({why}): {e}");
        }
    }

    fn work_lock(&self, id: &str) -> HubResult<Arc<tokio::sync::Mutex<()>>> {
        self.work_locks.of(id)
    }

    /// The work summary computed, kept and, when it changed, published. Under the agent's
    /// work lock, so an older computation never replaces a newer one.
    async fn compute_work(&self, id: &str) -> HubResult<Option<WorkSummary>> {
        let clones = self.def(id)?.clones_workspace();
        let ws = self.workspace_of(id)?;
        let work = blocking(move || summary_of(&ws, clones)).await?;
        self.keep_work(id, work.clone());
        Ok(work)
    }

    /// Keeps `work` as the agent's and publishes `work_changed` when it says otherwise than
    /// the summary it replaces.
    fn keep_work(&self, id: &str, work: Option<WorkSummary>) {
        let changed = self.update_and(id, |rt| {
            let changed = match (&rt.work, &work) {
                (Some(old), Some(new)) => !old.same_work(new),
                (old, new) => old.is_some() != new.is_some(),
            };
            rt.work = work.clone();
            changed
        });
        if changed == Some(true) {
            self.handles.events.emit(EventKind::WorkChanged {
                agent_id: id.to_string(),
                work,
            });
        }
    }
}

/// The summary of the workspace `ws`: its checkout here, or its pushed branch (`clones`);
/// `None` while there is neither.
fn summary_of(ws: &WorkspaceInfo, clones: bool) -> Result<Option<WorkSummary>, WorkspaceError> {
    let there = match clones {
        true => workspace::branch_tip(Path::new(&ws.repo), &ws.branch).is_some(),
        false => ws.exists,
    };
    if !there {
        return Ok(None);
    }
    match clones {
        true => workspace::summary(Work::Pushed(&branch(ws))).map(Some),
        false => workspace::summary(Work::Checkout(&checkout(ws))).map(Some),
    }
}

/// Follows the event bus and computes an agent's work again when [`refresh_for`] says so,
/// until `closing`; first, once for every agent with a workspace (one after another). Triggers
/// that come while one waits for its turn are one computation.
pub fn start(
    agents: Arc<Agents>,
    events: &EventSink,
    tracker: &TaskTracker,
    closing: CancellationToken,
) {
    if !agents.defs().any(|d| d.workspace.is_some()) {
        return;
    }
    let waiting: Arc<Mutex<HashSet<String>>> = Arc::default();
    let first = agents.clone();
    tracker.spawn(async move {
        let ids: Vec<String> = first
            .defs()
            .filter(|d| d.workspace.is_some())
            .map(|d| d.id.clone())
            .collect();
        for id in ids {
            first.refresh_work_logged(&id, "the hub started").await;
        }
    });
    let refreshes = tracker.clone();
    events.follow(tracker, closing, move |event| {
        let Some((agent, why)) = refresh_for(&event.kind) else {
            return;
        };
        let Ok(def) = agents.def(agent) else {
            return;
        };
        // A remote workspace's turn: computed after its push (`workspace_push`).
        let pushed_later = why == Refresh::TurnEnded && def.clones_workspace();
        if def.workspace.is_none() || pushed_later || !lock(&waiting).insert(agent.to_string()) {
            return;
        }
        let (agents, waiting, agent) = (agents.clone(), waiting.clone(), agent.to_string());
        refreshes.spawn(async move {
            let Ok(turn) = agents.work_lock(&agent) else {
                return;
            };
            let _one = turn.lock().await;
            lock(&waiting).remove(&agent);
            if let Err(e) = agents.compute_work(&agent).await {
                tracing::info!(agent, "its work summary was not computed: {e}");
            }
        });
    });
}

fn lock(waiting: &Mutex<HashSet<String>>) -> std::sync::MutexGuard<'_, HashSet<String>> {
    waiting.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent_state::State;
    use crate::protocol::AgentEvent;

    fn agent(id: &str) -> AgentEvent {
        AgentEvent {
            agent_id: id.into(),
            detail: String::new(),
        }
    }

    fn state(state: State, previous: State) -> EventKind {
        crate::agents::workspace_push::tests::changed(Some("w1"), state, previous)
    }

    #[test]
    fn a_turn_s_end_and_the_agent_s_lifecycle_ask_for_its_work() {
        use Refresh::*;
        let table = [
            (state(State::Idle, State::Working), Some(("w1", TurnEnded))),
            (state(State::Working, State::Idle), None),
            (state(State::Blocked, State::Working), None),
            (EventKind::AgentStarted(agent("a")), Some(("a", Lifecycle))),
            (EventKind::AgentStopped(agent("a")), Some(("a", Lifecycle))),
            (EventKind::AgentExited(agent("a")), Some(("a", Lifecycle))),
            (EventKind::AgentAttached(agent("a")), Some(("a", Lifecycle))),
            (EventKind::AgentStarting(agent("a")), None),
            (EventKind::AgentStartFailed(agent("a")), None),
            (
                EventKind::WorkChanged {
                    agent_id: "a".into(),
                    work: None,
                },
                None,
            ),
        ];
        for (event, want) in table {
            assert_eq!(refresh_for(&event), want, "{event:?}");
        }
    }
}
