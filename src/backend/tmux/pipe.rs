//! The pane's bytes through `pipe-pane` instead of control mode's `%output`.
//!
//! tmux formats every byte it sends a control client as octal-escaped `%output` text, and it
//! reads a pane only as fast as that client drains it: a program printing a lot runs about
//! 2.5x slower with the hub attached (#17). `pipe-pane` hands the same bytes, raw, to a
//! command that writes them into a FIFO. The control client stays for commands, replies and
//! the pane's state, with its `%output` for the pane switched off.
//!
//! Who reads the FIFO:
//! - **the hub itself**, when the FIFO can be on this machine ([`TmuxPlace::pipe_root`]): the
//!   host's tmux, or a container that has its agent's pipe directory mounted. Nothing sits
//!   between tmux's writer and the hub; in a container this also keeps the bytes out of
//!   `docker exec` and the engine, which cost a producer there about 1.4x its time (#17);
//! - else **a relay** beside the tmux server (a non-TTY exec in a container on a remote
//!   engine) makes the FIFO and streams it to the hub.
//!
//! Set-up, in order: a private FIFO is made (and, read directly, opened without waiting for a
//! writer: a FIFO read end sees neither data nor an end until a writer has come); the control
//! client runs `pipe-pane` (the writer opens the FIFO, removes its directory where it may,
//! then copies); from tmux's reply on, the control reader ignores `%output` (bytes before the
//! reply came that way, bytes after it come through the pipe, so nothing is lost or doubled);
//! then `refresh-client -A '%N:pause'` spares tmux the formatting. If anything fails, the session
//! keeps streaming through `%output`.
//!
//! `pause`, not `off`: tmux 3.3a's `off` keeps the `%output` blocks already queued for the
//! client but stops holding the pane's buffer for them, so when the pane was printing at that
//! moment tmux later formats bytes it has already freed and the server dies of SIGSEGV (every
//! session on it with it; half the time with a pane printing in a loop). `pause` drops the
//! queued blocks first. The `%pause %N` it prints comes inside its own reply.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::time::Instant;

use super::fifo;
use super::{TmuxError, TmuxPlace};
use crate::backend::pane_reader::PaneReader;
use crate::backend::read_buf::ReadBuf;
use crate::backend::read_pace::{Next, ReadPace};
use crate::backend::tmux::place::PipeRoot;
use crate::backend::tmux::place::TMUX_CALL_TIMEOUT;
use crate::output::{ExitInfo, Output};

/// Makes the FIFO, tells the hub where, then streams it (`cat` waits for the writer).
const READER_SCRIPT: &str = "d=$(mktemp -d \"${TMPDIR:-/tmp}/agent-hub-pipe.XXXXXX\") && mkfifo \"$d/out\" && echo \"$d\" && exec cat \"$d/out\"";
/// After the pane's exit is known, how long the pipe must stay quiet before the output ends.
const DRAIN_QUIET: Duration = Duration::from_millis(250);

/// A reader waiting for `pipe-pane` to open its FIFO.
pub(super) struct PanePipe {
    reader: PaneReader,
    /// Counts the input written to the pane: input ends a busy run (see [`ReadPace::on_input`]).
    input: Option<watch::Receiver<u64>>,
    /// Keeps a relay alive (a host process is killed when dropped); none when the hub reads
    /// the FIFO itself.
    _relay: Option<crate::backend::tmux::place::ReaderIo>,
    /// The FIFO's directory as the tmux server sees it.
    dir: String,
    /// The same directory on this machine, when the hub reads the FIFO itself: removed when
    /// the stream ends (the writer removes it first where it may).
    local_dir: Option<std::path::PathBuf>,
    /// Whether the tmux server must be asked if it sees the FIFO ([`PanePipe::seen_check`]).
    needs_check: bool,
}

/// Whether `dir` is a directory name the reader script could have printed, safe to put in
/// single quotes on a tmux command line.
pub(super) fn plain_path(dir: &str) -> bool {
    dir.starts_with('/')
        && dir.len() < 256
        && dir
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-'))
}

/// The control-mode command that starts the pipe into `dir`'s FIFO.
fn open_command(pane_id: &str, dir: &str) -> Option<String> {
    (plain_path(dir) && crate::backend::tmux::control::is_safe_name(pane_id)).then(|| {
        // A failed `exec >` ends the shell; a failed `rm` (a directory of another user's)
        // does not stop the copy.
        format!(
            "pipe-pane -O -t {pane_id} \"exec >'{dir}/out'; rm -rf '{dir}' 2>/dev/null; exec cat\""
        )
    })
}

