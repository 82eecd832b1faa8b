//! The reading end of a pane's byte stream, read on readiness or on ticks
//! ([`super::read_pace`]).
//!
//! A FIFO registered with the runtime wakes it at every write into it, whether or not a task
//! waits for it: a busy pane's `cat` writes many times a burst (#30: two thirds of the hub's
//! wake-ups with 20 busy agents). So a FIFO read on ticks is taken out of the runtime's
//! event loop for as long, and read as a plain non-blocking descriptor; it goes back in when
//! it is read on readiness again. Any other stream (a relay's) stays registered.

use std::io;
use std::os::fd::OwnedFd;
use std::pin::Pin;

use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::unix::pipe::Receiver;

/// A pane's byte stream.
pub enum PaneReader {
    /// A FIFO of this machine's.
    Fifo(Fifo),
    /// Any other stream.
    Stream(Pin<Box<dyn AsyncRead + Send>>),
}

/// A FIFO's read end, in the runtime's event loop or not.
pub enum Fifo {
    Registered(Receiver),
    Plain(OwnedFd),
    /// A move between the two failed: reads end the stream.
    Lost,
}

impl PaneReader {
    /// Reads once the stream is ready: some bytes, or 0 at its end.
    pub async fn read_ready(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            PaneReader::Stream(s) => s.read(buf).await,
            PaneReader::Fifo(f) => f.registered()?.read(buf).await,
        }
    }

    /// Reads what is there now, without waiting: `None` when nothing is.
    pub fn read_now(&mut self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        match self {
            PaneReader::Stream(s) => s.read(buf).now_or_never(),
            PaneReader::Fifo(f) => {
                let fd = match f.plain() {
                    Ok(fd) => fd,
                    Err(e) => return Some(Err(e)),
                };
                match nix::unistd::read(fd, buf) {
                    Err(nix::errno::Errno::EAGAIN) => None,
                    Err(nix::errno::Errno::EINTR) => None,
                    Err(e) => Some(Err(e.into())),
                    Ok(n) => Some(Ok(n)),
                }
            }
        }
    }
}

fn lost() -> io::Error {
    io::Error::other("the pane's FIFO could not move into or out of the event loop")
}

impl Fifo {
    /// The receiver, registered with the runtime (registering it now if needed).
    fn registered(&mut self) -> io::Result<&mut Receiver> {
        if let Fifo::Plain(_) = self {
            let Fifo::Plain(fd) = std::mem::replace(self, Fifo::Lost) else {
                unreachable!("matched just above");
            };
            *self = Fifo::Registered(Receiver::from_owned_fd(fd)?);
        }
        match self {
            Fifo::Registered(r) => Ok(r),
            _ => Err(lost()),
        }
    }

    /// The plain non-blocking descriptor, out of the runtime's event loop (taking it out now
    /// if needed).
    fn plain(&mut self) -> io::Result<&OwnedFd> {
        if let Fifo::Registered(_) = self {
            let Fifo::Registered(r) = std::mem::replace(self, Fifo::Lost) else {
                unreachable!("matched just above");
            };
            *self = Fifo::Plain(r.into_nonblocking_fd()?);
        }
        match self {
            Fifo::Plain(fd) => Ok(fd),
            _ => Err(lost()),
        }
    }
}
