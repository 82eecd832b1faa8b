//! Files into and out of a container through the engine's archive API (`PUT`/`GET
//! /containers/{id}/archive`): the one way the hub gives an agent's container its files and
//! reads them back when it cannot see them, whatever the engine. It works on a container that
//! is made but not started (its volumes included), so a start's files are in place before its
//! program runs.

use bollard::query_parameters::{DownloadFromContainerOptions, UploadToContainerOptions};
use bollard::Docker;
use bytes::Bytes;
use futures_util::StreamExt;

/// One entry to put.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its path under the directory it is put into (`agent-hub-agent/token`).
    pub path: String,
    pub kind: Kind,
    /// Its permission bits.
    pub mode: u32,
    /// Its owner (uid, gid); root when `None`.
    pub owner: Option<(u64, u64)>,
}

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File(Vec<u8>),
    Symlink(String),
}

impl Entry {
    /// A file readable by everyone, owned by root.
    pub fn file(path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Entry {
            path: path.into(),
            kind: Kind::File(bytes.into()),
            mode: 0o644,
            owner: None,
        }
    }

    /// A directory everyone may enter, owned by root.
    pub fn dir(path: impl Into<String>) -> Self {
        Entry {
            path: path.into(),
            kind: Kind::Dir,
            mode: 0o755,
            owner: None,
        }
    }

    /// A symbolic link to `target`.
    pub fn symlink(path: impl Into<String>, target: impl Into<String>) -> Self {
        Entry {
            path: path.into(),
            kind: Kind::Symlink(target.into()),
            mode: 0o777,
            owner: None,
        }
    }

    /// The same, owned by `owner`.
    pub fn owned_by(mut self, owner: Option<(u64, u64)>) -> Self {
        self.owner = owner;
        self
    }
}

/// A tar archive of `entries`.
pub fn tar_of(entries: &[Entry]) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    for e in entries {
        let mut header = tar::Header::new_gnu();
        header.set_mode(e.mode);
        header.set_mtime(now_s());
        let (uid, gid) = e.owner.unwrap_or((0, 0));
        header.set_uid(uid);
        header.set_gid(gid);
        match &e.kind {
            Kind::Dir => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                tar.append_data(&mut header, &e.path, std::io::empty())?;
            }
            Kind::File(bytes) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(bytes.len() as u64);
                tar.append_data(&mut header, &e.path, bytes.as_slice())?;
            }
            Kind::Symlink(target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_size(0);
                tar.append_link(&mut header, &e.path, target)?;
            }
        }
    }
    tar.into_inner()
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Puts `entries` under `dir` (which must exist) in `container`.
pub async fn put(
    docker: &Docker,
    container: &str,
    dir: &str,
    entries: &[Entry],
) -> Result<(), bollard::errors::Error> {
    let tar = tar_of(entries)?;
    let options = UploadToContainerOptions {
        path: dir.to_string(),
        ..Default::default()
    };
    docker
        .upload_to_container(
            container,
            Some(options),
            bollard::body_full(Bytes::from(tar)),
        )
        .await
}

/// How much of what is read back is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Names, owners and modes only (a file's bytes are skipped, never held).
    Names,
    /// Also the bytes of files up to this many bytes each (a larger one is kept empty, marked
    /// `cut`).
    Contents(usize),
}

/// One entry read back: its path relative to the parent of what was asked for, as Docker names
/// them (`GET …?path=/a/b` gives `b`, `b/…`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Got {
    pub path: String,
    pub is_dir: bool,
    pub uid: u64,
    pub gid: u64,
    pub mode: u32,
    /// Its modification time, in seconds since the epoch.
    pub mtime: u64,
    pub bytes: Vec<u8>,
    /// Its bytes were not kept (names only, or larger than the limit).
    pub cut: bool,
}

/// What a read found: directories and regular files, in the archive's order.
pub type Files = Vec<Got>;

/// What `path` in `container` holds (a file, or a directory and everything under it); `None`
/// when there is no such path. The archive is read as it streams, never held whole.
pub async fn get(
    docker: &Docker,
    container: &str,
    path: &str,
    read: Read,
) -> Result<Option<Files>, bollard::errors::Error> {
    let options = DownloadFromContainerOptions {
        path: path.to_string(),
    };
    let mut stream = docker.download_from_container(container, Some(options));
    let first = match stream.next().await {
        None => return Ok(Some(Vec::new())),
        Some(Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        })) => return Ok(None),
        Some(Err(e)) => return Err(e),
        Some(Ok(bytes)) => bytes,
    };
    let rest = futures_util::stream::iter([Ok(first)])
        .chain(stream)
        .map(|chunk| chunk.map_err(std::io::Error::other));
    let reader = tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(rest));
    tokio::task::spawn_blocking(move || read_tar(reader, read))
        .await
        .map_err(std::io::Error::other)?
        .map(Some)
        .map_err(Into::into)
}

/// The directories and regular files of a tar archive.
pub fn read_tar(tar: impl std::io::Read, read: Read) -> std::io::Result<Files> {
    let mut out = Vec::new();
    let mut archive = tar::Archive::new(tar);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let header = entry.header();
        let is_dir = match header.entry_type() {
            tar::EntryType::Directory => true,
            tar::EntryType::Regular => false,
            _ => continue,
        };
        let mut got = Got {
            path: entry
                .path()?
                .to_string_lossy()
                .trim_end_matches('/')
                .to_string(),
            is_dir,
            uid: header.uid().unwrap_or(0),
            gid: header.gid().unwrap_or(0),
            mode: header.mode().unwrap_or(0),
            mtime: header.mtime().unwrap_or(0),
            bytes: Vec::new(),
            cut: !is_dir,
        };
        if let Read::Contents(limit) = read {
            if !is_dir && entry.size() <= limit as u64 {
                std::io::Read::read_to_end(&mut entry, &mut got.bytes)?;
                got.cut = false;
            }
        }
        out.push(got);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_archive_reads_back_its_files_and_dirs_with_their_owners() {
        let tar = tar_of(&[
            Entry::dir("d"),
            Entry::file("d/token", "abc\n"),
            Entry::symlink("d/link", "/usr/bin/true"),
            Entry::file("d/args", b"--continue\n".to_vec()).owned_by(Some((1000, 1001))),
        ])
        .unwrap();
        let all = read_tar(tar.as_slice(), Read::Contents(100)).unwrap();
        let seen: Vec<String> = all
            .iter()
            .map(|g| {
                let text = String::from_utf8_lossy(&g.bytes);
                format!(
                    "{} {} {}:{} {:o} {text:?}",
                    g.path, g.is_dir, g.uid, g.gid, g.mode
                )
            })
            .collect();
        assert_eq!(
            seen,
            vec![
                "d true 0:0 755 \"\"",
                "d/token false 0:0 644 \"abc\\n\"",
                "d/args false 1000:1001 644 \"--continue\\n\"",
            ]
        );
        let names = read_tar(tar.as_slice(), Read::Names).unwrap();
        assert!(names.iter().all(|g| g.bytes.is_empty()));
        assert!(names[1].cut && !names[0].cut);
        let small = read_tar(tar.as_slice(), Read::Contents(5)).unwrap();
        assert_eq!(small[1].bytes, b"abc\n");
        assert!(small[2].cut && small[2].bytes.is_empty(), "11 bytes > 5");
    }
}
