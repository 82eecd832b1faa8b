//! Landing an agent's branch on its base (merge, squash, rebase or fast-forward only), and
//! bringing the base into the branch (update).
//!
//! The new commit is made in the object store alone ([`super::merge_tree`], `git commit-tree`):
//! a conflict, a refusal or an error leaves every ref, index and work tree as it was. Only
//! then does a branch move ([`super::branch_move`]): the ref (checked against its old value),
//! and the work tree where the branch is checked out, which must be clean.

use std::path::{Path, PathBuf};

use super::branch_move::{self, Moved};
use super::changes::{commits, files_between};
use super::conflicts::{self, Conflict};
use super::git::Git;
use super::merge_tree::merge_in;
use super::repo::locate;
use super::{owner, replay, Branch, Commit, FileChange, WorkspaceError};

/// How the branch lands on the base.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum LandMode {
    /// A merge commit (base, branch), or a fast-forward when the base is an ancestor of the
    /// branch, as `git merge` does by default.
    #[default]
    Merge,
    /// One new commit on the base with the merged tree.
    Squash,
    /// The branch's commits replayed on the base, the base moved to the last.
    Rebase,
    /// Only a fast-forward of the base to the branch.
    FfOnly,
}

impl LandMode {
    pub fn name(self) -> &'static str {
        match self {
            LandMode::Merge => "merge",
            LandMode::Squash => "squash",
            LandMode::Rebase => "rebase",
            LandMode::FfOnly => "ff-only",
        }
    }
}

/// What landing would do (a dry run).
#[derive(Debug, Clone, PartialEq)]
pub struct Preview {
    /// The agent's commits not on the base, newest first.
    pub commits: Vec<Commit>,
    /// The files that would change on the base (the branch's changes when it conflicts).
    pub files: Vec<FileChange>,
    /// The conflicting files (empty: it lands cleanly).
    pub conflicts: Vec<String>,
    /// Whether it lands at all in this mode (ff-only on a base that moved: no).
    pub lands: bool,
}

/// What landing did.
#[derive(Debug, Clone, PartialEq)]
pub struct Landed {
    pub before: String,
    pub after: String,
    /// The commits now on the base that were not, newest first.
    pub commits: Vec<Commit>,
    /// The files that changed on the base.
    pub files: Vec<FileChange>,
    /// Where the base was checked out, updated; `None`: only its ref moved.
    pub worktree: Option<PathBuf>,
}

/// One repository operation: git in its top level, as its owner when the hub is root.
pub(super) struct Op {
    pub dir: PathBuf,
    ids: Option<(u32, u32)>,
}

impl Op {
    pub(super) fn open(repo: &Path) -> Result<Self, WorkspaceError> {
        let repo = locate(repo)?;
        Ok(Op {
            ids: owner::run_as(&repo)?,
            dir: repo.toplevel,
        })
    }

    pub(super) fn git(&self) -> Git {
        Git::new(&self.dir).run_as_user(self.ids)
    }

    pub(super) fn rev(&self, rev: &str) -> Result<String, WorkspaceError> {
        self.git()
            .args(["rev-parse", "--verify"])
            .arg(format!("{rev}^{{commit}}"))
            .text()
    }

    /// Whether `a` is an ancestor of `b`.
    pub(super) fn is_ancestor(&self, a: &str, b: &str) -> Result<bool, WorkspaceError> {
        let git = self.git().args(["merge-base", "--is-ancestor", a, b]);
        let args = git.shown_args();
        let out = git.output()?;
        match out.code {
            Some(0) => Ok(true),
            Some(1) => Ok(false),
            _ => Err(WorkspaceError::Git {
                args,
                stderr: out.stderr,
            }),
        }
    }

