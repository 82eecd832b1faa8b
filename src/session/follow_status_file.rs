//! Following the CLI's own status file ([`crate::agent_state::status_file`]): a light loop per
//! session whose program keeps one (its profile says where), reading the files on this
//! machine: a container agent's in its CLI's config dir as this machine sees it, a program on
//! this machine's in the config dir its own process's environment names. A status that changes
//! is the agent's signal, adopted as a hook event is (the screen stays the cross-check).

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
/// While no status file of a program on this machine is found, how often its terminal's
/// processes are looked at for the config dirs their environments name (a scan of `/proc`).
const PROCESS_LOOK_INTERVAL: Duration = Duration::from_secs(1);

/// Where a session's program keeps its status files, as this machine sees it.
#[derive(Debug, Clone)]
pub enum StatusFiles {
    /// A container agent's: the directory of its CLI's status files on this machine (in its
    /// kept home or a mount). Its pids mean nothing here: the newest file is its program's (the
    /// hub removes the files of earlier runs from its kept home before a start).
    Container(PathBuf),
    /// A program on this machine, the session started with `env` (`HOME` included): its
    /// status file names a process of the session's terminal, started with the session (its
    /// config dir may be shared with other programs), in the config dir `env` names or the one
    /// that process's own environment names (a launcher may set `HOME` or the CLI's variable).
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

/// The directories a session's status files may be in: a container agent's one; for a program
/// on this machine, the one its session's environment names and those its terminal's
/// processes' environments name, looked at again (at most every [`PROCESS_LOOK_INTERVAL`])
/// while none of its own is found.
struct Dirs {
    place: StatusFiles,
    found: BTreeSet<PathBuf>,
    looked_at: Option<tokio::time::Instant>,
}

impl Dirs {
    fn new(place: StatusFiles) -> Self {
        Dirs {
            place,
            found: BTreeSet::new(),
            looked_at: None,
        }
    }

    /// The directories to look in for `spec`'s files.
    fn current(&self, spec: &StatusFileSpec) -> BTreeSet<PathBuf> {
        match &self.place {
            StatusFiles::Container(dir) => BTreeSet::from([dir.clone()]),
            StatusFiles::Host(env) => spec
                .dir_of(env)
                .into_iter()
                .chain(self.found.clone())
                .collect(),
        }
    }

    /// Looks at the terminal's processes again when it is time (a program on this machine
    /// whose status file was not found).
    async fn look_again(&mut self, spec: &StatusFileSpec, terminal: Option<u32>) {
        let due = self
            .looked_at
            .is_none_or(|at| at.elapsed() >= PROCESS_LOOK_INTERVAL);
        let (StatusFiles::Host(_), Some(sid), true) = (&self.place, terminal, due) else {
            return;
        };
        self.looked_at = Some(tokio::time::Instant::now());
        let spec = spec.clone();
        let dirs = tokio::task::spawn_blocking(move || processes_dirs(&spec, sid)).await;
        self.found = dirs.unwrap_or_default();
    }
}

/// The status-file directories the environments of terminal `sid`'s processes name.
fn processes_dirs(spec: &StatusFileSpec, sid: u32) -> BTreeSet<PathBuf> {
    crate::process::session_processes(sid)
        .into_iter()
        .filter_map(crate::process::environ)
        .filter_map(|env| spec.dir_of(&env))
        .collect()
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
    let mut dirs = Dirs::new(place);
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
        files.refresh(&dirs.current(spec), spec);
        let terminal = s.backend.pid();
        let ours = |pid: u32| !on_host || crate::process::session_of(pid) == terminal;
        let picked = status_file::pick(files.entries(), not_before_ms, ours);
        let status = picked.and_then(|e| Some((e.status.clone()?, e.status_at_ms)));
        if picked.is_none() {
            dirs.look_again(spec, terminal).await;
        }
        if status != last {
            if let Some((status, _)) = &status {
                s.note_status(spec, status);
            }
            last = status;
        }
    }
}
