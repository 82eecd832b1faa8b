//! One lock per agent for one kind of work (its operations, its work summary, its pushes):
//! what of that kind runs for an agent runs one at a time.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{HubError, HubResult};

/// A lock per agent id, made for the agents of the hub's configuration.
#[derive(Debug, Default)]
pub(super) struct AgentLocks(BTreeMap<String, Arc<tokio::sync::Mutex<()>>>);

impl AgentLocks {
    pub(super) fn new<'a>(ids: impl Iterator<Item = &'a String>) -> Self {
        AgentLocks(ids.map(|id| (id.clone(), Arc::default())).collect())
    }

    /// The agent's lock; `AGENT_NOT_FOUND` for an id of no agent.
    pub(super) fn of(&self, id: &str) -> HubResult<Arc<tokio::sync::Mutex<()>>> {
        self.0
            .get(id)
            .cloned()
            .ok_or_else(|| HubError::AgentNotFound { id: id.into() })
    }
}
