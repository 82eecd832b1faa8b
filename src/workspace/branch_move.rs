//! Moving a branch of the user's repository without touching anyone's work behind their back:
//! where the branch is checked out (any worktree, `git worktree list`), that work tree must be
//! clean, and it is updated as `git merge` would update it; elsewhere only the ref moves. The
//! ref moves only from the value it was read at. A work tree a root hub updates is given back
//! to its owner, file by file.

use std::path::{Path, PathBuf};

use super::changes::dirty_files;
use super::git::{fields, Git};
use super::land::Op;
use super::worktree::list;
use super::{owner, WorkspaceError};

/// Where a move updated a work tree.
pub(super) struct Moved {
    /// The work tree the branch is checked out in, updated; `None`: only the ref moved.
    pub worktree: Option<PathBuf>,
}

/// Where the branch `full_ref` is checked out (`None`: nowhere), refused with `dirty` (its
/// path and files) when that work tree has uncommitted changes, untracked files included.
pub(super) fn clean_checkout(
    op: &Op,
    full_ref: &str,
    dirty: impl FnOnce(PathBuf, Vec<String>) -> WorkspaceError,
) -> Result<Option<PathBuf>, WorkspaceError> {
    let short = full_ref.strip_prefix("refs/heads/").unwrap_or(full_ref);
    let found = list(&op.dir)?
        .into_iter()
        .find(|w| w.branch.as_deref() == Some(short) && w.path.join(".git").exists());
    let Some(worktree) = found else {
        return Ok(None);
    };
    let files = dirty_files(&worktree.path)?;
    if !files.is_empty() {
        return Err(dirty(worktree.path, files));
    }
    Ok(Some(worktree.path))
}

/// Moves `full_ref` from `old` to `new` and updates `checkout` (where it is checked out, found
/// clean by [`clean_checkout`]) to match. Refused when the ref is no longer at `old`; when the
/// work tree cannot be updated, the ref is moved back.
pub(super) fn move_branch(
    op: &Op,
    full_ref: &str,
    old: &str,
    new: &str,
    checkout: Option<PathBuf>,
    reason: &str,
) -> Result<Moved, WorkspaceError> {
    if old == new {
        return Ok(Moved { worktree: checkout });
    }
    let moved = op
        .git()
        .args(["update-ref", "-m", reason, full_ref, new, old])
        .output()?;
    if !moved.success {
        return Err(WorkspaceError::BranchMoved {
            branch: full_ref.to_string(),
            detail: moved.stderr,
        });
    }
    let Some(path) = checkout else {
        return Ok(Moved { worktree: None });
    };
    if let Err(e) = update_work_tree(&path, old, new) {
        // Back to where it was: nothing half done.
        let _ = op
            .git()
            .args(["update-ref", "-m", "agent-hub: undo", full_ref, old, new])
            .run();
        return Err(e);
    }
    Ok(Moved {
        worktree: Some(path),
    })
}

/// A clean work tree at `old` brought to `new`: its index and files, as a checkout does.
///
/// Run as the hub (the work tree may be where only the hub reaches, such as an agent's
/// checkout in the hub's data dir), and what it wrote given to the work tree's owner.
fn update_work_tree(path: &Path, old: &str, new: &str) -> Result<(), WorkspaceError> {
    // Stat information git has not written back would read as changes.
    let _ = Git::new(path)
        .args(["update-index", "-q", "--refresh"])
        .output()?;
    Git::new(path)
        .args(["read-tree", "-m", "-u", old, new])
        .run()?;
    let changed = Git::new(path)
        .args(["diff", "--name-only", "--no-renames", "-z", old, new])
        .run()?;
    let index = Git::new(path)
        .args(["rev-parse", "--path-format=absolute", "--git-path", "index"])
        .text()?;
    owner::give_updated_files(path, &fields(&changed), Path::new(&index))
}