    /// A commit of `tree` with `parents` and `message`; the author's name, email and date
    /// from `author_of` when given (a replayed commit keeps its author).
    pub(super) fn commit(
        &self,
        tree: &str,
        parents: &[&str],
        message: &str,
        author_of: Option<&str>,
    ) -> Result<String, WorkspaceError> {
        let mut git = self.git().args(["commit-tree", "--no-gpg-sign", tree]);
        for parent in parents {
            git = git.args(["-p", parent]);
        }
        if !self.has_identity() {
            for (name, value) in FALLBACK_IDENTITY {
                git = git.env(name, value);
            }
        }
        if let Some(commit) = author_of {
            let who = self
                .git()
                .args([
                    "log",
                    "-1",
                    "--no-show-signature",
                    "--format=%an%x00%ae%x00%aI",
                ])
                .arg(commit)
                .run()?;
            let who = super::git::fields(&who);
            let names = ["GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE"];
            for (name, value) in names.iter().zip(who) {
                git = git.env(name, value.trim());
            }
        }
        git.arg("-m").arg(message).text()
    }

    /// Whether git knows who commits here (`user.name` and `user.email` configured).
    fn has_identity(&self) -> bool {
        self.git()
            .args(["var", "GIT_COMMITTER_IDENT"])
            .output()
            .is_ok_and(|o| o.success)
    }

    /// A commit's tree.
    pub(super) fn tree_of(&self, commit: &str) -> Result<String, WorkspaceError> {
        self.git()
            .args(["rev-parse", "--verify"])
            .arg(format!("{commit}^{{tree}}"))
            .text()
    }

    /// The conflicts of a merged tree.
    pub(super) fn conflicts(
        &self,
        tree: &str,
        paths: &[String],
    ) -> Result<Vec<Conflict>, WorkspaceError> {
        conflicts::read(&|| self.git(), tree, paths)
    }
}

/// Who commits when the repository and its owner name no one.
const FALLBACK_IDENTITY: [(&str, &str); 4] = [
    ("GIT_COMMITTER_NAME", "agent-hub"),
    ("GIT_COMMITTER_EMAIL", "agent-hub@localhost"),
    ("GIT_AUTHOR_NAME", "agent-hub"),
    ("GIT_AUTHOR_EMAIL", "agent-hub@localhost"),
];

/// The base and the branch as they are now.
struct Tips {
    /// The base's full ref (`refs/heads/main`).
    base_ref: String,
    base: String,
    tip: String,
    merge_base: String,
}

impl Tips {
    fn read(op: &Op, b: &Branch) -> Result<Self, WorkspaceError> {
        let full = op
            .git()
            .args(["rev-parse", "--verify", "--symbolic-full-name", b.base])
            .output()?;
        let base_ref = String::from_utf8_lossy(&full.stdout).trim().to_string();
        if !full.success || !base_ref.starts_with("refs/heads/") {
            return Err(WorkspaceError::BaseNotABranch {
                base: b.base.to_string(),
            });
        }
        let base = op.rev(&base_ref)?;
        let tip =
            op.rev(&format!("refs/heads/{}", b.branch))
                .map_err(|_| WorkspaceError::NoBranch {
                    branch: b.branch.to_string(),
                })?;
        let merge_base = op.git().args(["merge-base", &base, &tip]).text()?;
        Ok(Tips {
            base_ref,
            base,
            tip,
            merge_base,
        })
    }
}

/// The commit the base would move to, or why it would not.
enum Outcome {
    Commit(String),
    Conflicts(Vec<Conflict>),
    NotFastForward,
}

