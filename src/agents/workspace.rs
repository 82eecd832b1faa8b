//! The operations on an agent's workspace: what it changed, and removing its checkout (the
//! branch stays in the user's repository).

use std::path::Path;

use super::{AgentStatus, Agents};
use crate::error::{HubError, HubResult};
use crate::protocol::WorkspaceInfo;
use crate::workspace::{self, Changes, Checkout, WorkspaceError};

impl Agents {
    /// The agent's workspace, or why it has none.
    fn workspace_of(&self, id: &str) -> HubResult<WorkspaceInfo> {
        let def = self.def(id)?;
        self.workspace_info(def).ok_or_else(|| HubError::Workspace {
            code: "NO_WORKSPACE",
            message: format!(
                "agent '{id}' has no workspace; give it one in hub.toml: \
                 workspace = {{ repo = \"/path/to/repo\", base = \"main\" }}"
            ),
            files: Vec::new(),
        })
    }

    /// What the agent changed against its base: committed and uncommitted apart, the full
    /// diffs when `full`.
    pub async fn changes(&self, id: &str, full: bool) -> HubResult<Changes> {
        let ws = self.workspace_of(id)?;
        blocking(move || workspace::changes(&checkout(&ws), full)).await
    }

    /// Deletes the agent's checkout and keeps its branch: refused while the agent runs, and
    /// with uncommitted changes unless `force`.
    pub async fn remove_workspace(&self, id: &str, force: bool) -> HubResult<WorkspaceInfo> {
        let lock = self.op_lock(id)?;
        let _op = lock.lock().await;
        let ws = self.workspace_of(id)?;
        if matches!(
            self.status(id),
            AgentStatus::Running | AgentStatus::Starting | AgentStatus::Stopping
        ) {
            return Err(HubError::AgentRunning { id: id.into() });
        }
        let removed = ws.clone();
        blocking(move || workspace::remove(&checkout(&ws), force)).await?;
        tracing::info!(agent = id, path = %removed.path, "workspace removed; branch {} kept", removed.branch);
        Ok(removed)
    }
}

pub(super) fn checkout(ws: &WorkspaceInfo) -> Checkout<'_> {
    Checkout {
        repo: Path::new(&ws.repo),
        base: &ws.base,
        branch: &ws.branch,
        path: Path::new(&ws.path),
    }
}

/// A workspace error as the hub says it.
fn workspace_error(e: WorkspaceError) -> HubError {
    let files = match &e {
        WorkspaceError::Dirty { files, .. } => files.clone(),
        _ => Vec::new(),
    };
    HubError::Workspace {
        code: e.code(),
        message: e.to_string(),
        files,
    }
}

/// Runs git work off the async threads.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WorkspaceError> + Send + 'static,
) -> HubResult<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| HubError::Internal {
            message: format!("workspace: {e}"),
        })?
        .map_err(workspace_error)
}
