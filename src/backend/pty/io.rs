//! Bytes in and out of the PTY master.
//!
//! On Unix the master is non-blocking. Its output is read by a task on the runtime, woken by
//! the runtime's own poller: an echo reaches the session's viewers on the thread that read it,
//! without waking a reader thread first and a runtime worker after it. A write the terminal
//! has room for is made at once by the caller's task, so a keystroke reaches the program
//! without a hop to another thread; what does not fit (a large paste into a program that is
//! not reading) goes to the writer thread, which waits for room, and later writes queue
//! behind it, in order. Elsewhere (ConPTY) the I/O is blocking: a reader thread drains the
//! output and every write goes through the writer thread.

use portable_pty::MasterPty;

use super::PtyError;
use crate::term::Signals;

#[cfg(unix)]
pub use unix::{Input, Source};

#[cfg(not(unix))]
pub use blocking::{Input, Source};

/// Which signals the terminal takes: a Unix terminal's, or a Windows console's (ConPTY).
#[cfg(unix)]
pub const SIGNALS: Signals = Signals::Unix;
#[cfg(not(unix))]
pub const SIGNALS: Signals = Signals::Console;

/// How a write to the terminal ended.
pub type Written = Result<(), PtyError>;

/// The master's input side and the source of its output.
pub fn split(master: &(dyn MasterPty + Send)) -> Result<(Input, Source), PtyError> {
    #[cfg(unix)]
    return unix::split(master);
    #[cfg(not(unix))]
    return blocking::split(master);
}

#[cfg(not(unix))]
mod blocking {
    use std::io::{Read, Write};

    use portable_pty::MasterPty;
    use tokio::sync::{mpsc, oneshot};

    use super::{PtyError, Written};
    use crate::backend::read_buf::ReadBuf;

    type Request = (Vec<u8>, oneshot::Sender<Written>);

    /// Every write goes through the writer thread.
    pub struct Input {
        requests: mpsc::UnboundedSender<Request>,
    }

    /// ConPTY's output. (The cursor query ConPTY sends when it starts, and waits on, is
    /// answered by the session's screen when no viewer's terminal is there to: see
    /// `session::rendered`.)
    pub struct Source(Box<dyn Read + Send>);

    pub fn split(master: &(dyn MasterPty + Send)) -> Result<(Input, Source), PtyError> {
        let reader = master
            .try_clone_reader()
            .map_err(|e| PtyError::Reader(e.into()))?;
        let mut writer = master
            .take_writer()
            .map_err(|e| PtyError::Writer(e.into()))?;
        let (requests, mut rx) = mpsc::unbounded_channel::<Request>();
        super::super::spawn_thread("pty-writer", move || {
            while let Some((bytes, done)) = rx.blocking_recv() {
                let result = writer
                    .write_all(&bytes)
                    .and_then(|_| writer.flush())
                    .map_err(PtyError::Write);
                let _ = done.send(result);
            }
        })?;
        Ok((Input { requests }, Source(reader)))
    }

    impl Input {
        pub async fn write(&self, bytes: Vec<u8>) -> Written {
            let (done, result) = oneshot::channel();
            self.requests
                .send((bytes, done))
                .map_err(|_| PtyError::WriterStopped)?;
            result.await.unwrap_or(Err(PtyError::WriterStopped))
        }
    }