fn outcome(
    op: &Op,
    t: &Tips,
    b: &Branch,
    mode: LandMode,
    message: Option<&str>,
) -> Result<Outcome, WorkspaceError> {
    let fast_forward = op.is_ancestor(&t.base, &t.tip)?;
    let merged = || merge_in(op.git(), &[&t.base, &t.tip]);
    let made = match mode {
        LandMode::FfOnly if !fast_forward => return Ok(Outcome::NotFastForward),
        LandMode::FfOnly => t.tip.clone(),
        LandMode::Merge if fast_forward => t.tip.clone(),
        LandMode::Merge => {
            let merged = merged()?;
            if !merged.is_clean() {
                return Ok(Outcome::Conflicts(
                    op.conflicts(&merged.tree, &merged.conflicts)?,
                ));
            }
            let default = format!("Merge branch '{}'", b.branch);
            let message = message.unwrap_or(&default);
            op.commit(&merged.tree, &[&t.base, &t.tip], message, None)?
        }
        LandMode::Squash => {
            let merged = merged()?;
            if !merged.is_clean() {
                return Ok(Outcome::Conflicts(
                    op.conflicts(&merged.tree, &merged.conflicts)?,
                ));
            }
            let subjects = commits(&op.dir, &t.merge_base, &t.tip)?;
            let default = squash_message(b.branch, &subjects);
            let message = message.unwrap_or(&default);
            op.commit(&merged.tree, &[&t.base], message, None)?
        }
        LandMode::Rebase => match replay::replay(op, &t.base, &t.base, &t.tip)? {
            Ok(commit) => commit,
            Err(conflicts) => return Ok(Outcome::Conflicts(conflicts)),
        },
    };
    Ok(Outcome::Commit(made))
}

/// The default message of a squash: the one commit's subject, or each commit's, oldest first,
/// under a title naming the branch.
pub(super) fn squash_message(branch: &str, newest_first: &[Commit]) -> String {
    match newest_first {
        [one] => one.subject.clone(),
        many => {
            let mut text = format!("Squash branch '{branch}'\n\n");
            for c in many.iter().rev() {
                text.push_str(&format!("* {}\n", c.subject));
            }
            text
        }
    }
}

/// What landing `b` on its base in `mode` would do; writes objects only.
pub fn preview(b: &Branch, mode: LandMode) -> Result<Preview, WorkspaceError> {
    let op = Op::open(b.repo)?;
    let t = Tips::read(&op, b)?;
    let commits = commits(&op.dir, &t.merge_base, &t.tip)?;
    let (files, conflicts, lands) = match outcome(&op, &t, b, mode, None)? {
        Outcome::Commit(new) => (files_between(&op.dir, &t.base, &new)?, vec![], true),
        Outcome::Conflicts(c) => (
            files_between(&op.dir, &t.merge_base, &t.tip)?,
            c.into_iter().map(|c| c.path).collect(),
            false,
        ),
        Outcome::NotFastForward => (
            files_between(&op.dir, &t.merge_base, &t.tip)?,
            vec![],
            false,
        ),
    };
    Ok(Preview {
        commits,
        files,
        conflicts,
        lands,
    })
}

/// Lands `b` on its base in `mode` (with `message` for a merge or squash commit): refused
/// with nothing changed when the branch has no commits the base lacks, where the base is
/// checked out with uncommitted changes, on a conflict, and (ff-only) when the base moved.
pub fn land(b: &Branch, mode: LandMode, message: Option<&str>) -> Result<Landed, WorkspaceError> {
    let op = Op::open(b.repo)?;
    let t = Tips::read(&op, b)?;
    if op.is_ancestor(&t.tip, &t.base)? {
        return Err(WorkspaceError::NothingToMerge {
            branch: b.branch.to_string(),
            base: b.base.to_string(),
        });
    }
    let checkout = branch_move::clean_checkout(&op, &t.base_ref, |path, files| {
        WorkspaceError::BaseDirty { path, files }
    })?;
    let new = match outcome(&op, &t, b, mode, message)? {
        Outcome::Commit(new) => new,
        Outcome::Conflicts(conflicts) => {
            return Err(WorkspaceError::Conflicts {
                branch: b.branch.to_string(),
                into: b.base.to_string(),
                conflicts,
            })
        }
        Outcome::NotFastForward => {
            return Err(WorkspaceError::NotFastForward {
                branch: b.branch.to_string(),
                base: b.base.to_string(),
            })
        }
    };
    let reason = format!("agent-hub: {} {}", mode.name(), b.branch);
    let Moved { worktree } =
        branch_move::move_branch(&op, &t.base_ref, &t.base, &new, checkout, &reason)?;
    Ok(Landed {
        commits: commits(&op.dir, &t.base, &new)?,
        files: files_between(&op.dir, &t.base, &new)?,
        before: t.base,
        after: new,
        worktree,
    })
}

