//! Bytes in and out of the PTY master.
//!
//! On Unix the master is non-blocking. A write the terminal has room for is made at once by
//! the caller's task, so a keystroke reaches the program without a hop to another thread; what
//! does not fit (a large paste into a program that is not reading) goes to the writer thread,
//! which waits for room, and later writes queue behind it, in order. The reader thread waits
//! for output with `poll`. Elsewhere (ConPTY) the I/O is blocking and every write goes through
//! the writer thread.

use portable_pty::MasterPty;

#[cfg(unix)]
pub use unix::{Input, Source};

#[cfg(not(unix))]
pub use blocking::{Input, Source};

/// How a write to the terminal ended.
pub type Written = Result<(), String>;

/// The master's input side and the source its reader thread drains.
pub fn split(master: &(dyn MasterPty + Send)) -> Result<(Input, Source), String> {
    #[cfg(unix)]
    return unix::split(master);
    #[cfg(not(unix))]
    return blocking::split(master);
}

/// Reads `source` until it ends, handing each chunk to `sink`; when a read would block,
/// `wait` waits for more (false: give up).
fn drain(
    mut source: impl std::io::Read,
    buf_bytes: usize,
    mut sink: impl FnMut(&[u8]),
    mut wait: impl FnMut() -> bool,
) {
    use std::io::ErrorKind;
    let mut buf = vec![0u8; buf_bytes];
    loop {
        match source.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => sink(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock && wait() => {}
            Err(_) => return,
        }
    }
}

fn stopped() -> String {
    "the PTY writer has stopped".to_string()
}

#[cfg(not(unix))]
mod blocking {
    use std::io::{Read, Write};

    use portable_pty::MasterPty;
    use tokio::sync::{mpsc, oneshot};

    use super::{stopped, Written};

    type Request = (Vec<u8>, oneshot::Sender<Written>);

    /// Every write goes through the writer thread.
    pub struct Input {
        requests: mpsc::UnboundedSender<Request>,
    }

    pub struct Source(Box<dyn Read + Send>);

    pub fn split(master: &(dyn MasterPty + Send)) -> Result<(Input, Source), String> {
        let reader = master
            .try_clone_reader()
            .map_err(|e| format!("cannot read the PTY: {e:#}"))?;
        let mut writer = master
            .take_writer()
            .map_err(|e| format!("cannot write the PTY: {e:#}"))?;
        let (requests, mut rx) = mpsc::unbounded_channel::<Request>();
        super::super::spawn_thread("pty-writer", move || {
            while let Some((bytes, done)) = rx.blocking_recv() {
                let result = writer
                    .write_all(&bytes)
                    .and_then(|_| writer.flush())
                    .map_err(|e| e.to_string());
                let _ = done.send(result);
            }
        })?;
        Ok((Input { requests }, Source(reader)))
    }

    impl Input {
        pub async fn write(&self, bytes: Vec<u8>) -> Written {
            let (done, result) = oneshot::channel();
            self.requests.send((bytes, done)).map_err(|_| stopped())?;
            result.await.unwrap_or_else(|_| Err(stopped()))
        }
    }

    impl Source {
        /// Reads until the terminal closes, handing each chunk to `sink`.
        pub fn drain(self, buf_bytes: usize, sink: impl FnMut(&[u8])) {
            super::drain(self.0, buf_bytes, sink, || false);
        }
    }
}

#[cfg(unix)]
mod unix {
    use std::fs::File;
    use std::io::{ErrorKind, Write};
    use std::os::fd::{AsFd, BorrowedFd};
    use std::sync::{Arc, Mutex};

    use nix::fcntl::{fcntl, FcntlArg, OFlag};
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use portable_pty::MasterPty;
    use tokio::sync::{mpsc, oneshot};

    use super::{stopped, Written};

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

    /// The non-blocking master, for the reader thread.
    pub struct Source(File);

