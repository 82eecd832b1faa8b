//! Opening a checkout to an agent that writes the repository as one of its group or as anyone
//! ([`super::access::Access::Open`]): the checkout, its administrative directory and its
//! branch's ref and reflog get the repository's permission bits for group and others, so the
//! agent can write files and commit as its owner could. Nothing else of the repository's is
//! touched, and bits are only ever added.

use std::fs::Metadata;
use std::path::Path;

use super::owner::admin_dir;
use super::{Checkout, Repo, WorkspaceError};

/// Opens the checkout at `c.path` and what git made for it in `repo` with `bits` (the
/// repository's bits for group and others, `0o077`). The checkout is walked when its top
/// lacks them (a new checkout, or one made before the repository was opened); its
/// administrative directory, the ref and reflog of its branch and the directories made for
/// them under `refs/heads` and `logs/refs/heads` every time (a few files).
pub fn open(repo: &Repo, c: &Checkout, bits: u32) -> Result<(), WorkspaceError> {
    let top = std::fs::symlink_metadata(c.path).map_err(io_at(c.path))?;
    if widened(mode_of(&top), true, bits) != mode_of(&top) {
        open_tree(c.path, bits)?;
    }
    if let Some(admin) = admin_dir(c.path)? {
        open_tree(&admin, bits)?;
    }
    for refs in ["refs/heads", "logs/refs/heads"] {
        let top = repo.common_dir.join(refs);
        open_with_parents(&top.join(c.branch), &top, bits)?;
    }
    Ok(())
}

/// `mode` with the bits the repository grants (`bits`): read and write, and execute on
/// directories and on files something may execute.
pub(super) fn widened(mode: u32, is_dir: bool, bits: u32) -> u32 {
    let executable = is_dir || mode & 0o111 != 0;
    match executable {
        true => mode | bits,
        false => mode | (bits & 0o066),
    }
}

/// `path` and everything under it (links are left alone: a mode change would follow them).
fn open_tree(path: &Path, bits: u32) -> Result<(), WorkspaceError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io_at(path)(e)),
    };
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    open_one(path, &meta, bits)?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path).map_err(io_at(path))? {
            open_tree(&entry.map_err(io_at(path))?.path(), bits)?;
        }
    }
    Ok(())
}

/// `path` (when it exists) and its parents up to `top` (exclusive).
fn open_with_parents(path: &Path, top: &Path, bits: u32) -> Result<(), WorkspaceError> {
    open_tree(path, bits)?;
    for parent in path
        .ancestors()
        .skip(1)
        .take_while(|p| p.starts_with(top) && *p != top)
    {
        if let Ok(meta) = std::fs::symlink_metadata(parent) {
            open_one(parent, &meta, bits)?;
        }
    }
    Ok(())
}

fn open_one(path: &Path, meta: &Metadata, bits: u32) -> Result<(), WorkspaceError> {
    let mode = mode_of(meta);
    let wanted = widened(mode, meta.is_dir(), bits);
    if wanted == mode {
        return Ok(());
    }
    crate::platform::set_mode(path, wanted).map_err(io_at(path))
}

fn mode_of(meta: &Metadata) -> u32 {
    crate::platform::owner(meta).mode
}

fn io_at(path: &Path) -> impl FnOnce(std::io::Error) -> WorkspaceError {
    WorkspaceError::io(format!(
        "could not open {} to the agent's user",
        path.display()
    ))
}
