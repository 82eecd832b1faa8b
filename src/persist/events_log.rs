//! The lifecycle log (`events.jsonl` in the data dir): one JSON object a line, appended for
//! every session created, killed, registered, unregistered or restored and every ownership
//! change. A last line cut short (a crash mid-write) is reported and closed off, never fatal.

use std::io::Write;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "events.jsonl";
/// When the log passes this size it is moved to `events.jsonl.1` (replacing an older one).
pub const ROTATE_BYTES: u64 = 16 << 20;

/// Event types that go into the log.
pub const LOGGED_TYPES: &[&str] = &[
    "session_created",
    "session_killed",
    "session_restored",
    "ownership_changed",
    "session_registered",
    "session_unregistered",
    "registry_reset",
];

#[derive(Clone)]
pub struct EventsLog {
    path: PathBuf,
}

/// What opening the log found wrong, if anything (for a warning).
#[derive(Debug, PartialEq)]
pub enum Opened {
    Clean,
    /// The last line was cut short; a newline was added so new lines stand on their own.
    Truncated {
        line: usize,
    },
}

impl EventsLog {
    /// Opens (creating if needed) `dir/events.jsonl`, closing off a cut-short last line.
    pub fn open(dir: &Path) -> std::io::Result<(Self, Opened)> {
        let path = dir.join(FILE_NAME);
        let mut opened = Opened::Clean;
        match std::fs::read(&path) {
            Ok(bytes) if !bytes.is_empty() && !bytes.ends_with(b"\n") => {
                let line = bytes.iter().filter(|&&b| b == b'\n').count() + 1;
                let mut f = std::fs::OpenOptions::new().append(true).open(&path)?;
                f.write_all(b"\n")?;
                opened = Opened::Truncated { line };
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        Ok((EventsLog { path }, opened))
    }

    /// Appends one event as a line.
    pub fn append(&self, event: &serde_json::Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
        line.push(b'\n');
        if std::fs::metadata(&self.path).is_ok_and(|m| m.len() > ROTATE_BYTES) {
            std::fs::rename(&self.path, self.path.with_extension("jsonl.1"))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        f.write_all(&line)
    }
}

/// Reads the log's events, skipping lines that do not parse (returns how many were skipped).
pub fn read_all(dir: &Path) -> std::io::Result<(Vec<serde_json::Value>, usize)> {
    let text = std::fs::read_to_string(dir.join(FILE_NAME))?;
    let mut bad = 0;
    let events = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let parsed = serde_json::from_str(l).ok();
            bad += usize::from(parsed.is_none());
            parsed
        })
        .collect();
    Ok((events, bad))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cut_short_last_line_is_closed_off_and_new_events_stay_readable() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(FILE_NAME),
            "{\"type\":\"session_created\"}\n{\"type\":\"sess",
        )
        .unwrap();
        let (log, opened) = EventsLog::open(dir.path()).unwrap();
        assert_eq!(opened, Opened::Truncated { line: 2 });
        log.append(&json!({"type": "session_killed"})).unwrap();
        let (events, bad) = read_all(dir.path()).unwrap();
        assert_eq!(bad, 1);
        let types: Vec<_> = events.iter().map(|e| e["type"].clone()).collect();
        assert_eq!(
            types,
            vec![json!("session_created"), json!("session_killed")]
        );
        let (_, opened) = EventsLog::open(dir.path()).unwrap();
        assert_eq!(opened, Opened::Clean);
    }
}
