//! Opt-in scrollback snapshots (`snapshots/<session>.bin` in the data dir): the newest bytes
//! of each session's output, capped in size and written at most once per interval, so a host
//! PTY that ended with the hub can still be read after a restart. Off by default: terminals
//! hold secrets (and what is written is redacted like every other output path).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::redact::Redactor;
use crate::registry::Registry;

pub const DIR_NAME: &str = "snapshots";

fn path(dir: &Path, id: &str) -> PathBuf {
    dir.join(DIR_NAME).join(format!("{id}.bin"))
}

/// Writes a snapshot for every session whose output moved since the last one (`written`
/// maps session id to the offset last written), and removes those of sessions that are gone.
pub fn write_changed(
    sessions: &Registry,
    redactor: &Redactor,
    dir: &Path,
    max_bytes: usize,
    written: &mut HashMap<String, u64>,
) -> std::io::Result<()> {
    let snap_dir = dir.join(DIR_NAME);
    std::fs::create_dir_all(&snap_dir)?;
    let sessions = sessions.list();
    for session in &sessions {
        let end = session.output().end_offset();
        if written.get(session.id()) == Some(&end) || session.external().is_some() {
            continue;
        }
        let start = end.saturating_sub(max_bytes as u64);
        let chunk = session.output().read(Some(start), max_bytes);
        // Snapshots are an output path too: what reaches the disk is redacted.
        let before = crate::redact::output_before(session.output(), chunk.start_offset);
        let bytes = redactor.redact_window(&before, &chunk.bytes, true);
        super::registry_file::write_atomic(&path(dir, session.id()), &bytes)?;
        written.insert(session.id().to_string(), end);
    }
    written.retain(|id, _| sessions.iter().any(|s| s.id() == id));
    for entry in std::fs::read_dir(&snap_dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let id = name.trim_end_matches(".bin");
        if !written.contains_key(id) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    Ok(())
}

/// Whether a session has a saved snapshot.
pub fn exists(dir: &Path, id: &str) -> bool {
    path(dir, id).is_file()
}

/// The saved snapshot of a session, if there is one.
pub fn load(dir: &Path, id: &str) -> Option<Vec<u8>> {
    std::fs::read(path(dir, id)).ok()
}
