//! The attempts journal: an append-only file holding each operation's attempt from before the
//! operation runs until its outcome is in the database. Appending a line is one `write` from
//! the request's own task, far cheaper than a database commit, and like any write it survives
//! a kill of the hub. At the next start the log takes in every attempt the journal still
//! holds, so an operation cut short by a crash is on record without an outcome.
//!
//! The file is emptied whenever no attempt is open, and rewritten with only the open ones when
//! it grows past [`COMPACT_AT`] while attempts overlap.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::Record;

/// Size past which the journal is rewritten with the open attempts only.
pub const COMPACT_AT: u64 = 1 << 20;

pub struct Journal {
    path: PathBuf,
    state: Mutex<State>,
}

struct State {
    file: File,
    /// The open attempts' lines, by id.
    open: BTreeMap<i64, Vec<u8>>,
    len: u64,
}

/// Opens `path` for writing at its end (not in append mode: Windows cannot truncate a file
/// opened for appending, and this hub is the file's only writer, under its lock).
fn append_to(path: &Path, truncate: bool) -> std::io::Result<File> {
    let mut options = std::fs::OpenOptions::new();
    options.create(true).write(true).truncate(false);
    crate::platform::private_file(&mut options);
    let mut file = options.open(path)?;
    if truncate {
        file.set_len(0)?;
    }
    file.seek(SeekFrom::End(0))?;
    Ok(file)
}

/// Empties the file; the next line goes at its start.
fn empty(file: &mut File) -> std::io::Result<()> {
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0)).map(|_| ())
}

/// Takes the file for this hub alone: two hubs handing out ids for one log would overwrite
/// each other's records.
fn locked(file: &File) -> std::io::Result<()> {
    file.try_lock().map_err(|e| match e {
        std::fs::TryLockError::WouldBlock => std::io::Error::other(
            "another hub keeps its audit log here (give each hub its own audit.path)",
        ),
        std::fs::TryLockError::Error(e) => e,
    })
}

impl Journal {
    /// Opens (creating) the journal at `path`, returning the attempts it still holds; call
    /// [`Journal::clear`] once they are in the database.
    pub fn open(path: &Path) -> std::io::Result<(Journal, Vec<Record>)> {
        let mut left = read_file(path)?;
        // A compaction cut short leaves its file: the open attempts again, or (where the old
        // file could not be replaced and the new one was written to) later ones.
        for record in read_file(&aside_of(path))? {
            if !left.iter().any(|r| r.id == record.id) {
                left.push(record);
            }
        }
        let file = append_to(path, false)?;
        locked(&file)?;
        let len = file.metadata()?.len();
        let journal = Journal {
            path: path.to_path_buf(),
            state: Mutex::new(State {
                file,
                open: BTreeMap::new(),
                len,
            }),
        };
        Ok((journal, left))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes an attempt (with its id) before its operation runs.
    pub fn append(&self, record: &Record) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        let mut state = self.lock();
        state.file.write_all(&line)?;
        state.len += line.len() as u64;
        state.open.insert(record.id, line);
        Ok(())
    }

    /// The attempt `id` is in the database now (with its outcome).
    pub fn settle(&self, id: i64) {
        let mut state = self.lock();
        state.open.remove(&id);
        let result = if state.open.is_empty() {
            empty(&mut state.file).map(|()| state.len = 0)
        } else if state.len > COMPACT_AT {
            self.rewrite(&mut state)
        } else {
            Ok(())
        };
        if let Err(e) = result {
            tracing::warn!("audit journal {}: {e}", self.path.display());
        }
    }