/// The control-mode command that stops tmux formatting the pane's output for this client
/// (`pause`, never `off`: see the module's note).
pub(super) fn output_pause_command(pane_id: &str) -> String {
    format!("refresh-client -A '{pane_id}:pause'")
}

/// The control-mode command that closes the pane's pipe (the reader then ends).
pub(super) fn close_command(pane_id: &str) -> String {
    format!("pipe-pane -t {pane_id}")
}

/// What the tmux server prints when it sees the hub's FIFO (see [`PanePipe::seen_check`]).
pub(super) const FIFO_SEEN: &str = "agent-hub-fifo-seen";

impl PanePipe {
    /// A FIFO the hub reads itself, where the FIFO can be on this machine
    /// ([`TmuxPlace::pipe_root`]); `None` when it cannot (then a relay is the way).
    pub(super) fn direct_at(place: &TmuxPlace) -> Option<Self> {
        let root = place.pipe_root()?;
        Self::direct(&root)
            .inspect_err(|e| tracing::warn!("no pipe of the hub's own: {e}"))
            .ok()
    }

    /// The `if-shell` arguments that make the tmux server print [`FIFO_SEEN`] when it sees
    /// this pipe's FIFO; `None` when that needs no asking (the host's tmux sees the hub's
    /// temporary directory). A container must have the very directory mounted: a hub that
    /// itself runs in a container may see another directory at the path the engine mounted.
    /// Asked in the tmux call that looks at the pane, so it costs no exec of its own.
    pub(super) fn seen_check(&self) -> Option<[String; 2]> {
        self.needs_check.then(|| {
            [
                format!("[ -p '{}/out' ]", self.dir),
                format!("display-message -p {FIFO_SEEN}"),
            ]
        })
    }

    /// The pipe of the pane once the tmux server has said whether it `seen` this one: this
    /// one, else a relay beside the server; `None` (the pane's bytes through control mode)
    /// when no relay starts either.
    pub(super) async fn chosen(
        direct: Option<Self>,
        seen: bool,
        place: &TmuxPlace,
    ) -> Option<Self> {
        if let Some(p) = direct {
            if seen || !p.needs_check {
                return Some(p);
            }
            let dir = p.dir.clone();
            tracing::warn!(%dir, "the tmux server does not see the hub's pipe directory: relaying");
            p.abandon(place).await;
        }
        Self::relay(place)
            .await
            .inspect_err(|e| tracing::warn!("pane output through control mode: {e}"))
            .ok()
    }

    /// A FIFO in a private directory under `root`, opened for reading by the hub.
    fn direct(root: &PipeRoot) -> Result<Self, TmuxError> {
        let made = fifo::make(root)?;
        Ok(PanePipe {
            reader: made.reader,
            input: None,
            _relay: None,
            dir: made.dir,
            local_dir: Some(made.local),
            needs_check: root.other_user,
        })
    }

    /// Starts a relay beside the tmux server and waits for its FIFO.
    async fn relay(place: &TmuxPlace) -> Result<Self, TmuxError> {
        let mut io = place.open_reader(READER_SCRIPT).await?;
        let mut line = Vec::new();
        let read_line = async {
            let mut byte = [0u8; 1];
            loop {
                match io.reader.read(&mut byte).await {
                    Ok(1) if byte[0] == b'\n' => return Ok(()),
                    Ok(1) => line.push(byte[0]),
                    Ok(_) => return Err(TmuxError::RelayEnded),
                    Err(e) => return Err(TmuxError::RelayRead(e)),
                }
                if line.len() > 256 {
                    return Err(TmuxError::RelayNoFifo);
                }
            }
        };
        tokio::time::timeout(TMUX_CALL_TIMEOUT, read_line)
            .await
            .map_err(|_| TmuxError::RelayNotStarted)??;
        let dir = String::from_utf8_lossy(&line).into_owned();
        if !plain_path(&dir) {
            return Err(TmuxError::FifoDir { dir });
        }
        let reader = std::mem::replace(&mut io.reader, Box::pin(tokio::io::empty()));
        Ok(PanePipe {
            reader: PaneReader::Stream(reader),
            input: None,
            _relay: Some(io),
            dir,
            local_dir: None,
            needs_check: false,
        })
    }

