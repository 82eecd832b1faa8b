//! Giving what a root hub created to the repository's owner: the checkout, its administrative
//! directory in the common dir, and the branch's ref and reflog when they are new. In the
//! common dir only what root owns is changed, so nothing of the user's is touched.

use std::path::{Path, PathBuf};

use super::{Repo, WorkspaceError};
use crate::platform::{self, lchown};

/// When the hub runs as root, gives the new checkout at `checkout` (on `branch`) and what git
/// created for it to the owner of the repository's common dir.
///
/// The hub is root when what git just created as it, the checkout's `.git`, belongs to root
/// (this needs no user-id call).
pub(super) fn give_to_repo_owner(
    repo: &Repo,
    checkout: &Path,
    branch: &str,
) -> Result<(), WorkspaceError> {
    if !platform::is_root() || !created_by_root(checkout)? {
        return Ok(());
    }
    let owner = Owner::of(repo)?;
    owner.take(checkout, &|_| true)?;
    if let Some(admin) = admin_dir(checkout)? {
        owner.take_with_parents(&admin, &repo.common_dir)?;
    }
    owner.take_branch(repo, branch)
}

/// When the hub runs as root, gives the branch's new ref and reflog (and the directories made
/// for them) to the owner of the repository's common dir (a branch made without a checkout:
/// [`super::remote`]).
pub(super) fn give_branch_to_repo_owner(repo: &Repo, branch: &str) -> Result<(), WorkspaceError> {
    if !platform::is_root() {
        return Ok(());
    }
    Owner::of(repo)?.take_branch(repo, branch)
}

/// The user and group git should run as on the repository: its owner when the hub is root
/// and the repository is someone else's (what git writes is then theirs); `None`: the hub.
pub(super) fn run_as(repo: &Repo) -> Result<Option<(u32, u32)>, WorkspaceError> {
    let owner = Owner::of(repo)?;
    let hub_is_root = platform::is_root();
    Ok((hub_is_root && owner.uid != 0).then_some((owner.uid, owner.gid)))
}

/// When the hub runs as root, gives what updating the work tree `worktree` as root created or
/// rewrote to the owner of the work tree: the files `paths` (relative to it) with the
/// directories made for them, and its index `index`.
pub(super) fn give_updated_files(
    worktree: &Path,
    paths: &[String],
    index: &Path,
) -> Result<(), WorkspaceError> {
    if !platform::is_root() {
        return Ok(());
    }
    let meta = std::fs::metadata(worktree).map_err(io_at(worktree))?;
    let found = platform::owner(&meta);
    if found.uid == 0 {
        return Ok(());
    }
    let owner = Owner {
        uid: found.uid,
        gid: found.gid,
    };
    for path in paths {
        owner.take_with_parents(&worktree.join(path), worktree)?;
    }
    owner.take(index, &|meta| platform::owner(meta).uid == 0)
}

/// [`run_as`] for the hub's own git work in the repository (landing a branch): the owner
/// when they can reach the repository's top level and git directory (every directory above
/// them lets them through), else the hub itself, which can (a repository given to a user
/// inside a directory only root may enter, as the agents' is in some test rigs).
pub(super) fn run_as_reaching(repo: &Repo) -> Result<Option<(u32, u32)>, WorkspaceError> {
    let Some((uid, gid)) = run_as(repo)? else {
        return Ok(None);
    };
    let reaches = [&repo.toplevel, &repo.common_dir]
        .iter()
        .all(|path| path.ancestors().skip(1).all(|dir| may_enter(dir, uid, gid)));
    Ok(reaches.then_some((uid, gid)))
}

/// Whether `uid` (of group `gid`) may pass through the directory `dir`.
fn may_enter(dir: &Path, uid: u32, gid: u32) -> bool {
    let Ok(meta) = std::fs::metadata(dir) else {
        return false;
    };
    let found = platform::owner(&meta);
    let search = match (found.uid == uid, found.gid == gid) {
        (true, _) => 0o100,
        (false, true) => 0o010,
        (false, false) => 0o001,
    };
    found.mode & search != 0
}

fn created_by_root(checkout: &Path) -> Result<bool, WorkspaceError> {
    let file = checkout.join(".git");
    let meta = std::fs::symlink_metadata(&file).map_err(WorkspaceError::io(format!(
        "could not inspect {}",
        file.display()
    )))?;
    Ok(platform::owner(&meta).uid == 0)
}

/// The checkout's administrative directory, named by its `.git` file (`gitdir: <path>`).
pub(super) fn admin_dir(checkout: &Path) -> Result<Option<PathBuf>, WorkspaceError> {
    let file = checkout.join(".git");
    let text = std::fs::read_to_string(&file).map_err(WorkspaceError::io(format!(
        "could not read {}",
        file.display()
    )))?;
    Ok(text
        .lines()
        .find_map(|line| line.strip_prefix("gitdir: "))
        .map(|dir| {
            let dir = checkout.join(dir.trim());
            dir.canonicalize().unwrap_or(dir)
        }))
}

struct Owner {
    uid: u32,
    gid: u32,
}

impl Owner {
    /// The owner of the repository's common dir.
    fn of(repo: &Repo) -> Result<Self, WorkspaceError> {
        let meta = std::fs::metadata(&repo.common_dir).map_err(WorkspaceError::io(format!(
            "could not inspect {}",
            repo.common_dir.display()
        )))?;
        let found = platform::owner(&meta);
        Ok(Owner {
            uid: found.uid,
            gid: found.gid,
        })
    }

    /// What root owns of the branch's ref and reflog.
    fn take_branch(&self, repo: &Repo, branch: &str) -> Result<(), WorkspaceError> {
        let common = &repo.common_dir;
        self.take_with_parents(&common.join("refs/heads").join(branch), common)?;
        self.take_with_parents(&common.join("logs/refs/heads").join(branch), common)
    }

    /// `path` and everything under it that `which` selects (links themselves, not followed).
    fn take(
        &self,
        path: &Path,
        which: &dyn Fn(&std::fs::Metadata) -> bool,
    ) -> Result<(), WorkspaceError> {
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_at(path)(e)),
        };
        if which(&meta) {
            lchown(path, self.uid, self.gid).map_err(io_at(path))?;
        }
        if meta.is_dir() {
            for entry in std::fs::read_dir(path).map_err(io_at(path))? {
                self.take(&entry.map_err(io_at(path))?.path(), which)?;
            }
        }
        Ok(())
    }

    /// What root owns of `path` (recursively) and of its parents up to `top` (exclusive).
    fn take_with_parents(&self, path: &Path, top: &Path) -> Result<(), WorkspaceError> {
        let root_owned = |meta: &std::fs::Metadata| platform::owner(meta).uid == 0;
        self.take(path, &root_owned)?;
        for parent in path
            .ancestors()
            .skip(1)
            .take_while(|p| p.starts_with(top) && *p != top)
        {
            let meta = std::fs::symlink_metadata(parent).map_err(io_at(parent))?;
            if root_owned(&meta) {
                lchown(parent, self.uid, self.gid).map_err(io_at(parent))?;
            }
        }
        Ok(())
    }
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> WorkspaceError {
    WorkspaceError::io(format!(
        "could not give {} to the repository's owner",
        path.display()
    ))
}
