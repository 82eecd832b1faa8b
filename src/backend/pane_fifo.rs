//! A pane's FIFO on this machine (Unix only), read on readiness through the runtime's event
//! loop or, on ticks, as a plain non-blocking descriptor taken out of it (see
//! [`super::pane_reader`]).

use std::io;
use std::os::fd::OwnedFd;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe::Receiver;

/// A FIFO's read end, in the runtime's event loop or not.
pub enum Fifo {
    Registered(Receiver),
    Plain(OwnedFd),
    /// A move between the two failed: reads end the stream.
    Lost,
}

impl Fifo {
    /// Reads once the FIFO is ready: some bytes, or 0 at its end.
    pub async fn read_ready(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.registered()?.read(buf).await
    }

    /// Reads what is there now, without waiting: `None` when nothing is.
    pub fn read_now(&mut self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        let fd = match self.plain() {
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

fn lost() -> io::Error {
    io::Error::other("the pane's FIFO could not move into or out of the event loop")
}
