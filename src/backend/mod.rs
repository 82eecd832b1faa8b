//! Backends only move bytes: they start a terminal program, push its output into the session's
//! [`Output`](crate::output::Output) pipeline, own the single writer for its input, resize it and
//! stop it. Scrollback, screen, activity and fan-out live above them, written once.

pub mod exited;
pub mod external;
#[cfg(unix)]
pub mod pane_fifo;
pub mod pane_reader;
pub mod pty;
pub mod read_buf;
pub mod read_pace;
pub mod tmux;

use std::collections::BTreeMap;
use std::path::PathBuf;

use futures_util::future::BoxFuture;

use crate::error::HubResult;
use crate::screen::{TermRead, TermReadRequest};
use crate::term::TalkResult;
use crate::term::{Signals, TermSignal};

/// What a backend offers beyond moving bytes. The session answers a missing one with its
/// stable error code (`RESIZE_UNSUPPORTED`, `KILL_UNSUPPORTED`), so no caller needs to know
/// which backend it talks to.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
pub struct Capabilities {
    /// The terminal size can be changed.
    pub resize: bool,
    /// The hub can end the program (kill, terminating signals).
    pub kill: bool,
    /// The hub owns the terminal: it may lend it to other hubs through its bridge API.
    pub owned: bool,
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities::OWNED
    }
}

impl Capabilities {
    /// A terminal the hub started itself (a PTY or a tmux pane).
    pub const OWNED: Capabilities = Capabilities {
        resize: true,
        kill: true,
        owned: true,
    };
}

pub use crate::term::TermSize;

/// Why a backend could not resize, stop or capture its terminal. The session turns it into
/// the hub error of the operation (`PTY_WRITE_FAILED` for a resize, `INTERNAL` for a kill).
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error(transparent)]
    Pty(#[from] pty::PtyError),
    #[error(transparent)]
    Tmux(#[from] tmux::TmuxError),
    /// Processes of the terminal outlived SIGKILL.
    #[error(transparent)]
    Process(#[from] crate::process::ProcessError),
    /// The program is gone (a session restored after it ended).
    #[error("the session has ended")]
    Ended,
    /// An external session's terminal belongs to another process.
    #[error("external sessions cannot be resized through the hub")]
    ExternalResize,
    /// An external session's program belongs to another process.
    #[error("external sessions are owned by another process")]
    ExternalTerminate,
}

/// What to start: the program, its arguments, directory and complete environment.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub program: String,
    pub args: Vec<String>,
    pub cwd: PathBuf,
    /// The child's whole environment: nothing of the hub's own environment leaks in beyond this.
    pub env: BTreeMap<String, String>,
    pub size: TermSize,
}

/// A running terminal program. Every method is safe to call after the program exited.
pub trait Backend: Send + Sync {
    /// Writes bytes to the terminal's input, in call order, through the backend's single writer.
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, HubResult<()>>;
    /// Changes the terminal size the program sees.
    fn resize(&self, size: TermSize) -> BoxFuture<'_, Result<(), BackendError>>;
    /// Which signals the terminal takes (a Unix terminal's, unless a backend says otherwise).
    fn signals(&self) -> Signals {
        Signals::Unix
    }
    /// Sends `first` to every process of the terminal, then SIGKILL to whatever is left after
    /// a grace period; returns once nothing is left (or the grace for SIGKILL ran out). On
    /// Windows every signal ends the terminal's job at once.
    fn terminate(&self, first: TermSignal) -> BoxFuture<'_, Result<(), BackendError>>;
    /// Host process id of the program, when there is one.
    fn pid(&self) -> Option<u32>;
    /// Stops streaming without stopping the program (a tmux client detaches cleanly, leaving
    /// no client behind). The default does nothing: a PTY cannot outlive its reader.
    fn detach(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// What it can do besides moving bytes.
    fn capabilities(&self) -> Capabilities {
        Capabilities::OWNED
    }
    /// A backend that runs `talk` whole (a bridge does, on its own side) answers here; `None`
    /// means the session types the command and watches the byte stream for its end.
    fn talk<'a>(
        &'a self,
        _command: &'a str,
        _sentinel: Option<&'a str>,
        _timeout: std::time::Duration,
    ) -> Option<BoxFuture<'a, HubResult<TalkResult>>> {
        None
    }
    /// The screen as the terminal itself shows it, as bytes that paint it on a blank emulator
    /// of the current size: tmux is the authority on its panes, and reflows wrapped lines on a
    /// resize where an emulator fed the same bytes cuts them. `None`: nothing but the session's
    /// own emulator knows the screen.
    fn visible_screen(&self) -> Option<BoxFuture<'_, Result<Vec<u8>, BackendError>>> {
        None
    }
    /// A backend that renders its screen whole (a bridge) answers here; `None` means the
    /// session's own emulator renders it.
    fn term_read<'a>(
        &'a self,
        _req: &'a TermReadRequest,
    ) -> Option<BoxFuture<'a, HubResult<TermRead>>> {
        None
    }
    /// For external sessions, the link to the bridge that owns the terminal: what the registry
    /// file keeps and the session info shows (the operations go through the methods above).
    fn external(&self) -> Option<&std::sync::Arc<external::ExternalLink>> {
        None
    }
}
