//! Following the CLI's own status file ([`crate::agent_state::status_file`]): a light loop per
//! session whose program keeps one (its profile says where), reading the files through the
//! agent's home on this machine. A status that changes is the agent's signal, adopted as a
//! hook event is (the screen stays the cross-check).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use super::Session;
use crate::agent_state::status_file::{self, Entry, StatusFileSpec};

/// How often the status files are looked at: a directory listing and a `stat` per file; a
/// file is read only when it changed.
const STATUS_FILE_INTERVAL: Duration = Duration::from_millis(100);
/// A program started this long before its session still counts as the session's (clocks).
const START_SLACK_MS: u64 = 5_000;

/// Where a session's program keeps its home, as this machine sees it.
#[derive(Debug, Clone)]
pub struct AgentHome {
    /// The home on this machine (a container agent's kept home).
    pub dir: PathBuf,
    /// The program's environment (names the CLI's config dir, when set).
    pub env: BTreeMap<String, String>,
    /// The program runs on this machine: its status file names a process of the session's
    /// terminal, started with the session (its home may be shared with other programs). In a
    /// container, whose pids mean nothing here, the home is the agent's own and the newest
    /// file is its program's (the hub removes the files of earlier runs before a start).
    pub on_host: bool,
}

impl Session {
    /// Follows the status file the session's profile names, in `home`, while the session
    /// lives and its profile names one (nothing when it names none now).
    pub fn follow_status_file(self: &Arc<Self>, home: AgentHome) {
        if self.profile().signals.status_file.is_some() {
            tokio::spawn(follow(Arc::downgrade(self), home, self.cancel.clone()));
        }
    }

    /// The status the program wrote last changed to `status`: adopted as its signal.
    fn note_status(&self, spec: &StatusFileSpec, status: &str) {
        let Some((state, source)) = spec.signal(status) else {
            return;
        };
        let now = tokio::time::Instant::now();
        self.watch_changing(|w| w.note_status(state, source, now));
        self.inputs.send_modify(|n| *n += 1);
    }
}

/// Each status file's modification time and contents, so unchanged files are not read again.
#[derive(Default)]
struct Files(HashMap<String, (SystemTime, Option<Entry>)>);

impl Files {
    /// Looks at the files in `dir` now (a missing directory: none).
    fn refresh(&mut self, dir: &Path, spec: &StatusFileSpec) {
        let mut seen = HashMap::new();
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !status_file::is_status_file(&name) {
                continue;
            }
            let Ok(modified) = entry.metadata().and_then(|m| m.modified()) else {
                continue;
            };
            let parsed = match self.0.remove(&name) {
                Some((at, parsed)) if at == modified => parsed,
                _ => std::fs::read_to_string(entry.path())
                    .ok()
                    .and_then(|text| spec.parse(&text)),
            };
            seen.insert(name, (modified, parsed));
        }
        self.0 = seen;
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.0.values().filter_map(|(_, e)| e.as_ref())
    }
}

async fn follow(
    session: Weak<Session>,
    home: AgentHome,
    cancel: tokio_util::sync::CancellationToken,
) {
    let not_before_ms = match home.on_host {
        true => {
            (chrono::Utc::now().timestamp_millis().max(0) as u64).saturating_sub(START_SLACK_MS)
        }
        false => 0,
    };
    let mut files = Files::default();
    // The status last adopted, and when the program wrote it.
    let mut last: Option<(String, u64)> = None;
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(STATUS_FILE_INTERVAL) => {}
        }
        let Some(s) = session.upgrade() else { return };
        let profile = s.profile();
        let Some(spec) = &profile.signals.status_file else {
            return;
        };
        files.refresh(&spec.dir_in(&home.dir, &home.env), spec);
        let terminal = s.backend.pid();
        let ours = |pid: u32| !home.on_host || crate::process::session_of(pid) == terminal;
        let status = status_file::pick(files.entries(), not_before_ms, ours)
            .and_then(|e| Some((e.status.clone()?, e.status_at_ms)));
        if status != last {
            if let Some((status, _)) = &status {
                s.note_status(spec, status);
            }
            last = status;
        }
    }
}
