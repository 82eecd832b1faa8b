//! Creating and deleting an agent's checkout: a linked worktree of the user's repository.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use super::git::Git;
use super::repo::{has_branch, locate, resolve_base};
use super::{changes::dirty_files, owner, Checkout, Repo, WorkspaceError};

/// Makes sure the checkout exists on its branch; whether it was created now.
///
/// The branch is created from the base when it does not exist, else checked out. An existing
/// worktree at the path is kept as it is (its uncommitted files untouched), on the branch or
/// detached (mid-rebase, say); on another branch it is refused, as is a branch checked out
/// elsewhere. An empty directory at the path is used; anything else there is refused. When
/// the hub runs as root, what it creates is given to the repository's owner ([`owner`]).
pub fn ensure(c: &Checkout) -> Result<bool, WorkspaceError> {
    let repo = locate(c.repo)?;
    let path = absolute(c.path)?;
    let one = one_at_a_time(&repo.toplevel);
    let _held = one.lock().unwrap_or_else(|e| e.into_inner());
    prune(&repo.toplevel)?;
    let mut worktrees = list(&repo.toplevel)?;
    if let Some(found) = worktrees.iter().find(|w| same_path(&w.path, &path)) {
        if path.join(".git").exists() {
            return keep(found, c.branch, &path).map(|()| false);
        }
        // Our locked entry whose files were deleted by hand: forget it, and check out again.
        let _ = Git::new(&repo.toplevel)
            .args(["worktree", "unlock"])
            .arg(&found.path)
            .run();
        prune(&repo.toplevel)?;
        worktrees = list(&repo.toplevel)?;
    }
    if let Some(other) = worktrees.iter().find(|w| w.is_on(c.branch)) {
        return Err(WorkspaceError::BranchCheckedOutElsewhere {
            branch: c.branch.to_string(),
            path: other.path.clone(),
        });
    }
    make_room(&path)?;
    add(&repo, c, &path)?;
    lock(&repo.toplevel, &path)?;
    owner::give_to_repo_owner(&repo, &path, c.branch)?;
    Ok(true)
}

/// The lock that makes the hub's changes to `repo`'s worktrees one at a time: git writes a new
/// worktree's entry in steps, and another `git worktree` command of the same repository that
/// reads it half made fails ("failed to read .git/worktrees/<name>/commondir"), as when two
/// agents on one repository start at once.
fn one_at_a_time(repo: &Path) -> Arc<Mutex<()>> {
    static LOCKS: LazyLock<Mutex<HashMap<PathBuf, Arc<Mutex<()>>>>> = LazyLock::new(Mutex::default);
    let mut locks = LOCKS.lock().unwrap_or_else(|e| e.into_inner());
    locks.entry(repo.to_path_buf()).or_default().clone()
}

/// Locks the new worktree: a `git worktree prune` run where its path does not exist (in
/// another agent's container, where only the repository's git directory is mounted) must not
/// take it away from its agent.
fn lock(repo: &Path, path: &Path) -> Result<(), WorkspaceError> {
    Git::new(repo)
        .args([
            "worktree",
            "lock",
            "--reason",
            "an agent-hub agent's workspace",
        ])
        .arg(path)
        .run()
        .map(drop)
}

/// Deletes the checkout, keeping its branch; a checkout with uncommitted changes only with
/// `force`.
pub fn remove(c: &Checkout, force: bool) -> Result<(), WorkspaceError> {
    let repo = locate(c.repo)?;
    let path = absolute(c.path)?;
    let one = one_at_a_time(&repo.toplevel);
    let _held = one.lock().unwrap_or_else(|e| e.into_inner());
    prune(&repo.toplevel)?;
    let worktrees = list(&repo.toplevel)?;
    let Some(found) = worktrees.iter().find(|w| same_path(&w.path, &path)) else {
        return Err(WorkspaceError::WorkspaceMissing { path });
    };
    if !force {
        let files = dirty_files(&path)?;
        if !files.is_empty() {
            return Err(WorkspaceError::Dirty { path, files });
        }
    }
    // Locked (see `lock`): `--force` twice removes a locked, dirty worktree; without force it
    // is unlocked first and git checks again that nothing is uncommitted.
    let mut remove = Git::new(&repo.toplevel).args(["worktree", "remove"]);
    if force {
        remove = remove.args(["--force", "--force"]);
    } else {
        Git::new(&repo.toplevel)
            .args(["worktree", "unlock"])
            .arg(&found.path)
            .run()?;
    }
    remove.arg(&found.path).run()?;
    prune(&repo.toplevel)
}

