//! An agent's workspace as the agents see it: its checkout made and mounted at a start, what
//! it changed, and removing its checkout (the branch stays in the user's repository). The git
//! work itself is [`crate::workspace`]; the load-time checks are `config/workspace.rs`.

use std::path::{Path, PathBuf};

use super::containers::ImageInfo;
use super::{home, AgentStatus, Agents};
use crate::config::AgentDef;
use crate::error::{HubError, HubResult};
use crate::protocol::WorkspaceInfo;
use crate::workspace::{self, AgentUser, Branch, Changes, Checkout, ServedRepo, WorkspaceError};

impl Agents {
    /// The agent's workspace, or why it has none.
    pub fn workspace_of(&self, id: &str) -> HubResult<WorkspaceInfo> {
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
        let def = self.def(id)?;
        if def.clones_workspace() {
            return self.cloned_changes(def, full).await;
        }
        let ws = self.workspace_of(id)?;
        blocking(move || workspace::changes(&checkout(&ws), full)).await
    }

    /// The agent's workspace and the facts of its repository for serving it over git.
    pub async fn served_workspace(&self, id: &str) -> HubResult<(WorkspaceInfo, ServedRepo)> {
        let ws = self.workspace_of(id)?;
        let of = ws.clone();
        let repo = blocking(move || workspace::served_repo(&branch(&of))).await?;
        Ok((ws, repo))
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
        let def = self.def(id)?;
        if def.clones_workspace() {
            let engine = crate::docker::endpoint_name(def.endpoint());
            let container = crate::docker::container_name(self.hub_id(), id);
            let volume = super::cloned_workspace::volume_name(self.hub_id(), id);
            return Err(HubError::Workspace {
                code: "WORKSPACE_REMOTE",
                message: format!(
                    "agent '{id}''s workspace is a clone in the volume {volume} on its engine \
                     {engine}, not a checkout here: remove it there (docker -H {engine} rm \
                     {container}; docker -H {engine} volume rm {volume}); its branch {} stays",
                    ws.branch
                ),
                files: Vec::new(),
            });
        }
        let removed = ws.clone();
        blocking(move || workspace::remove(&checkout(&ws), force)).await?;
        tracing::info!(agent = id, path = %removed.path, "workspace removed; branch {} kept", removed.branch);
        Ok(removed)
    }

    /// Makes sure the agent's checkout exists, writable by the image's user (refused when the
    /// repository does not let that user write it), and mounts it at the workdir, with the
    /// repository's git directory at its own path (the checkout's `.git` names it).
    pub(super) async fn add_workspace(
        &self,
        def: &mut AgentDef,
        image: &ImageInfo,
    ) -> HubResult<()> {
        if def.clones_workspace() {
            return self.prepare_cloned_workspace(def).await;
        }
        let Some(ws) = self.workspace_info(def) else {
            return Ok(());
        };
        let path = PathBuf::from(&ws.path);
        let user = AgentUser::parse(&image.user);
        let image = def.image.get_ref().clone();
        let common_dir = blocking(move || {
            let checkout = checkout(&ws);
            Ok(workspace::prepare(&checkout, &user, &image)?.common_dir)
        })
        .await?;
        mount_workspace(def, &path, &common_dir);
        Ok(())
    }

    /// The agent's workspace as clients see it.
    pub(super) fn workspace_info(&self, def: &AgentDef) -> Option<WorkspaceInfo> {
        let ws = def.workspace.as_ref()?;
        let agents_dir = &self.handles.access.agents_dir;
        let path = home::workspace_dir(agents_dir, &def.id);
        let (path, exists) = match def.clones_workspace() {
            // A volume on its engine, cloned at its first start.
            true => (
                format!(
                    "{}:{}",
                    super::cloned_workspace::volume_name(self.hub_id(), &def.id),
                    super::cloned_workspace::workdir(def)
                ),
                home::started_mark(agents_dir, &def.id).exists(),
            ),
            false => (path.display().to_string(), path.join(".git").exists()),
        };
        Some(WorkspaceInfo {
            repo: ws.repo.get_ref().clone(),
            base: def.workspace_base().unwrap_or_default(),
            branch: def.workspace_branch().unwrap_or_default(),
            exists,
            path,
        })
    }
}

/// The agent's branch in the user's repository.
pub(super) fn branch(ws: &WorkspaceInfo) -> Branch<'_> {
    Branch {
        repo: Path::new(&ws.repo),
        base: &ws.base,
        branch: &ws.branch,
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
        WorkspaceError::Dirty { files, .. } | WorkspaceError::BaseDirty { files, .. } => {
            files.clone()
        }
        WorkspaceError::Conflicts { conflicts, .. } => {
            return HubError::MergeConflict {
                message: e.to_string(),
                conflicts: serde_json::to_value(conflicts).unwrap_or_default(),
                delivered: None,
            }
        }
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

/// The git directory of the repository of the workspace `ws` (the one a start mounts), read
/// without changing anything; `None` when it cannot be read (said in the log).
pub(super) async fn common_dir_now(agent: &str, ws: WorkspaceInfo) -> Option<PathBuf> {
    let found =
        blocking(move || Ok(workspace::check(Path::new(&ws.repo), &ws.base)?.common_dir)).await;
    found
        .inspect_err(|e| {
            tracing::info!(agent, "whether its container is outdated is not known: {e}");
        })
        .ok()
}

/// Mounts the agent's checkout at `path` at its workdir, with its repository's git directory
/// `common_dir` at its own path (the checkout's `.git` names it).
pub(super) fn mount_workspace(def: &mut AgentDef, path: &Path, common_dir: &Path) {
    let workdir = def
        .workdir_or_default()
        .unwrap_or_else(|| "/workspace".into());
    def.mounts.push(format!("{}:{workdir}", path.display()));
    let git = common_dir.display();
    def.mounts.push(format!("{git}:{git}"));
    def.workdir = Some(workdir);
    // The checkout belongs to the repository's owner, not necessarily the agent's user.
    if !def.env.contains_key("GIT_CONFIG_COUNT") {
        def.env.insert("GIT_CONFIG_COUNT".into(), "1".into());
        def.env
            .insert("GIT_CONFIG_KEY_0".into(), "safe.directory".into());
        def.env.insert("GIT_CONFIG_VALUE_0".into(), "*".into());
    }
}