    impl Source {
        /// Reads on a thread of its own until the terminal closes, handing each chunk to
        /// `sink`, then calls `done`.
        pub fn spawn_drain(
            mut self,
            buf_bytes: usize,
            mut sink: impl FnMut(&[u8]) + Send + 'static,
            done: impl FnOnce() + Send + 'static,
        ) -> Result<(), PtyError> {
            super::super::spawn_thread("pty-reader", move || {
                let mut buf = ReadBuf::new(buf_bytes);
                loop {
                    match self.0.read(buf.space()) {
                        Ok(0) => break,
                        Ok(n) => sink(buf.filled(n)),
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => break,
                    }
                }
                done();
            })
        }
    }
}

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::io::{ErrorKind, Read, Write};
    use std::os::fd::{AsFd, BorrowedFd};
    use std::sync::{Arc, Mutex};

    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use portable_pty::MasterPty;
    use tokio::io::unix::AsyncFd;
    use tokio::io::Interest;
    use tokio::sync::{mpsc, oneshot};

    use super::{PtyError, Written};
    use crate::backend::read_buf::ReadBuf;

    type Request = (Vec<u8>, oneshot::Sender<Written>);

    /// Writes at once when they fit, else through the writer thread, in order.
    pub struct Input {
        shared: Arc<Shared>,
        requests: mpsc::UnboundedSender<Request>,
    }

    struct Shared {
        master: File,
        /// Writes handed to the thread and not finished: while there are any, new writes
        /// queue behind them.
        queued: Mutex<usize>,
    }

    /// In a flood, how many chunks the reader hands on before it lets the viewers they woke
    /// run: well inside a session's broadcast ring (`output::SUBSCRIBER_CHANNEL_CHUNKS`).
    /// Never yielding let a viewer that keeps up fall behind and resync (1-2 times per 100 MB);
    /// yielding after every chunk cost a third of the ingest rate.
    pub(super) const VIEWER_TURN_EVERY: usize = 16;

    /// How often a terminal that hung up and was opened again is read (see the reader).
    const REOPENED_POLL: std::time::Duration = std::time::Duration::from_millis(20);

    /// The non-blocking master's output side, read on the runtime.
    pub struct Source(File);

    pub fn split(master: &(dyn MasterPty + Send)) -> Result<(Input, Source), PtyError> {
        let raw = master.as_raw_fd().ok_or(PtyError::NoDescriptor)?;
        // SAFETY: `master` owns the descriptor and outlives this call; what is kept is a copy.
        let fd = unsafe { BorrowedFd::borrow_raw(raw) }
            .try_clone_to_owned()
            .map_err(PtyError::CopyDescriptor)?;
        let flags = fcntl(&fd, FcntlArg::F_GETFL).map_err(|source| PtyError::Fcntl {
            op: "F_GETFL",
            source: source.into(),
        })?;
        let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
        fcntl(&fd, FcntlArg::F_SETFL(flags)).map_err(|source| PtyError::Fcntl {
            op: "F_SETFL",
            source: source.into(),
        })?;
        let master = File::from(fd);
        let source = Source(master.try_clone().map_err(PtyError::CopyDescriptor)?);
        let shared = Arc::new(Shared {
            master,
            queued: Mutex::new(0),
        });
        let (requests, mut rx) = mpsc::unbounded_channel::<Request>();
        let theirs = shared.clone();
        super::super::spawn_thread("pty-writer", move || {
            while let Some((bytes, done)) = rx.blocking_recv() {
                let result = write_waiting(&theirs.master, &bytes);
                *theirs.queued.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
                let _ = done.send(result);
            }
        })?;
        Ok((Input { shared, requests }, Source(source.0)))
    }

    impl Input {
        pub async fn write(&self, bytes: Vec<u8>) -> Written {
            let (done, result) = oneshot::channel();
            {
                let mut queued = self.shared.queued.lock().unwrap_or_else(|e| e.into_inner());
                let rest = if *queued == 0 {
                    let n = write_now(&self.shared.master, &bytes)?;
                    if n == bytes.len() {
                        return Ok(());
                    }
                    bytes[n..].to_vec()
                } else {
                    bytes
                };
                self.requests
                    .send((rest, done))
                    .map_err(|_| PtyError::WriterStopped)?;
                *queued += 1;
            }
            result.await.unwrap_or(Err(PtyError::WriterStopped))
        }
    }

    /// Writes what fits now; returns how much that was.
    fn write_now(mut master: &File, bytes: &[u8]) -> Result<usize, PtyError> {
        let mut done = 0;
        while done < bytes.len() {
            match master.write(&bytes[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(PtyError::Write(e)),
            }
        }
        Ok(done)
    }

    /// Writes all of `bytes`, waiting for room as needed (the writer thread).
    fn write_waiting(master: &File, mut bytes: &[u8]) -> Written {
        while !bytes.is_empty() {
            let n = write_now(master, bytes)?;
            bytes = &bytes[n..];
            if !bytes.is_empty() {
                wait_for_room(master).map_err(|e| PtyError::WaitForRoom(e.into()))?;
            }
        }
        Ok(())
    }

    /// Waits until the terminal can be written, or has closed (the next write then says so).
    fn wait_for_room(file: &File) -> nix::Result<()> {
        loop {
            let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLOUT)];
            match poll(&mut fds, PollTimeout::NONE) {
                Err(nix::errno::Errno::EINTR) => {}
                other => return other.map(|_| ()),
            }
        }
    }

    impl Source {
        /// Reads on a task of the current runtime until the terminal closes, handing each
        /// chunk to `sink`, then calls `done`. The runtime's poller wakes the task when there
        /// is output. Waiting on the poller takes nothing from the task's budget, so in a
        /// flood the task yields by itself, every [`VIEWER_TURN_EVERY`] chunks.
        pub fn spawn_drain(
            self,
            buf_bytes: usize,
            mut sink: impl FnMut(&[u8]) + Send + 'static,
            done: impl FnOnce() + Send + 'static,
        ) -> Result<(), PtyError> {
            let runtime = tokio::runtime::Handle::try_current().map_err(|_| PtyError::NoRuntime)?;
            // SAFETY: the `File` owns its descriptor, and the `AsyncFd` owns the `File` for as
            // long as it is registered.
            let master = unsafe { AsyncFd::register_with_interest(self.0, Interest::READABLE) }
                .map_err(|e| PtyError::Poll(e.into()))?;
            runtime.spawn(async move {
                let mut buf = ReadBuf::new(buf_bytes);
                // Chunks handed on since the viewers last had a turn.
                let mut unseen = 0;
                loop {
                    let Ok(mut ready) = master.readable().await else {
                        break;
                    };
                    let hung_up = ready.ready().is_read_closed();
                    match ready.try_io(|m| m.get_ref().read(buf.space())) {
                        Ok(Ok(0)) => break,
                        Ok(Ok(n)) => {
                            sink(buf.filled(n));
                            unseen += 1;
                            // The viewers a chunk wakes wait in this thread's next-task slot,
                            // where no other thread can take them: in a flood, let them run
                            // before they fall a ring's length behind and must resync.
                            if unseen == VIEWER_TURN_EVERY {
                                unseen = 0;
                                tokio::task::yield_now().await;
                            }
                        }
                        Ok(Err(e)) if e.kind() == ErrorKind::Interrupted => {}
                        // EIO once the program and everything else on the terminal is gone.
                        Ok(Err(_)) => break,
                        // Nothing left to read: the task waits for the poller, and the viewers
                        // run meanwhile.
                        Err(_would_block) => {
                            unseen = 0;
                            if hung_up {
                                // The terminal hung up and something opened it again before
                                // this read: the poller keeps saying "closed" and would
                                // never wait again, so look again a moment later instead.
                                tokio::time::sleep(REOPENED_POLL).await;
                            }
                        }
                    }
                }
                done();
            });
            Ok(())
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Duration;

    use futures_util::FutureExt;
    use portable_pty::{native_pty_system, CommandBuilder, PtySize};

    use super::*;

    type Child = Box<dyn portable_pty::Child + Send + Sync>;

    /// `sh -c script` on a new PTY.
    fn sh(script: &str) -> (Input, Source, Child) {
        let pair = native_pty_system().openpty(PtySize::default()).unwrap();
        let mut cmd = CommandBuilder::new("sh");
        cmd.args(["-c", script]);
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let (input, source) = split(&*pair.master).unwrap();
        // The descriptors are copies: the master itself may go.
        drop(pair.master);
        (input, source, child)
    }

    /// A PTY whose program (raw mode, no echo) reads nothing for `delay_s` seconds, then copies
    /// `bytes` bytes of its input to `out`.
    fn program(delay_s: &str, bytes: usize, out: &std::path::Path) -> (Input, Source, Child) {
        sh(&format!(
            "stty raw -echo; echo ready; sleep {delay_s}; head -c {bytes} > '{}'; echo done",
            out.display()
        ))
    }

    /// Drains the output on the runtime; returns once the program has said `ready` (it is in
    /// raw mode: in canonical mode a full line buffer drops input), with what will be all of
    /// its output once the terminal closes.
    async fn started(source: Source) -> tokio::sync::oneshot::Receiver<Vec<u8>> {
        let (ready_tx, mut ready) = tokio::sync::mpsc::unbounded_channel();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let theirs = seen.clone();
        source
            .spawn_drain(
                4096,
                move |b| {
                    let mut seen = theirs.lock().unwrap();
                    seen.extend_from_slice(b);
                    if seen.windows(5).any(|w| w == b"ready") {
                        let _ = ready_tx.send(());
                    }
                },
                move || {
                    let _ = done_tx.send(std::mem::take(&mut *seen.lock().unwrap()));
                },
            )
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), ready.recv())
            .await
            .expect("the program did not start");
        done
    }

    /// All the program's output, once the terminal has closed; it must end with `done`.
    async fn finished(
        reading: tokio::sync::oneshot::Receiver<Vec<u8>>,
        mut child: Child,
    ) -> Vec<u8> {
        tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        let seen = tokio::time::timeout(Duration::from_secs(10), reading)
            .await
            .expect("the terminal never closed")
            .unwrap();
        let text = String::from_utf8_lossy(&seen);
        assert!(text.trim_end().ends_with("done"), "output: {text:?}");
        seen
    }

    #[tokio::test]
    async fn a_keystroke_is_written_without_waiting_for_the_writer_thread() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let (input, source, child) = program("0", 3, &out);
        let reading = started(source).await;
        let written = input.write(b"abc".to_vec()).now_or_never();
        let written = written.map(|w| w.map_err(|e| e.to_string()));
        assert_eq!(written, Some(Ok(())), "the write had to wait");
        finished(reading, child).await;
        assert_eq!(std::fs::read(&out).unwrap(), b"abc");
    }

    /// A program that prints `bytes` x's as fast as it can, then `done`.
    fn flood(bytes: usize) -> (Source, Child) {
        let (_input, source, child) = sh(&format!(
            "stty raw -echo; head -c {bytes} /dev/zero | tr '\\0' x; echo done"
        ));
        (source, child)
    }

    /// The output is read on the runtime's own thread (no reader thread to wake first), to the
    /// last byte, and the reader ends when the terminal closes.
    #[tokio::test(flavor = "current_thread")]
    async fn output_is_read_on_the_runtime_to_the_last_byte() {
        const BYTES: usize = 3_000_000;
        let (source, child) = flood(BYTES);
        let here = std::thread::current().id();
        let on_other_threads = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = on_other_threads.clone();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let theirs = seen.clone();
        source
            .spawn_drain(
                64 * 1024,
                move |b| {
                    if std::thread::current().id() != here {
                        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    theirs.lock().unwrap().extend_from_slice(b);
                },
                move || {
                    let _ = done_tx.send(std::mem::take(&mut *seen.lock().unwrap()));
                },
            )
            .unwrap();
        let seen = finished(done, child).await;
        let xs = seen.iter().filter(|&&b| b == b'x').count();
        assert_eq!(xs, BYTES, "bytes lost or doubled");
        assert_eq!(
            on_other_threads.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "output was read on another thread"
        );
    }

    /// In a flood the reader lets the tasks its chunks woke run before it has handed on more
    /// than [`unix::VIEWER_TURN_EVERY`] chunks: on one thread, where nothing else can run them,
    /// a viewer with room for that many is never outrun (a session's viewers have a ring of
    /// 512, and fell behind it when the reader never yielded).
    #[tokio::test(flavor = "current_thread")]
    async fn in_a_flood_the_viewers_get_a_turn_before_they_fall_behind() {
        const BYTES: usize = 4_000_000;
        let (source, mut child) = flood(BYTES);
        let (tx, mut rx) = tokio::sync::mpsc::channel::<usize>(unix::VIEWER_TURN_EVERY);
        let outrun = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = outrun.clone();
        let (done_tx, done) = tokio::sync::oneshot::channel();
        source
            .spawn_drain(
                64 * 1024,
                move |b| {
                    if tx.try_send(b.len()).is_err() {
                        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                },
                move || {
                    let _ = done_tx.send(());
                },
            )
            .unwrap();
        let viewer = tokio::spawn(async move {
            let mut got = 0;
            while let Some(n) = rx.recv().await {
                got += n;
            }
            got
        });
        tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), done)
            .await
            .expect("the reader never ended")
            .unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), viewer)
            .await
            .expect("the viewer never saw the end")
            .unwrap();
        assert_eq!(
            outrun.load(std::sync::atomic::Ordering::Relaxed),
            0,
            "the viewer was outrun (it received {got} bytes)"
        );
        assert!(got > BYTES, "{got} bytes");
    }

    /// A terminal that hangs up and is opened again before the reader reads (a program
    /// reopening its tty): the poller keeps saying "closed" while a read finds nothing, and the
    /// reader must neither end nor spin on its thread; it still reads what comes later.
    #[test]
    fn a_terminal_opened_again_after_a_hang_up_is_read_without_spinning() {
        let (result_tx, result) = std::sync::mpsc::channel();
        // The scenario runs on a thread of its own: a spinning reader would hold it forever.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let _ = result_tx.send(rt.block_on(reopened_after_hang_up()));
        });
        let seen = result
            .recv_timeout(Duration::from_secs(10))
            .expect("the reader spun on its thread");
        assert!(
            String::from_utf8_lossy(&seen).contains("after-reopen"),
            "output: {:?}",
            String::from_utf8_lossy(&seen)
        );
    }

    async fn reopened_after_hang_up() -> Vec<u8> {
        use std::sync::{Arc, Mutex};
        use tokio::io::AsyncWriteExt;
        let pair = native_pty_system().openpty(PtySize::default()).unwrap();
        let name = pair.master.tty_name().expect("the slave's name");
        let (_input, source) = split(&*pair.master).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let theirs = seen.clone();
        source
            .spawn_drain(
                4096,
                move |b| theirs.lock().unwrap().extend_from_slice(b),
                || {},
            )
            .unwrap();
        // A task that opens the terminal again as soon as `signal` is readable.
        let (mut signal, signalled) = tokio::net::UnixStream::pair().unwrap();
        let reopened = tokio::spawn(async move {
            signalled.readable().await.unwrap();
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&name)
                .unwrap()
        });
        // Both tasks wait on the poller now.
        tokio::task::yield_now().await;
        // One poll of the poller then sees both events, the signal first: the reopening task
        // runs before the reader, which then finds the terminal open again and empty.
        signal.write_all(b"x").await.unwrap();
        drop(pair.slave);
        let mut slave = reopened.await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        std::io::Write::write_all(&mut slave, b"after-reopen\n").unwrap();
        for _ in 0..100 {
            if String::from_utf8_lossy(&seen.lock().unwrap()).contains("after-reopen") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let seen = seen.lock().unwrap().clone();
        seen
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_write_with_no_room_waits_without_blocking_and_later_writes_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let big: Vec<u8> = (0..256 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
        let (input, source, child) = program("1", big.len() + 3, &out);
        let reading = started(source).await;
        let input = std::sync::Arc::new(input);
        let first = {
            let (input, big) = (input.clone(), big.clone());
            tokio::spawn(async move { input.write(big).await })
        };
        // On this one thread, a blocked write would stop the clock too.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!first.is_finished(), "256 KiB fit in the terminal at once");
        let second = input.write(b"END".to_vec());
        tokio::time::timeout(Duration::from_secs(10), async {
            first.await.unwrap().unwrap();
            second.await.unwrap();
        })
        .await
        .expect("the writes never finished");
        finished(reading, child).await;
        let got = std::fs::read(&out).unwrap();
        assert_eq!(got.len(), big.len() + 3);
        assert!(
            got[..big.len()] == big[..] && got.ends_with(b"END"),
            "bytes out of order"
        );
    }
}
