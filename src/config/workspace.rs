//! The `workspace` of each agent, checked at load against the repositories themselves: a
//! repository that is not one, a base that names no commit, a branch two agents would share,
//! a workspace on a remote engine with no `hub_url` to clone it from: each refused at
//! `hub.toml:LINE:COL` with what to do.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use toml::Spanned;

use super::{AgentPlace, ConfigError, HubConfig};
use crate::workspace::{self, WorkspaceError};

/// Checks every agent's workspace and fills in the bases not written (the branch the
/// repository has checked out).
pub(super) fn check(config: &mut HubConfig, text: &str, origin: &str) -> Result<(), ConfigError> {
    let mut branches: HashMap<(PathBuf, String), String> = HashMap::new();
    for agent in &mut config.agents {
        let table = agent.span();
        let def = agent.get_mut();
        let unreachable = def.clones_workspace() && def.hub_url.is_none();
        let Some(ws) = def.workspace.as_mut() else {
            continue;
        };
        let id = def.id.clone();
        let place = AgentPlace {
            text,
            origin,
            table,
            agent: &id,
        };
        let fail = |field, span, message| place.error(field, span, message);
        if unreachable {
            return Err(fail(
                "workspace",
                None,
                "an agent on a remote engine clones its workspace from the hub and pushes it \
                 back over the hub's API: set hub_url (how its container reaches the hub)"
                    .into(),
            ));
        }
        let repo_path = Path::new(ws.repo.get_ref());
        if !repo_path.is_absolute() {
            return Err(fail(
                "workspace.repo",
                Some(ws.repo.span()),
                format!("'{}' must be an absolute path", ws.repo.get_ref()),
            ));
        }
        let base = match &ws.base {
            Some(b) => b.get_ref().clone(),
            None => workspace::current_branch(repo_path).map_err(|e| {
                let (field, span) = blame(&e, ws);
                fail(field, span, e.to_string())
            })?,
        };
        let repo = workspace::check(repo_path, &base).map_err(|e| {
            let (field, span) = blame(&e, ws);
            fail(field, span, e.to_string())
        })?;
        let branch = ws
            .branch
            .as_ref()
            .map(|b| b.get_ref().clone())
            .unwrap_or_else(|| format!("agent/{id}"));
        let branch_span = ws.branch.as_ref().map(|b| b.span());
        if !workspace::valid_branch_name(&branch) {
            return Err(fail(
                "workspace.branch",
                branch_span,
                format!("'{branch}' is not a valid git branch name"),
            ));
        }
        if let Some(other) = branches.insert((repo.common_dir, branch.clone()), id.clone()) {
            return Err(fail(
                "workspace.branch",
                branch_span,
                format!(
                    "branch '{branch}' of {} is already agent '{other}''s workspace; give this \
                     agent a branch of its own (workspace.branch)",
                    ws.repo.get_ref()
                ),
            ));
        }
        if ws.base.is_none() {
            ws.base = Some(Spanned::new(0..0, base));
        }
    }
    Ok(())
}

/// The field a workspace error is about, and where it is written.
fn blame(
    e: &WorkspaceError,
    ws: &crate::config::WorkspaceDef,
) -> (&'static str, Option<Range<usize>>) {
    match e {
        WorkspaceError::NoSuchBase { .. } => match &ws.base {
            Some(b) => ("workspace.base", Some(b.span())),
            None => ("workspace.repo", Some(ws.repo.span())),
        },
        _ => ("workspace.repo", Some(ws.repo.span())),
    }
}