    pub fn split(master: &(dyn MasterPty + Send)) -> Result<(Input, Source), String> {
        let raw = master
            .as_raw_fd()
            .ok_or_else(|| "the PTY has no file descriptor".to_string())?;
        // SAFETY: `master` owns the descriptor and outlives this call; what is kept is a copy.
        let fd = unsafe { BorrowedFd::borrow_raw(raw) }
            .try_clone_to_owned()
            .map_err(|e| format!("cannot copy the PTY descriptor: {e}"))?;
        let flags = fcntl(&fd, FcntlArg::F_GETFL).map_err(|e| format!("F_GETFL: {e}"))?;
        let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
        fcntl(&fd, FcntlArg::F_SETFL(flags)).map_err(|e| format!("F_SETFL: {e}"))?;
        let master = File::from(fd);
        let source = Source(
            master
                .try_clone()
                .map_err(|e| format!("cannot copy the PTY descriptor: {e}"))?,
        );
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
                self.requests.send((rest, done)).map_err(|_| stopped())?;
                *queued += 1;
            }
            result.await.unwrap_or_else(|_| Err(stopped()))
        }
    }

    /// Writes what fits now; returns how much that was.
    fn write_now(mut master: &File, bytes: &[u8]) -> Result<usize, String> {
        let mut done = 0;
        while done < bytes.len() {
            match master.write(&bytes[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => return Err(e.to_string()),
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
                wait_for(master, PollFlags::POLLOUT).map_err(|e| e.to_string())?;
            }
        }
        Ok(())
    }

    /// Waits until the terminal can be read or written, or has closed (the next read or write
    /// then says so).
    fn wait_for(file: &File, flags: PollFlags) -> nix::Result<()> {
        loop {
            match poll(&mut [PollFd::new(file.as_fd(), flags)], PollTimeout::NONE) {
                Err(nix::errno::Errno::EINTR) => {}
                other => return other.map(|_| ()),
            }
        }
    }

    impl Source {
        /// Reads until the terminal closes, handing each chunk to `sink`.
        pub fn drain(self, buf_bytes: usize, sink: impl FnMut(&[u8])) {
            super::drain(&self.0, buf_bytes, sink, || {
                wait_for(&self.0, PollFlags::POLLIN).is_ok()
            });
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::time::Duration;

    use futures_util::FutureExt;
    use portable_pty::{native_pty_system, CommandBuilder, PtySize};

    use super::*;

    /// A PTY whose program (raw mode, no echo) reads nothing for `delay_s` seconds, then copies
    /// `bytes` bytes of its input to `out`.
    fn program(
        delay_s: &str,
        bytes: usize,
        out: &std::path::Path,
    ) -> (Input, Source, Box<dyn portable_pty::Child + Send + Sync>) {
        let pair = native_pty_system().openpty(PtySize::default()).unwrap();
        let mut cmd = CommandBuilder::new("sh");
        cmd.args([
            "-c",
            &format!(
                "stty raw -echo; echo ready; sleep {delay_s}; head -c {bytes} > '{}'; echo done",
                out.display()
            ),
        ]);
        let child = pair.slave.spawn_command(cmd).unwrap();
        drop(pair.slave);
        let (input, source) = split(&*pair.master).unwrap();
        // The descriptors are copies: the master itself may go.
        drop(pair.master);
        (input, source, child)
    }

    /// Drains the output on a thread; returns once the program has said `ready` (it is in raw
    /// mode: in canonical mode a full line buffer drops input), and the thread, which checks
    /// that the program said `done`.
    fn started(source: Source) -> std::thread::JoinHandle<()> {
        let (ready_tx, ready) = std::sync::mpsc::channel();
        let reading = std::thread::spawn(move || {
            let mut seen = Vec::new();
            source.drain(4096, |b| {
                seen.extend_from_slice(b);
                if seen.windows(5).any(|w| w == b"ready") {
                    let _ = ready_tx.send(());
                }
            });
            let seen = String::from_utf8_lossy(&seen).into_owned();
            assert!(seen.contains("done"), "output: {seen:?}");
        });
        ready
            .recv_timeout(Duration::from_secs(10))
            .expect("the program did not start");
        reading
    }

    #[test]
    fn a_keystroke_is_written_without_waiting_for_the_writer_thread() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let (input, source, mut child) = program("0", 3, &out);
        let reading = started(source);
        let written = input.write(b"abc".to_vec()).now_or_never();
        assert_eq!(written, Some(Ok(())), "the write had to wait");
        child.wait().unwrap();
        reading.join().unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), b"abc");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_write_with_no_room_waits_without_blocking_and_later_writes_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let big: Vec<u8> = (0..256 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
        let (input, source, mut child) = program("1", big.len() + 3, &out);
        let reading = started(source);
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
        tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        reading.join().unwrap();
        let got = std::fs::read(&out).unwrap();
        assert_eq!(got.len(), big.len() + 3);
        assert!(
            got[..big.len()] == big[..] && got.ends_with(b"END"),
            "bytes out of order"
        );
    }
}
