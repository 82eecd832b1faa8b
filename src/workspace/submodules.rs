//! Initialising the submodules of a new checkout (`git submodule update --init --recursive`):
//! a worktree is made with its submodules' directories empty.
//!
//! Submodules at local paths (`url = ../lib`) need git's `file` transport, which git refuses
//! to submodules by default (a repository could name any repository of the machine, and git
//! would copy it in). The hub allows it for this one call, and only when the checkout's
//! `.gitmodules` is the base's, as the user committed it: a `.gitmodules` written on the
//! agent's own branch could otherwise make the hub (perhaps root) copy another repository of
//! the hub's machine into the agent's checkout. Other transports (https, ssh) are git's
//! defaults, with no prompt.

use std::path::{Path, PathBuf};

use super::git::Git;
use super::owner::admin_dir;
use super::WorkspaceError;

/// Initialises the submodules of the new checkout at `checkout`, made from `base` or on an
/// existing branch.
pub(super) fn init(checkout: &Path, base: &str) -> Result<(), WorkspaceError> {
    let Some(ours) = gitmodules_blob(checkout, "HEAD")? else {
        return Ok(());
    };
    let local_allowed = gitmodules_blob(checkout, base)?.as_ref() == Some(&ours);
    let mut git = Git::new(checkout);
    let mut global = None;
    if local_allowed {
        git = git.args(["-c", "protocol.file.allow=always"]);
        let file = global_config_with_any_owner(checkout)?;
        git = git.env("GIT_CONFIG_GLOBAL", &file);
        global = Some(file);
    }
    let done = git
        .args(["submodule", "--quiet", "update", "--init", "--recursive"])
        .run()
        .map(drop);
    if let Some(file) = global {
        let _ = std::fs::remove_file(file);
    }
    done
}

/// A global git configuration for the submodules' clones: the user's own (included) and
/// `safe.directory = *`. A local clone runs `git upload-pack` in the submodule's repository
/// with the command line's settings removed (git clears them for a local transport), so a
/// hub running as root would refuse a submodule repository the user owns as "dubious
/// ownership". Written into the checkout's administrative directory (removed with it).
fn global_config_with_any_owner(checkout: &Path) -> Result<PathBuf, WorkspaceError> {
    let admin = admin_dir(checkout)?.unwrap_or_else(|| checkout.join(".git"));
    let file = admin.join("agent-hub-submodules.gitconfig");
    let xdg = std::env::var("XDG_CONFIG_HOME")
        .map(|dir| format!("{dir}/git/config"))
        .unwrap_or_else(|_| "~/.config/git/config".into());
    let text =
        format!("[include]\n\tpath = {xdg}\n\tpath = ~/.gitconfig\n[safe]\n\tdirectory = *\n");
    std::fs::write(&file, text).map_err(WorkspaceError::io(format!(
        "could not write {}",
        file.display()
    )))?;
    Ok(file)
}

/// The object id of `.gitmodules` at `rev`; `None` when it has none.
fn gitmodules_blob(dir: &Path, rev: &str) -> Result<Option<String>, WorkspaceError> {
    let out = Git::new(dir)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("{rev}:.gitmodules"))
        .output()?;
    Ok(out
        .success
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()))
}