/// What an update of the branch did.
#[derive(Debug, Clone, PartialEq)]
pub struct Updated {
    pub before: String,
    pub after: String,
    /// Where the branch is checked out, updated; `None`: only its ref moved.
    pub worktree: Option<PathBuf>,
}

/// Brings the base into `b`'s branch: merges it (a fast-forward when the branch has nothing of
/// its own), or with `rebase` replays the branch's commits on it. Refused with nothing changed
/// when the branch's checkout has uncommitted changes and on a conflict; nothing to do when
/// the branch already has the base (`before == after`).
pub fn update(b: &Branch, rebase: bool) -> Result<Updated, WorkspaceError> {
    let op = Op::open(b.repo)?;
    let t = Tips::read(&op, b)?;
    let (branch_ref, checkout) = clean_agent_checkout(&op, b)?;
    let conflict = |conflicts| WorkspaceError::Conflicts {
        branch: b.base.to_string(),
        into: b.branch.to_string(),
        conflicts,
    };
    let new = if op.is_ancestor(&t.base, &t.tip)? {
        t.tip.clone()
    } else if op.is_ancestor(&t.tip, &t.base)? {
        t.base.clone()
    } else if rebase {
        replay::replay(&op, &t.base, &t.base, &t.tip)?.map_err(conflict)?
    } else {
        let merged = merge_in(op.git(), &[&t.tip, &t.base])?;
        if !merged.is_clean() {
            return Err(conflict(op.conflicts(&merged.tree, &merged.conflicts)?));
        }
        let message = format!("Merge branch '{}' into {}", b.base, b.branch);
        op.commit(&merged.tree, &[&t.tip, &t.base], &message, None)?
    };
    if new == t.tip {
        return Ok(Updated {
            before: t.tip,
            after: new,
            worktree: None,
        });
    }
    let reason = format!("agent-hub: update {} from {}", b.branch, b.base);
    let Moved { worktree } =
        branch_move::move_branch(&op, &branch_ref, &t.tip, &new, checkout, &reason)?;
    Ok(Updated {
        before: t.tip,
        after: new,
        worktree,
    })
}

/// Refuses (WORKSPACE_DIRTY) when `b`'s branch is checked out with uncommitted changes: asked
/// before a merge that will move the branch to the base afterwards.
pub fn check_branch_clean(b: &Branch) -> Result<(), WorkspaceError> {
    clean_agent_checkout(&Op::open(b.repo)?, b).map(drop)
}

/// The full ref of `b`'s branch, and where it is checked out (found clean; else
/// WORKSPACE_DIRTY).
fn clean_agent_checkout(op: &Op, b: &Branch) -> Result<(String, Option<PathBuf>), WorkspaceError> {
    let branch_ref = format!("refs/heads/{}", b.branch);
    let checkout = branch_move::clean_checkout(op, &branch_ref, |path, files| {
        WorkspaceError::Dirty { path, files }
    })?;
    Ok((branch_ref, checkout))
}

/// Moves `b`'s branch to where its base is now (after a merge, so that its next task starts
/// from what landed), with its checkout, which must be clean.
pub fn continue_from_base(b: &Branch) -> Result<Updated, WorkspaceError> {
    let op = Op::open(b.repo)?;
    let t = Tips::read(&op, b)?;
    let (branch_ref, checkout) = clean_agent_checkout(&op, b)?;
    let reason = format!("agent-hub: {} continues from {}", b.branch, b.base);
    let Moved { worktree } =
        branch_move::move_branch(&op, &branch_ref, &t.tip, &t.base, checkout, &reason)?;
    Ok(Updated {
        before: t.tip,
        after: t.base,
        worktree,
    })
}
