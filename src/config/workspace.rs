//! The `workspace` of each agent, checked at load against the repositories themselves: a
//! repository that is not one, a base that names no commit, a branch two agents would share,
//! a workspace on a remote engine with no `hub_url` to clone it from, an `include` pattern
//! that cannot work (or any on a remote engine), an empty `setup` command: each refused at
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
        let fail = |field: &'static str, span: Option<Range<usize>>, message: String| {
            place.error(field, span, message)
        };
        if unreachable {
            return Err(fail(
                "workspace",
                None,
                "an agent on a remote engine clones its workspace from the hub and pushes it \
                 back over the hub's API: set hub_url (how its container reaches the hub)"
                    .into(),
            ));
        }
        check_include_and_setup(ws, def.docker_host.is_some(), &fail)?;
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

/// The `include` patterns (refused on a remote engine, where the checkout is a clone made
/// there) and the `setup` commands (none empty).
fn check_include_and_setup(
    ws: &crate::config::WorkspaceDef,
    remote: bool,
    fail: &dyn Fn(&'static str, Option<Range<usize>>, String) -> ConfigError,
) -> Result<(), ConfigError> {
    for pattern in &ws.include {
        if remote {
            return Err(fail(
                "workspace.include",
                Some(pattern.span()),
                "include is not available on a remote engine: the checkout is a clone made in \
                 its container, which cannot read the untracked files of the repository here; \
                 put the files there in a setup command, or run the agent on the hub's engine"
                    .into(),
            ));
        }
        if let Some(problem) = workspace::pattern_problem(pattern.get_ref()) {
            return Err(fail(
                "workspace.include",
                Some(pattern.span()),
                format!("'{}' is not a usable pattern: {problem}", pattern.get_ref()),
            ));
        }
    }
    for command in &ws.setup {
        if command.get_ref().trim().is_empty() {
            return Err(fail(
                "workspace.setup",
                Some(command.span()),
                "a setup command is empty; write the command (run with sh -c)".into(),
            ));
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
