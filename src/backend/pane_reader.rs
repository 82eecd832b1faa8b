//! The reading end of a pane's byte stream, read on readiness or on ticks
//! ([`super::read_pace`]).
//!
//! A FIFO registered with the runtime wakes it at every write into it, whether or not a task
//! waits for it: a busy pane's `cat` writes many times a burst (#30: two thirds of the hub's
//! wake-ups with 20 busy agents). So a FIFO read on ticks is taken out of the runtime's
//! event loop for as long, and read as a plain non-blocking descriptor; it goes back in when
//! it is read on readiness again. Any other stream (a relay's) stays registered.

use std::io;
use std::pin::Pin;

use futures_util::FutureExt;
use tokio::io::{AsyncRead, AsyncReadExt};

#[cfg(unix)]
pub use super::pane_fifo::Fifo;

/// A pane's byte stream.
pub enum PaneReader {
    /// A FIFO of this machine's (Unix only: on Windows a pane's bytes come through a relay).
    #[cfg(unix)]
    Fifo(Fifo),
    /// Any other stream.
    Stream(Pin<Box<dyn AsyncRead + Send>>),
}

impl PaneReader {
    /// Reads once the stream is ready: some bytes, or 0 at its end.
    pub async fn read_ready(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            PaneReader::Stream(s) => s.read(buf).await,
            #[cfg(unix)]
            PaneReader::Fifo(f) => f.read_ready(buf).await,
        }
    }

    /// Reads what is there now, without waiting: `None` when nothing is.
    pub fn read_now(&mut self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        match self {
            PaneReader::Stream(s) => s.read(buf).now_or_never(),
            #[cfg(unix)]
            PaneReader::Fifo(f) => f.read_now(buf),
        }
    }
}
