//! Backends only move bytes: they start a terminal program, push its output into the session's
//! [`Output`](crate::output::Output) pipeline, own the single writer for its input, resize it and
//! stop it. Scrollback, screen, activity and fan-out live above them, written once.

pub mod exited;
pub mod external;
pub mod pty;
pub mod tmux;
pub mod tmux_control;
pub mod tmux_place;

use std::collections::BTreeMap;
use std::path::PathBuf;

use futures_util::future::BoxFuture;

use crate::session::input::TermSignal;

/// Terminal size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TermSize {
    pub cols: u16,
    pub rows: u16,
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
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, Result<(), String>>;
    /// Changes the terminal size the program sees.
    fn resize(&self, size: TermSize) -> BoxFuture<'_, Result<(), String>>;
    /// Sends `first` to every process of the terminal, then SIGKILL to whatever is left after
    /// a grace period; returns once nothing is left (or the grace for SIGKILL ran out).
    fn terminate(&self, first: TermSignal) -> BoxFuture<'_, Result<(), String>>;
    /// Host process id of the program, when there is one.
    fn pid(&self) -> Option<u32>;
    /// Stops streaming without stopping the program (a tmux client detaches cleanly, leaving
    /// no client behind). The default does nothing: a PTY cannot outlive its reader.
    fn detach(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// For external sessions, the bridge that owns the terminal: operations the bridge API
    /// offers whole (talk, rendered reads) are proxied to it instead of done here.
    fn external(&self) -> Option<&std::sync::Arc<external::ExternalLink>> {
        None
    }
}
