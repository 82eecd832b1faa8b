//! What merging two commits gives, worked out in the object store alone (`git merge-tree
//! --write-tree`): no work tree, index or ref is touched, so it answers "does the agent's branch
//! merge cleanly into its base?" at any moment, and gives the tree a merge, squash or conflict
//! report is made from.

use std::path::Path;

use super::git::{fields, Git};
use super::WorkspaceError;

/// The result of merging `theirs` into `ours`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merged {
    /// The merged tree; where there are conflicts, their files hold git's conflict markers.
    pub tree: String,
    /// The files that conflict (empty: the merge is clean), each once, in git's order.
    pub conflicts: Vec<String>,
}

impl Merged {
    pub fn is_clean(&self) -> bool {
        self.conflicts.is_empty()
    }
}

/// Merges the commits `ours` and `theirs` (any revisions) of the repository at `dir`, writing
/// only objects.
pub fn merge_tree(dir: &Path, ours: &str, theirs: &str) -> Result<Merged, WorkspaceError> {
    merge_in(Git::new(dir), &[ours, theirs])
}

/// `git merge-tree --write-tree` of `revs` (`ours theirs`, or `--merge-base B ours theirs` to
/// apply one commit, as a cherry-pick does) through the call `git` (run as whom it says).
pub(super) fn merge_in(git: Git, revs: &[&str]) -> Result<Merged, WorkspaceError> {
    let git = git
        .args([
            "merge-tree",
            "--write-tree",
            "--name-only",
            "--no-messages",
            "-z",
        ])
        .args(revs);
    let args = git.shown_args();
    let out = git.output()?;
    // Exit 1 is a conflict, and also what a revision that names nothing gives (with no tree).
    match out.code {
        Some(0) | Some(1) if !out.stdout.is_empty() => Ok(parse(&out.stdout)),
        _ => Err(WorkspaceError::Git {
            args,
            stderr: out.stderr,
        }),
    }
}

/// Parses `git merge-tree --write-tree --name-only --no-messages -z`: the tree, then each
/// conflicted file, NUL-terminated (a file in several conflicting stages is named once).
pub(super) fn parse(out: &[u8]) -> Merged {
    let mut fields = fields(out).into_iter();
    let tree = fields.next().unwrap_or_default();
    let mut conflicts: Vec<String> = Vec::new();
    for file in fields.filter(|f| !f.is_empty()) {
        if !conflicts.contains(&file) {
            conflicts.push(file);
        }
    }
    Merged { tree, conflicts }
}
