//! A session is one terminal: identity, metadata, the output pipeline, the rendered screen and a
//! backend. The operations people and agents use (send_line, keys, signal, talk, resize, kill)
//! are written here once, whatever the backend; `write` holds the input operations and the
//! command guard they enforce.

mod follow;
mod follow_status_file;
mod info;
pub mod input;
mod rendered;
mod state;
pub mod talk;
mod wait;
pub mod write;

pub use follow_status_file::StatusFiles;

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::agent_state::profile::Profile;
use crate::agent_state::Watch;
use crate::backend::{Backend, TermSize};
use crate::error::{HubError, HubResult};
use crate::guard::Guard;
use crate::output::{ExitInfo, Output};
use crate::screen::Screen;
pub use follow::screen_looks;
pub use info::{Owner, SessionBackend, SessionInfo, SessionSpec};
use input::{SignalAction, TermSignal};
pub use state::StateChange;
pub use talk::TalkResult;

struct Mutable {
    size: TermSize,
    owner: Owner,
    last_input_at: Option<DateTime<Utc>>,
    last_heartbeat_at: Option<DateTime<Utc>>,
}

/// `bytes` carries Enter: input that submits something.
fn submits(bytes: &[u8]) -> bool {
    bytes.contains(&b'\r') || bytes.contains(&b'\n')
}

/// One terminal session.
pub struct Session {
    spec: SessionSpec,
    mutable: Mutex<Mutable>,
    output: Arc<Output>,
    screen: Mutex<Screen>,
    /// Meaningful activity and agent state (see [`crate::agent_state`]).
    watch: Mutex<Watch>,
    backend: Box<dyn Backend>,
    /// The command guard every caller's input passes (see [`write`]).
    guard: Arc<Guard>,
    /// Serialises talks so two never interleave on one terminal.
    talk_lock: tokio::sync::Mutex<()>,
    /// Stops the session's background tasks when it is removed.
    cancel: CancellationToken,
    /// Interactive viewers attached (WebSocket screen mode): while there is one, its terminal
    /// answers the program's terminal queries; otherwise the hub does (PTY sessions only).
    viewers: std::sync::atomic::AtomicUsize,
    /// Counts input written by users of the session, and the agent's own hook events: state
    /// waiters wake on it (both change the state at once, before any output).
    inputs: tokio::sync::watch::Sender<u64>,
    /// Told of every change of the reported agent state (the hub publishes it as an event).
    on_state_change: std::sync::OnceLock<Box<dyn Fn(StateChange) + Send + Sync>>,
    /// The engine a container agent's terminal goes through, while it does not answer:
    /// input is refused rather than held where it might run much later (see [`write`]).
    unreachable: Mutex<Option<String>>,
}

impl Session {
    /// Wraps a started backend. `output` must be the pipeline the backend pushes into.
    pub fn new(
        spec: SessionSpec,
        size: TermSize,
        owner: Owner,
        output: Arc<Output>,
        backend: Box<dyn Backend>,
        profile: Arc<Profile>,
        guard: Arc<Guard>,
    ) -> Arc<Self> {
        let session = Arc::new(Session {
            spec,
            mutable: Mutex::new(Mutable {
                size,
                owner,
                last_input_at: None,
                last_heartbeat_at: None,
            }),
            output,
            screen: Mutex::new(Screen::new(size)),
            watch: Mutex::new(Watch::new(profile, tokio::time::Instant::now())),
            backend,
            guard,
            talk_lock: tokio::sync::Mutex::new(()),
            cancel: CancellationToken::new(),
            viewers: std::sync::atomic::AtomicUsize::new(0),
            inputs: tokio::sync::watch::channel(0).0,
            on_state_change: std::sync::OnceLock::new(),
            unreachable: Mutex::new(None),
        });
        tokio::spawn(follow::follow_screen(
            Arc::downgrade(&session),
            session.cancel.clone(),
        ));
        session
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Mutable> {
        self.mutable.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session id.
    pub fn id(&self) -> &str {
        &self.spec.id
    }

    /// The fixed facts about the session.
    pub fn spec(&self) -> &SessionSpec {
        &self.spec
    }

    /// The output pipeline (scrollback, subscribers).
    pub fn output(&self) -> &Arc<Output> {
        &self.output
    }

    /// For external sessions, the bridge that owns the terminal (what the registry keeps).
    pub fn external(&self) -> Option<&Arc<crate::backend::external::ExternalLink>> {
        self.backend.external()
    }

    /// What the session's backend can do besides moving bytes.
    pub fn capabilities(&self) -> crate::backend::Capabilities {
        self.backend.capabilities()
    }

    fn exited_error(&self, exit: ExitInfo, output: String) -> HubError {
        HubError::ProcessExited {
            exit_code: exit.exit_code,
            output,
        }
    }

    /// Delivers a signal: SIGINT and SIGQUIT as their control characters (runs nothing, so
    /// unchecked), the others by terminating the terminal's processes.
    pub async fn signal(&self, name: &str) -> HubResult<()> {
        let action = input::signal_action_in(name, self.backend.signals())
            .map_err(|e| HubError::bad_request(e.to_string()))?;
        match action {
            SignalAction::Write(bytes) => self.send_unchecked(bytes.to_vec()).await,
            SignalAction::Terminate(sig) => self.terminate(sig).await,
        }
    }

    /// Stops every process of the terminal (`first`, then SIGKILL after a grace period).
    pub async fn terminate(&self, first: TermSignal) -> HubResult<()> {
        if !self.capabilities().kill {
            return Err(HubError::KillUnsupported {
                id: self.spec.id.clone(),
            });
        }
        self.backend
            .terminate(first)
            .await
            .map_err(|e| HubError::Internal {
                message: e.to_string(),
            })
    }

    /// Stops the background tasks; called when the session leaves the registry.
    pub fn close(&self) {
        self.cancel.cancel();
    }

    /// Cancelled when the session leaves the registry: a background task of the session's
    /// kept elsewhere ends with it.
    pub fn closed(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Stops streaming without stopping the program (detaches a tmux client cleanly).
    pub async fn detach(&self) {
        self.backend.detach().await;
    }

    /// Counts an interactive viewer for as long as the returned guard lives.
    pub fn viewer(self: &Arc<Self>) -> ViewerGuard {
        self.viewers
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        ViewerGuard(self.clone())
    }
}

/// Keeps a session's interactive-viewer count up while it lives.
pub struct ViewerGuard(Arc<Session>);

impl Drop for ViewerGuard {
    fn drop(&mut self) {
        self.0
            .viewers
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}
