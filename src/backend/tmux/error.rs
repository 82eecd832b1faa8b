//! What can go wrong with a tmux session: its name, running tmux commands (on the host or
//! through `docker exec`), the control client and the pane's pipe.

use std::path::PathBuf;

use super::place::TMUX_CALL_TIMEOUT;

/// A failure of the tmux backend.
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    #[error(
        "tmux session name '{name}' is not allowed: use 1-64 characters of letters, digits, '_', '-' and '.'"
    )]
    InvalidName { name: String },
    #[error("working directory '{}' does not exist or is not a directory", .path.display())]
    NoWorkingDirectory { path: PathBuf },
    /// `tmux` could not be started on the host.
    #[error("cannot run tmux: {0}")]
    RunTmux(#[source] std::io::Error),
    /// `sh` could not be started on the host.
    #[error("cannot run sh: {0}")]
    RunSh(#[source] std::io::Error),
    /// A started program has no pipe for this stream.
    #[error("{program} has no {stream}")]
    NoStream {
        program: &'static str,
        stream: &'static str,
    },
    /// A tmux command failed; `message` is what it said on its standard error.
    #[error("{message}")]
    Command { command: String, message: String },
    /// A tmux command did not finish within [`TMUX_CALL_TIMEOUT`].
    #[error("{command} timed out")]
    TimedOut { command: String },
    /// Creating the session failed.
    #[error("tmux new-session failed: {0}")]
    NewSession(#[source] Box<TmuxError>),
    #[error("tmux did not report a pane for session '{name}'")]
    NoPane { name: String },
    #[error("docker exec in {container_id} failed: {source}")]
    Exec {
        container_id: String,
        source: bollard::errors::Error,
    },
    #[error("docker exec started detached")]
    ExecDetached,
    #[error("docker exec output failed: {0}")]
    ExecOutput(#[source] bollard::errors::Error),
    #[error("docker exec inspect failed: {0}")]
    ExecInspect(#[source] bollard::errors::Error),
    #[error("cannot start the tmux control client: {0}")]
    StartControl(#[source] std::io::Error),
    #[error("cannot start the tmux control client: {0}")]
    StartControlExec(#[source] bollard::errors::Error),
    #[error("the tmux control client ended before attaching")]
    EndedBeforeAttach,
    #[error("the tmux control client did not attach within {} s", TMUX_CALL_TIMEOUT.as_secs())]
    AttachTimedOut,
    #[error("the tmux control client has exited")]
    ClientExited,
    #[error("tmux did not answer within {} s", TMUX_CALL_TIMEOUT.as_secs())]
    NoAnswer,
    #[error("cannot write to tmux: {0}")]
    Write(#[source] std::io::Error),
    /// tmux answered a control-mode command with `%error`; `message` is its reply.
    #[error("tmux: {message}")]
    Refused { message: String },
    #[error("the tmux session has ended")]
    SessionEnded,
    #[error("cannot make a pipe directory in {}: {source}", .path.display())]
    PipeDir {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The pipe directory's name is not UTF-8.
    #[error("bad name")]
    PipeDirName,
    #[error("unexpected FIFO directory '{dir}'")]
    FifoDir { dir: String },
    #[error("cannot make a FIFO in {}: {source}", .path.display())]
    MakeFifo {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Windows has no FIFOs: the pane's bytes come through a relay.
    #[error("this system has no FIFOs (a relay carries the pane's bytes)")]
    NoFifos,
    /// The pipe's directory or FIFO could not be opened to the container's user.
    #[error("{source}")]
    FifoMode {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open {}: {source}", .path.display())]
    OpenFifo {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the pipe reader ended before its FIFO was made")]
    RelayEnded,
    #[error("the pipe reader failed: {0}")]
    RelayRead(#[source] std::io::Error),
    #[error("the pipe reader printed no FIFO")]
    RelayNoFifo,
    #[error("the pipe reader did not start")]
    RelayNotStarted,
}

impl TmuxError {
    /// tmux refused to create the session because one of that name exists.
    pub fn is_duplicate_session(&self) -> bool {
        match self {
            TmuxError::NewSession(e) => e.is_duplicate_session(),
            TmuxError::Command { message, .. } => message.contains("duplicate session"),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::TmuxError;

    #[test]
    fn a_session_someone_else_created_meanwhile_is_told_apart() {
        let refused = |message: &str| {
            TmuxError::NewSession(Box::new(TmuxError::Command {
                command: "tmux start-server".into(),
                message: message.into(),
            }))
        };
        let duplicate = refused("duplicate session: agent");
        assert!(duplicate.is_duplicate_session());
        assert_eq!(
            duplicate.to_string(),
            "tmux new-session failed: duplicate session: agent"
        );
        assert!(!refused("no server running on /tmp/x").is_duplicate_session());
        assert!(!TmuxError::NoAnswer.is_duplicate_session());
        assert_eq!(
            TmuxError::NoAnswer.to_string(),
            "tmux did not answer within 10 s"
        );
    }
}
