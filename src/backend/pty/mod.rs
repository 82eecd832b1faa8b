//! Host PTY backend (portable-pty: openpty on Unix, ConPTY on Windows). Each session has a
//! reader (output -> pipeline: a task on the runtime on Unix, a thread with ConPTY), one writer
//! thread (input the terminal has no room for at once, see [`io`]) and one waiter thread (exit
//! status).

mod io;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::Utc;
use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use portable_pty::{native_pty_system, CommandBuilder, MasterPty, PtySize};

use super::{Backend, SpawnSpec, TermSize};
use crate::output::{ExitInfo, Output};
use crate::term::TermSignal;

/// Largest read of the output; a PTY rarely hands over more than a few KiB at once.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// After the program exits, how long to wait for the reader to drain what it wrote last
/// (a background job holding the PTY open would otherwise delay the exit forever).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

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
    pub fn spawn(spec: &SpawnSpec, output: Arc<Output>) -> Result<Self, String> {
        if !spec.cwd.is_dir() {
            return Err(format!(
                "working directory '{}' does not exist or is not a directory",
                spec.cwd.display()
            ));
        }
        let pair = native_pty_system()
            .openpty(pty_size(spec.size))
            .map_err(|e| format!("openpty failed: {e:#}"))?;
        let mut cmd = CommandBuilder::new(&spec.program);
        cmd.args(&spec.args);
        cmd.cwd(&spec.cwd);
        cmd.env_clear();
        for (k, v) in &spec.env {
            cmd.env(k, v);
        }
        let mut child = pair
            .slave
            .spawn_command(cmd)
            .map_err(|e| format!("cannot start '{}': {e:#}", spec.program))?;
        // Without this the reader never sees EOF after the child exits.
        drop(pair.slave);
        let pid = child.process_id();
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
                return Err(e);
            }
        };

        spawn_thread("pty-waiter", move || {
            let status = child.wait();
            let _ = reader_done_rx.recv_timeout(DRAIN_AFTER_EXIT);
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

fn spawn_thread(name: &str, f: impl FnOnce() + Send + 'static) -> Result<(), String> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(f)
        .map(|_| ())
        .map_err(|e| format!("cannot start {name} thread: {e}"))
}

impl Backend for PtyBackend {
    fn write(&self, bytes: Vec<u8>) -> BoxFuture<'_, crate::error::HubResult<()>> {
        async move {
            self.input
                .write(bytes)
                .await
                .map_err(|reason| crate::error::HubError::WriteFailed { reason })
        }
        .boxed()
    }

    fn resize(&self, size: TermSize) -> BoxFuture<'_, Result<(), String>> {
        let result = self
            .master
            .lock()
            .map_err(|_| "PTY lock poisoned".to_string())
            .and_then(|m| m.resize(pty_size(size)).map_err(|e| format!("{e:#}")));
        async move { result }.boxed()
    }

    fn terminate(&self, first: TermSignal) -> BoxFuture<'_, Result<(), String>> {
        async move {
            let Some(pid) = self.pid else {
                return Ok(());
            };
            let left = crate::process::terminate_session(pid, first).await;
            crate::process::none_left(&left)
        }
        .boxed()
    }

    fn pid(&self) -> Option<u32> {
        self.pid
    }
}
