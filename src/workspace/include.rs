//! Copying files git does not track (`.env`, `config/local.toml`) from the user's work tree
//! into a new checkout: a worktree has only the tracked files, and a project often needs a
//! few ignored ones to run at all.
//!
//! Which files: the untracked files of the repository's (main) work tree that a pattern of the
//! agent's `include` or of the repository's `.worktreeinclude` (one a line, `#` comments)
//! matches. Patterns are `.gitignore` patterns relative to the repository's root (`.env` at
//! any depth, `/.env` at the root only, `config/local.*`, `secrets/`), matched by git itself
//! (`git ls-files --others --ignored --exclude=...`), so nothing outside the work tree and
//! nothing under `.git` can match. A file the checkout has (tracked on its branch) is never
//! overwritten; modes are kept, symbolic links copied as links.

use std::path::Path;

use super::git::{fields, Git};
use super::{Repo, WorkspaceError};

/// The file of the repository's root that lists more patterns.
pub const INCLUDE_FILE: &str = ".worktreeinclude";

/// Why `pattern` cannot be an `include` pattern; `None` when it can.
pub fn pattern_problem(pattern: &str) -> Option<&'static str> {
    if pattern.trim().is_empty() {
        return Some("it is empty");
    }
    if pattern.contains(['\n', '\r', '\0']) {
        return Some("it has a line break or a NUL character");
    }
    if pattern.starts_with('#') {
        return Some("it starts with '#', which makes it a comment (write \\# for a '#')");
    }
    if pattern.split('/').any(|part| part == "..") {
        return Some("it has a '..' component: patterns match inside the repository only");
    }
    if pattern == "/" || pattern == "!" {
        return Some("it matches nothing");
    }
    None
}

/// Copies the files of `repo`'s work tree that `patterns` and its `.worktreeinclude` match into
/// the new checkout at `checkout`; the paths copied (relative to the root).
pub(super) fn copy_into(
    repo: &Repo,
    patterns: &[String],
    checkout: &Path,
) -> Result<Vec<String>, WorkspaceError> {
    let mut copied = Vec::new();
    for path in matching(&repo.toplevel, patterns)? {
        if copy_one(&repo.toplevel.join(&path), &checkout.join(&path))? {
            copied.push(path);
        }
    }
    Ok(copied)
}

/// The untracked files of the work tree at `toplevel` the patterns match.
fn matching(toplevel: &Path, patterns: &[String]) -> Result<Vec<String>, WorkspaceError> {
    let list_file = toplevel.join(INCLUDE_FILE);
    let has_list = list_file.is_file();
    if patterns.is_empty() && !has_list {
        return Ok(Vec::new());
    }
    let mut git = Git::new(toplevel).args(["ls-files", "-z", "--others", "--ignored"]);
    for pattern in patterns {
        git = git.arg(format!("--exclude={pattern}"));
    }
    if has_list {
        let mut arg = std::ffi::OsString::from("--exclude-from=");
        arg.push(&list_file);
        git = git.arg(arg);
    }
    Ok(fields(&git.run()?))
}

/// Copies the file or link `from` to `to` unless something is there; whether it did.
fn copy_one(from: &Path, to: &Path) -> Result<bool, WorkspaceError> {
    let io = |what: &str, path: &Path| WorkspaceError::io(format!("{what} {}", path.display()));
    if std::fs::symlink_metadata(to).is_ok() {
        return Ok(false);
    }
    let meta = std::fs::symlink_metadata(from).map_err(io("could not inspect", from))?;
    if let Some(parent) = to.parent() {
        match std::fs::create_dir_all(parent) {
            // A file of the checkout where the user has a directory (`config` tracked as a
            // file on the branch): the checkout's stays.
            Err(e) if parent_is_taken(&e) => return Ok(false),
            other => other.map_err(io("could not create", parent))?,
        }
    }
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from).map_err(io("could not read", from))?;
        crate::platform::symlink(&target, to).map_err(io("could not make", to))?;
    } else if meta.is_file() {
        // Copies the permission bits too.
        std::fs::copy(from, to).map_err(io("could not copy to", to))?;
    } else {
        return Ok(false);
    }
    Ok(true)
}

/// Whether a directory could not be made because a file of that name is on its way.
fn parent_is_taken(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotADirectory | std::io::ErrorKind::AlreadyExists
    )
}
