//! A workspace on another engine: the agent's branch in the user's repository, with no
//! checkout on the hub's machine. The agent clones it over the hub's API into a volume on its
//! engine and pushes back to it ([`super::http_backend`]); what it pushed is on the branch, as
//! a local agent's commits are.

use std::path::{Path, PathBuf};

use super::git::Git;
use super::repo::{has_branch, locate, resolve_base};
use super::{owner, Branch, WorkspaceError};

/// Makes the agent's branch from the base when it does not exist (as a local workspace's
/// first start does); whether it was made now. A root hub gives it to the repository's owner.
pub fn ensure_branch(b: &Branch) -> Result<bool, WorkspaceError> {
    let repo = locate(b.repo)?;
    resolve_base(&repo.toplevel, b.base)?;
    if has_branch(&repo.toplevel, b.branch)? {
        return Ok(false);
    }
    Git::new(&repo.toplevel)
        .args(["branch", "--no-track", b.branch, b.base])
        .run()?;
    owner::give_branch_to_repo_owner(&repo, b.branch)?;
    Ok(true)
}

/// What serving the repository to the agent needs to know of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedRepo {
    /// The repository's git directory (the common dir).
    pub git_dir: PathBuf,
    /// The base's full ref name when it names a branch or a tag.
    pub base_ref: Option<String>,
    /// The user and group git runs as: the repository's owner when the hub is root.
    pub run_as: Option<(u32, u32)>,
}

/// The facts of `b`'s repository for serving it.
pub fn served_repo(b: &Branch) -> Result<ServedRepo, WorkspaceError> {
    let repo = locate(b.repo)?;
    let full = Git::new(&repo.toplevel)
        .args(["rev-parse", "--symbolic-full-name", "--verify", "--quiet"])
        .arg(b.base)
        .output()?;
    let base_ref = String::from_utf8_lossy(&full.stdout).trim().to_string();
    Ok(ServedRepo {
        run_as: owner::run_as(&repo)?,
        git_dir: repo.common_dir,
        base_ref: (full.success && base_ref.starts_with("refs/")).then_some(base_ref),
    })
}

/// The commit a branch is at (`None`: no such branch).
pub fn branch_tip(git_dir: &Path, branch: &str) -> Option<String> {
    let out = Git::new(git_dir)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("refs/heads/{branch}^{{commit}}"))
        .output()
        .ok()?;
    let tip = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.success && !tip.is_empty()).then_some(tip)
}

/// Whether `ancestor` is an ancestor of `commit` (`None`: one of them is missing).
pub fn is_ancestor(git_dir: &Path, ancestor: &str, commit: &str) -> Option<bool> {
    let out = Git::new(git_dir)
        .args(["merge-base", "--is-ancestor", ancestor, commit])
        .output()
        .ok()?;
    // Exit 1 says "not an ancestor"; a missing object is another error.
    match out.code {
        Some(0) => Some(true),
        Some(1) => Some(false),
        _ => None,
    }
}