    /// Empties the journal (the attempts [`Journal::open`] returned are in the database),
    /// and removes what a compaction cut short left.
    pub fn clear(&self) -> std::io::Result<()> {
        let mut state = self.lock();
        empty(&mut state.file)?;
        state.len = 0;
        match std::fs::remove_file(aside_of(&self.path)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Replaces the file with one holding the open attempts only (written aside, then renamed
    /// over it, so a crash leaves one or the other whole).
    fn rewrite(&self, state: &mut State) -> std::io::Result<()> {
        let aside = aside_of(&self.path);
        let mut file = append_to(&aside, true)?;
        locked(&file)?;
        let mut len = 0;
        for line in state.open.values() {
            file.write_all(line)?;
            len += line.len() as u64;
        }
        let renamed = std::fs::rename(&aside, &self.path);
        // From here on the new file (which holds the lock) is written to; on Windows, which
        // cannot rename over a file that is open, this also closes the old one for a retry.
        state.file = file;
        state.len = len;
        if renamed.is_err() {
            if let Err(e) = std::fs::rename(&aside, &self.path) {
                // Back to the file as it was, which still holds every open attempt.
                state.file = append_to(&self.path, false)?;
                locked(&state.file)?;
                state.len = state.file.metadata()?.len();
                let _ = std::fs::remove_file(&aside);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Bytes in the file now.
    #[cfg(test)]
    fn len(&self) -> u64 {
        self.lock().len
    }
}

/// Where a compaction writes the journal's next file before it replaces the journal.
fn aside_of(path: &Path) -> std::path::PathBuf {
    path.with_extension("attempts-new")
}

/// The attempts in the file at `path` (none when there is no file).
fn read_file(path: &Path) -> std::io::Result<Vec<Record>> {
    match File::open(path) {
        Ok(f) => Ok(read_lines(std::io::BufReader::new(f))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// The attempts in a journal; a line cut short by a crash is skipped.
fn read_lines(reader: impl BufRead) -> Vec<Record> {
    reader
        .split(b'\n')
        .map_while(Result::ok)
        .filter(|line| !line.is_empty())
        .filter_map(|line| match serde_json::from_slice::<Record>(&line) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!("audit journal: a line that is not an attempt skipped: {e}");
                None
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(id: i64, command: &str) -> Record {
        Record {
            id,
            action: "send_line".into(),
            command: Some(command.into()),
            ..Record::default()
        }
    }

    #[test]
    fn open_attempts_survive_a_reopen_and_settled_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.attempts");
        let (journal, left) = Journal::open(&path).unwrap();
        assert!(left.is_empty());
        for id in 1..=3 {
            journal.append(&attempt(id, &format!("line {id}"))).unwrap();
        }
        journal.settle(2);
        // A crash now: the file is all that is left.
        drop(journal);
        let (journal, left) = Journal::open(&path).unwrap();
        let ids: Vec<i64> = left.iter().map(|r| r.id).collect();
        // Settling does not rewrite a small file: 2 is still there, and the database keeps
        // its outcome over the replay (`Existing::Keep`).
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(left[2].command.as_deref(), Some("line 3"));
        journal.clear().unwrap();
        drop(journal);
        assert!(Journal::open(&path).unwrap().1.is_empty());
    }

    /// A compaction cut short (a crash, or a journal that could not be replaced on Windows)
    /// leaves the attempts it wrote aside: they are read back with the journal's, once each,
    /// and the file aside goes once they are in the database.
    #[test]
    fn attempts_left_aside_by_a_compaction_are_read_back_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.attempts");
        let lines = |ids: &[i64]| -> Vec<u8> {
            ids.iter()
                .flat_map(|id| {
                    let mut line = serde_json::to_vec(&attempt(*id, "x")).unwrap();
                    line.push(b'\n');
                    line
                })
                .collect()
        };
        std::fs::write(&path, lines(&[1, 2])).unwrap();
        std::fs::write(aside_of(&path), lines(&[2, 3])).unwrap();
        let (journal, left) = Journal::open(&path).unwrap();
        assert_eq!(left.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2, 3]);
        journal.clear().unwrap();
        assert!(!aside_of(&path).exists());
        drop(journal);
        assert!(Journal::open(&path).unwrap().1.is_empty());
    }

    #[test]
    fn the_file_is_emptied_when_no_attempt_is_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.attempts");
        let (journal, _) = Journal::open(&path).unwrap();
        journal.append(&attempt(1, "a")).unwrap();
        journal.append(&attempt(2, "b")).unwrap();
        journal.settle(1);
        assert!(journal.len() > 0);
        journal.settle(2);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        // Appends after a truncation land at the start, whole.
        journal.append(&attempt(3, "c")).unwrap();
        drop(journal);
        let left = Journal::open(&path).unwrap().1;
        assert_eq!(left.iter().map(|r| r.id).collect::<Vec<_>>(), [3]);
    }

    #[test]
    fn overlapping_attempts_keep_the_file_small() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.attempts");
        let (journal, _) = Journal::open(&path).unwrap();
        let big = "x".repeat(8 * 1024);
        // One attempt stays open throughout, so the file is never emptied.
        journal.append(&attempt(0, "long")).unwrap();
        for id in 1..1000 {
            journal.append(&attempt(id, &big)).unwrap();
            journal.settle(id);
        }
        let size = std::fs::metadata(&path).unwrap().len();
        assert!(
            size <= COMPACT_AT + 16 * 1024,
            "the journal grew to {size} bytes"
        );
        drop(journal);
        let left = Journal::open(&path).unwrap().1;
        assert_eq!(
            left.first().map(|r| r.id),
            Some(0),
            "the open attempt was lost"
        );
        assert!(left
            .iter()
            .all(|r| r.id == 0 || r.command.as_deref() == Some(&*big)));
    }

    #[test]
    fn a_line_cut_short_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.attempts");
        let whole = serde_json::to_string(&attempt(1, "a")).unwrap();
        std::fs::write(&path, format!("{whole}\n{}", &whole[..whole.len() / 2])).unwrap();
        let left = Journal::open(&path).unwrap().1;
        assert_eq!(left.iter().map(|r| r.id).collect::<Vec<_>>(), [1]);
    }
}
