//! The user's repository: whether it is one, and what names what in it.

use std::path::{Path, PathBuf};

use super::git::Git;
use super::{Repo, WorkspaceError};

/// Checks `repo` is a git repository with a work tree (bare repositories are refused) and
/// that `base` names a commit in it.
pub fn check(repo: &Path, base: &str) -> Result<Repo, WorkspaceError> {
    let found = locate(repo)?;
    resolve_base(&found.toplevel, base)?;
    Ok(found)
}

/// Whether `branch` is a valid branch name (`git check-ref-format --branch`).
pub fn valid_branch_name(branch: &str) -> bool {
    if branch.is_empty() || branch.starts_with('-') {
        return false;
    }
    // Run outside any repository: `--branch` would expand `@{-1}` against one.
    let checked = Git::new(Path::new("/"))
        .args(["check-ref-format", "--branch", branch])
        .text();
    checked.is_ok_and(|name| name == branch)
}

/// The toplevel and common dir of the repository `repo` is in.
pub(super) fn locate(repo: &Path) -> Result<Repo, WorkspaceError> {
    let not_a_repo = |detail: String| WorkspaceError::NotARepo {
        path: repo.to_path_buf(),
        detail,
    };
    if !repo.is_dir() {
        return Err(not_a_repo("there is no such directory".into()));
    }
    let facts = Git::new(repo)
        .args(["rev-parse", "--is-bare-repository", "--git-common-dir"])
        .output()?;
    if !facts.success {
        return Err(not_a_repo(facts.stderr));
    }
    let facts = String::from_utf8_lossy(&facts.stdout).into_owned();
    let mut lines = facts.lines();
    if lines.next() == Some("true") {
        return Err(not_a_repo("it is a bare repository".into()));
    }
    let common = lines.next().unwrap_or_default();
    let toplevel = Git::new(repo)
        .args(["rev-parse", "--show-toplevel"])
        .output()?;
    if !toplevel.success {
        return Err(not_a_repo(toplevel.stderr));
    }
    let toplevel = String::from_utf8_lossy(&toplevel.stdout).trim().to_string();
    Ok(Repo {
        toplevel: canonical(Path::new(&toplevel))?,
        common_dir: canonical(&repo.join(common))?,
    })
}

/// The commit `base` names, resolved in `dir` (any work tree of the repository).
pub(super) fn resolve_base(dir: &Path, base: &str) -> Result<String, WorkspaceError> {
    let no_base = || WorkspaceError::NoSuchBase {
        repo: dir.to_path_buf(),
        base: base.to_string(),
    };
    if base.is_empty() || base.starts_with('-') {
        return Err(no_base());
    }
    let out = Git::new(dir)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("{base}^{{commit}}"))
        .output()?;
    if !out.success {
        return Err(no_base());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Whether the local branch `branch` exists.
pub(super) fn has_branch(dir: &Path, branch: &str) -> Result<bool, WorkspaceError> {
    let out = Git::new(dir)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("refs/heads/{branch}"))
        .output()?;
    Ok(out.success)
}

fn canonical(path: &Path) -> Result<PathBuf, WorkspaceError> {
    path.canonicalize().map_err(WorkspaceError::io(format!(
        "could not resolve {}",
        path.display()
    )))
}

/// The branch `repo` has checked out (a workspace's default base).
pub fn current_branch(repo: &Path) -> Result<String, WorkspaceError> {
    let found = locate(repo)?;
    let out = Git::new(&found.toplevel)
        .args(["symbolic-ref", "--quiet", "--short", "HEAD"])
        .output()?;
    if !out.success {
        return Err(WorkspaceError::NoSuchBase {
            repo: found.toplevel,
            base: "HEAD (no branch is checked out: set workspace.base)".into(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
