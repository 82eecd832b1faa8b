//! The FIFO the hub reads a pane's bytes from itself (Unix only; see [`super::pipe`]): made
//! in a private directory and opened for reading before tmux's writer comes.

use std::path::{Path, PathBuf};

use super::pipe::plain_path;
use super::place::PipeRoot;
use super::TmuxError;
use crate::backend::pane_reader::{Fifo, PaneReader};

/// A FIFO made and opened: its reader, its directory as the tmux server sees it, and the same
/// directory here.
pub(super) struct Made {
    pub reader: PaneReader,
    pub dir: String,
    pub local: PathBuf,
}

/// A FIFO in a private directory under `root`, opened for reading by the hub; on failure its
/// directory is removed again.
pub(super) fn make(root: &PipeRoot) -> Result<Made, TmuxError> {
    let local = private_dir(&root.local).map_err(|source| TmuxError::PipeDir {
        path: root.local.clone(),
        source,
    })?;
    match make_in(root, &local) {
        Ok((reader, dir)) => Ok(Made {
            reader: PaneReader::Fifo(Fifo::Registered(reader)),
            dir,
            local,
        }),
        Err(e) => {
            let _ = std::fs::remove_dir_all(&local);
            Err(e)
        }
    }
}

fn make_in(
    root: &PipeRoot,
    local: &Path,
) -> Result<(tokio::net::unix::pipe::Receiver, String), TmuxError> {
    let name = local
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or(TmuxError::PipeDirName)?;
    let dir = format!("{}/{name}", root.for_tmux);
    if !plain_path(&dir) {
        return Err(TmuxError::FifoDir { dir });
    }
    let fifo = local.join("out");
    nix::unistd::mkfifo(
        &fifo,
        nix::sys::stat::Mode::S_IRUSR | nix::sys::stat::Mode::S_IWUSR,
    )
    .map_err(|source| TmuxError::MakeFifo {
        path: local.to_path_buf(),
        source: source.into(),
    })?;
    if root.other_user {
        // The container's user reaches the FIFO (the directory is its agent's alone).
        let set_mode = |path: &Path, m| {
            crate::platform::set_mode(path, m).map_err(|source| TmuxError::FifoMode {
                path: path.to_path_buf(),
                source,
            })
        };
        set_mode(local, 0o755)?;
        set_mode(&fifo, 0o622)?;
    }
    // Opened now, without waiting for a writer.
    let reader = tokio::net::unix::pipe::OpenOptions::new()
        .open_receiver(&fifo)
        .map_err(|source| TmuxError::OpenFifo {
            path: fifo.clone(),
            source,
        })?;
    Ok((reader, dir))
}

/// A new directory `agent-hub-pipe.XXXXXXXX` in `root`, for its creator alone.
fn private_dir(root: &Path) -> std::io::Result<PathBuf> {
    use rand::distr::{Alphanumeric, SampleString};
    use std::os::unix::fs::DirBuilderExt;
    loop {
        let name = Alphanumeric.sample_string(&mut rand::rng(), 8);
        let dir = root.join(format!("agent-hub-pipe.{name}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            made => return made.map(|()| dir),
        }
    }
}
