//! A rebase in the object store: a branch's own commits applied one by one on another commit
//! (`git merge-tree --merge-base <parent>`, as a cherry-pick does) and committed with their
//! authors and messages, as `git rebase` would, without a work tree. Merge commits and
//! commits whose change is already upstream are left out, and commits that become empty are
//! dropped, as `git rebase` does by default.

use super::conflicts::Conflict;
use super::land::Op;
use super::merge_tree::merge_in;
use super::WorkspaceError;

/// The commits of `upstream...tip` that `tip` has, replayed on `onto`: the last new commit
/// (`onto` itself when nothing is left to apply), or the conflicts of the first commit that
/// does not apply.
pub(super) fn replay(
    op: &Op,
    onto: &str,
    upstream: &str,
    tip: &str,
) -> Result<Result<String, Vec<Conflict>>, WorkspaceError> {
    let list = op
        .git()
        .args([
            "rev-list",
            "--reverse",
            "--no-merges",
            "--right-only",
            "--cherry-pick",
        ])
        .arg(format!("{upstream}...{tip}"))
        .text()?;
    let mut current = onto.to_string();
    for commit in list.lines() {
        let parent = format!("{commit}^");
        let merged = merge_in(op.git(), &["--merge-base", &parent, &current, commit])?;
        if !merged.is_clean() {
            return Ok(Err(op.conflicts(&merged.tree, &merged.conflicts)?));
        }
        if merged.tree == op.tree_of(&current)? {
            continue;
        }
        let message = op
            .git()
            .args(["log", "-1", "--no-show-signature", "--format=%B"])
            .arg(commit)
            .text()?;
        current = op.commit(&merged.tree, &[&current], &message, Some(commit))?;
    }
    Ok(Ok(current))
}