/// One entry of `git worktree list --porcelain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Worktree {
    pub path: PathBuf,
    /// The branch checked out (short name); `None` when detached or bare.
    pub branch: Option<String>,
}

impl Worktree {
    fn is_on(&self, branch: &str) -> bool {
        self.branch.as_deref() == Some(branch)
    }
}

/// Parses `git worktree list --porcelain`: blocks of `worktree <path>`, `HEAD <sha>`,
/// `branch refs/heads/<name>` or `detached`, ... separated by blank lines.
pub(super) fn parse_list(text: &str) -> Vec<Worktree> {
    let mut worktrees = Vec::new();
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            worktrees.push(Worktree {
                path: PathBuf::from(path),
                branch: None,
            });
        } else if let Some(branch) = line.strip_prefix("branch ") {
            if let Some(last) = worktrees.last_mut() {
                let short = branch.strip_prefix("refs/heads/").unwrap_or(branch);
                last.branch = Some(short.to_string());
            }
        }
    }
    worktrees
}

pub(super) fn list(repo: &Path) -> Result<Vec<Worktree>, WorkspaceError> {
    let out = Git::new(repo)
        .args(["worktree", "list", "--porcelain"])
        .run()?;
    Ok(parse_list(&String::from_utf8_lossy(&out)))
}

/// Forgets worktrees whose directories are gone.
fn prune(repo: &Path) -> Result<(), WorkspaceError> {
    Git::new(repo).args(["worktree", "prune"]).run().map(drop)
}

/// The worktree already at the path: kept when on the branch or detached.
fn keep(found: &Worktree, branch: &str, path: &Path) -> Result<(), WorkspaceError> {
    let in_the_way = |detail: String| WorkspaceError::PathInUse {
        path: path.to_path_buf(),
        detail,
    };
    match &found.branch {
        Some(other) if other != branch => Err(in_the_way(format!(
            "it is a checkout of branch {other:?}, not {branch:?}; switch it back (`git switch \
             {branch}` in it) or remove the checkout"
        ))),
        _ => Ok(()),
    }
}

/// Makes sure nothing is in the way of a new worktree at `path`: nothing there, or an empty
/// directory. Creates the parent directories.
fn make_room(path: &Path) -> Result<(), WorkspaceError> {
    let in_the_way = |detail: &str| WorkspaceError::PathInUse {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = path.parent().unwrap_or(Path::new("/"));
            std::fs::create_dir_all(parent).map_err(WorkspaceError::io(format!(
                "could not create {}",
                parent.display()
            )))
        }
        Err(e) => Err(WorkspaceError::io(format!(
            "could not inspect {}",
            path.display()
        ))(e)),
        Ok(meta) if !meta.is_dir() => Err(in_the_way("it is not a directory")),
        Ok(_) if !is_empty_dir(path)? => Err(in_the_way(
            "it is a directory with files that is not a worktree of the repository",
        )),
        Ok(_) => Ok(()),
    }
}

fn is_empty_dir(path: &Path) -> Result<bool, WorkspaceError> {
    let mut entries = std::fs::read_dir(path).map_err(WorkspaceError::io(format!(
        "could not read {}",
        path.display()
    )))?;
    Ok(entries.next().is_none())
}

/// `git worktree add`: the existing branch, or a new one from the base (not tracking it).
fn add(repo: &Repo, c: &Checkout, path: &Path) -> Result<(), WorkspaceError> {
    let git = Git::new(&repo.toplevel).args(["worktree", "add"]);
    let git = if has_branch(&repo.toplevel, c.branch)? {
        git.arg(path).arg(c.branch)
    } else {
        resolve_base(&repo.toplevel, c.base)?;
        git.args(["--no-track", "-b", c.branch])
            .arg(path)
            .arg(c.base)
    };
    git.run().map(drop)
}

fn absolute(path: &Path) -> Result<PathBuf, WorkspaceError> {
    std::path::absolute(path).map_err(WorkspaceError::io(format!(
        "could not resolve {}",
        path.display()
    )))
}

/// Whether two paths name the same place (resolving links where they exist).
fn same_path(a: &Path, b: &Path) -> bool {
    let resolve = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    resolve(a) == resolve(b)
}
