//! An agent's workspace: its own git worktree of a repository on the hub's machine.
//!
//! An agent definition may name a repository and a base (`workspace = { repo = "/srv/app",
//! base = "main" }`, with an optional `branch`, `agent/<id>` by default). The hub gives the
//! agent a checkout of that repository on the branch, at `<data_dir>/agents/<id>/workspace`,
//! which becomes the agent's working directory in its container.
//!
//! # Design
//! - The checkout is a **`git worktree`, not a clone**: a commit the agent makes lands on the
//!   branch in the user's repository at once, with nothing to fetch or copy back, and the
//!   objects are shared, so a checkout costs only its files.
//! - A worktree's `.git` is a file naming its administrative directory inside the repository's
//!   common git dir (`/srv/app/.git/worktrees/<name>`) by absolute path, so the container mounts
//!   the common dir ([`Repo::common_dir`]) **at the same absolute path**: git then works inside
//!   the container as it does on the host.
//! - The hub may run as root on a user's repository: every git call passes
//!   `-c safe.directory=*`, runs with `LC_ALL=C`, never prompts and runs none of the
//!   repository's hooks ([`git`]); a checkout created as root is given to the owner of the
//!   repository ([`owner`]), so the user can go on using their repository and the checkout.
//! - The agent's container may run as another user than the repository's owner: it works where
//!   the repository lets its group or everyone write, its checkout opened as far as the
//!   repository is; elsewhere its start is refused before anything is made ([`mod@access`]).
//! - An agent on another engine has no checkout here: it clones its branch over the hub's API
//!   into a volume on its engine and pushes back to it ([`remote`], [`http_backend`], with
//!   the refs it may push decided by [`push_rule`]).
//! - Everything here but [`http_backend`] is synchronous `git` processes: callers run it in
//!   `spawn_blocking`.
//!
//! - A new checkout gets what a project needs besides its tracked files: the untracked files
//!   the agent's `include` and the repository's `.worktreeinclude` name ([`include`]), and its
//!   submodules ([`submodules`]).
//!
//! The operations: [`check`] (at load), [`prepare`] (before the agent starts: [`agent_access`],
//! [`ensure`], [`open::open`]), [`changes`] (what the agent changed against its base),
//! [`dirty_files`], [`summary`] (the agent's work at a glance: ahead, behind, files, whether it
//! merges cleanly) and [`remove`]; landing the work: [`preview`] and [`land`] (merge, squash,
//! rebase, ff-only into the base), [`update`] (the base into the branch),
//! [`continue_from_base`] and [`push`].
//!
//! Workspace code elsewhere only calls these: `config/workspace.rs` checks each definition at
//! load, `agents/workspace.rs` makes and mounts an agent's checkout at its start and answers
//! `changes` and `remove`, and `api/agents.rs`, `cli/workspace.rs` and the MCP tools expose
//! those.

mod access;
mod branch_move;
mod changes;
mod conflicts;
mod git;
pub mod http_backend;
mod include;
mod land;
mod merge_tree;
mod open;
mod owner;
mod push;
pub mod push_rule;
mod remote;
mod replay;
mod repo;
pub mod review;
mod submodules;
mod summary;
mod worktree;

/// Unix only: they drive real git in scratch repositories, and a Windows build run under
/// Wine cannot start a Linux program with its pipes and exit status (docs/testing.md).
#[cfg(all(test, unix))]
mod tests;

use std::path::{Path, PathBuf};

pub use access::{agent_access, Access, AgentUser};
pub use changes::{changes, committed_changes, dirty_files, uncommitted_from};
pub use conflicts::{prompt as conflict_prompt, Conflict};
pub use include::{pattern_problem, INCLUDE_FILE};
pub use land::{
    check_branch_clean, continue_from_base, land, preview, update, LandMode, Landed, Preview,
    Updated,
};
pub use merge_tree::{merge_tree, Merged};
pub use push::{push, Pushed};
pub use remote::{branch_tip, ensure_branch, is_ancestor, served_repo, ServedRepo};
pub use repo::{check, current_branch, valid_branch_name};
pub use summary::{summary, Work, WorkSummary};
pub use worktree::{ensure, remove};

