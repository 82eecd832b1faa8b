//! Host PTY backend (portable-pty: openpty on Unix, ConPTY on Windows). Each session has a
//! reader (output -> pipeline: a task on the runtime on Unix, a thread with ConPTY), one writer
//! thread (input the terminal has no room for at once, see [`io`]) and one waiter thread (exit
//! status).

#[cfg(all(test, windows))]
mod conpty_tests;
mod io;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use portable_pty::{native_pty_system, CommandBuilder, MasterPty, PtySize};

use super::{Backend, BackendError, SpawnSpec, TermSize};
use crate::output::{ExitInfo, Output};
use crate::term::{Signals, TermSignal};

/// Largest read of the output; a PTY rarely hands over more than a few KiB at once.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// After the program exits, how long to wait for the reader to drain what it wrote last
/// (a background job holding the PTY open would otherwise delay the exit forever).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// An error of portable-pty: an `anyhow` error (a crate the library does not use), boxed as a
/// plain error that keeps its causes.
type PtyCause = Box<dyn std::error::Error + Send + Sync>;

/// Why a host PTY could not be started, written to or resized.
#[derive(Debug, thiserror::Error)]
pub enum PtyError {
    #[error("working directory '{}' does not exist or is not a directory", .path.display())]
    NoWorkingDirectory { path: PathBuf },
    #[error("openpty failed: {}", chain(.source))]
    OpenPty { source: PtyCause },
    #[error("cannot start '{program}': {}", chain(.source))]
    Start { program: String, source: PtyCause },
    #[error("cannot start {name} thread: {source}")]
    Thread {
        name: &'static str,
        source: std::io::Error,
    },
    /// A master without a descriptor of its own (not a Unix PTY).
    #[error("the PTY has no file descriptor")]
    NoDescriptor,
    #[error("cannot copy the PTY descriptor: {0}")]
    CopyDescriptor(#[source] std::io::Error),
    /// `fcntl` (`F_GETFL`, `F_SETFL`) failed while making the master non-blocking.
    #[error("{op}: {source}")]
    Fcntl {
        op: &'static str,
        source: std::io::Error,
    },
    #[error("the PTY is read on a tokio runtime, and none is running")]
    NoRuntime,
    #[error("cannot poll the PTY: {0}")]
    Poll(#[source] std::io::Error),
    #[error("cannot read the PTY: {}", chain(.0))]
    Reader(#[source] PtyCause),
    #[error("cannot write the PTY: {}", chain(.0))]
    Writer(#[source] PtyCause),
    /// Writing to the terminal failed.
    #[error("{0}")]
    Write(#[source] std::io::Error),
    /// Waiting for room to write failed.
    #[error("{0}")]
    WaitForRoom(#[source] std::io::Error),
    #[error("the PTY writer has stopped")]
    WriterStopped,
    #[error("PTY lock poisoned")]
    Poisoned,
    #[error("{}", chain(.0))]
    Resize(#[source] PtyCause),
}

/// `error: cause: cause...`, as portable-pty's errors have always been shown (`{e:#}`).
fn chain(error: &PtyCause) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(&format!(": {e}"));
        cause = e.source();
    }
    text
}

/// A program running on a host PTY.
pub struct PtyBackend {
    master: Mutex<Box<dyn MasterPty + Send>>,
    input: io::Input,
    pid: Option<u32>,
}

fn pty_size(size: TermSize) -> PtySize {
    PtySize {
        rows: size.rows,
        cols: size.cols,
        pixel_width: 0,
        pixel_height: 0,
    }
}

impl PtyBackend {
    /// Starts `spec` on a new PTY, streaming its output into `output`.
    pub fn spawn(spec: &SpawnSpec, output: Arc<Output>) -> Result<Self, PtyError> {
        if !spec.cwd.is_dir() {
            return Err(PtyError::NoWorkingDirectory {
                path: spec.cwd.clone(),
            });
        }
        let pair = native_pty_system()
            .openpty(pty_size(spec.size))
            .map_err(|e| PtyError::OpenPty { source: e.into() })?;
        let mut cmd = CommandBuilder::new(&spec.program);
        cmd.args(&spec.args);
        cmd.cwd(&spec.cwd);
        cmd.env_clear();
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let mut child = pair.slave.spawn_command(cmd).map_err(|e| PtyError::Start {
            program: spec.program.clone(),
            source: e.into(),
        })?;
        // Without this the reader never sees EOF after the child exits.
        drop(pair.slave);
        let pid = child.process_id();
        // On Windows its processes are held in a job, ended with the session.
        if let Some(pid) = pid {
            if let Err(e) = crate::process::contain(pid) {
                tracing::warn!(pid, "the session's processes are not held together: {e}");
            }
        }
        let (reader_done_tx, reader_done_rx) = std::sync::mpsc::channel::<()>();
        let reader_output = output.clone();
        let input = io::split(&*pair.master).and_then(|(input, source)| {
            source.spawn_drain(
                READ_BUFFER_BYTES,
                move |bytes| reader_output.push(bytes),
                move || {
                    let _ = reader_done_tx.send(());
                },
            )?;
            Ok(input)
        });
        let input = match input {
            Ok(input) => input,
            Err(e) => {
                // Nobody would read or wait for it.
                let _ = child.kill();
                let _ = child.wait();
                if let Some(pid) = pid {
                    crate::process::release(pid);
                }
                return Err(e);
            }
        };

        spawn_thread("pty-waiter", move || {
            let status = child.wait();
            let _ = reader_done_rx.recv_timeout(DRAIN_AFTER_EXIT);
            if let Some(pid) = pid {
                crate::process::release(pid);
            }
            let (exit_code, reason) = match status {
                Ok(s) => match s.signal() {
                    Some(sig) => (None, format!("killed by {sig}")),
                    None => (Some(s.exit_code() as i32), "exited".to_string()),
                },
                Err(e) => (None, format!("wait failed: {e}")),
            };
            output.finish(ExitInfo {
                exit_code,
                reason,
                exited_at: Utc::now(),
            });
        })?;

        Ok(PtyBackend {
            master: Mutex::new(pair.master),
            input,
            pid,
        })
    }
}

fn spawn_thread(name: &'static str, f: impl FnOnce() + Send + 'static) -> Result<(), PtyError> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map(|_| ())
        .map_err(|source| PtyError::Thread { name, source })
}

impl Backend for PtyBackend {
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, crate::error::HubResult<()>> {
        async move {
            self.input
                .write(bytes)
                .await
                .map_err(|e| crate::error::HubError::WriteFailed {
                    reason: e.to_string(),
                })
        }
        .boxed()
    }

    fn resize(&self, size: TermSize) -> BoxFuture<'_, Result<(), BackendError>> {
        let result = self
            .master
            .lock()
            .map_err(|_| PtyError::Poisoned)
            .and_then(|m| {
                m.resize(pty_size(size))
                    .map_err(|e| PtyError::Resize(e.into()))
            })
            .map_err(BackendError::from);
        async move { result }.boxed()
    }

    fn terminate(&self, first: TermSignal) -> BoxFuture<'_, Result<(), BackendError>> {
        async move {
            let Some(pid) = self.pid else {
                return Ok(());
            };
            let left = crate::process::terminate_session(pid, first).await;
            Ok(crate::process::none_left(&left)?)
        }
        .boxed()
    }

    fn pid(&self) -> Option<u32> {
        self.pid
    }

    fn signals(&self) -> Signals {
        io::SIGNALS
    }
}

#[cfg(test)]
mod tests {
    /// portable-pty's errors read as they did when formatted with `{e:#}`.
    #[test]
    fn a_pty_error_shows_its_causes_as_before() {
        let e = anyhow::Error::new(std::io::Error::other("no such device"))
            .context("failed to resolve home dir")
            .context("cannot spawn");
        let want = format!("cannot start 'sh': {e:#}");
        let got = super::PtyError::Start {
            program: "sh".into(),
            source: e.into(),
        };
        assert_eq!(got.to_string(), want);
        assert_eq!(
            want,
            "cannot start 'sh': cannot spawn: failed to resolve home dir: no such device"
        );
    }
}
