//! Persistence: what lets the hub restart without losing agents. One task keeps
//! `registry.json` current (debounced, atomic, written at once on shutdown), appends lifecycle
//! events to `events.jsonl`, and, when enabled, writes scrollback snapshots. At start-up,
//! [`start`] loads the registry and [`restore`] brings its sessions back. Nothing here stops
//! the hub: a corrupt file is set aside and a data dir that cannot be written is reported in
//! `/health` and the log, while the hub goes on serving.

pub mod events_log;
pub mod registry_file;
pub mod restore;
pub mod snapshots;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::HubConfig;
use crate::event_bus::EventSink;
use crate::protocol::HubEvent;
use crate::redact::Redactor;
use crate::registry::Registry;
use events_log::{EventsLog, Opened};
use registry_file::{Loaded, RegistryFile, SavedSession, SCHEMA_VERSION};
use restore::RestoreReport;

/// Why the registry file cannot be used, or a host tmux session cannot be adopted again.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("not valid JSON ({0})")]
    NotJson(#[source] serde_json::Error),
    #[error("no schema_version field")]
    NoSchemaVersion,
    #[error("schema version {version} is newer than this hub understands ({SCHEMA_VERSION})")]
    NewerSchema { version: u64 },
    #[error("unexpected content ({0})")]
    Content(#[source] serde_json::Error),
    /// The tmux backend could not attach to the session.
    #[error(transparent)]
    TmuxAttach(#[from] crate::backend::tmux::TmuxError),
    #[error("the tmux session '{name}' was gone")]
    TmuxGone { name: String },
}

/// How long after a change the registry is written (changes in between are folded in).
pub const SAVE_DEBOUNCE: Duration = Duration::from_secs(1);
/// How often snapshots are refreshed at most.
pub const SNAPSHOT_INTERVAL: Duration = Duration::from_secs(2);

/// What `/health` says about persistence.
#[derive(Debug, Default, Clone, Serialize)]
pub struct PersistStatus {
    pub data_dir: PathBuf,
    pub registry_saved_at: Option<DateTime<Utc>>,
    /// The last failure to write the registry, events log or snapshots; cleared by a success.
    pub error: Option<String>,
    /// Problems found at start-up (a set-aside registry, a cut-short events log).
    pub startup_warnings: Vec<String>,
    pub restored: RestoreReport,
    pub snapshots: bool,
}

/// What persistence works with: narrow handles, not the hub.
#[derive(Clone)]
pub struct Handles {
    pub config: Arc<HubConfig>,
    pub sessions: Arc<Registry>,
    /// Restored external sessions are registered again through it.
    pub externals: crate::external_sessions::Externals,
    pub redactor: Arc<Redactor>,
    pub events: EventSink,
    /// Cancelled when the hub begins to shut down.
    pub closing: CancellationToken,
    /// Where its tasks run (the hub's tracker, so shutdown waits for them).
    pub tracker: TaskTracker,
}

/// The persistence component: the registry file, the lifecycle log and the snapshots. It
/// holds the session registry, the redactor and its own settings.
#[derive(Clone)]
pub struct Persistence {
    inner: Arc<Inner>,
}

struct Inner {
    sessions: Arc<Registry>,
    redactor: Arc<Redactor>,
    hub_id: Option<String>,
    /// Scrollback snapshots, up to this many bytes a session (`None`: off).
    snapshot_max_bytes: Option<usize>,
    closing: CancellationToken,
    dir: PathBuf,
    status: Mutex<PersistStatus>,
    /// The sessions as last written, to skip writes that change nothing.
    last_saved: tokio::sync::Mutex<Option<Vec<SavedSession>>>,
    /// Set by the shutdown's last save ([`Persistence::final_save`]): what a session records
    /// after it (the hub's own detaching of its tmux clients) must not reach the file.
    sealed: std::sync::atomic::AtomicBool,
    events: Option<EventsLog>,
}

/// Loads the registry, restores its sessions, and starts the task that keeps the files
/// current. Call before the Docker sync starts, so container sessions get their ids back, and
/// hand the result to the hub (`Hub::set_persistence`): until then `Hub::persist_now` saves
/// nothing.
pub async fn start(hub: Handles) -> Persistence {
    let dir = hub.config.data_dir.clone();
    let mut warnings = Vec::new();
    let file = match registry_file::load(&dir) {
        Loaded::Missing => None,
        Loaded::Ok(f) => Some(f),
        Loaded::SetAside { reason, set_aside } => {
            let w = match set_aside {
                Some(p) => format!(
                    "registry {} could not be used ({reason}); set aside as {}; rebuilding from Docker and tmux",
                    dir.join(registry_file::FILE_NAME).display(),
                    p.display()
                ),
                None => format!("registry could not be used ({reason}); rebuilding from Docker and tmux"),
            };
            tracing::warn!("{w}");
            warnings.push(w);
            None
        }
    };
    let events = match EventsLog::open(&dir) {
        Ok((log, Opened::Clean)) => Some(log),
        Ok((log, Opened::Truncated { line })) => {
            let w = format!(
                "events log {} ended mid-line (line {line} cut short, probably a crash); continuing on a new line",
                dir.join(events_log::FILE_NAME).display()
            );
            tracing::warn!("{w}");
            warnings.push(w);
            Some(log)
        }
        Err(e) => {
            let w = format!(
                "cannot open the events log in {}: {e}; lifecycle events are not logged",
                dir.display()
            );
            tracing::warn!("{w}");
            warnings.push(w);
            None
        }
    };
    // Subscribed before restoring, so the restore's own events are logged.
    let bus = hub.events.subscribe();
    let restored = restore::restore(&hub, file, &dir).await;
    tracing::info!(
        reattached = restored.tmux_reattached.len(),
        exited = restored.exited.len(),
        "{restored}"
    );
    let p = Persistence {
        inner: Arc::new(Inner {
            sessions: hub.sessions.clone(),
            redactor: hub.redactor.clone(),
            hub_id: hub.config.hub_id.clone(),
            snapshot_max_bytes: hub
                .config
                .snapshots
                .then_some(hub.config.snapshot_max_bytes),
            closing: hub.closing.clone(),
            sealed: std::sync::atomic::AtomicBool::new(false),
            status: Mutex::new(PersistStatus {
                data_dir: dir.clone(),
                startup_warnings: warnings,
                restored,
                snapshots: hub.config.snapshots,
                ..PersistStatus::default()
            }),
            dir,
            last_saved: tokio::sync::Mutex::new(None),
            events,
        }),
    };
    hub.tracker.spawn(p.clone().run(bus));
    p
}

impl Persistence {
    /// What `/health` shows.
    pub fn status(&self) -> PersistStatus {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PersistStatus> {
        self.inner.status.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn record(&self, what: &str, result: std::io::Result<()>) {
        let mut st = self.lock();
        match result {
            Ok(()) => {
                if st.error.as_deref().is_some_and(|e| e.starts_with(what)) {
                    st.error = None;
                }
            }
            Err(e) => {
                let message = format!("{what}: {e}");
                // Say it once, not every second.
                if st.error.as_deref() != Some(message.as_str()) {
                    tracing::error!("{message} (the hub goes on serving)");
                    st.error = Some(message);
                }
            }
        }
    }

    /// Writes the registry now if it changed since the last write.
    pub async fn save(&self) {
        // Locked before the sessions are read: of two saves at once, the later read is the
        // later write, so no change a caller waited for is overwritten by an older list.
        let mut last = self.inner.last_saved.lock().await;
        if self.inner.sealed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let sessions: Vec<SavedSession> = self
            .inner
            .sessions
            .list()
            .iter()
            .map(|s| SavedSession::of(s))
            .collect();
        if last.as_ref() == Some(&sessions) {
            return;
        }
        let file = RegistryFile {
            schema_version: SCHEMA_VERSION,
            hub_id: self.inner.hub_id.clone(),
            saved_at: Utc::now(),
            sessions: sessions.clone(),
        };
        let dir = self.inner.dir.clone();
        let result = tokio::task::spawn_blocking(move || registry_file::save(&dir, &file))
            .await
            .unwrap_or_else(|e| Err(std::io::Error::other(e)));
        let ok = result.is_ok();
        self.record("cannot write the registry", result);
        if ok {
            *last = Some(sessions);
            self.lock().registry_saved_at = Some(Utc::now());
        }
    }

    /// The registry's last write of this run, taken by the shutdown before the hub lets go of
    /// its tmux clients; no save after it writes. A client the hub detaches ends its reader
    /// with "tmux session closed" while the pane runs on: saved, that record would make the
    /// next start write the live session off (on a busy machine the readers get there before
    /// a later save did).
    pub async fn final_save(&self) {
        self.save().await;
        // Under the save's lock: a save already waiting for it sees the seal.
        let _last = self.inner.last_saved.lock().await;
        self.inner
            .sealed
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Writes everything now (shutdown): the registry (unless [`Persistence::final_save`]
    /// sealed it) and the snapshots.
    pub async fn flush(&self) {
        self.save().await;
        if self.inner.snapshot_max_bytes.is_some() {
            let mut written = HashMap::new();
            self.snapshot(&mut written).await;
        }
    }

    /// Writes the snapshots of sessions whose output changed, on a blocking thread.
    async fn snapshot(&self, written: &mut HashMap<String, u64>) {
        let Some(max) = self.inner.snapshot_max_bytes else {
            return;
        };
        let (inner, mut done) = (self.inner.clone(), std::mem::take(written));
        let (result, done) = tokio::task::spawn_blocking(move || {
            let result = snapshots::write_changed(
                &inner.sessions,
                &inner.redactor,
                &inner.dir,
                max,
                &mut done,
            );
            (result, done)
        })
        .await
        .unwrap_or_else(|e| (Err(std::io::Error::other(e)), HashMap::new()));
        *written = done;
        self.record("cannot write scrollback snapshots", result);
    }

    async fn run(self, mut events: tokio::sync::broadcast::Receiver<HubEvent>) {
        let closing = self.inner.closing.clone();
        let mut tick = tokio::time::interval(SAVE_DEBOUNCE);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut snapshots_written = HashMap::new();
        let mut last_snapshot = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = closing.cancelled() => return,
                event = events.recv() => match event {
                    Ok(event) => {
                        if events_log::LOGGED_TYPES.contains(&event.type_name()) {
                            self.log_line(serde_json::to_value(&event).unwrap_or_default()).await;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        self.log_line(serde_json::json!({
                            "type": "events_lost", "count": n, "at": Utc::now(),
                        }))
                        .await;
                    }
                    Err(_) => return,
                },
                _ = tick.tick() => {
                    self.save().await;
                    if last_snapshot.elapsed() >= SNAPSHOT_INTERVAL {
                        last_snapshot = tokio::time::Instant::now();
                        self.snapshot(&mut snapshots_written).await;
                    }
                }
            }
        }
    }

    /// Appends a line to the events log, on a blocking thread (in order: the loop waits).
    async fn log_line(&self, line: serde_json::Value) {
        if let Some(log) = self.inner.events.clone() {
            let result = tokio::task::spawn_blocking(move || log.append(&line))
                .await
                .unwrap_or_else(|e| Err(std::io::Error::other(e)));
            self.record("cannot append to the events log", result);
        }
    }
}