/// The agent's checkout before its start: the repository checked, the start refused when the
/// agent's user (`user`, of image `image`) could not write it, the checkout made or kept, and
/// opened to that user when it writes as the repository's group or anyone. The repository,
/// and whether the checkout was made now.
pub fn prepare(
    c: &Checkout,
    user: &AgentUser,
    image: &str,
) -> Result<(Repo, bool), WorkspaceError> {
    let repo = check(c.repo, c.base)?;
    let access = agent_access(&repo, user, image)?;
    let created = ensure(c)?;
    if let Access::Open(bits) = access {
        open::open(&repo, c, bits)?;
    }
    Ok((repo, created))
}

/// [`agent_access`] to the repository `repo` is in: at load (the daemon's preflight, doctor).
pub fn access_to(repo: &Path, user: &AgentUser, image: &str) -> Result<Access, WorkspaceError> {
    agent_access(&repo::locate(repo)?, user, image)
}

/// The repository facts found at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The canonical root of the repository's (main) work tree.
    pub toplevel: PathBuf,
    /// The canonical absolute git common dir, e.g. `/srv/app/.git`: what the container mounts
    /// at the same path.
    pub common_dir: PathBuf,
}

/// One agent's checkout.
#[derive(Debug, Clone, Copy)]
pub struct Checkout<'a> {
    /// The user's repository (any directory of its work tree).
    pub repo: &'a Path,
    /// What a new branch starts from (a branch, tag or commit).
    pub base: &'a str,
    /// The agent's branch.
    pub branch: &'a str,
    /// Where the checkout lives (`<data_dir>/agents/<id>/workspace`).
    pub path: &'a Path,
    /// Patterns of untracked files copied into a new checkout ([`include`]).
    pub include: &'a [String],
}

/// One agent's branch, with no checkout on the hub's machine (a workspace on another engine).
#[derive(Debug, Clone, Copy)]
pub struct Branch<'a> {
    /// The user's repository (any directory of its work tree).
    pub repo: &'a Path,
    /// What the branch starts from.
    pub base: &'a str,
    /// The agent's branch.
    pub branch: &'a str,
}

/// What the agent changed against its base.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Changes {
    pub branch: String,
    pub base: String,
    /// The checkout's path.
    pub path: String,
    /// The commit the checkout's `HEAD` is at (the branch's head).
    pub head: String,
    /// The merge base of `base` and `head`: where the committed changes start.
    pub merge_base: String,
    /// The commits `merge_base..head`, newest first.
    pub commits: Vec<Commit>,
    /// The files changed by those commits.
    pub committed: Vec<FileChange>,
    /// The files changed in the work tree and index against `head`, untracked ones included.
    pub uncommitted: Vec<FileChange>,
    /// The diffs, when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<Diffs>,
}

/// One commit.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Commit {
    pub sha: String,
    pub subject: String,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct FileChange {
    /// The path in the work tree (the new path of a renamed file).
    pub path: String,
    /// Lines added; `None` for a binary file.
    pub added: Option<u64>,
    /// Lines removed; `None` for a binary file.
    pub removed: Option<u64>,
    /// `added`, `modified`, `deleted`, `renamed` or `untracked`.
    pub status: String,
}

/// The unified diffs of [`Changes`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Diffs {
    /// `merge_base..head`.
    pub committed: String,
    /// The work tree against `head`, untracked files as new files.
    pub uncommitted: String,
}