    /// This pipe, told of the input written to its pane (a counter bumped at each write).
    pub(super) fn with_input(mut self, input: watch::Receiver<u64>) -> Self {
        self.input = Some(input);
        self
    }

    /// Whether input went into the pane since the last look.
    fn input_came(&mut self) -> bool {
        let Some(input) = &mut self.input else {
            return false;
        };
        let came = input.has_changed().unwrap_or(false);
        input.mark_unchanged();
        came
    }

    /// Waits until `tick`; `true` when input went into the pane first (it is then seen).
    async fn typed_before(&mut self, tick: Instant) -> bool {
        let typed = async {
            let changed = match &mut self.input {
                Some(input) => input.changed().await.is_ok(),
                None => false,
            };
            if !changed {
                // No input counter (or no pane any more): only the tick.
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            _ = tokio::time::sleep_until(tick) => false,
            () = typed => true,
        }
    }

    /// The command that opens this pipe for `pane_id`.
    pub(super) fn open_command(&self, pane_id: &str) -> Option<String> {
        open_command(pane_id, &self.dir)
    }

    /// Unblocks and removes a FIFO that tmux never opened, so its reader ends.
    pub(super) async fn abandon(self, place: &TmuxPlace) {
        if let Some(local) = &self.local_dir {
            // The hub's own reader waits for nobody: dropping it is enough.
            let _ = std::fs::remove_dir_all(local);
            return;
        }
        let script = format!(": > '{0}/out'; rm -rf '{0}'", self.dir);
        if let Ok(mut io) = place.open_reader(&script).await {
            let _ = tokio::time::timeout(TMUX_CALL_TIMEOUT, async {
                let mut sink = Vec::new();
                io.reader.read_to_end(&mut sink).await
            })
            .await;
        }
    }

    /// Streams the pane's bytes into `output` until the pipe closes, or until it has been
    /// quiet for a moment after the pane's exit (told by the control reader through `exit`);
    /// then records the end of the output.
    pub(super) async fn stream(
        mut self,
        output: Arc<Output>,
        mut exit: watch::Receiver<Option<ExitInfo>>,
    ) {
        let mut buf = ReadBuf::new(64 * 1024);
        let mut pace = ReadPace::default();
        let mut known: Option<ExitInfo> = None;
        loop {
            // Input ends a busy run: what answers it is read at once.
            if self.input_came() {
                pace.on_input();
            }
            // `None`: a read on a tick found nothing.
            let read = match pace.next(Instant::now()) {
                Next::OnReady => tokio::select! {
                    read = self.reader.read_ready(buf.space()) => Some(read),
                    changed = exit.changed(), if known.is_none() => {
                        if changed.is_err() {
                            break;
                        }
                        known = exit.borrow().clone();
                        continue;
                    }
                    _ = tokio::time::sleep(DRAIN_QUIET), if known.is_some() => break,
                },
                next => {
                    if let Next::At(tick) = next {
                        if self.typed_before(tick).await {
                            pace.on_input();
                            continue;
                        }
                    }
                    if known.is_none() && exit.has_changed().unwrap_or(true) {
                        known = exit.borrow_and_update().clone();
                    }
                    self.reader.read_now(buf.space())
                }
            };
            let now = Instant::now();
            match read {
                Some(Ok(0)) | Some(Err(_)) => break,
                Some(Ok(n)) => {
                    let full = n == buf.space().len();
                    output.push(buf.filled(n));
                    pace.after_read(n, full, now);
                }
                None if known.is_some() && pace.quiet_for(now) >= DRAIN_QUIET => break,
                None => pace.after_nothing(now),
            }
        }
        if known.is_none() {
            // The pipe closed first (the session was killed): the control reader has the why.
            let told = tokio::time::timeout(TMUX_CALL_TIMEOUT, exit.wait_for(Option::is_some));
            known = match told.await {
                Ok(Ok(e)) => e.clone(),
                _ => None,
            };
        }
        if let Some(local) = &self.local_dir {
            let _ = std::fs::remove_dir_all(local);
        }
        output.finish(known.unwrap_or_else(|| ExitInfo {
            exit_code: None,
            reason: "tmux session closed".into(),
            exited_at: Utc::now(),
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// A pipe reading what is written into the returned writer.
    fn test_pipe() -> (tokio::io::DuplexStream, PanePipe) {
        let (writer, reader) = tokio::io::duplex(64 * 1024);
        let pipe = PanePipe {
            reader: PaneReader::Stream(Box::pin(reader)),
            input: None,
            _relay: None,
            dir: "/tmp/agent-hub-pipe.test".into(),
            local_dir: None,
            needs_check: false,
        };
        (writer, pipe)
    }

    /// A pipe fed `writes` writes of one line each, `gap` apart (on tokio's paused clock):
    /// what the output holds once the writer is done, and in how many chunks it came.
    async fn stream_of(writes: usize, gap: Duration) -> (Vec<u8>, Vec<u8>, u64) {
        let (mut writer, pipe) = test_pipe();
        let output = Arc::new(Output::new(1 << 20));
        let (exit_tx, exit_rx) = watch::channel(None);
        let streaming = tokio::spawn(pipe.stream(output.clone(), exit_rx));
        let mut sent = Vec::new();
        for i in 0..writes {
            let line = format!("line {i:05} of a program printing line by line\r\n");
            writer.write_all(line.as_bytes()).await.unwrap();
            sent.extend_from_slice(line.as_bytes());
            tokio::time::sleep(gap).await;
        }
        drop(writer);
        let _ = exit_tx.send(Some(ExitInfo {
            exit_code: Some(0),
            reason: "exited".into(),
            exited_at: Utc::now(),
        }));
        streaming.await.unwrap();
        let got = output.read(Some(0), usize::MAX).bytes;
        (sent, got, output.chunks())
    }

    #[tokio::test(start_paused = true)]
    async fn a_busy_stream_is_read_in_fewer_larger_chunks_exactly() {
        // 400 lines a millisecond apart (400 chunks if read write by write): the first 2 kB
        // (about 40 lines) are read as they come, the rest once a tick (80 chunks at 10 ms).
        let (sent, got, chunks) = stream_of(400, Duration::from_millis(1)).await;
        assert_eq!(got, sent, "every byte, in order");
        assert!(
            chunks <= 100,
            "{chunks} chunks for 400 writes: a busy stream's small writes are gathered"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn input_after_a_busy_run_is_answered_without_waiting_for_a_tick() {
        let (mut writer, pipe) = test_pipe();
        let (input, typed) = watch::channel(0u64);
        let pipe = pipe.with_input(typed);
        let output = Arc::new(Output::new(1 << 20));
        let (_exit_tx, exit_rx) = watch::channel(None);
        tokio::spawn(pipe.stream(output.clone(), exit_rx));
        for i in 0..100 {
            let line = format!("busy line {i:05} of a program printing line by line\r\n");
            writer.write_all(line.as_bytes()).await.unwrap();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // The busy run is read on ticks now; a keystroke's echo is not.
        let before = output.end_offset();
        input.send_modify(|n| *n += 1);
        writer.write_all(b"x").await.unwrap();
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        let read = output.read(Some(before), 1024).bytes;
        assert!(
            read.ends_with(b"x"),
            "the echo was read before the next tick: {read:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_interactive_stream_is_read_write_by_write() {
        // A few writes close together (an echo, a command's short output, a prompt).
        let (sent, got, chunks) = stream_of(5, Duration::from_millis(1)).await;
        assert_eq!(got, sent);
        assert_eq!(chunks, 5, "no write waits for the next");
    }

    #[test]
    fn commands_quote_only_plain_paths_and_pane_ids() {
        assert_eq!(
            open_command("%3", "/tmp/agent-hub-pipe.Ab12_x").as_deref(),
            Some("pipe-pane -O -t %3 \"exec >'/tmp/agent-hub-pipe.Ab12_x/out'; rm -rf '/tmp/agent-hub-pipe.Ab12_x' 2>/dev/null; exec cat\"")
        );
        for dir in ["tmp/x", "/tmp/a b", "/tmp/a'b", "/tmp/$x", "/tmp/a\"b", ""] {
            assert_eq!(open_command("%3", dir), None, "{dir}");
        }
        assert_eq!(open_command("%3; kill-server", "/tmp/x"), None);
        assert_eq!(output_pause_command("%3"), "refresh-client -A '%3:pause'");
        assert_eq!(close_command("%3"), "pipe-pane -t %3");
    }
}
