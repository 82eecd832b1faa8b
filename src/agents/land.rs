//! Landing an agent's work as the agents see it: its branch merged (squashed, rebased,
//! fast-forwarded) into its base, the base brought into its branch, its branch pushed. The git
//! work is [`crate::workspace`]'s; this picks the agent's workspace, keeps one operation on an
//! agent at a time, and refuses what a workspace on another engine cannot do.

use super::workspace::{blocking, branch};
use super::Agents;
use crate::error::{HubError, HubResult};
use crate::protocol::WorkspaceInfo;
use crate::workspace::{self, LandMode, Landed, Preview, Pushed, Updated};

/// A merge as asked.
#[derive(Debug, Clone, Default)]
pub struct MergeAsked {
    pub mode: LandMode,
    pub message: Option<String>,
    /// Move the agent's branch to the new base afterwards.
    pub continue_from_base: bool,
}

/// What a merge did.
#[derive(Debug, Clone)]
pub struct Merged {
    pub workspace: WorkspaceInfo,
    pub landed: Landed,
    /// The agent's branch moved to the new base (`continue_from_base`).
    pub continued: Option<Updated>,
}

impl Agents {
    /// What merging the agent's branch into its base in `mode` would do; changes nothing.
    pub async fn merge_preview(
        &self,
        id: &str,
        mode: LandMode,
    ) -> HubResult<(WorkspaceInfo, Preview)> {
        let ws = self.workspace_of(id)?;
        let of = ws.clone();
        let preview = blocking(move || workspace::preview(&branch(&of), mode)).await?;
        Ok((ws, preview))
    }

    /// Merges the agent's branch into its base. With `continue_from_base`, its checkout must
    /// be clean before anything happens, and its branch moves to the new base afterwards.
    pub async fn merge(&self, id: &str, asked: MergeAsked) -> HubResult<Merged> {
        let lock = self.op_lock(id)?;
        let _op = lock.lock().await;
        let ws = self.workspace_of(id)?;
        if asked.continue_from_base {
            self.refuse_remote(id, &ws, "continue_from_base")?;
        }
        let of = ws.clone();
        let (landed, continued) = blocking(move || {
            let b = branch(&of);
            if asked.continue_from_base {
                workspace::check_branch_clean(&b)?;
            }
            let landed = workspace::land(&b, asked.mode, asked.message.as_deref())?;
            let continued = match asked.continue_from_base {
                true => Some(workspace::continue_from_base(&b)?),
                false => None,
            };
            Ok((landed, continued))
        })
        .await?;
        tracing::info!(
            agent = id,
            "{} merged into {}: {}",
            ws.branch,
            ws.base,
            landed.after
        );
        Ok(Merged {
            workspace: ws,
            landed,
            continued,
        })
    }

    /// Brings the agent's base into its branch (merged, or its commits rebased on it), its
    /// checkout updated.
    pub async fn update_branch(
        &self,
        id: &str,
        rebase: bool,
    ) -> HubResult<(WorkspaceInfo, Updated)> {
        let lock = self.op_lock(id)?;
        let _op = lock.lock().await;
        let ws = self.workspace_of(id)?;
        self.refuse_remote(id, &ws, "update")?;
        let of = ws.clone();
        let updated = blocking(move || workspace::update(&branch(&of), rebase)).await?;
        Ok((ws, updated))
    }

    /// Pushes the agent's branch to `remote` of its repository.
    pub async fn push_branch(&self, id: &str, remote: &str) -> HubResult<(WorkspaceInfo, Pushed)> {
        let ws = self.workspace_of(id)?;
        let (of, remote) = (ws.clone(), remote.to_string());
        let pushed = blocking(move || workspace::push(&branch(&of), &remote)).await?;
        Ok((ws, pushed))
    }

    /// Refuses `what` for an agent whose workspace is a clone on another engine: its branch
    /// there would not follow a branch moved here, and its next push would be refused.
    fn refuse_remote(&self, id: &str, ws: &WorkspaceInfo, what: &str) -> HubResult<()> {
        if !self.def(id)?.clones_workspace() {
            return Ok(());
        }
        Err(HubError::Workspace {
            code: "WORKSPACE_REMOTE",
            message: format!(
                "agent '{id}''s workspace is a clone on its engine, not a checkout here: {what} \
                 cannot move its branch {} under it; have the agent merge {} itself (git pull \
                 from the hub) instead",
                ws.branch, ws.base
            ),
            files: Vec::new(),
        })
    }
}