/// Why a workspace operation failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    /// `workspace.repo` is missing, not a repository, bare, or inside a `.git` directory.
    #[error(
        "{} is not a git repository with a work tree: {detail}; point workspace.repo at a \
         directory of a non-bare git repository",
        path.display()
    )]
    NotARepo { path: PathBuf, detail: String },
    /// `workspace.base` names no commit.
    #[error(
        "{base:?} names no commit in {}; set workspace.base to an existing branch, tag or commit",
        repo.display()
    )]
    NoSuchBase { repo: PathBuf, base: String },
    /// The branch is checked out in another worktree (or the repository's own).
    #[error(
        "branch {branch:?} is already checked out at {}; a branch can be checked out in one \
         place only: remove that checkout (`git worktree remove`) or give the agent another \
         workspace.branch",
        path.display()
    )]
    BranchCheckedOutElsewhere { branch: String, path: PathBuf },
    /// The checkout has uncommitted changes (untracked files included).
    #[error(
        "the checkout at {} has uncommitted changes ({}); commit or discard them, or remove it \
         with force",
        path.display(),
        list_files(files)
    )]
    Dirty { path: PathBuf, files: Vec<String> },
    /// There is no checkout at the path.
    #[error("there is no checkout at {}; it is created when the agent starts", path.display())]
    WorkspaceMissing { path: PathBuf },
    /// Something else is at the checkout's path: files, or the checkout switched to another
    /// branch.
    #[error(
        "{} is in the way of the agent's checkout: {detail}; move it away or delete it",
        path.display()
    )]
    PathInUse { path: PathBuf, detail: String },
    /// The user the agent's container runs as cannot write the repository ([`agent_access`]).
    #[error("{reason}; {fix}")]
    NotWritable {
        /// The repository (or its git directory, when that is elsewhere).
        path: PathBuf,
        /// Who cannot write what.
        reason: String,
        /// The ways out.
        fix: String,
    },
    /// The base is checked out with uncommitted changes: a merge into it is refused.
    #[error(
        "the base is checked out at {} with uncommitted changes ({}); commit or stash them \
         there first, then merge again",
        path.display(),
        list_files(files)
    )]
    BaseDirty { path: PathBuf, files: Vec<String> },
    /// Merging one branch into another conflicts; nothing was changed.
    #[error(
        "merging {branch} into {into} conflicts in {}; nothing was changed: resolve them on \
         the agent's branch (merge {into} into it) and merge again",
        list_files(&conflicts.iter().map(|c| c.path.clone()).collect::<Vec<_>>())
    )]
    Conflicts {
        branch: String,
        into: String,
        conflicts: Vec<conflicts::Conflict>,
    },
    /// The branch has no commits its base lacks.
    #[error("branch {branch} has no commits that {base} lacks: there is nothing to merge")]
    NothingToMerge { branch: String, base: String },
    /// A fast-forward only merge of a base that is not an ancestor of the branch.
    #[error(
        "{base} is not an ancestor of {branch}, so it cannot be fast-forwarded; merge, \
         squash or rebase instead, or update the branch first"
    )]
    NotFastForward { branch: String, base: String },
    /// The base is a tag or a commit, which a merge cannot move.
    #[error("the base {base:?} is not a branch; only a branch can be merged into")]
    BaseNotABranch { base: String },
    /// The agent's branch does not exist (yet).
    #[error("there is no branch {branch:?}; it is made at the agent's first start")]
    NoBranch { branch: String },
    /// A branch moved while it was being changed; nothing was changed.
    #[error("{branch} moved meanwhile ({detail}); nothing was changed: try again")]
    BranchMoved { branch: String, detail: String },
    /// The repository has no such remote.
    #[error("the repository has no remote {remote:?} (see `git remote -v`)")]
    NoSuchRemote { remote: String },
    /// `git push` failed.
    #[error("git push to {remote} failed: {detail}")]
    PushFailed { remote: String, detail: String },
    /// A git command failed.
    #[error("`git {args}` failed: {stderr}")]
    Git { args: String, stderr: String },
    /// Running git or a file operation failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

impl WorkspaceError {
    /// The stable machine code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NotARepo { .. } => "WORKSPACE_NOT_A_REPO",
            Self::NoSuchBase { .. } => "WORKSPACE_NO_BASE",
            Self::BranchCheckedOutElsewhere { .. } => "WORKSPACE_BRANCH_IN_USE",
            Self::Dirty { .. } => "WORKSPACE_DIRTY",
            Self::WorkspaceMissing { .. } => "WORKSPACE_MISSING",
            Self::PathInUse { .. } => "WORKSPACE_PATH_IN_USE",
            Self::NotWritable { .. } => "WORKSPACE_NOT_WRITABLE",
            Self::BaseDirty { .. } => "BASE_DIRTY",
            Self::Conflicts { .. } => "MERGE_CONFLICT",
            Self::NothingToMerge { .. } => "NOTHING_TO_MERGE",
            Self::NotFastForward { .. } => "NOT_FAST_FORWARD",
            Self::BaseNotABranch { .. } => "BASE_NOT_A_BRANCH",
            Self::NoBranch { .. } => "NO_BRANCH",
            Self::BranchMoved { .. } => "BRANCH_MOVED",
            Self::NoSuchRemote { .. } => "NO_SUCH_REMOTE",
            Self::PushFailed { .. } => "PUSH_FAILED",
            Self::Git { .. } | Self::Io { .. } => "GIT_FAILED",
        }
    }

    /// An I/O error with what was being done.
    fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let context = context.into();
        move |source| Self::Io { context, source }
    }
}

/// The first few files of a list, and how many more there are.
fn list_files(files: &[String]) -> String {
    const SHOWN: usize = 10;
    let mut text = files
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if files.len() > SHOWN {
        text.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    text
}
