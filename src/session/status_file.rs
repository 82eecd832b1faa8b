//! Following the CLI's own status file ([`crate::agent_state::status_file`]): a light loop per
//! session whose program keeps one (its profile says where), reading the files on this
//! machine: a container agent's in its CLI's config dir as this machine sees it, a program on
//! this machine's in the config dir its session's environment names. A status that changes is
//! the agent's signal, adopted as a hook event is (the screen stays the cross-check).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use super::Session;
use crate::agent_state::status_file::{self, Entry, StatusFileSpec};

/// How often the status files are looked at: a directory listing and a `stat` per file; a
/// file is read only when it changed.
const STATUS_FILE_INTERVAL: Duration = Duration::from_millis(100);
/// A program started this long before its session still counts as the session's (clocks).
const START_SLACK_MS: u64 = 5_000;

/// Where a session's program keeps its status files, as this machine sees it.
#[derive(Debug, Clone)]
pub enum StatusFiles {
    /// A container agent's: the directory of its CLI's status files on this machine (in its
    /// kept home or a mount). Its pids mean nothing here: the newest file is its program's (the
    /// hub removes the files of earlier runs from its kept home before a start).
    Container(PathBuf),
    /// A program on this machine, the session started with `env` (`HOME` included): its
    /// status file names a process of the session's terminal, started with the session (its
    /// config dir may be shared with other programs), in the config dir `env` names.
    Host(BTreeMap<String, String>),
}

impl Session {
    /// Follows the status file the session's profile names, in `place`, while the session
    /// lives and its profile names one (nothing when it names none now).
    pub fn follow_status_file(self: &Arc<Self>, place: StatusFiles) {
        if self.profile().signals.status_file.is_some() {
            tokio::spawn(follow(Arc::downgrade(self), place, self.cancel.clone()));
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

/// Each status file's modification time and contents, by path, so unchanged files are not
/// read again.
#[derive(Default)]
struct Files(HashMap<PathBuf, (SystemTime, Option<Entry>)>);

impl Files {
    /// Looks at the files in `dirs` now (a missing directory: none).
    fn refresh<'a>(&mut self, dirs: impl IntoIterator<Item = &'a PathBuf>, spec: &StatusFileSpec) {
        let mut seen = HashMap::new();
        for dir in dirs {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                if !status_file::is_status_file(&entry.file_name().to_string_lossy()) {
                    continue;
                }
                let Ok(modified) = entry.metadata().and_then(|m| m.modified()) else {
                    continue;
                };
                let path = entry.path();
                let parsed = match self.0.remove(&path) {
                    Some((at, parsed)) if at == modified => parsed,
                    _ => std::fs::read_to_string(&path)
                        .ok()
                        .and_then(|text| spec.parse(&text)),
                };
                seen.insert(path, (modified, parsed));
            }
        }
        self.0 = seen;
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.0.values().filter_map(|(_, e)| e.as_ref())
    }
}

/// The directories a session's status files may be in.
fn dirs(place: &StatusFiles, spec: &StatusFileSpec) -> BTreeSet<PathBuf> {
    match place {
        StatusFiles::Container(dir) => BTreeSet::from([dir.clone()]),
        StatusFiles::Host(env) => spec.dir_of(env).into_iter().collect(),
    }
}

async fn follow(
    session: Weak<Session>,
    place: StatusFiles,
    cancel: tokio_util::sync::CancellationToken,
) {
    let on_host = matches!(place, StatusFiles::Host(_));
    let not_before_ms = match on_host {
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
        files.refresh(&dirs(&place, spec), spec);
        let terminal = s.backend.pid();
        let ours = |pid: u32| !on_host || crate::process::session_of(pid) == terminal;
        let picked = status_file::pick(files.entries(), not_before_ms, ours);
        let status = picked.and_then(|e| Some((e.status.clone()?, e.status_at_ms)));
        if status != last {
            if let Some((status, _)) = &status {
                s.note_status(spec, status);
            }
            last = status;
        }
    }
}
