//! Whether the agent's user can work in its checkout, decided before anything is made.
//!
//! The checkout belongs to the repository's owner ([`super::owner`]: a root hub gives it to
//! them, a hub of another user works on its own repository) and a commit writes into the
//! repository's common dir (objects, the branch's ref), so an agent whose container runs as
//! another user can work there only where the repository lets its group or everyone write.
//! Then its checkout is opened as far as the repository is ([`super::open`]); where the
//! repository does not let it write, the start is refused with the fix, before its container
//! is made: never halfway through a task.
//!
//! The user comes from the image's `User` (`agent`, `1000`, `1000:1000`, `agent:staff`); a
//! name's ids are only known inside the image, so a named user is taken for not root, and for
//! the owner of a repository that does not belong to root (it may be, as the shipped image's
//! `agent` is uid 1000, a single-user machine's first user).

use std::fmt;
use std::path::Path;

use super::{Repo, WorkspaceError};

/// One half of a container user: a number or a name.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Id {
    Num(u32),
    Name(String),
}

impl Id {
    fn parse(text: &str) -> Self {
        text.parse().map_or_else(|_| Id::Name(text.into()), Id::Num)
    }

    /// Whether it is `id` (`root` is 0); `None` when a name's number cannot be known.
    fn is(&self, id: u32) -> Option<bool> {
        match self {
            Id::Num(n) => Some(*n == id),
            Id::Name(name) if name == "root" => Some(id == 0),
            Id::Name(_) if id == 0 => Some(false),
            Id::Name(_) => None,
        }
    }
}

/// The user an agent runs as in its container: its image's `User` (empty: root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentUser {
    user: Id,
    group: Option<Id>,
}

impl AgentUser {
    pub fn parse(text: &str) -> Self {
        let (user, group) = match text.split_once(':') {
            Some((user, group)) => (user, Some(Id::parse(group))),
            None => (text, None),
        };
        let user = if user.is_empty() { "root" } else { user };
        AgentUser {
            user: Id::parse(user),
            group,
        }
    }

    fn is_root(&self) -> bool {
        self.user.is(0) == Some(true)
    }

    /// Whether its group is `gid`; `None` when unknown (a name, or the image's default group).
    fn in_group(&self, gid: u32) -> Option<bool> {
        self.group.as_ref().and_then(|g| g.is(gid))
    }
}

impl fmt::Display for AgentUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |id: &Id| match id {
            Id::Num(n) => n.to_string(),
            Id::Name(name) => name.clone(),
        };
        write!(f, "{}", show(&self.user))?;
        match &self.group {
            Some(group) => write!(f, ":{}", show(group)),
            None => Ok(()),
        }
    }
}

/// The owner, group and mode of the repository's common dir.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepoMode {
    pub uid: u32,
    pub gid: u32,
    /// The permission bits (`0o755`).
    pub mode: u32,
}

/// What a start does about the agent's user and the repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The checkout as the hub makes it: the agent is root or the repository's owner (or may
    /// be: a named user on a repository that is not root's).
    AsMade,
    /// The agent writes as one of the repository's group or as anyone: the checkout and what
    /// git made for it get the repository's bits for its group and others (`0o077`).
    Open(u32),
}

/// Who may write what: the agent's user against the repository's owner and mode. `None` when
/// that user cannot write the repository.
pub fn decide(repo: RepoMode, user: &AgentUser) -> Option<Access> {
    let owner = user.user.is(repo.uid);
    if user.is_root() || owner == Some(true) {
        return Some(Access::AsMade);
    }
    let others = repo.mode & 0o002 != 0;
    let group = repo.mode & 0o020 != 0 && user.in_group(repo.gid) != Some(false);
    match (others || group, owner) {
        (true, _) => Some(Access::Open(repo.mode & 0o077)),
        (false, None) => Some(Access::AsMade),
        (false, Some(_)) => None,
    }
}

/// Whether the agent's user (`user` of image `image`) can work in a checkout of `repo`: how to
/// make it, or why not and what to do.
pub fn agent_access(repo: &Repo, user: &AgentUser, image: &str) -> Result<Access, WorkspaceError> {
    let dir = &repo.common_dir;
    let meta = std::fs::metadata(dir).map_err(WorkspaceError::io(format!(
        "could not inspect {}",
        dir.display()
    )))?;
    let found = crate::platform::owner(&meta);
    let mode = RepoMode {
        uid: found.uid,
        gid: found.gid,
        mode: found.mode & 0o777,
    };
    decide(mode, user).ok_or_else(|| refusal(repo, mode, user, image))
}

/// The refusal: who cannot write what, and the three ways out.
fn refusal(repo: &Repo, mode: RepoMode, user: &AgentUser, image: &str) -> WorkspaceError {
    let path = fix_target(repo);
    let owner = match mode.uid {
        0 => "root".to_string(),
        uid => format!("uid {uid}"),
    };
    let writers = match mode.mode & 0o020 {
        0 => "its owner".to_string(),
        _ => format!("its owner and group {}", mode.gid),
    };
    let reason = format!(
        "the agent runs as user '{user}' (image {image}), which cannot write {}: it belongs to \
         {owner} (group {}, mode {:o}) and only {writers} may write it, so the agent would \
         fail at its first file or commit",
        path.display(),
        mode.gid,
        mode.mode
    );
    let fix = format!(
        "give the repository to the agent's user: {}, or let everyone write it: chmod -R \
         a+rwX {}, or run the agent from an image whose user is root",
        chown(user, image, path),
        path.display()
    );
    WorkspaceError::NotWritable {
        path: path.to_path_buf(),
        reason,
        fix,
    }
}

/// The `chown` that gives `path` to the agent's user.
fn chown(user: &AgentUser, image: &str, path: &Path) -> String {
    let path = path.display();
    match (&user.user, &user.group) {
        (Id::Num(uid), Some(Id::Num(gid))) => format!("chown -R {uid}:{gid} {path}"),
        (Id::Num(uid), _) => format!("chown -R {uid} {path}"),
        _ => format!(
            "chown -R UID:GID {path} (the ids `docker run --rm --entrypoint id {image}` \
             prints; 1000:1000 in the shipped image)"
        ),
    }
}

/// What the user gives or opens: the repository, or its git directory when that is elsewhere.
fn fix_target(repo: &Repo) -> &Path {
    if repo.common_dir.starts_with(&repo.toplevel) {
        &repo.toplevel
    } else {
        &repo.common_dir
    }
}
